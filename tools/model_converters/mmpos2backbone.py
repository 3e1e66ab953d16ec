"""Extract the backbone of an mmpos / mmpretrain training checkpoint.

    python tools/model_converters/mmpos2backbone.py SRC DST
        [--src-prefix backbone.] [--keep-prefix] [--ema]
        [--config CFG] [--drop-unexpected] [--force]

Keeps ``<src-prefix>*`` (default ``backbone.``; e.g. ``teacher.backbone.``
for a distillation teacher) and drops the algorithm (necks, heads, target
networks, optimizer, message hub). DST keys are bare backbone names, loadable
by the backbone's ``init_cfg=dict(type='Pretrained', checkpoint=DST)``; with
``--keep-prefix`` they are ``backbone.<name>``, for ``load_from`` of a whole
detector / segmentor / classifier or ``init_cfg`` with ``prefix='backbone.'``.
``--ema`` takes the weights of mmengine's EMAHook instead.

``--config`` checks the result against ``model.backbone`` of any mmpretrain,
mmdet or mmseg config (e.g. the downstream one): missing and unexpected
keys are reported, shape mismatches refused.

SRC is loaded with ``torch.load(weights_only=True)`` when the file allows;
mmengine's own training checkpoints (message hub) need
``weights_only=False`` and are accepted only if they pickle nothing but
what mmengine writes (``mmpos.utils.checkpoint_io``). An existing DST is
kept unless ``--force``.
"""
import argparse
import os.path as osp
import sys

sys.path.insert(0, osp.dirname(osp.dirname(osp.dirname(osp.abspath(
    __file__)))))

from mmpos.utils.checkpoint_convert import (  # noqa: E402
    ConversionError, check_and_save, extract_backbone,
    load_training_checkpoint, save_state_dict, unwrap_state_dict)


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
    parser.add_argument('--drop-unexpected', action='store_true',
                        help='with --config: leave out keys the backbone '
                        'has no place for')
    parser.add_argument('--force', action='store_true',
                        help='overwrite DST')
    return parser, parser.parse_args(argv)


def build_backbone(config_path, keep_prefix):
    """``model.backbone`` of a config, built in the config's scope and
    wrapped so that its state-dict keys match the output (``backbone.``
    kept or not)."""
    import torch.nn as nn
    from mmengine.config import Config
    from mmengine.registry import init_default_scope
    from mmpretrain.registry import MODELS

    import mmpos  # noqa: F401  (registers mmpos backbones)
    cfg = Config.fromfile(config_path)
    if cfg.get('model', {}).get('backbone') is None:
        raise ConversionError(f'{config_path} has no model.backbone')
    init_default_scope(cfg.get('default_scope', 'mmpretrain'))
    backbone = MODELS.build(cfg.model.backbone)
    return nn.ModuleDict(dict(backbone=backbone)) if keep_prefix else backbone


def main(argv=None):
    parser, args = parse_args(argv)
    try:
        checkpoint = load_training_checkpoint(args.src)
        key = 'ema_state_dict' if args.ema else 'state_dict'
        if args.ema and key not in checkpoint:
            raise ConversionError(f'{args.src} has no ema_state_dict')
        state_dict = extract_backbone(
            unwrap_state_dict(checkpoint, (key, )), args.src_prefix,
            args.keep_prefix)
        meta = dict(source=osp.abspath(args.src),
                    converter='mmpos2backbone', src_prefix=args.src_prefix,
                    ema=args.ema)
        if args.config:
            check_and_save(state_dict, build_backbone(args.config,
                                                      args.keep_prefix),
                           args.dst, meta=meta, force=args.force,
                           drop_unexpected=args.drop_unexpected)
        else:
            save_state_dict(state_dict, args.dst, meta, args.force)
            print(f'saved {len(state_dict)} tensors to {args.dst}')
    except (ConversionError, OSError, ValueError, KeyError) as err:
        parser.exit(1, f'{parser.prog}: error: {err}\n')


if __name__ == '__main__':
    main()
