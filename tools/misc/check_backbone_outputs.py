"""Outputs of every shipped config's backbone on random weights, saved once
and compared after a change (a refactor must leave them unchanged).

For every config of ``configs/**/*.py`` (not ``_base_``, not the model-free
dense-probe settings; the list of ``tests/test_configs.py``) the backbone
(and a CR2PQ neck, which owns a position scheme) is built in the config's
scope with a fixed seed, shrunk as ``tests/test_configs.py`` shrinks it (a
ViT named by arch: 16 channels per head; a Swin: 8 per head), given random
weights drawn by parameter name, and run on fixed inputs in training and in
eval mode, the global RNG reseeded before every forward (coordinate
augmentation, masking and drop-path draws are then fixed):

* ``forward`` on a ``2 x 3 x 64 x 64`` and a ``1 x 3 x 48 x 80`` image;
* for mmpos ViTs, ``forward_tokens`` on the patch tokens of the first image
  with per-sample fractional coordinates (one NaN: no position).

Besides the configs, ``extra/*`` cases build tiny mmpos backbones with the
options no shipped config sets (every scheme with ViTDet windows, test-time
frequency scaling on a larger grid, each coordinate draw, RoPE Swin with
every rotary scheme).

Saved per config: the outputs, the state-dict keys and shapes, and a digest
of the seeded initial weights.

    python tools/misc/check_backbone_outputs.py save DIR [--only SUBSTR]
    python tools/misc/check_backbone_outputs.py compare DIR [--atol 1e-6]

``compare`` prints one line per config and exits 1 on any difference
(bitwise equality is reported as such; a difference within ``--atol`` is
reported with its size).
"""
import argparse
import copy
import hashlib
import os.path as osp
import sys
from pathlib import Path

import mmpos_positions
import torch
from mmengine.registry import init_default_scope

from mmpos.apis.features import load_config

REPO = Path(__file__).resolve().parents[2]
TINY_HEAD_DIM = 16


def configs(only=None):
    """The shipped configs with a model (``tests/test_configs.py``)."""
    found = sorted(
        str(p.relative_to(REPO)) for p in (REPO / 'configs').rglob('*.py')
        if '_base_' not in p.parts and not (
            p.parent.name == 'dense_probes' and p.name.startswith(
                ('depth_', 'correspondence_', 'retrieval_'))))
    return [c for c in found if only is None or only in c]


def registry(scope):
    if scope == 'mmdet':
        from mmdet.registry import MODELS
    elif scope == 'mmseg':
        from mmseg.registry import MODELS
    else:
        from mmpretrain.registry import MODELS
    return MODELS


def shrink(backbone):
    """A ViT / Swin named by arch shrunk to a few channels per head."""
    from mmpretrain.models.backbones import SwinTransformer
    from mmpos.models.backbones import RoPEVisionTransformer
    arch = backbone.get('arch')
    if not isinstance(arch, str):
        return backbone
    if 'Swin' in str(backbone.get('type')):
        depths = SwinTransformer.arch_zoo[arch.lower()]['depths']
        backbone['arch'] = dict(embed_dims=8, depths=depths,
                                num_heads=[1, 2, 4, 8])
    elif arch.lower() in RoPEVisionTransformer.arch_zoo:
        zoo = RoPEVisionTransformer.arch_zoo[arch.lower()]
        width = TINY_HEAD_DIM * zoo['num_heads']
        backbone['arch'] = dict(zoo, embed_dims=width,
                                feedforward_channels=2 * width)
    return backbone


def randomise(module, seed=1):
    """Every parameter redrawn ``N(0, 0.2^2)`` (+1 for norm weights) from a
    generator seeded per parameter name: independent of creation order."""
    with torch.no_grad():
        for name, param in sorted(module.named_parameters()):
            gen = torch.Generator().manual_seed(
                seed + int(hashlib.sha1(name.encode()).hexdigest()[:8], 16))
            value = torch.randn(param.shape, generator=gen) * 0.2
            if name.endswith('weight') and param.dim() == 1:
                value += 1.
            param.copy_(value)


def digest(state):
    h = hashlib.sha1()
    for key in sorted(state):
        h.update(key.encode())
        h.update(state[key].detach().float().cpu().numpy().tobytes())
    return h.hexdigest()


def tensors(out):
    """The tensors of a (nested) output, in order."""
    if isinstance(out, torch.Tensor):
        return [out.detach().clone()]
    if isinstance(out, (list, tuple)):
        return [t for o in out for t in tensors(o)]
    if isinstance(out, dict):
        return [t for k in sorted(out) for t in tensors(out[k])]
    return []


