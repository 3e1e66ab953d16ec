"""CPU method ranking of the pretraining methods on the demo's tiny
RoPE-Mixed ViT, against random init.

    python tools/paper_tables/method_ranking.py [--work-dir
        work_dirs/method_ranking] [--data-root data/mini]
        [--methods droppos cr2pq dinov2 icpf mae random] [--seeds 0 1 2]
        [--pretrain-iters N] [--iters N] [--jobs N]

The methods, their compute and the resumption are described in
:mod:`mmpos_harness.method_ranking`.
"""
import os
import os.path as osp
import sys

sys.path.insert(0, osp.dirname(osp.dirname(osp.dirname(osp.abspath(
    __file__)))))

from mmpos_harness.method_ranking import main  # noqa: E402

if __name__ == '__main__':
    os.environ.setdefault('OMP_NUM_THREADS', str(os.cpu_count() or 1))
    main()
