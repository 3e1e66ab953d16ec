"""Evaluate one classification checkpoint at several input resolutions.

    python tools/analysis_tools/multires_eval.py CONFIG CHECKPOINT
        [--resolutions 96 128 160 192 224 288 384 448 512]
        [--crop-ratio R] [--out-dir DIR] [--batch-size N]
        [--cfg-options k=v ...] [--force]

The test pipeline's resize (``ResizeEdge`` / ``Resize``) and ``CenterCrop``
are rewritten for each resolution ``r``: the short edge is resized to
``round(r / crop_ratio)`` and the centre ``r x r`` crop is evaluated, so
the model sees ``r x r`` inputs (Heo et al., Fig. 4 / Table 5; the default
list is theirs, any list works). ``--crop-ratio`` defaults to the config's
own (crop size / resize scale; DeiT-III evaluates with 1.0). Nothing in the
model is changed: RoPE extrapolates, an APE is interpolated by the backbone.

Writes ``multires.md`` (markdown table), ``multires.csv``, ``multires.json``
and ``multires.png`` (top-1 against resolution, the training resolution
marked) to ``--out-dir`` (default: next to the checkpoint); existing files
are kept unless ``--force``.
"""
import argparse
import copy
import csv
import io
import json
import math
import os
import os.path as osp

from mmpos.analysis.pictures import save_figure
from mmpos.checkpoint import write_atomically
from mmpos.guardrails.cli import cli_main
from mmpos.errors import BadInputError

PAPER_RESOLUTIONS = (96, 128, 160, 192, 224, 288, 384, 448, 512)
RESIZES = ('ResizeEdge', 'Resize')
OUTPUTS = ('multires.md', 'multires.csv', 'multires.json', 'multires.png')


class MultiresError(BadInputError):
    """A config, checkpoint or argument the tool cannot work with."""


def _find(pipeline, names):
    """Index of the first transform whose type (scope stripped) is in
    ``names``."""
    for index, transform in enumerate(pipeline):
        if str(transform.get('type', '')).rpartition('.')[2] in names:
            return index
    raise MultiresError(
        f'the test pipeline has no {" / ".join(names)} transform to set the '
        f'resolution; its transforms are '
        f'{[t.get("type") for t in pipeline]}')


def config_crop_ratio(pipeline) -> float:
    """Crop size / resize scale of a ``resize + CenterCrop`` pipeline."""
    resize = pipeline[_find(pipeline, RESIZES)]
    crop = pipeline[_find(pipeline, ('CenterCrop', ))]
    scale, size = resize['scale'], crop['crop_size']
    scale = min(scale) if isinstance(scale, (list, tuple)) else scale
    size = min(size) if isinstance(size, (list, tuple)) else size
    return size / scale


def set_test_resolution(pipeline, resolution: int, crop_ratio: float):
    """Copy of ``pipeline`` that yields ``resolution`` x ``resolution``
    centre crops of images whose short edge is resized to
    ``round(resolution / crop_ratio)`` (a ``Resize`` becomes a
    ``ResizeEdge`` so the aspect ratio is kept)."""
    pipeline = copy.deepcopy(list(pipeline))
    index = _find(pipeline, RESIZES)
    resize = pipeline[index]
    pipeline[index] = dict(
        type='ResizeEdge', scale=round(resolution / crop_ratio),
        edge='short', backend=resize.get('backend', 'cv2'),
        interpolation=resize.get('interpolation', 'bilinear'))
    pipeline[_find(pipeline, ('CenterCrop', ))]['crop_size'] = resolution
    return pipeline


def evaluate(model, dataloader_cfg, evaluator_cfg):
    """Metrics of ``model`` on one test dataloader, and the ``(H, W)`` of
    the first batch as the model saw it."""
    import torch
    from mmengine.evaluator import Evaluator
    from mmengine.runner import Runner

    dataloader = Runner.build_dataloader(dataloader_cfg)
    evaluator = Evaluator(copy.deepcopy(evaluator_cfg))
    evaluator.dataset_meta = dataloader.dataset.metainfo
    input_hw = None
    with torch.no_grad():
        for data in dataloader:
            if input_hw is None:
                input_hw = tuple(
                    model.data_preprocessor(data)['inputs'].shape[-2:])
            evaluator.process(model.test_step(data), data)
    return evaluator.evaluate(len(dataloader.dataset)), input_hw


def write_outputs(rows, out_dir, title, train_resolution=None):
    """Markdown table, CSV, JSON and a PNG plot of ``rows`` (dicts with
    ``resolution``, ``input`` and metric values)."""
    import matplotlib
    matplotlib.use('Agg')
    import matplotlib.pyplot as plt

    metrics = [k for k in rows[0] if k not in ('resolution', 'input')]
    header = ['resolution', 'input'] + metrics
    table = ['| ' + ' | '.join(header) + ' |',
             '|' + ' --- |' * len(header)]
    for row in rows:
        cells = [str(row['resolution']), row['input']]
        cells += [f'{row[m]:.2f}' for m in metrics]
        table.append('| ' + ' | '.join(cells) + ' |')
    write_atomically((f'# {title}\n\n' + '\n'.join(table) + '\n').encode(),
                     osp.join(out_dir, 'multires.md'))
    text = io.StringIO()
    writer = csv.DictWriter(text, fieldnames=header)
    writer.writeheader()
    writer.writerows(rows)
    write_atomically(text.getvalue().encode(),
                     osp.join(out_dir, 'multires.csv'))
    write_atomically(json.dumps(dict(
        title=title, train_resolution=train_resolution, rows=rows),
        indent=1).encode(), osp.join(out_dir, 'multires.json'))

    fig, ax = plt.subplots(figsize=(6, 4))
    key = metrics[0]
    ax.plot([r['resolution'] for r in rows], [r[key] for r in rows], 'o-')
    if train_resolution:
        ax.axvline(train_resolution, color='grey', linestyle='--',
                   label=f'train {train_resolution}')
        ax.legend()
    ax.set_xlabel('test resolution (px)')
    ax.set_ylabel(key)
    ax.set_title(title, fontsize=9)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    save_figure(fig, osp.join(out_dir, 'multires.png'), dpi=100)


