"""RoPE-ViT's resolution claim in miniature, for every position scheme.

    python tools/paper_tables/position_study.py OUT_DIR [--schemes ...]
        [--seeds 0 1 2] [--iters 2000] [--batch-size 32]
        [--sizes 24 32 48 64 96] [--train-size 32] [--num-train 4800]
        [--num-val 1200] [--threads 1] [--calibrate]

The study and its options are described in :mod:`mmpos_harness.position_study`.
"""
import os.path as osp
import sys

sys.path.insert(0, osp.dirname(osp.dirname(osp.dirname(osp.abspath(
    __file__)))))

from mmpos_harness.position_study import main  # noqa: E402

if __name__ == '__main__':
    main()
