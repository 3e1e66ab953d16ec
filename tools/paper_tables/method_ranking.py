"""CPU method ranking: every pretraining method that fits the demo's tiny
RoPE-Mixed ViT (DropPos, CR2PQ, DINOv2, ICPF and, as the peer, mmpretrain's
MAE on that ViT), plus random init, transferred to mini-objects and
mini-stuff with the demo's label-scarce recipe and the same seeds; one
ranked table (mean ± std over seeds, difference to random init, compute)
written by ``tools/paper_tables/gen_tables.py --seeds``.

    python tools/paper_tables/method_ranking.py [--work-dir
        work_dirs/method_ranking] [--data-root data/mini]
        [--methods droppos cr2pq dinov2 icpf mae random] [--seeds 0 1 2]
        [--pretrain-iters N] [--iters N]

Estimated at an hour on 2 idle CPU cores with the defaults (not measured
yet; not part of CI). It
resumes: the work dir is fixed, finished runs (pretraining and transfer)
are skipped and an interrupted run is restarted; run the same command
again. Each method pretrains with its own mini recipe (schedule, views);
the table's compute column says what each took. MAE runs mmpretrain's
``MAE`` / ``MAEPretrainDecoder`` / ``MAEPretrainHead`` on ``MAERoPEViT``
(mmpretrain's ``MAEViT`` masking on the RoPE ViT). QB-Heat is left out: its
backbone (MobileFormer) is not the ViT the transfer configs build.
"""
import argparse
import os
import os.path as osp
import sys
import time

sys.path.insert(0, osp.dirname(osp.dirname(osp.dirname(osp.abspath(
    __file__)))))

from mmpos.paper_tables import mini  # noqa: E402

# method -> (table name, pretraining config with the demo's backbone)
CONFIGS = 'configs/method_ranking/'
METHODS = {
    'droppos': ('DropPos', 'configs/demo/droppos_vit-tiny-rope-mixed_mini.py'),
    'cr2pq': ('CR2PQ', CONFIGS + 'cr2pq_vit-tiny-rope-mixed_mini.py'),
    'dinov2': ('DINOv2', CONFIGS + 'dinov2_vit-tiny-rope-mixed_mini.py'),
    'icpf': ('ICPF', CONFIGS + 'icpf_vit-tiny-rope-mixed_mini.py'),
    'mae': ('MAE', CONFIGS + 'mae_vit-tiny-rope-mixed_mini.py'),
    'random': (mini.RANDOM_INIT, None),
}


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--work-dir', default='work_dirs/method_ranking')
    parser.add_argument('--data-root', default='data/mini')
    parser.add_argument('--methods', nargs='+', choices=list(METHODS),
                        default=list(METHODS))
    parser.add_argument('--seeds', type=int, nargs='+', default=[0, 1, 2])
    parser.add_argument('--pretrain-iters', type=int, default=None,
                        help='override every method\'s pretraining '
                        'iterations (reduced runs only: the schedulers keep '
                        'their own lengths)')
    parser.add_argument('--iters', type=int, default=None,
                        help='override the transfer iterations')
    return parser.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    if 'random' not in args.methods:
        args.methods.append('random')  # the reference of every difference
    start = time.time()
    mini.ensure_data(args.data_root)
    inits = [METHODS[m][0] for m in args.methods]
    reduced = ', reduced' if args.pretrain_iters or args.iters else ''
    mini.write_plan(
        args.work_dir,
        f'CPU method ranking: {", ".join(inits)} -> mini-objects / '
        f'mini-stuff, tiny RoPE-Mixed ViT{reduced}', inits, args.seeds)
    for method in args.methods:
        init, config = METHODS[method]
        backbone = config and mini.pretrain(config, args.work_dir, init,
                                            args.data_root,
                                            args.pretrain_iters)
        for task in mini.TASKS:
            for seed in args.seeds:
                mini.transfer(args.work_dir, task, init, seed,
                              args.data_root, backbone, args.iters)
    mini.run([sys.executable, 'tools/paper_tables/gen_tables.py', '--seeds',
              args.work_dir, '--print'])
    print(f'this invocation: {(time.time() - start) / 60:.1f} minutes')


if __name__ == '__main__':
    os.environ.setdefault('OMP_NUM_THREADS', str(os.cpu_count() or 1))
    main()
