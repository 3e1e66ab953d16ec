"""The README's demo: what DropPos pretraining buys, with its noise.

    python tools/demo.py [--data-root data/mini] [--work-dir work_dirs/demo]
        [--from-scratch] [--seeds 0 1 2] [--pretrain-iters N] [--iters N]
        [--jobs 2]

The steps and options are described in :mod:`mmpos_harness.demo`.
"""
import os
import os.path as osp
import sys

sys.path.insert(0, osp.dirname(osp.dirname(osp.abspath(__file__))))

from mmpos_harness.demo import main  # noqa: E402

if __name__ == '__main__':
    os.environ.setdefault('OMP_NUM_THREADS', str(os.cpu_count() or 1))
    main()
