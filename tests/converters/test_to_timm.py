"""mmpos -> timm (``mmpos.converters.to_timm``, ``mmpos2timm.py``): tiny
random mmpos backbones of every exportable family written as timm hub
folders, which timm 1.0.31 builds and loads strictly (``local-dir:``,
``pretrained=True``, nothing downloaded) and which give mmpos' tokens
(fp32, 1e-5 relative to the tokens' scale); timm state dicts survive timm ->
mmpos -> timm bit for bit; schemes timm lacks are refused in one line."""
import os.path as osp
import sys

import pytest
import torch
from mmengine.config import Config

import mmpos_positions

timm = pytest.importorskip('timm')

from mmpos.converters import DINOV3_BACKBONE, convert_timm_vit  # noqa: E402
from mmpos.converters.to_timm import (EXPORTABLE,  # noqa: E402
                                      export_to_timm, mmpos_tokens,
                                      save_timm_folder, timm_state_dict)
from mmpos.errors import ConversionError  # noqa: E402
from mmpos.models.backbones import RoPEVisionTransformer  # noqa: E402
from mmpos.checkpoint import strip_prefix  # noqa: E402

REPO = osp.dirname(osp.dirname(osp.dirname(osp.abspath(__file__))))
sys.path.insert(0, osp.join(REPO, 'tools', 'model_converters'))
import mmpos2timm  # noqa: E402

ARCH = dict(embed_dims=64, num_layers=2, num_heads=2,
            feedforward_channels=128)
FAMILIES = {
    'vit_small_patch16_rope_224': dict(rope=dict(type='axial')),
    'vit_small_patch16_rope_mixed_ape_224': dict(rope=dict(type='mixed'),
                                                 use_ape=True),
    'vit_small_patch16_dinov3_qkvb': dict(
        DINOV3_BACKBONE, num_register_tokens=4, layer_scale_init_value=0.1),
    'vit_small_patch14_reg4_dinov2': dict(
        rope=None, use_ape=True, num_register_tokens=4,
        layer_scale_init_value=0.1),
}


def backbone(seed=0, **options):
    """A tiny RoPEVisionTransformer, every tensor re-drawn (norms and layer
    scales near 1, so position and every block matter)."""
    torch.manual_seed(seed)
    model = RoPEVisionTransformer(arch=ARCH, img_size=64, patch_size=16,
                                  **options).eval()
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.dim() == 1 and ('ln' in name or 'gamma' in name):
                p.copy_(1 + 0.1 * torch.randn_like(p))
            elif not name.startswith('rope.'):
                p.copy_(torch.randn_like(p) * (1.5 / p[0].numel()**0.5
                                               if p.dim() >= 2 else 0.05))
        if (options.get('rope') or {}).get('layout') == 'half':
            for layer in model.layers:  # DINOv3's key bias is 0 in timm
                layer.attn.qkv.bias[64:128] = 0
    return model


def assert_close(ours, theirs, rtol=1e-5):
    err = (ours - theirs).abs().max()
    assert err <= rtol * theirs.abs().max(), f'max error {err:.3g}'


@pytest.mark.parametrize('name', sorted(FAMILIES))
def test_export_loads_in_timm_and_gives_mmpos_tokens(name, tmp_path):
    model = backbone(**FAMILIES[name])
    folder = str(tmp_path / 'export')
    assert save_timm_folder(model, folder)[0] == name
    assert sorted(p.name for p in tmp_path.joinpath('export').iterdir()) \
        == ['README.md', 'config.json', 'model.safetensors']
    theirs = timm.create_model(f'local-dir:{folder}', pretrained=True).eval()
    assert theirs.pretrained_cfg['architecture'] == name
    img = torch.randn(2, 3, 64, 64)
    with torch.no_grad():
        assert_close(mmpos_tokens(model, img), theirs.forward_features(img))
    with pytest.raises(FileExistsError, match='--force'):
        save_timm_folder(model, folder)


