"""FLOPs and parameters of a config's backbone for one image (mmengine's
counter, ``mmengine.analysis.FlopAnalyzer``).

    python tools/analysis_tools/get_flops.py CONFIG [--shape H W]
        [--cfg-options KEY=VALUE ...]

The backbone is built as the config says (random weights, eval mode) and
run on one ``(1, 3, H, W)`` input: default the backbone's ``img_size``,
else 224. A multiply-add counts as one FLOP (mmengine's and fvcore's
convention), attention's two matrix products included; element-wise
operators and the others the counter does not know are listed and left
out, so the total is a lower bound.
"""
import argparse
from math import prod

import torch
from mmengine.analysis import FlopAnalyzer, parameter_count
from mmengine.analysis.jit_handles import get_shape
from mmengine.analysis.print_helper import complexity_stats_table
from mmengine.config import DictAction

from mmpos.apis import build_backbone
from mmpos.guardrails.cli import cli_main
from mmpos.guardrails.launch import load_config


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('config')
    parser.add_argument('--shape', nargs=2, type=int, metavar=('H', 'W'),
                        help="input size (default: the backbone's img_size, "
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


def backbone_flops(backbone, h: int, w: int) -> FlopAnalyzer:
    """The counter of ``backbone`` on one ``(1, 3, h, w)`` input, the
    attention handle set, its totals computed."""
    flops = FlopAnalyzer(backbone, (torch.zeros(1, 3, h, w), ))
    flops.set_op_handle('aten::scaled_dot_product_attention',
                        attention_flops)
    flops.unsupported_ops_warnings(False).uncalled_modules_warnings(False)
    with torch.no_grad():
        flops.total()
    return flops


def input_shape(backbone, shape):
    if shape:
        return tuple(shape)
    size = getattr(backbone, 'img_size', 224)
    return tuple(size) if isinstance(size, (tuple, list)) else (size, size)


@cli_main('get_flops.py')
def main(argv=None):
    args = parse_args(argv)
    backbone = build_backbone(load_config(args.config, args.cfg_options))
    backbone.eval()
    h, w = input_shape(backbone, args.shape)
    flops = backbone_flops(backbone, h, w)
    total = flops.total()
    print(complexity_stats_table(flops=flops, max_depth=2))
    uncounted = sorted(flops.unsupported_ops())
    if uncounted:
        print(f'not counted (the total is a lower bound): '
              f'{", ".join(uncounted)}')
    params = parameter_count(backbone)['']
    print(f'{type(backbone).__name__} at {h}x{w}: {total / 1e9:.3g} GFLOPs, '
          f'{params / 1e6:.3g} M parameters')


if __name__ == '__main__':
    main()
