"""Checkpoint converters: the authors' RoPE-ViT (DeiT-III layout) and timm
ViT state dicts give, after conversion, the same logits as an independent
re-implementation of those models' forward passes (complex-number RoPE as
in the authors' code); plus key/shape checks and the command-line tools."""
import argparse
import math
import os
import os.path as osp
import stat
import sys

import pytest
import torch
import torch.nn.functional as F
from mmengine.registry import DefaultScope

import mmpos  # noqa: F401
from mmpos.models.backbones import RoPEVisionTransformer
from mmpos.registry import MODELS
from mmpos.checkpoint import compare
from mmpos.errors import CheckpointMismatchError
from mmpos.converters import (convert_official_rope_vit,
                                         convert_timm_vit, infer_vit_config)

REPO = osp.dirname(osp.dirname(osp.dirname(osp.abspath(__file__))))
sys.path.insert(0, osp.join(REPO, 'tools', 'model_converters'))
import mmpos2backbone  # noqa: E402
import rope_vit_official2mmpos  # noqa: E402
import timm2mmpos  # noqa: E402

C, HEADS, DEPTH, FFN, PATCH, CLASSES = 32, 2, 2, 64, 8, 5
D = C // HEADS


def fake_source(layout='official', rope='mixed', ape=True, layer_scale=True,
                grid=4, pos_cls_slot=False):
    """Random state dict with the authors' or timm's key names."""
    g = torch.Generator().manual_seed(0)

    def rnd(*shape, scale=0.2):
        return torch.randn(*shape, generator=g) * scale

    sd = {
        'cls_token': rnd(1, 1, C),
        'patch_embed.proj.weight': rnd(C, 3, PATCH, PATCH, scale=0.05),
        'patch_embed.proj.bias': rnd(C),
        'norm.weight': 1 + rnd(C), 'norm.bias': rnd(C),
        'head.weight': rnd(CLASSES, C), 'head.bias': rnd(CLASSES),
    }
    if ape:
        sd['pos_embed'] = rnd(1, grid * grid + pos_cls_slot, C)
    for i in range(DEPTH):
        b = f'blocks.{i}.'
        sd.update({
            b + 'norm1.weight': 1 + rnd(C), b + 'norm1.bias': rnd(C),
            b + 'attn.qkv.weight': rnd(3 * C, C),
            b + 'attn.qkv.bias': rnd(3 * C),
            b + 'attn.proj.weight': rnd(C, C), b + 'attn.proj.bias': rnd(C),
            b + 'norm2.weight': 1 + rnd(C), b + 'norm2.bias': rnd(C),
            b + 'mlp.fc1.weight': rnd(FFN, C), b + 'mlp.fc1.bias': rnd(FFN),
            b + 'mlp.fc2.weight': rnd(C, FFN), b + 'mlp.fc2.bias': rnd(C),
        })  # yapf: disable
        if layer_scale:
            names = (('gamma_1', 'gamma_2') if layout == 'official' else
                     ('ls1.gamma', 'ls2.gamma'))
            sd.update({b + n: 0.5 + rnd(C) for n in names})
    if rope == 'mixed':
        sd['freqs'] = rnd(2, DEPTH, HEADS * D // 2, scale=1.0)
        sd['freqs_t_x'] = (torch.arange(grid * grid) % grid).float()
        sd['freqs_t_y'] = (torch.arange(grid * grid) // grid).float()
    return sd


def reference_forward(sd, img, rope='mixed', layout='official', theta=100.):
    """The authors' / timm's ViT forward written with complex numbers."""
    w_patch = sd['patch_embed.proj.weight']
    x = F.conv2d(img, w_patch, sd['patch_embed.proj.bias'], stride=PATCH)
    B, _, h, w = x.shape
    x = x.flatten(2).transpose(1, 2)
    cls = sd['cls_token'].expand(B, -1, -1)
    pos = sd.get('pos_embed')
    if pos is not None:
        slot = math.isqrt(pos.shape[1])**2 != pos.shape[1]
        grid = pos[:, int(slot):]
        side = int(grid.shape[1]**0.5)
        grid = F.interpolate(
            grid.reshape(1, side, side, C).permute(0, 3, 1, 2), size=(h, w),
            mode='bicubic', align_corners=False).permute(0, 2, 3,
                                                         1).flatten(1, 2)
        x = x + grid
        if slot:
            cls = cls + pos[:, :1]
    x = torch.cat((cls, x), dim=1)
    t = torch.arange(h * w, dtype=torch.float32)
    tx, ty = t % w, torch.div(t, w, rounding_mode='floor')
    N = x.shape[1]
    for i in range(DEPTH):
        b = f'blocks.{i}.'
        y = F.layer_norm(x, (C, ), sd[b + 'norm1.weight'],
                         sd[b + 'norm1.bias'], 1e-6)
        q, k, v = F.linear(y, sd[b + 'attn.qkv.weight'],
                           sd[b + 'attn.qkv.bias']).reshape(
                               B, N, 3, HEADS, D).permute(2, 0, 3, 1, 4)
        if rope is not None:
            if rope == 'mixed':
                f = sd['freqs'][:, i].reshape(2, HEADS, D // 2)
                angle = (tx[:, None, None] * f[0] +
                         ty[:, None, None] * f[1]).transpose(0, 1)
            else:
                mag = theta**(-torch.arange(0, D, 4)[:D // 4].float() / D)
                angle = torch.cat((tx[:, None] * mag, ty[:, None] * mag), -1)
            rot = torch.polar(torch.ones_like(angle), angle)

            def rotate(z):
                zc = torch.view_as_complex(z[:, :, 1:].reshape(
                    B, HEADS, N - 1, D // 2, 2).contiguous())
                return torch.cat(
                    (z[:, :, :1], torch.view_as_real(zc * rot).flatten(3)),
                    dim=2)

            q, k = rotate(q), rotate(k)
        attn = (q @ k.transpose(-1, -2) * D**-0.5).softmax(-1)
        out = F.linear((attn @ v).transpose(1, 2).reshape(B, N, C),
                       sd[b + 'attn.proj.weight'], sd[b + 'attn.proj.bias'])
        g1, g2 = ((b + 'gamma_1', b + 'gamma_2') if layout == 'official'
                  else (b + 'ls1.gamma', b + 'ls2.gamma'))
        x = x + sd.get(g1, 1.) * out
        y = F.layer_norm(x, (C, ), sd[b + 'norm2.weight'],
                         sd[b + 'norm2.bias'], 1e-6)
        y = F.linear(
            F.gelu(F.linear(y, sd[b + 'mlp.fc1.weight'],
                            sd[b + 'mlp.fc1.bias'])),
            sd[b + 'mlp.fc2.weight'], sd[b + 'mlp.fc2.bias'])
        x = x + sd.get(g2, 1.) * y
    x = F.layer_norm(x, (C, ), sd['norm.weight'], sd['norm.bias'], 1e-6)
    return F.linear(x[:, 0], sd['head.weight'], sd['head.bias'])


def build_loaded(state_dict, rope_type):
    cfg = infer_vit_config(state_dict, HEADS, rope_type)
    with DefaultScope.overwrite_default_scope('mmpretrain'):
        model = MODELS.build(cfg).eval()
    model.load_state_dict(state_dict, strict=True)
    return model


@pytest.mark.parametrize('rope,ape,layer_scale', [('mixed', True, True),
                                                  ('mixed', False, False),
                                                  ('axial', True, True),
                                                  ('axial', False, True)])
def test_official_checkpoint_gives_the_authors_outputs(rope, ape,
                                                       layer_scale):
    source = fake_source('official', rope, ape, layer_scale)
    converted = convert_official_rope_vit(source, HEADS)
    assert not any('freqs_t_' in k for k in converted)
    model = build_loaded(converted, rope)
    if ape:
        assert torch.equal(model.backbone.pos_embed[0, 0], torch.zeros(C))
    # trained grid (4x4), extrapolation (6x6) and a non-square input
    for size in [(32, 32), (48, 48), (32, 56)]:
        img = torch.randn(2, 3, *size)
        with torch.no_grad():
            ours = model(img, mode='tensor')
        assert torch.allclose(ours, reference_forward(source, img, rope),
                              atol=1e-5), size


def test_mixed_frequencies_land_per_layer_and_head():
    source = fake_source('official', 'mixed')
    model = build_loaded(convert_official_rope_vit(source, HEADS), 'mixed')
    freqs = model.backbone.rope.freqs[1]
    # head 1, pair 3 of layer 1 is element 1 * D/2 + 3 of the flat vector
    assert freqs[0, 1, 3] == source['freqs'][0, 1, D // 2 + 3]
    assert freqs[1, 1, 3] == source['freqs'][1, 1, D // 2 + 3]


@pytest.mark.parametrize('cls_slot', [True, False])
def test_timm_checkpoint_gives_timm_outputs(cls_slot):
    source = fake_source('timm', rope=None, pos_cls_slot=cls_slot)
    converted = convert_timm_vit(source)
    model = build_loaded(converted, 'none')
    assert model.backbone.pos_embed.shape == (1, 17, C)
    for size in [(32, 32), (48, 40)]:
        img = torch.randn(2, 3, *size)
        with torch.no_grad():
            ours = model(img, mode='tensor')
        assert torch.allclose(
            ours, reference_forward(source, img, None, 'timm'), atol=1e-5)


def test_shape_mismatch_is_refused_naming_key_and_shapes():
    model = RoPEVisionTransformer(
        arch=dict(embed_dims=C, num_layers=1, num_heads=HEADS,
                  feedforward_channels=FFN), patch_size=PATCH)
    state_dict = model.state_dict()
    state_dict['rope.freqs.0'] = torch.zeros(2, 4, 4)
    with pytest.raises(CheckpointMismatchError) as err:
        compare(state_dict, model).enforce('lenient', 'src', 'Model')
    assert ('rope.freqs.0: checkpoint (2, 4, 4) vs model '
            '(2, 2, 8)') in str(err.value)


def test_missing_and_unexpected_keys_are_reported():
    model = RoPEVisionTransformer(
        arch=dict(embed_dims=C, num_layers=1, num_heads=HEADS,
                  feedforward_channels=FFN), patch_size=PATCH)
    state_dict = model.state_dict()
    del state_dict['ln1.bias'], state_dict['rope.freqs.0']
    state_dict['blocks.0.attn.q_norm.weight'] = torch.ones(D)
    report = compare(state_dict, model)
    assert report.missing == ['ln1.bias', 'rope.freqs.0']
    assert report.unexpected == ['blocks.0.attn.q_norm.weight']
    assert not report.mismatched
    assert '2 missing key(s): ln1.bias, rope.freqs.0' in str(
        report)


def run_cli(module, argv, capsys):
    try:
        module.main([str(a) for a in argv])
    except SystemExit as exit_:
        return exit_.code, capsys.readouterr()
    return 0, capsys.readouterr()


def test_official_cli(tmp_path, capsys):
    source = fake_source('official', 'mixed')
    src, dst = tmp_path / 'rope.pth', tmp_path / 'out' / 'converted.pth'
    # the authors' training script stores its argparse namespace too
    torch.save(dict(model=source, args=argparse.Namespace(lr=4e-3)), src)
    code, out = run_cli(rope_vit_official2mmpos,
                        [src, dst, '--num-heads', HEADS], capsys)
    assert code == 0, out.err
    assert '0 missing key(s)' in out.out and '0 unexpected' in out.out
    saved = torch.load(dst, weights_only=True)
    assert saved['meta']['model']['backbone']['rope'] == dict(type='mixed')
    model = build_loaded(saved['state_dict'], 'mixed')
    img = torch.randn(1, 3, 32, 32)
    with torch.no_grad():
        assert torch.allclose(model(img, mode='tensor'),
                              reference_forward(source, img), atol=1e-5)

    code, out = run_cli(rope_vit_official2mmpos, [src, dst], capsys)
    assert code == 1 and 'exists; pass --force' in out.err
    source['blocks.0.attn.q_norm.weight'] = torch.ones(D)
    torch.save(dict(model=source), src)
    code, out = run_cli(rope_vit_official2mmpos,
                        [src, dst, '--force', '--num-heads', HEADS], capsys)
    assert code == 1 and 'backbone.blocks.0.attn.q_norm.weight' in out.err
    code, out = run_cli(rope_vit_official2mmpos,
                        [src, dst, '--force', '--drop-unexpected',
                         '--num-heads', HEADS], capsys)
    assert code == 0 and '1 unexpected key(s)' in out.out
    assert 'backbone.blocks.0.attn.q_norm.weight' not in torch.load(
        dst, weights_only=True)['state_dict']


def test_rope_type_auto_refuses_to_guess(tmp_path, capsys):
    """An Axial checkpoint has no RoPE key: auto must not call it Axial
    (official) nor silently drop RoPE (timm), and an explicit type that
    contradicts stored Mixed frequencies is refused."""
    src = tmp_path / 'deit3.pth'
    torch.save(dict(model=fake_source('official', rope='axial')), src)
    code, out = run_cli(rope_vit_official2mmpos, [src, tmp_path / 'a.pth'],
                        capsys)
    assert code == 1 and 'refusing to guess' in out.err
    assert 'deit3.pth' in out.err and not (tmp_path / 'a.pth').exists()
    timm_src = tmp_path / 'timm.bin'
    torch.save(fake_source('timm', rope=None), timm_src)
    code, out = run_cli(timm2mmpos, [timm_src, tmp_path / 't.pth'], capsys)
    assert code == 1 and 'pass --rope-type axial or none' in out.err
    code, out = run_cli(timm2mmpos, [timm_src, tmp_path / 't.pth',
                                     '--rope-type', 'axial'], capsys)
    assert code == 0, out.err
    mixed = tmp_path / 'mixed.pth'
    torch.save(dict(model=fake_source('official', 'mixed')), mixed)
    code, out = run_cli(rope_vit_official2mmpos,
                        [mixed, tmp_path / 'm.pth', '--rope-type', 'axial',
                         '--num-heads', HEADS], capsys)
    assert code == 1 and 'RoPE-Mixed frequencies' in out.err


def test_official_cli_refuses_wrong_head_count(tmp_path, capsys):
    src = tmp_path / 'rope.pth'
    torch.save(dict(model=fake_source('official', 'mixed')), src)
    code, out = run_cli(rope_vit_official2mmpos,
                        [src, tmp_path / 'x.pth', '--num-heads', 3], capsys)
    assert code == 1 and 'heads=3' in out.err
    assert not (tmp_path / 'x.pth').exists()


def test_timm_cli_to_rope_reports_new_frequencies_missing(tmp_path, capsys):
    src, dst = tmp_path / 'timm.bin', tmp_path / 'vit.pth'
    torch.save(fake_source('timm', rope=None, pos_cls_slot=True), src)
    code, out = run_cli(
        timm2mmpos, [src, dst, '--rope-type', 'mixed', '--num-heads', HEADS],
        capsys)
    assert code == 0, out.err
    assert ('2 missing key(s): backbone.rope.freqs.0, '
            'backbone.rope.freqs.1') in out.out


def test_mmpos2backbone(tmp_path, capsys):
    arch = dict(embed_dims=C, num_layers=DEPTH, num_heads=HEADS,
                feedforward_channels=FFN)
    torch.manual_seed(0)
    backbone = RoPEVisionTransformer(arch=arch, patch_size=PATCH).eval()
    state_dict = {'backbone.' + k: v for k, v in
                  backbone.state_dict().items()}
    state_dict.update({'neck.decoder.weight': torch.ones(3),
                       'head.proj.weight': torch.ones(2)})
    src = tmp_path / 'epoch_1.pth'
    torch.save(dict(meta=dict(epoch=1), state_dict=state_dict), src)

    bare = tmp_path / 'backbone.pth'
    code, out = run_cli(mmpos2backbone, [src, bare], capsys)
    assert code == 0, out.err
    loaded = RoPEVisionTransformer(arch=arch, patch_size=PATCH).eval()
    loaded.load_state_dict(
        torch.load(bare, weights_only=True)['state_dict'], strict=True)
    img = torch.randn(1, 3, 32, 32)
    assert torch.equal(loaded(img)[0], backbone(img)[0])

    config = tmp_path / 'det.py'
    config.write_text(
        "default_scope = 'mmdet'\n"
        "model = dict(type='MaskRCNN', backbone=dict(\n"
        "    type='mmpretrain.RoPEVisionTransformer', arch=dict(\n"
        f"    embed_dims={C}, num_layers={DEPTH}, num_heads={HEADS},\n"
        f"    feedforward_channels={FFN}), patch_size={PATCH},\n"
        "    use_ape=True, out_type='featmap'))\n")
    kept = tmp_path / 'kept.pth'
    code, out = run_cli(mmpos2backbone,
                        [src, kept, '--keep-prefix', '--config', config],
                        capsys)
    assert code == 0, out.err
    assert '1 missing key(s): backbone.pos_embed' in out.out
    assert all(k.startswith('backbone.') for k in torch.load(
        kept, weights_only=True)['state_dict'])

    code, out = run_cli(mmpos2backbone,
                        [src, tmp_path / 'y.pth', '--src-prefix', 'teacher.'],
                        capsys)
    assert code == 1
    assert "no 'teacher.' keys" in out.err and "'backbone'" in out.err


def test_clis_name_the_real_problem(tmp_path, capsys):
    """issue 27: a CNN checkpoint is not asked for a RoPE type, a directory
    is not 'not found', and outputs get the user's umask."""
    from mmpretrain.models import MobileNetV2
    cnn = tmp_path / 'mobilenet.pth'
    torch.save(dict(model=MobileNetV2().state_dict()), cnn)
    for module in (rope_vit_official2mmpos, timm2mmpos):
        code, out = run_cli(module, [cnn, tmp_path / 'o.pth'], capsys)
        assert code == 1
        line = out.err.strip()
        assert line.endswith(
            f'error: {cnn} is not a ViT checkpoint of this layout: it has no '
            'patch_embed.proj.weight and blocks.<i>.* keys (its top-level '
            "modules are ['conv1', 'conv2', 'layer1', 'layer2', 'layer3', "
            "'layer4', 'layer5', 'layer6'])"), line
        assert '--rope-type' not in line and '\n' not in line
    code, out = run_cli(timm2mmpos, [tmp_path, tmp_path / 'o.pth'], capsys)
    assert code == 1 and out.err.strip().endswith(
        f'error: checkpoint {tmp_path} is a directory, not a checkpoint file')

    src, dst = tmp_path / 'rope.pth', tmp_path / 'shared' / 'converted.pth'
    torch.save(dict(model=fake_source('official', 'mixed')), src)
    old = os.umask(0o022)
    try:
        code, out = run_cli(rope_vit_official2mmpos,
                            [src, dst, '--num-heads', HEADS], capsys)
    finally:
        os.umask(old)
    assert code == 0, out.err
    assert stat.S_IMODE(os.stat(dst).st_mode) == 0o644
