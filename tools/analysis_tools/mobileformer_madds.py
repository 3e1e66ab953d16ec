"""Multiply-adds and parameters of the Mobile-Former encoders (QB-Heat
Tab. 8: 285M / 1.0G / 3.7G MAdds at 224^2), the figures quoted in
``configs/qbheat/README.md``.

Two counts of one image, both at batch 1 in eval mode:

* ``hooks``: convolutions and linear layers (forward hooks) plus the two
  matmuls of every attention (``q k^T`` and ``attn v``); BatchNorm is
  taken as folded into the convs (not counted), as MAdds usually are.
* ``flop_analyzer``: mmengine's ``FlopAnalyzer`` (one multiply-add per
  FLOP, BatchNorm and LayerNorm counted) with a handle for
  ``aten::scaled_dot_product_attention``, which it does not count by
  itself (without it the attention matmuls are missing, e.g. 272.9M
  instead of 285.0M for MF-285M).

Usage::

    python tools/analysis_tools/mobileformer_madds.py [--size 224] \
        [--arch 285m 1.0g 3.7g]
"""
import argparse
from math import prod
from typing import Any, Dict, List

import torch
import torch.nn as nn

from mmpos.models.backbones.mobile_former import (
    Former, FormerToMobile, MobileFormer, MobileToFormer)
from mmpos.guardrails.cli import cli_main

ARCHS = ('285m', '1.0g', '3.7g')


def count_madds(model: nn.Module, size: int = 224) -> int:
    """Multiply-adds of one ``size x size`` image: convs and linears by
    forward hooks, plus the two matmuls of every attention."""
    total = []

    def hook(m, args, out):
        if isinstance(m, nn.Conv2d):
            k = m.kernel_size[0] * m.kernel_size[1]
            total.append(out.numel() * k * m.in_channels // m.groups)
        elif isinstance(m, nn.Linear):
            total.append(out.numel() * m.in_features)
        elif isinstance(m, (MobileToFormer, FormerToMobile)):
            x, tokens = args  # M x HW x C both ways (keys = values)
            total.append(2 * tokens.shape[1] * x[0].numel())
        elif isinstance(m, Former):  # M x M x d
            total.append(2 * args[0].shape[1] * args[0][0].numel())

    handles = [m.register_forward_hook(hook) for m in model.modules()]
    try:
        with torch.no_grad():
            model(torch.zeros(1, 3, size, size))
    finally:
        for h in handles:
            h.remove()
    return sum(total)


def _sdpa_flop_jit(inputs: List[Any], outputs: List[Any]) -> int:
    """``q k^T`` and ``attn v`` of ``scaled_dot_product_attention``:
    ``L S (d + d_v)`` per batch and head for q ``(..., L, d)``, k ``(...,
    S, d)``, v ``(..., S, d_v)``."""
    from mmengine.analysis.jit_handles import get_shape
    q, k, v = (get_shape(x) for x in inputs[:3])
    return prod(q[:-1]) * k[-2] * (q[-1] + v[-1])


def flop_analyzer_madds(model: nn.Module, size: int = 224) -> Dict[str, int]:
    """mmengine ``FlopAnalyzer`` counts by operator (plus ``'total'``),
    attention included."""
    from mmengine.analysis import FlopAnalyzer
    analyzer = FlopAnalyzer(model, (torch.zeros(1, 3, size, size), ))
    analyzer.set_op_handle('aten::scaled_dot_product_attention',
                           _sdpa_flop_jit)
    analyzer.unsupported_ops_warnings(False)
    analyzer.uncalled_modules_warnings(False)
    out = dict(analyzer.by_operator())
    out['total'] = analyzer.total()
    return out


def complexity(arch: str, size: int = 224) -> Dict[str, float]:
    """``hooks`` and ``flop_analyzer`` MAdds and ``params`` of one arch."""
    model = MobileFormer(arch).eval()
    return dict(
        hooks=count_madds(model, size),
        flop_analyzer=flop_analyzer_madds(model, size)['total'],
        params=sum(p.numel() for p in model.parameters()))


@cli_main('mobileformer_madds.py')
def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--size', type=int, default=224)
    parser.add_argument('--arch', nargs='+', default=list(ARCHS),
                        choices=ARCHS)
    args = parser.parse_args(argv)
    print('| arch | MAdds (hooks, BN folded) | MAdds (FlopAnalyzer + '
          'attention) | params |')
    print('| --- | --- | --- | --- |')
    for arch in args.arch:
        c = complexity(arch, args.size)
        print(f'| {arch} | {c["hooks"] / 1e6:.1f}M | '
              f'{c["flop_analyzer"] / 1e6:.1f}M | {c["params"] / 1e6:.2f}M |')


if __name__ == '__main__':
    main()
