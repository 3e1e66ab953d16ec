"""The README's demo: what DropPos pretraining buys, with its noise.

    python tools/demo.py [--data-root data/mini] [--work-dir work_dirs/demo]
        [--from-scratch] [--pretrain-seeds 0 1 2] [--seeds 0]
        [--pretrain-iters N] [--iters N] [--jobs 2]

The steps and options are described in :mod:`mmpos_harness.demo`.
"""
import os

from mmpos_harness.demo import main

if __name__ == '__main__':
    os.environ.setdefault('OMP_NUM_THREADS', str(os.cpu_count() or 1))
    main()
