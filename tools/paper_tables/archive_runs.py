"""Archive a method ranking's finished runs without their checkpoints, or
write them back into a fresh work dir (the ranking then resumes).

    python tools/paper_tables/archive_runs.py store WORK_DIR ARCHIVE \\
        --command "python tools/paper_tables/method_ranking.py ..."
    python tools/paper_tables/archive_runs.py restore ARCHIVE WORK_DIR

Described in :mod:`mmpos_harness.comparison.archive`.
"""
from mmpos_harness.comparison.archive import main

if __name__ == '__main__':
    main()
