"""FLOPs and parameters of what a config runs, for one image (mmengine's
counter, ``mmengine.analysis.FlopAnalyzer``).

    python tools/analysis_tools/get_flops.py CONFIG [--shape H W]
        [--cfg-options KEY=VALUE ...]

What is measured (random weights, eval mode):

* an mmdet or mmseg config (``default_scope``): the whole detector or
  segmentor as it runs at test time, ``forward(mode='tensor')`` (mmdet's
  and mmseg's own ``get_flops.py`` measure the same: backbone, neck and
  heads, proposals included; no auxiliary head, no post-processing) on an
  image of its test size: a square image through the test pipeline's
  ``Resize`` (``keep_ratio``: the short side of ``scale``; else ``scale``),
  padded by the config's data preprocessor;
* any other config (pretraining, classification): its backbone as it runs
  outside the pretraining model (``mmpos.apis.build_backbone(...,
  plain=True)``: DropPos' and MAE's masking ``MAERoPEViT`` unmasked, the
  whole image), on a ``(1, 3, H, W)`` input of the backbone's
  ``img_size``, else 224.

``--shape H W`` sets the image size instead. A multiply-add counts as one
FLOP (mmengine's and fvcore's convention), attention's two matrix products
included (mmdet's and mmseg's tools leave ``scaled_dot_product_attention``
out; the table shows it apart); element-wise operators and the others the
counter does not know are listed and left out, so the total is a lower
bound.
"""
import argparse
from functools import partial
from math import prod

import torch
from mmengine.analysis import FlopAnalyzer, parameter_count
from mmengine.analysis.jit_handles import get_shape
from mmengine.analysis.print_helper import complexity_stats_table
from mmengine.config import DictAction

from mmpos.apis import build_backbone
from mmpos.apis.features import backbone_config
from mmpos.errors import BadInputError
from mmpos.guardrails.cli import cli_main
from mmpos.guardrails.launch import load_config

#: ``default_scope`` -> what its configs' ``model`` is
WHOLE_MODELS = {'mmdet': 'detector', 'mmseg': 'segmentor'}


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('config')
    parser.add_argument('--shape', nargs=2, type=int, metavar=('H', 'W'),
                        help='image size (default: the test size of a '
                        "detector / segmentor, the backbone's img_size, "
                        'else 224)')
    parser.add_argument('--cfg-options', nargs='+', action=DictAction,
                        help='override config entries, e.g. '
                        'model.backbone.arch=small')
    return parser.parse_args(argv)


def attention_flops(inputs, outputs) -> int:
    """Multiply-adds of ``scaled_dot_product_attention(q, k, v)``: ``q
    k^T`` and the weights times ``v``, ``B' N_q N_k (D_k + D_v)`` (the
    counter has no handle of its own for it)."""
    q, k, v = (get_shape(value) for value in inputs[:3])
    return prod(q[:-2]) * q[-2] * k[-2] * (q[-1] + v[-1])


def count_flops(model, inputs: tuple) -> FlopAnalyzer:
    """The counter of ``model(*inputs)``, the attention handle set, its
    totals computed."""
    flops = FlopAnalyzer(model, inputs)
    flops.set_op_handle('aten::scaled_dot_product_attention',
                        attention_flops)
    flops.unsupported_ops_warnings(False).uncalled_modules_warnings(False)
    with torch.no_grad():
        flops.total()
    return flops


def backbone_flops(backbone, h: int, w: int) -> FlopAnalyzer:
    """The counter of ``backbone`` on one ``(1, 3, h, w)`` input."""
    return count_flops(backbone, (torch.zeros(1, 3, h, w), ))


