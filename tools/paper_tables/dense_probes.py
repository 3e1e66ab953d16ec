"""The frozen-evaluation page's dense-probe table: DropPos (the demo's
recipe, one pretraining per seed) against random init and the probes'
baselines on the mini data, stored with its provenance.

    python tools/paper_tables/dense_probes.py [--work-dir DIR]
        [--data-root data/mini] [--seeds 0 1 2] [--jobs 2]
    python tools/paper_tables/dense_probes.py --publish DIR

The steps, resumption and the stored files are described in
:mod:`mmpos_harness.dense_probes`.
"""
import os

from mmpos_harness.dense_probes import main

if __name__ == '__main__':
    os.environ.setdefault('OMP_NUM_THREADS', str(os.cpu_count() or 1))
    main()
