"""RoPE-ViT's resolution claim in miniature, with its two factors apart.

    python tools/paper_tables/position_study.py OUT_DIR [--schemes ...]
        [--seeds 0 1 2 3 4] [--iters N] [--num-train N] [--train-size 64]
        [--sizes 80 96 128] [--calibrate] [--retable JSON]

The study and its options are described in :mod:`mmpos_harness.position_study`.
"""
from mmpos_harness.position_study import main

if __name__ == '__main__':
    main()
