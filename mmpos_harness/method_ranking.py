"""CPU method ranking: every pretraining method that fits the demo's tiny
RoPE-Mixed ViT (DropPos, CR2PQ, DINOv2, ICPF and, as the peer, mmpretrain's
MAE on that ViT), plus random init, transferred to mini-objects and
mini-stuff with the demo's label-scarce recipe and the same seeds; one
ranked table (mean ± std over seeds, difference to random init, compute)
written by ``tools/paper_tables/gen_tables.py --seeds``.

    python tools/paper_tables/method_ranking.py [--work-dir
        work_dirs/method_ranking] [--data-root data/mini]
        [--methods droppos cr2pq dinov2 icpf mae random] [--seeds 0 1 2]
        [--pretrain-iters N] [--iters N] [--jobs N]

55 CPU minutes with the defaults (measured 2026-11-24: 42.8 minutes wall with
2 jobs; not part of CI); every method gets about the pretraining compute of
the demo's DropPos (see METHODS). It resumes: the work dir is fixed, finished runs (pretraining and transfer)
are skipped and an interrupted run is restarted; run the same command
again. Each method pretrains with its own mini recipe (views, losses,
schedule shape) for its equal-compute iterations; the table's compute
column says what each took. MAE runs mmpretrain's
``MAE`` / ``MAEPretrainDecoder`` / ``MAEPretrainHead`` on ``MAERoPEViT``
(mmpretrain's ``MAEViT`` masking on the RoPE ViT). QB-Heat is left out: its
backbone (MobileFormer) is not the ViT the transfer configs build.
"""
import argparse
import sys
import time

from .comparison import runs

# method -> (table name, pretraining config with the demo's backbone,
# pretraining iterations). The iterations give every method about the
# pretraining compute of the demo's 3000 DropPos iterations (2.3 CPU
# minutes): MAE and CR2PQ steps cost about what DropPos' do, the multi-crop
# DINOv2 / ICPF steps about 2.4x (measured: DINOv2 500 iterations, 0.9 CPU
# minutes). None keeps the config's schedule; otherwise
# runs.schedule_options stretches it.
CONFIGS = 'configs/method_ranking/'
METHODS = {
    'droppos': ('DropPos', 'configs/demo/droppos_vit-tiny-rope-mixed_mini.py',
                None),
    'cr2pq': ('CR2PQ', CONFIGS + 'cr2pq_vit-tiny-rope-mixed_mini.py', 3000),
    'dinov2': ('DINOv2', CONFIGS + 'dinov2_vit-tiny-rope-mixed_mini.py',
               1250),
    'icpf': ('ICPF', CONFIGS + 'icpf_vit-tiny-rope-mixed_mini.py', 1250),
    'mae': ('MAE', CONFIGS + 'mae_vit-tiny-rope-mixed_mini.py', 3000),
    'random': (runs.RANDOM_INIT, None, None),
}


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--work-dir', default='work_dirs/method_ranking')
    parser.add_argument('--data-root', default='data/mini')
    parser.add_argument('--methods', nargs='+', choices=list(METHODS),
                        default=list(METHODS))
    parser.add_argument('--seeds', type=int, nargs='+', default=[0, 1, 2])
    parser.add_argument('--pretrain-iters', type=int, default=None,
                        help='every method\'s pretraining iterations (their '
                        'schedules stretched to it) instead of the '
                        'equal-compute defaults')
    parser.add_argument('--iters', type=int, default=None,
                        help='override the transfer iterations')
    parser.add_argument('--jobs', type=int, default=2,
                        help='runs at a time, each single-threaded (1: one '
                        'at a time with all threads)')
    return parser.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    if args.jobs < 1:
        raise SystemExit(f'method_ranking.py: --jobs must be at least 1, '
                         f'got {args.jobs}')
    if 'random' not in args.methods:
        args.methods.append('random')  # the reference of every difference
    start = time.time()
    runs.ensure_data(args.data_root)
    inits = [METHODS[m][0] for m in args.methods]
    reduced = ', reduced' if args.pretrain_iters or args.iters else ''
    runs.write_plan(
        args.work_dir,
        f'CPU method ranking: {", ".join(inits)} -> mini-objects / '
        f'mini-stuff, tiny RoPE-Mixed ViT{reduced}', inits, args.seeds)
    runs.compare(args.work_dir,
                 [(METHODS[m][0], METHODS[m][1],
                   args.pretrain_iters or METHODS[m][2])
                  for m in args.methods],
                 args.seeds, args.data_root, args.jobs, args.iters)
    runs.run([sys.executable, 'tools/paper_tables/gen_tables.py', '--seeds',
              args.work_dir, '--print'])
    print(f'this invocation: {(time.time() - start) / 60:.1f} minutes')
