"""Position-reconstruction accuracy of a DropPos checkpoint (DropPos paper
§4.1 and Tables S3-S5).

For every patch mask ratio ``gamma`` in {0, .25, .5, .75} and position mask
ratio ``gamma_pos`` in {.25, .5, .75, .95}, the images are masked and their
position embeddings dropped as in pretraining, and the top-1 accuracy of
the predicted positions of the dropped-position patches is measured
(pooled over all such patches of the evaluated images). The table has one
row per ``gamma``, one column per ``gamma_pos``, a row and a column of
averages and the average of the 16 cases ("Avg. acc").

Images: the config's training dataset (``--data-root`` / ``--split`` to
point it elsewhere, e.g. ImageNet ``val``), resized (short side
``size * 256 / 224``) and centre-cropped to the backbone's ``img_size``.
Masks are drawn from ``--seed``, so runs are repeatable.

    python tools/analysis_tools/droppos_position_acc.py CONFIG CHECKPOINT
        [--data-root DIR] [--split val] [--num-images N] [--batch-size B]
        [--seed S] [--device cpu|cuda] [--out table.md|table.csv]
        [--plot heatmap.png]

``--plot`` also draws the 16 cases as a heatmap (rows ``gamma``, columns
``gamma_pos``, the accuracy written in each cell).
"""
import argparse
import itertools
from typing import Dict, Iterable, Sequence, Tuple

import torch

from mmpos.analysis.pictures import save_figure
from mmpos.checkpoint import write_atomically
from mmpos.guardrails.cli import cli_main

GAMMAS = (0., .25, .5, .75)
GAMMAS_POS = (.25, .5, .75, .95)


@torch.no_grad()
def position_accuracy_table(
        model,
        batches: Iterable[torch.Tensor],
        gammas: Sequence[float] = GAMMAS,
        gammas_pos: Sequence[float] = GAMMAS_POS,
        seed: int = 0) -> Dict[Tuple[float, float], float]:
    """Top-1 accuracy (%) per ``(gamma, gamma_pos)`` over ``batches`` of
    preprocessed images ``(B, 3, H, W)``, pooled over dropped patches."""
    model.eval()
    correct = {case: 0 for case in itertools.product(gammas, gammas_pos)}
    total = dict.fromkeys(correct, 0)
    torch.manual_seed(seed)
    for inputs in batches:
        for case in correct:
            res = model.position_predictions(inputs, *case)
            hits = (res['pred'] == res['target']) & res['dropped']
            correct[case] += int(hits.sum())
            total[case] += int(res['dropped'].sum())
    for case, count in total.items():
        if count == 0:
            raise ValueError(f'no dropped position for gamma, gamma_pos = '
                             f'{case}: too few patches for these ratios')
    return {case: 100. * correct[case] / total[case] for case in correct}


def format_table(acc: Dict[Tuple[float, float], float],
                 fmt: str = 'markdown') -> str:
    """Tables S3-S5 layout: rows gamma, columns gamma_pos, averages."""
    gammas = sorted({g for g, _ in acc})
    gammas_pos = sorted({p for _, p in acc})

    def mean(values):
        values = list(values)
        return sum(values) / len(values)

    header = ['gamma \\ gamma_pos'] + [f'{p:.2f}' for p in gammas_pos] + \
        ['avg.']
    rows = [[f'{g:.2f}'] + [f'{acc[g, p]:.2f}' for p in gammas_pos] +
            [f'{mean(acc[g, p] for p in gammas_pos):.2f}'] for g in gammas]
    rows.append(['avg.'] +
                [f'{mean(acc[g, p] for g in gammas):.2f}'
                 for p in gammas_pos] + [f'{mean(acc.values()):.2f}'])
    if fmt == 'csv':
        return '\n'.join(','.join(r) for r in [header] + rows) + '\n'
    if fmt != 'markdown':
        raise ValueError(f"format must be 'markdown' or 'csv', got {fmt!r}")
    lines = ['| ' + ' | '.join(header) + ' |',
             '|' + ' --- |' * len(header)]
    lines += ['| ' + ' | '.join(r) + ' |' for r in rows]
    return '\n'.join(lines) + f'\n\nAvg. acc: {mean(acc.values()):.2f}\n'


