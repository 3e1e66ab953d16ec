"""RoPE attention on whatever device is present (CUDA when available).

Loads mmpos' linear-angle RoPE schemes (``mmpos/models/layers/positions/
linear.py`` and the torch-only files it imports) by path, without the
packages' ``__init__`` files, so that it runs where only torch is installed
(e.g. a GPU machine without the OpenMMLab stack).

* Checks on the device, under autocast (``--amp auto``: bf16 on CUDA, fp32
  on CPU): q.k logits between patch tokens are unchanged by a common shift
  of all coordinates (integer and fractional), axial and mixed; outputs
  finite.
* Times one attention layer (qkv -> RoPE -> SDPA -> proj, forward+backward)
  without RoPE, with RoPE-Axial and with RoPE-Mixed at ViT-B width for
  several token counts, and prints each ratio against no RoPE measured in
  the same run.

Timing and device/AMP selection come from the sibling ``_timing.py`` (torch
only).

    python benchmarks/rope_attention_device.py [--quick] [--device auto]
        [--amp auto|off|bf16|fp16]
"""
import argparse
import importlib
import json
import sys
import types
from pathlib import Path

import torch
import torch.nn as nn
import torch.nn.functional as F

import _timing

_LAYERS = Path(__file__).resolve().parents[1] / 'mmpos' / 'models' / 'layers'


def load_rope_module():
    """``mmpos.models.layers.positions.linear`` as ``mmpos_layers.positions.
    linear``: its package and the parent package are stood in by empty
    modules, so only the torch-only files themselves run."""
    for name, path in (('mmpos_layers', _LAYERS),
                       ('mmpos_layers.positions', _LAYERS / 'positions')):
        package = types.ModuleType(name)
        package.__path__ = [str(path)]
        sys.modules.setdefault(name, package)
    return importlib.import_module('mmpos_layers.positions.linear')


def scheme(rope_mod, rope_type, head_dim, heads):
    """A one-block ``AxialRoPE`` / ``MixedRoPE``."""
    cls = rope_mod.AxialRoPE if rope_type == 'axial' else rope_mod.MixedRoPE
    return cls(head_dim, heads, 1)


class Attention(nn.Module):
    """Minimal multi-head attention with optional 2-D RoPE on patch tokens."""

    def __init__(self, rope_mod, dim, heads, rope_type):
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(dim, dim * 3)
        self.proj = nn.Linear(dim, dim)
        self.rope = None if rope_type == 'none' else scheme(
            rope_mod, rope_type, dim // heads, heads)

    def forward(self, x, hw):
        B, N, C = x.shape
        qkv = self.qkv(x).reshape(B, N, 3, self.heads, C // self.heads)
        qkv = qkv.permute(2, 0, 3, 1, 4)
        qk, v = qkv[:2], qkv[2]  # q and k rotated in one call, no copy
        if self.rope is not None:  # the table, as a backbone computes it
            qk = self.rope(None, hw, B, device=x.device)[0].rotate(qk)
        q, k = qk.unbind(0)
        out = F.scaled_dot_product_attention(q, k, v)
        return self.proj(out.transpose(1, 2).reshape(B, N, C))


def check_shift_invariance(rope_mod, device, dtype):
    torch.manual_seed(0)
    results = {}
    for rope_type in ('axial', 'mixed'):
        table = scheme(rope_mod, rope_type, 64, 4).to(device).block_table

        def rope(x, coords):
            return table(0, coords[None]).rotate(x)

        q = torch.randn(2, 4, 50, 64, device=device)
        k = torch.randn(2, 4, 50, 64, device=device)
        coords = torch.rand(50, 2, device=device) * 14
        worst = 0.
        for shift in ((3., -2.), (0.37, -1.5)):
            shifted = coords + torch.tensor(shift, device=device)
            with _timing.autocast(device, dtype):
                a = rope(torch.stack((q, k)), coords=coords)
                b = rope(torch.stack((q, k)), coords=shifted)
            la = (a[0].float() @ a[1].float().transpose(-1, -2))
            lb = (b[0].float() @ b[1].float().transpose(-1, -2))
            assert torch.isfinite(la).all() and torch.isfinite(lb).all()
            worst = max(worst, ((la - lb).abs().max() /
                                la.abs().max()).item())
        results[rope_type] = worst
    return results


def time_attention(rope_mod, device, dtype, batch, grid, iters):
    """Median fwd+bwd ms of one attention layer per RoPE type."""
    dim, heads = 768, 12
    hw = (grid, grid)
    x = torch.randn(batch, grid * grid, dim, device=device,
                    requires_grad=True)
    steps = {}
    for rope_type in ('none', 'axial', 'mixed'):
        layer = Attention(rope_mod, dim, heads, rope_type).to(device)

        def step(layer=layer):
            with _timing.autocast(device, dtype):
                out = layer(x, hw)
            out.float().sum().backward()

        steps[rope_type] = step
    stats = _timing.measure(steps, device, warmup=3, iters=iters,
                            memory=False)
    return {name: entry['step_ms'] for name, entry in stats.items()}


def run(quick=False, device='auto', amp='auto'):
    rope_mod = load_rope_module()
    device, dtype = _timing.setup(device, amp)
    report = dict(
        device=torch.cuda.get_device_name() if device.type == 'cuda' else
        'cpu',
        autocast=str(dtype),
        shift_invariance_rel_err=check_shift_invariance(
            rope_mod, device, dtype))
    grids = (14, ) if quick else (14, 28, 56, 64)
    batch = 2 if quick or device.type == 'cpu' else 64
    rows = []
    for grid in grids:
        b = max(1, batch * 196 // (grid * grid))
        times = time_attention(rope_mod, device, dtype, b, grid,
                               iters=3 if quick else 20)
        rows.append(
            dict(tokens=grid * grid, batch=b,
                 ms_none=round(times['none'], 3),
                 ratio_axial=round(times['axial'] / times['none'], 3),
                 ratio_mixed=round(times['mixed'] / times['none'], 3)))
    report['attention_fwd_bwd'] = rows
    return report


if __name__ == '__main__':
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--quick', action='store_true')
    parser.add_argument('--device', default='auto')
    parser.add_argument('--amp', default='auto', choices=_timing.AMP_CHOICES)
    args = parser.parse_args()
    print(json.dumps(run(args.quick, args.device, args.amp), indent=2))
