"""CPU method ranking of the pretraining methods on the demo's tiny
RoPE-Mixed ViT, against random init.

    python tools/paper_tables/method_ranking.py --tune [options]
    python tools/paper_tables/method_ranking.py [options]

The stages, options, budget, seeds and resumption are described in
:mod:`mmpos_harness.method_ranking`.
"""
import os

from mmpos_harness.method_ranking import main

if __name__ == '__main__':
    os.environ.setdefault('OMP_NUM_THREADS', str(os.cpu_count() or 1))
    main()
