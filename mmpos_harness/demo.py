"""The README's demo: what DropPos pretraining buys, with its noise.

mini data (thousands of unlabeled views of scikit-image's photographs and
synthetic scenes; label-scarce mini-objects and mini-stuff, whose classes
are materials told apart by texture only) -> DropPos pretraining of a tiny
RoPE-Mixed ViT on the unlabeled views -> backbone extracted from the
checkpoint -> label-scarce transfer to Mask R-CNN (mini-objects) and
Semantic FPN (mini-stuff) on CPU, from the pretrained backbone and from
random init, for each of ``--seeds`` -> metrics from the real COCO and mmseg
evaluators -> mean ± std per metric, the difference and whether it exceeds
2 std, in the printed summary, ``results.json`` and the table regenerated
by ``tools/paper_tables/gen_tables.py --seeds`` -> pictures of the models on
a real photograph (scikit-image's ``chelsea``) under ``<run>/pictures/``:
PCA of the pretrained patch features and class attention maps at several
input sizes, DropPos' predicted patch positions, and the seed-0 detector's
and segmenter's predictions drawn by mmdet's and mmseg's visualizers.

    python tools/demo.py [--data-root data/mini] [--work-dir work_dirs/demo]
        [--from-scratch] [--seeds 0 1 2] [--pretrain-iters N] [--iters N]
        [--jobs 2] [--probes depth correspondence retrieval]

``--probes`` adds frozen probes (the method ranking's: linear probe, kNN,
depth, correspondence, retrieval) of both inits to the same table, beside
fine-tuning; cheaper and less noisy than fine-tuning, they are off by
default to keep the demo's time.
``--from-scratch`` skips pretraining (random init only). ``--jobs N`` runs
N single-threaded runs at a time (default 2, the 2-core machine the demo is
sized for): pretraining beside the random-init transfer runs, then the
pretrained ones. Existing mini data written with the demo's sizes is reused
(data written by the generator with other sizes is rewritten); every run
writes to a fresh timestamped directory under ``--work-dir``, each result
file atomically; a second demo on the same ``--work-dir`` is refused while
one runs (:func:`mmpos.utils.launch.work_dir_lock`).
"""
import argparse
import os
import os.path as osp
import sys
import time

from mmpos.utils.cli import cli_main
from mmpos.utils.launch import work_dir_lock

from .comparison import runs, seeds
from .results import last_checkpoint, training_records

PRETRAIN = 'configs/demo/droppos_vit-tiny-rope-mixed_mini.py'
METHOD = 'DropPos'


def last_scalars(work_dir, keys, window=10):
    """Mean of the last ``window`` logged training values of ``keys``."""
    records = [r for r in training_records(work_dir)
               if all(k in r for k in keys)][-window:]
    return {k: round(sum(r[k] for r in records) / len(records), 4)
            for k in keys} if records else {}


def pretraining_summary(run_dir):
    """DropPos' last logged loss and position accuracy (chance 1/16)."""
    work_dir = seeds.pretrain_dir(run_dir, METHOD)
    metrics = last_scalars(work_dir, ('loss', 'acc_pos'))
    metrics['chance'] = round(1 / 16, 4)
    metrics['minutes'] = seeds.minutes(work_dir)
    return metrics


def title(args):
    what = ('random init only (--from-scratch)' if args.from_scratch else
            f'{METHOD}-pretrained vs random init')
    iters = (f', {args.iters} transfer iterations' if args.iters else '')
    if args.pretrain_iters and not args.from_scratch:
        iters += f', {args.pretrain_iters} pretraining iterations'
    scarce = f'{runs.DATA["num_train"]} labelled images per task{iters}'
    return (f'tiny RoPE-Mixed ViT on mini-objects / mini-stuff (CPU): '
            f'{what}, {scarce}')