def plot_table(acc: Dict[Tuple[float, float], float], path: str) -> None:
    """Heatmap PNG of the accuracies (%), one cell per case."""
    import matplotlib
    matplotlib.use('Agg')
    import matplotlib.pyplot as plt
    gammas = sorted({g for g, _ in acc})
    gammas_pos = sorted({p for _, p in acc})
    grid = [[acc[g, p] for p in gammas_pos] for g in gammas]
    fig, ax = plt.subplots(figsize=(1.3 * len(gammas_pos) + 2,
                                    1.0 * len(gammas) + 1.5))
    image = ax.imshow(grid, cmap='viridis', vmin=0, vmax=100)
    for i, row in enumerate(grid):
        for j, value in enumerate(row):
            ax.text(j, i, f'{value:.1f}', ha='center', va='center',
                    color='white' if value < 60 else 'black')
    ax.set_xticks(range(len(gammas_pos)), [f'{p:.2f}' for p in gammas_pos])
    ax.set_yticks(range(len(gammas)), [f'{g:.2f}' for g in gammas])
    ax.set_xlabel('gamma_pos (position mask ratio)')
    ax.set_ylabel('gamma (patch mask ratio)')
    mean = sum(acc.values()) / len(acc)
    ax.set_title(f'position accuracy (%), avg. {mean:.2f}')
    fig.colorbar(image, ax=ax)
    fig.tight_layout()
    save_figure(fig, path, dpi=100)


def build_batches(cfg, args, model):
    """Preprocessed image batches of the evaluation images."""
    from mmengine.dataset import default_collate
    from mmpretrain.registry import DATASETS
    size = model.backbone.patch_embed.init_input_size[0]
    dataset_cfg = cfg.train_dataloader.dataset.copy()
    if args.data_root:
        dataset_cfg['data_root'] = args.data_root
    if args.split:
        dataset_cfg['split'] = args.split
    dataset_cfg['pipeline'] = [
        dict(type='LoadImageFromFile'),
        dict(type='ResizeEdge', scale=round(size * 256 / 224), edge='short',
             backend='pillow', interpolation='bicubic'),
        dict(type='CenterCrop', crop_size=size),
        dict(type='PackInputs'),
    ]
    dataset = DATASETS.build(dataset_cfg)
    num = min(len(dataset), args.num_images or len(dataset))
    loader = torch.utils.data.DataLoader(
        torch.utils.data.Subset(dataset, range(num)),
        batch_size=args.batch_size,
        num_workers=args.num_workers,
        collate_fn=default_collate)
    for data in loader:
        yield model.data_preprocessor(data, False)['inputs']


@cli_main('droppos_position_acc.py')
def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('config')
    parser.add_argument('checkpoint')
    parser.add_argument('--data-root')
    parser.add_argument('--split', help='dataset split, e.g. val (ImageNet)')
    parser.add_argument('--num-images', type=int,
                        help='evaluate the first N images (default: all)')
    parser.add_argument('--batch-size', type=int, default=64)
    parser.add_argument('--num-workers', type=int, default=0)
    parser.add_argument('--seed', type=int, default=0)
    parser.add_argument('--device', default='cpu')
    parser.add_argument('--out', help='write the table (.md or .csv)')
    parser.add_argument('--plot', help='write a heatmap PNG of the table')
    args = parser.parse_args(argv)

    from mmengine.config import Config
    from mmengine.registry import init_default_scope
    from mmengine.utils import import_modules_from_strings
    import mmpos  # noqa: F401
    from mmpos.checkpoint import load_checkpoint_into
    from mmpretrain.registry import MODELS

    cfg = Config.fromfile(args.config)
    if cfg.get('custom_imports'):
        import_modules_from_strings(**cfg.custom_imports)
    init_default_scope(cfg.get('default_scope', 'mmpretrain'))
    model = MODELS.build(cfg.model)
    if not hasattr(model, 'position_predictions'):
        raise TypeError(f'{args.config}: model {type(model).__name__} is '
                        f'not a DropPos model')
    load_checkpoint_into(model, args.checkpoint)
    model.to(args.device)
    acc = position_accuracy_table(model, build_batches(cfg, args, model),
                                  seed=args.seed)
    print(format_table(acc, 'markdown'))
    if args.out:
        fmt = 'csv' if args.out.endswith('.csv') else 'markdown'
        write_atomically(format_table(acc, fmt).encode(), args.out)
    if args.plot:
        plot_table(acc, args.plot)


if __name__ == '__main__':
    main()