@pytest.mark.parametrize('name', sorted(FAMILIES))
def test_rope_without_ape_exports_for_any_input_size(name, tmp_path):
    """timm's RoPE models compute their positions for the input's grid as
    mmpos does: exported with ``dynamic_img_size`` (``fixed_input_size``
    false), they give mmpos' tokens at a non-square size the backbone was
    not built for. APE tables are resized otherwise by timm, so APE models
    stay at their input size (timm refuses another)."""
    model = backbone(**FAMILIES[name])
    folder = str(tmp_path / 'export')
    dynamic = save_timm_folder(model, folder)[2]
    assert dynamic == (model.pos_embed is None)
    theirs = timm.create_model(f'local-dir:{folder}', pretrained=True).eval()
    assert theirs.pretrained_cfg['fixed_input_size'] is not dynamic
    img = torch.randn(2, 3, 96, 48)
    if dynamic:
        with torch.no_grad():
            assert_close(mmpos_tokens(model, img),
                         theirs.forward_features(img))
    else:
        with pytest.raises(AssertionError, match='Input'):
            theirs.forward_features(img)


def test_backbones_other_than_the_rope_vit_are_refused_naming_them():
    with pytest.raises(ConversionError, match='mmpos2timm exports '
                       'RoPEVisionTransformer backbones; this one is a '
                       'Conv2d'):
        export_to_timm(torch.nn.Conv2d(3, 8, 3))


@pytest.mark.parametrize('name', ['vit_small_patch16_rope_mixed_224',
                                  'vit_small_patch16_dinov3'])
def test_timm_state_dicts_survive_timm_mmpos_timm(name):
    source = timm.create_model(name, pretrained=False, num_classes=0,
                               embed_dim=64, depth=2, num_heads=2,
                               img_size=64)
    state = source.state_dict()
    converted = strip_prefix(convert_timm_vit(state), 'backbone.')
    back = timm_state_dict(converted, state)
    assert back.keys() == state.keys()
    assert all(torch.equal(back[k], state[k]) for k in state)


@pytest.mark.parametrize('scheme', [n for n in mmpos_positions.SCHEMES
                                    if n not in EXPORTABLE])
def test_schemes_timm_lacks_are_refused_naming_the_scheme(scheme):
    with pytest.raises(ConversionError,
                       match=f"no model with the '{scheme}' position"):
        export_to_timm(backbone(rope=dict(type=scheme)))


def test_what_timm_cannot_hold_is_refused():
    model = backbone(**FAMILIES['vit_small_patch16_dinov3_qkvb'])
    with torch.no_grad():
        model.layers[1].attn.qkv.bias[64] = 1.
    with pytest.raises(ConversionError, match='blocks.1.attn.qkv: timm keeps'
                       ' the key bias at 0'):
        export_to_timm(model)
    # an option the timm model does not share: other tokens, refused
    with pytest.raises(ConversionError, match='gives other tokens'):
        export_to_timm(backbone(rope=dict(type='axial', theta=10.)))


def test_cli_writes_a_hub_folder_and_names_the_problem(tmp_path, capsys):
    config = tmp_path / 'backbone.py'
    options = FAMILIES['vit_small_patch16_rope_224']
    Config(dict(model=dict(backbone=dict(
        type='RoPEVisionTransformer', arch=ARCH, img_size=64, patch_size=16,
        **options)))).dump(str(config))
    model = backbone(**options)
    src, dst = tmp_path / 'backbone.pth', tmp_path / 'hub'
    torch.save(dict(state_dict=model.state_dict()), src)
    mmpos2timm.main([str(src), str(dst), '--config', str(config)])
    assert 'saved timm vit_small_patch16_rope_224' in capsys.readouterr().out
    theirs = timm.create_model(f'local-dir:{dst}', pretrained=True).eval()
    cfg = theirs.pretrained_cfg  # the backbone's, not timm's released ones
    assert cfg['tag'] == 'mmpos' and 'license' not in cfg
    assert tuple(cfg['input_size']) == (3, 64, 64)
    assert cfg['mean'] == pytest.approx((0.485, 0.456, 0.406))
    img = torch.randn(1, 3, 64, 64)
    with torch.no_grad():
        assert_close(mmpos_tokens(model, img), theirs.forward_features(img))
    torch.save(dict(state_dict={k: v for k, v in model.state_dict().items()
                                if k != 'ln1.weight'}), src)
    with pytest.raises(SystemExit) as exit_:
        mmpos2timm.main([str(src), str(dst), '--config', str(config),
                         '--force'])
    err = capsys.readouterr().err.strip().splitlines()
    assert exit_.value.code == 1 and len(err) == 1
    assert err[0].endswith(f': error: checkpoint {src} does not fit '
                           'RoPEVisionTransformer: 1 model tensors missing '
                           '(ln1.weight)')