def pictures(run_dir, backbone, inits):
    """PNGs of the models on scikit-image's ``chelsea`` photograph (the
    seed-0 transfer runs of the first init); returns their paths."""
    from skimage import data

    from mmpos.analysis.pictures import save_png
    out_dir = osp.join(run_dir, 'pictures')
    os.makedirs(out_dir, exist_ok=True)
    image = osp.join(out_dir, 'chelsea.png')
    # cropped to a multiple of the ViT's 8-pixel patches (296 x 448): the
    # segmenter takes whole images of such sizes only
    photo = data.chelsea()
    save_png(photo[:photo.shape[0] // 8 * 8, :photo.shape[1] // 8 * 8], image)
    if backbone:
        runs.run([sys.executable, 'tools/analysis_tools/feature_pictures.py',
                  PRETRAIN, backbone, image, '--out-dir', out_dir, '--sizes',
                  '32', '64', '128', '--layers', '1', '3', '--heads', '0',
                  '1', '2'])
        runs.run([sys.executable, 'tools/analysis_tools/droppos_positions.py',
                  PRETRAIN, last_checkpoint(seeds.pretrain_dir(run_dir,
                                                               METHOD)),
                  image, '--out', osp.join(out_dir, 'chelsea_droppos.png')])
    for task, spec in runs.TASKS.items():
        work_dir = seeds.transfer_dir(run_dir, task, inits[0], 0)
        if osp.isfile(osp.join(work_dir, 'last_checkpoint')):
            runs.run([sys.executable, 'tools/infer.py', spec['config'],
                      last_checkpoint(work_dir), image, '--out-dir',
                      osp.join(out_dir, task), '--score-thr', '0.3'])
    return sorted(osp.join(root, f) for root, _, files in os.walk(out_dir)
                  for f in files if f.endswith('.png') and f != 'chelsea.png')


@cli_main('demo.py')
def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--data-root', default='data/mini')
    parser.add_argument('--work-dir', default='work_dirs/demo')
    parser.add_argument('--seeds', type=int, nargs='+', default=[0, 1, 2],
                        help='transfer seeds, each run from both inits')
    parser.add_argument(
        '--iters', type=int, default=None,
        help='override the number of training iterations per transfer run')
    parser.add_argument(
        '--pretrain-iters', type=int, default=None,
        help='override the number of DropPos pretraining iterations')
    parser.add_argument(
        '--jobs', type=int, default=2,
        help='transfer runs at a time, each single-threaded (1: one at a '
        'time with all threads, its log on the console)')
    parser.add_argument(
        '--probes', nargs='*', default=[], choices=list(runs.PROBES),
        help='frozen probes reported beside fine-tuning, each on both inits '
        '(random init: one random backbone per seed), e.g. depth '
        'correspondence retrieval')
    parser.add_argument(
        '--from-scratch', action='store_true',
        help='skip pretraining: transfer runs start from random weights')
    args = parser.parse_args(argv)
    if args.jobs < 1:
        parser.error(f'--jobs must be at least 1, got {args.jobs}')

    # one demo per work dir at a time; a failed one keeps its runs' logs
    with work_dir_lock(args.work_dir, keep_output=lambda: True):
        run_demo(args)


def run_demo(args):
    """The demo's steps (module docstring) into a new run directory under
    ``args.work_dir``."""
    start = time.time()
    runs.ensure_data(args.data_root)
    run_dir = osp.join(args.work_dir, time.strftime('%Y%m%d_%H%M%S'))
    inits = [runs.RANDOM_INIT] if args.from_scratch else [
        METHOD, runs.RANDOM_INIT]
    probes = {t: dict(runs.PROBES[t]) for t in args.probes}
    for spec in probes.values():  # a probe that draws nothing runs once
        if not spec['seeded']:
            spec['seeds'] = args.seeds[:1]
    runs.ensure_probe_data(args.data_root, probes)
    runs.write_plan(run_dir, title(args), inits, args.seeds,
                    tasks={**runs.TASKS, **probes})
    backbone = runs.compare(
        run_dir, [(METHOD, PRETRAIN, args.pretrain_iters)] * (
            not args.from_scratch) + [(runs.RANDOM_INIT, None, None)],
        args.seeds, args.data_root, args.jobs, args.iters).get(METHOD)
    for task, spec in probes.items():
        for init in inits:
            for seed in spec.get('seeds', args.seeds):
                runs.probe(run_dir, task, init, seed, args.data_root,
                           backbone if init == METHOD else
                           runs.random_backbone(run_dir, init, seed))

    summary = seeds.summarise(run_dir)
    cpu = sum(v or 0 for c in summary['compute'].values()
              for k, v in c.items() if k.endswith('cpu_minutes'))
    results = dict(title=summary['title'], tasks=summary['tasks'],
                   compute=summary['compute'],
                   verdicts=seeds.verdicts(summary), jobs=args.jobs,
                   runs_cpu_minutes=round(cpu, 2))
    if not args.from_scratch:
        results['pretraining'] = pretraining_summary(run_dir)
    path = osp.join(run_dir, 'results.json')

    def save():
        results['minutes'] = round((time.time() - start) / 60, 2)
        seeds.write_json(path, results)

    save()
    print('\n=== mmpos demo results (mini data, CPU) ===')
    if 'pretraining' in results:
        print('pretraining: ' + ', '.join(
            f'{k}={v}' for k, v in results['pretraining'].items()))
    # The same table generator that regenerates the papers' tables.
    runs.run([sys.executable, 'tools/paper_tables/gen_tables.py', '--seeds',
              run_dir, '--print'])
    written = pictures(run_dir, backbone, inits)
    print('pictures: ' + ', '.join(written))
    save()
    print(f'whole demo: {results["minutes"]} minutes (wall, {args.jobs} '
          f'run(s) at a time); its pretraining and transfer runs used '
          f'{results["runs_cpu_minutes"]} CPU minutes; results written to '
          f'{path}')