def inference_size(cfg) -> tuple:
    """``(H, W)`` of a square image after the test pipeline's ``Resize``
    (``scale`` is ``(w, h)``; with ``keep_ratio`` a square image keeps its
    short side ``min(scale)``)."""
    pipeline = cfg.get('test_dataloader', {}).get('dataset', {}).get(
        'pipeline') or cfg.get('test_pipeline') or []
    resize = next((t for t in pipeline if str(t.get('type')).endswith(
        'Resize') and t.get('scale')), None)
    if resize is None:
        raise BadInputError(
            f'{cfg.filename}: test_dataloader.dataset.pipeline has no '
            'Resize with a scale to take the test size from; pass --shape '
            'H W')
    scale = resize['scale']
    scale = (scale, scale) if isinstance(scale, int) else tuple(scale)
    if resize.get('keep_ratio'):
        return (min(scale), ) * 2
    return scale[1], scale[0]


def build_whole_model(cfg):
    """The detector / segmentor of ``cfg`` in its registry (its
    ``default_scope``), eval mode, SyncBN as BN, no auxiliary head (a
    training-only loss)."""
    from mmengine.model import revert_sync_batchnorm
    from mmengine.registry import MODELS, DefaultScope
    with DefaultScope.overwrite_default_scope(cfg.default_scope):
        model = MODELS.build(cfg.model)
    if getattr(model, 'auxiliary_head', None) is not None:
        model.auxiliary_head = None
    return revert_sync_batchnorm(model).eval()


def whole_model_batch(cfg, model, h: int, w: int) -> dict:
    """One random ``h x w`` image (0-255) and its data sample, through
    ``model``'s data preprocessor (normalised, padded)."""
    if cfg.default_scope == 'mmdet':
        from mmdet.structures import DetDataSample as Sample
    else:
        from mmseg.structures import SegDataSample as Sample
    meta = dict(img_shape=(h, w), ori_shape=(h, w), pad_shape=(h, w),
                scale_factor=(1., 1.))
    batch = dict(inputs=[torch.rand(3, h, w) * 255],
                 data_samples=[Sample(metainfo=meta)])
    return model.data_preprocessor(batch, False)


def whole_model_flops(model, data: dict) -> FlopAnalyzer:
    """The counter of ``model.forward(inputs, data_samples,
    mode='tensor')`` on a preprocessed batch ``data`` (what mmdet's and
    mmseg's ``get_flops.py`` count)."""
    forward = model.forward
    model.forward = partial(forward, data_samples=data['data_samples'],
                            mode='tensor')
    try:
        return count_flops(model, (data['inputs'], ))
    finally:
        del model.forward  # the class's again


def measure(cfg, shape=None):
    """``(model, input shape (H, W), counter)`` of what ``cfg`` runs (the
    module docstring)."""
    scope = cfg.get('default_scope')
    if scope in WHOLE_MODELS:
        h, w = shape or inference_size(cfg)
        model = build_whole_model(cfg)
        data = whole_model_batch(cfg, model, h, w)
        return model, tuple(data['inputs'].shape[-2:]), whole_model_flops(
            model, data)
    backbone = build_backbone(cfg, plain=True).eval()
    size = shape or getattr(backbone, 'img_size', 224)
    h, w = (size, size) if isinstance(size, int) else tuple(size)
    return backbone, (h, w), backbone_flops(backbone, h, w)


@cli_main('get_flops.py')
def main(argv=None):
    args = parse_args(argv)
    cfg = load_config(args.config, args.cfg_options)
    model, (h, w), flops = measure(cfg, args.shape)
    print(complexity_stats_table(flops=flops, max_depth=2))
    uncounted = sorted(flops.unsupported_ops())
    if uncounted:
        print(f'not counted (the total is a lower bound): '
              f'{", ".join(uncounted)}')
    what = WHOLE_MODELS.get(cfg.get('default_scope'))
    if what is None and type(model).__name__ != backbone_config(
            cfg)['type']:
        what = (f'the unmasked backbone of {backbone_config(cfg)["type"]}, '
                'as exported')
    params = parameter_count(model)['']
    print(f'{type(model).__name__}{f" ({what})" if what else ""} at '
          f'{h}x{w}: {flops.total() / 1e9:.3g} GFLOPs, '
          f'{params / 1e6:.3g} M parameters')


if __name__ == '__main__':
    main()