def run_backbone(model):
    outs = {}
    images = [torch.randn(2, 3, 64, 64, generator=torch.Generator(
        ).manual_seed(2)), torch.randn(1, 3, 48, 80, generator=torch.Generator(
        ).manual_seed(3))]
    for mode in ('train', 'eval'):
        model.train(mode == 'train')
        for i, img in enumerate(images):
            torch.manual_seed(4)
            with torch.no_grad():
                outs[f'{mode}/forward{i}'] = tensors(model(img))
        if hasattr(model, 'forward_tokens') and hasattr(model, 'embed'):
            torch.manual_seed(5)
            with torch.no_grad():
                tokens, hw = model.embed(images[0])
                ys, xs = torch.meshgrid(torch.arange(hw[0]).float(),
                                        torch.arange(hw[1]).float(),
                                        indexing='ij')
                grid = torch.stack((xs.flatten(), ys.flatten()), -1)
                jitter = torch.rand(2, *grid.shape, generator=torch.Generator(
                    ).manual_seed(6)) - 0.5
                coords = grid[None] + jitter
                coords[1, 0] = float('nan')
                torch.manual_seed(7)
                outs[f'{mode}/forward_tokens'] = tensors(
                    model.forward_tokens(tokens, coords=coords, hw=hw))
    return outs


def run_neck(neck, embed_dims):
    outs = {}
    gen = torch.Generator().manual_seed(8)
    tokens = torch.randn(2, 16, embed_dims, generator=gen)
    coords_b = torch.rand(2, 5, 2, generator=gen) * 4
    for mode in ('train', 'eval'):
        neck.train(mode == 'train')
        torch.manual_seed(9)
        with torch.no_grad():
            outs[f'{mode}/neck'] = tensors(neck(tokens, (4, 4), coords_b))
            outs[f'{mode}/neck_coords_a'] = tensors(
                neck(tokens, (4, 4), coords_b, coords_a=coords_b.new_tensor(
                    torch.rand(2, 16, 2, generator=gen) * 4)))
    return outs


def collect(config):
    cfg = load_config(osp.join(REPO, config))
    scope = cfg.get('default_scope', 'mmpretrain')
    init_default_scope(scope)
    model_cfg = cfg.get('model')
    backbone_cfg = model_cfg.get('backbone') if model_cfg else None
    if backbone_cfg is None:
        return None
    result = {}
    backbone_cfg = shrink(copy.deepcopy(backbone_cfg))
    backbone_cfg.pop('init_cfg', None)
    torch.manual_seed(0)
    backbone = registry(scope).build(backbone_cfg)
    state = backbone.state_dict()
    result['keys'] = [(k, tuple(v.shape)) for k, v in state.items()]
    result['init_digest'] = digest(state)
    randomise(backbone)
    result['outputs'] = run_backbone(backbone)
    neck_cfg = model_cfg.get('neck')
    if isinstance(neck_cfg, dict) and 'CR2PQNeck' in str(neck_cfg.get('type')):
        torch.manual_seed(0)
        neck = registry(scope).build(copy.deepcopy(neck_cfg))
        state = neck.state_dict()
        result['neck_keys'] = [(k, tuple(v.shape)) for k, v in state.items()]
        result['neck_init_digest'] = digest(state)
        randomise(neck)
        result['outputs'].update(run_neck(neck, neck.embed_dims))
    return result


TINY_VIT = dict(type='RoPEVisionTransformer', img_size=32, patch_size=16,
                arch=dict(embed_dims=32, num_layers=3, num_heads=2,
                          feedforward_channels=64))
#: every registered scheme (LookHere's LH-90) and ComRoPE-AP
SCHEMES = {name: dict(type=name, **(dict(fov=90) if name == 'lookhere' else
                                    {}))
           for name in mmpos_positions.SCHEMES}
SCHEMES['comrope_ap'] = dict(type='comrope', variant='ap')
COORDS = dict(
    dinov3_per_forward_sample=dict(type='dinov3', coords=dict(
        draw='per_forward', per='sample', shift=0.1, jitter=1.2)),
    axial_max_frame=dict(type='axial', coords=dict(frame='max', rescale=1.5)),
    mixed_min_frame=dict(type='mixed', layout='half', axes='yx',
                         coords=dict(frame='min', shift=0.2)),
    axial_periods=dict(type='axial', periods=dict(min_period=0.5,
                                                  max_period=20.)))
SCALINGS = {f'{t}_{m}': dict(type=t, freq_scaling=dict(method=m,
                                                       train_grid=2))
            for t in ('axial', 'mixed', 'spiral', 'string')
            for m in ('pi', 'ntk', 'yarn')}