def parse_args(argv=None):
    from mmengine.config import DictAction
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('config', help='classification config')
    parser.add_argument('checkpoint', help='checkpoint of that model')
    parser.add_argument('--resolutions', type=int, nargs='+',
                        default=list(PAPER_RESOLUTIONS),
                        help='square test resolutions (default: the '
                        "paper's 96 ... 512)")
    parser.add_argument('--crop-ratio', type=float,
                        help="crop / resize ratio (default: the config's)")
    parser.add_argument('--out-dir', help='where the table and plot go')
    parser.add_argument('--batch-size', type=int,
                        help='test batch size (default: the config\'s)')
    parser.add_argument('--cfg-options', nargs='+', action=DictAction,
                        help='override config entries')
    parser.add_argument('--force', action='store_true',
                        help='overwrite existing outputs')
    return parser, parser.parse_args(argv)


def run(args):
    import torch
    from mmengine.registry import init_default_scope
    from mmpretrain.registry import MODELS

    import mmpos  # noqa: F401  (registers mmpos)
    from mmpos.checkpoint import check_checkpoint_file, load_checkpoint_into
    from mmpos.guardrails.launch import load_config

    if not osp.isfile(args.config):
        raise MultiresError(f'config not found: {args.config}')
    check_checkpoint_file(args.checkpoint)
    bad = [r for r in args.resolutions if r < 1]
    if bad:
        raise MultiresError(f'resolutions must be positive, got {bad}')
    if args.crop_ratio is not None and not 0 < args.crop_ratio <= 1:
        raise MultiresError(
            f'--crop-ratio must be in (0, 1], got {args.crop_ratio}')
    out_dir = args.out_dir or osp.join(
        osp.dirname(osp.abspath(args.checkpoint)), 'multires')
    existing = [n for n in OUTPUTS if osp.exists(osp.join(out_dir, n))]
    if existing and not args.force:
        raise MultiresError(f'{out_dir} already holds {existing}; pass '
                            '--force to overwrite')

    cfg = load_config(args.config, args.cfg_options)
    init_default_scope(cfg.get('default_scope', 'mmpretrain'))
    dataloader_cfg = copy.deepcopy(cfg.test_dataloader)
    if args.batch_size:
        dataloader_cfg.batch_size = args.batch_size
    pipeline = dataloader_cfg.dataset.pipeline
    crop_ratio = args.crop_ratio or config_crop_ratio(pipeline)

    model_cfg = copy.deepcopy(cfg.model)
    if cfg.get('data_preprocessor'):  # as mmengine's Runner does
        model_cfg.setdefault('data_preprocessor', cfg.data_preprocessor)
    model = MODELS.build(model_cfg)
    patch = getattr(getattr(model, 'backbone', None), 'patch_size', None)
    if patch is not None:
        step = math.lcm(*patch) if isinstance(patch, tuple) else patch
        bad = [r for r in args.resolutions if r % step]
        if bad:
            raise MultiresError(f'resolutions {bad} are not multiples of '
                                f'the patch size {step}')
    load_checkpoint_into(model, args.checkpoint)
    device = 'cuda' if torch.cuda.is_available() else 'cpu'
    model = model.to(device).eval()

    rows = []
    for resolution in args.resolutions:
        dataloader_cfg.dataset.pipeline = set_test_resolution(
            pipeline, resolution, crop_ratio)
        metrics, input_hw = evaluate(model, dataloader_cfg,
                                     cfg.test_evaluator)
        row = dict(resolution=resolution,
                   input='x'.join(map(str, input_hw)))
        row.update({k: float(v) for k, v in metrics.items()})
        rows.append(row)
        print(f'{resolution}px: ' + ', '.join(
            f'{k} {v:.2f}' for k, v in row.items()
            if k not in ('resolution', 'input')), flush=True)

    os.makedirs(out_dir, exist_ok=True)
    backbone = cfg.model.get('backbone', {})
    train_resolution = backbone.get('img_size')
    title = (f'{osp.basename(args.checkpoint)} '
             f'({osp.splitext(osp.basename(args.config))[0]})')
    write_outputs(rows, out_dir, title,
                  train_resolution if isinstance(train_resolution, int)
                  else None)
    print(f'wrote {", ".join(OUTPUTS)} to {out_dir}')
    return rows


@cli_main('multires_eval.py')
def main(argv=None):
    parser, args = parse_args(argv)
    try:
        return run(args)
    except (MultiresError, OSError) as err:
        parser.exit(1, f'{parser.prog}: error: {err}\n')


if __name__ == '__main__':
    main()
