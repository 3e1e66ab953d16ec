"""Extract the backbone of an mmpos / mmpretrain training checkpoint.

    python tools/model_converters/mmpos2backbone.py SRC DST
        [--src-prefix backbone.] [--keep-prefix] [--ema]
        [--config CFG] [--grid H W] [--drop-unexpected] [--force]

Keeps ``<src-prefix>*`` (default ``backbone.``; e.g. ``teacher.backbone.``
for a distillation teacher) and drops the algorithm (necks, heads, target
networks, optimizer, message hub). DST keys are bare backbone names, loadable
by the backbone's ``init_cfg=dict(type='Pretrained', checkpoint=DST)``; with
``--keep-prefix`` they are ``backbone.<name>``, for ``load_from`` of a whole
detector / segmentor / classifier or ``init_cfg`` with ``prefix='backbone.'``.
``--ema`` takes the weights of mmengine's EMAHook instead. The output
records the backbone's config (``meta.backbone_cfg``: ``--config``'s, else
the one the training checkpoint records), so
``mmpos.apis.load_backbone(DST)`` builds and loads it in one line.

``--config`` checks the result against ``model.backbone`` of any mmpretrain,
mmdet or mmseg config (e.g. the downstream one): missing and unexpected
keys are reported, shape mismatches refused.

ICPF checkpoints (a positional field ``pos_field.field`` next to the
extracted ``backbone.``, e.g. ``teacher.module.pos_field.field`` for
``--src-prefix teacher.module.backbone.``): the field becomes the backbone's
``pos_embed``, sampled on the whole image for an ``H x W`` patch grid
(``--grid``; default: the grid of ``--config``'s backbone, else that of the
checkpoint's ``pos_embed``), so the result is a plain APE ViT. The
backbone's own ``pos_embed`` is not what ICPF trained and is never kept.

SRC is read with ``mmpos.checkpoint.read_checkpoint``: ``weights_only=True``
when the file allows; mmengine's own training checkpoints (message hub)
need ``weights_only=False`` and are accepted only if they pickle nothing
but what mmengine writes. An existing DST is kept unless ``--force``.
"""
import argparse
import math
import os.path as osp
from collections import OrderedDict
from typing import Optional

import torch.nn as nn
from mmengine.config import Config

from mmpos.apis import build_backbone
from mmpos.apis.features import backbone_config
from mmpos.checkpoint import read_checkpoint, save_state_dict, state_dict_of
from mmpos.errors import ConversionError
from mmpos.converters import (
    extract_backbone, find_positional_field, positional_field_to_ape)
from mmpos.converters.command import USER_ERRORS, check_and_save
from mmpos.guardrails.cli import cli_main


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('src', help='training checkpoint')
    parser.add_argument('dst', help='output backbone checkpoint')
    parser.add_argument('--src-prefix', default='backbone.',
                        help='module to extract (default: backbone.)')
    parser.add_argument('--keep-prefix', action='store_true',
                        help='write keys as backbone.<name>')
    parser.add_argument('--ema', action='store_true',
                        help='use the EMAHook weights (ema_state_dict)')
    parser.add_argument('--config',
                        help='check against model.backbone of this config')
    parser.add_argument('--grid', nargs=2, type=int, metavar=('H', 'W'),
                        help='ICPF checkpoints: patch grid of the pos_embed '
                        'exported from the positional field (default: '
                        "--config's backbone grid, else the checkpoint's)")
    parser.add_argument('--drop-unexpected', action='store_true',
                        help='with --config: leave out keys the backbone '
                        'has no place for')
    parser.add_argument('--force', action='store_true',
                        help='overwrite DST')
    return parser, parser.parse_args(argv)


def export_field(state_dict, backbone, args, model):
    """Replace ``backbone['pos_embed']`` by the ICPF positional field of
    ``state_dict`` if it has one; returns ``(backbone, grid or None)``."""
    field = find_positional_field(state_dict, args.src_prefix)
    if field is None:
        if args.grid:
            raise ConversionError(
                f'--grid applies to ICPF checkpoints, but {args.src} has no '
                f'positional field next to {args.src_prefix!r}')
        return backbone, None
    grid = args.grid
    if grid is None and getattr(model, 'pos_embed', None) is not None:
        grid = model.patch_resolution
    backbone = positional_field_to_ape(backbone, field, grid)
    if grid is None:  # the checkpoint's own square grid
        grid = (math.isqrt(backbone['pos_embed'].shape[1] - 1), ) * 2
    print(f'pos_embed: ICPF positional field {tuple(field.shape)} sampled '
          f'on a {grid[0]}x{grid[1]} patch grid')
    return backbone, list(grid)


def fit_cls_slot(backbone, model):
    """A ``--config`` backbone without class token (ViTDet window attention)
    takes the patch slots of ``pos_embed`` only, as its load hook would."""
    pos, own = backbone.get('pos_embed'), getattr(model, 'pos_embed', None)
    if pos is not None and own is not None and getattr(
            model, 'cls_token', True) is None and \
            pos.shape[1] == own.shape[1] + 1:
        backbone['pos_embed'] = pos[:, 1:]
        print('pos_embed: class-token slot dropped (the backbone has no '
              'class token)')
    return backbone


def backbone_text(source) -> Optional[str]:
    """The text of a config holding only ``model.backbone`` of ``source``
    (a config path, or a training checkpoint whose meta records its
    config), for ``mmpos.apis.load_backbone`` of the output; ``None`` when
    the checkpoint records no config."""
    if isinstance(source, dict):
        if not isinstance(source.get('meta', {}).get('cfg'), str):
            return None
        source = Config.fromstring(source['meta']['cfg'], '.py')
    backbone = dict(backbone_config(source))
    backbone.pop('init_cfg', None)
    return Config(dict(model=dict(backbone=backbone),
                       custom_imports=dict(imports=['mmpos']))).pretty_text


@cli_main('mmpos2backbone.py')
def main(argv=None):
    parser, args = parse_args(argv)
    try:
        checkpoint = read_checkpoint(args.src)
        key = 'ema_state_dict' if args.ema else 'state_dict'
        if args.ema and key not in checkpoint:
            raise ConversionError(f'{args.src} has no ema_state_dict')
        state_dict = state_dict_of(checkpoint, (key, ),
                                   f'checkpoint {args.src}')
        model = build_backbone(args.config) if args.config else None
        backbone, grid = export_field(
            state_dict, extract_backbone(state_dict, args.src_prefix), args,
            model)
        if model is not None:
            backbone = fit_cls_slot(backbone, model)
        if args.keep_prefix:
            backbone = OrderedDict(
                ('backbone.' + k, v) for k, v in backbone.items())
        meta = dict(source=osp.abspath(args.src),
                    converter='mmpos2backbone', src_prefix=args.src_prefix,
                    ema=args.ema, positional_field_grid=grid,
                    backbone_cfg=backbone_text(args.config or checkpoint)
                    if grid is None else None)
        if model is not None:  # keys as in the output
            target = nn.ModuleDict(dict(
                backbone=model)) if args.keep_prefix else model
            check_and_save(backbone, target, args.dst, meta=meta,
                           force=args.force,
                           drop_unexpected=args.drop_unexpected)
        else:
            save_state_dict(backbone, args.dst, meta, args.force)
            print(f'saved {len(backbone)} tensors to {args.dst}')
    except USER_ERRORS as err:
        parser.exit(1, f'{parser.prog}: error: {err}\n')


if __name__ == '__main__':
    main()