def extra_cases():
    """``{name: backbone cfg}`` of the extra cases (module docstring)."""
    cases = {}
    for name, rope in {**SCHEMES, **COORDS, **SCALINGS}.items():
        cases[f'extra/vit_{name}'] = dict(TINY_VIT, rope=rope,
                                          out_type='raw',
                                          num_register_tokens=1)
    for name, rope in {**SCHEMES, **COORDS}.items():
        cases[f'extra/vitdet_{name}'] = dict(
            TINY_VIT, rope=rope, with_cls_token=False, out_type='featmap',
            window_size=2, global_attn_indexes=(1, ), out_indices=(0, 2))
    cases['extra/vitdet_rel_pos'] = dict(
        TINY_VIT, rope=None, use_ape=True, with_cls_token=False,
        out_type='featmap', window_size=2, global_attn_indexes=(1, ),
        use_rel_pos=True)
    # Swin: the schemes of the patch frame with a table per window
    for name in [n for n in mmpos_positions.SCHEMES
                 if n not in ('dinov3', 'lookhere')]:
        cases[f'extra/swin_{name}'] = dict(
            type='RoPESwinTransformer', img_size=64, window_size=2,
            arch=dict(embed_dims=16, depths=[2, 2, 2, 2],
                      num_heads=[1, 2, 4, 8]), rope=SCHEMES[name],
            out_indices=(0, 1, 2, 3))
    cases['extra/swin_axial_rpb'] = dict(cases['extra/swin_axial'],
                                         use_rpb=True)
    return cases


def collect_extra(backbone_cfg):
    init_default_scope('mmpretrain')
    torch.manual_seed(0)
    backbone = registry('mmpretrain').build(copy.deepcopy(backbone_cfg))
    state = backbone.state_dict()
    result = dict(keys=[(k, tuple(v.shape)) for k, v in state.items()],
                  init_digest=digest(state))
    randomise(backbone)
    result['outputs'] = run_backbone(backbone)
    if 'freq_scaling' in str(backbone_cfg):  # a grid larger than training
        backbone.eval()
        torch.manual_seed(4)
        with torch.no_grad():
            result['outputs']['eval/large'] = tensors(backbone(torch.randn(
                1, 3, 96, 112, generator=torch.Generator().manual_seed(10))))
    return result


def compare(ref, new, atol):
    """``(ok, note)`` for one config."""
    for key in ('keys', 'init_digest', 'neck_keys', 'neck_init_digest'):
        if ref.get(key) != new.get(key):
            return False, f'{key} differ'
    if ref['outputs'].keys() != new['outputs'].keys():
        return False, (f'outputs {sorted(ref["outputs"])} -> '
                       f'{sorted(new["outputs"])}')
    worst, bitwise = 0., True
    for name, old in ref['outputs'].items():
        cur = new['outputs'][name]
        if len(old) != len(cur):
            return False, f'{name}: {len(old)} -> {len(cur)} tensors'
        for a, b in zip(old, cur):
            if a.shape != b.shape or a.dtype != b.dtype:
                return False, f'{name}: {a.shape} -> {b.shape}'
            if torch.equal(a, b) or (a.is_floating_point() and torch.equal(
                    a.isnan(), b.isnan()) and torch.equal(
                        a.nan_to_num(), b.nan_to_num())):
                continue
            bitwise = False
            worst = max(worst, (a.double() - b.double()).abs().max().item())
    if bitwise:
        return True, 'bitwise equal'
    return worst <= atol, f'max abs diff {worst:.3g}'


def main():
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('action', choices=('save', 'compare'))
    parser.add_argument('dir')
    parser.add_argument('--only', help='configs whose path contains this')
    parser.add_argument('--atol', type=float, default=1e-6)
    args = parser.parse_args()
    torch.set_num_threads(1)
    out_dir = Path(args.dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    failed = 0
    extra = extra_cases()
    for config in configs(args.only) + [
            k for k in extra if args.only is None or args.only in k]:
        path = out_dir / (config.replace('/', '__') + '.pt')
        try:
            result = (collect_extra(extra[config]) if config in extra else
                      collect(config))
        except Exception as err:  # a config that no longer builds
            print(f'ERROR {config}: {type(err).__name__}: {err}')
            failed += 1
            continue
        if result is None:
            print(f'skip  {config}: no backbone')
            continue
        if args.action == 'save':
            torch.save(result, path)
            print(f'saved {config}')
            continue
        if not path.exists():
            print(f'NOREF {config}: no saved reference')
            failed += 1
            continue
        ok, note = compare(torch.load(path), result, args.atol)
        failed += not ok
        print(f'{"ok   " if ok else "DIFF "} {config}: {note}')
    sys.exit(1 if failed else 0)


if __name__ == '__main__':
    main()
