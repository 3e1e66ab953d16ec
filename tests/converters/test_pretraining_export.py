"""Every pretraining config's backbone exports and loads in one line
(issue 58): a training checkpoint (the SSL model's state dict and its
config, as mmengine's Runner writes one) of the DropPos, MAE, CR2PQ, ICPF
and DINOv2 mini configs gives, through ``mmpos.apis.load_backbone``,
``mmpos2timm.py`` (timm ``local-dir:``) and ``rope_vit2onnx.py``
(onnxruntime, dynamic batch), the tokens of the backbone's unmasked
forward inside its SSL model on the same images: ``backbone(x,
mask=None)`` of MAE's and DropPos' masking ``MAERoPEViT``, and ICPF's
``extract_feat`` (its positional field as APE). QBHeat's MobileFormer is
refused by the exporters in one line naming it."""
import pytest
import torch
from mmengine.config import Config

from conftest import REPO, load_tool
from mmpos.apis import load_backbone
from mmpos.apis.features import load_config
from mmpos.converters import plain_backbone_config
from mmpos.converters.command import build_model
from mmpos.models.backbones import MAERoPEViT, RoPEVisionTransformer

timm = pytest.importorskip('timm')
ort = pytest.importorskip('onnxruntime')

CONFIGS = {
    'droppos': 'configs/droppos/droppos_vit-tiny_mini.py',
    'mae': 'configs/method_ranking/mae_vit-tiny-rope-mixed_mini.py',
    'cr2pq': 'configs/cr2pq/cr2pq_vit-tiny_mini.py',
    'icpf': 'configs/icpf/icpf_vit-tiny_mini.py',
    'dinov2': 'configs/dinov2/dinov2_vit-tiny_mini.py',
}


def training_checkpoint(config, path):
    """The SSL model of ``config`` (random init, every parameter redrawn so
    that positions and the ICPF field matter) saved as a training
    checkpoint; returns the model in eval mode."""
    cfg = load_config(str(REPO / config))
    torch.manual_seed(0)
    model = build_model(cfg.model)
    model.init_weights()
    with torch.no_grad():
        for p in model.parameters():
            p.normal_(0, 0.5 / p[0].numel()**0.5 if p.dim() > 1 else 0.1)
    torch.save(dict(state_dict=model.state_dict(),
                    meta=dict(cfg=cfg.pretty_text)), path)
    return model.eval()


def unmasked_tokens(model, images):
    """Class + patch tokens ``(B, 1 + N, C)`` of the SSL model's backbone
    on whole images: ICPF's ``extract_feat`` (the field as APE), else the
    backbone's ``'raw'`` last block, unmasked."""
    with torch.no_grad():
        if type(model).__name__ == 'ICPF':
            return model.extract_feat(images)
        backbone = model.backbone
        backbone.out_type = 'raw'  # as configured, tokens or a map
        kwargs = dict(mask=None) if isinstance(backbone, MAERoPEViT) else {}
        return backbone(images, **kwargs)[-1]


def assert_close(ours, theirs, rtol=1e-4):
    assert ours.shape == theirs.shape
    err = (ours - theirs).abs().max()
    assert err <= rtol * theirs.abs().max(), f'max error {err:.3g}'


@pytest.mark.parametrize('family', sorted(CONFIGS))
def test_checkpoint_exports_and_loads_unmasked(family, tmp_path):
    ckpt = str(tmp_path / 'iter_4.pth')
    model = training_checkpoint(CONFIGS[family], ckpt)
    size = tuple(model.backbone.img_size)
    images = torch.randn(3, 3, *size)
    expected = unmasked_tokens(model, images)

    backbone = load_backbone(ckpt)
    assert type(backbone) is RoPEVisionTransformer and not backbone.training
    with torch.no_grad():
        assert_close(backbone(images)[-1], expected)

    load_tool('mmpos2timm', 'model_converters').main(
        [ckpt, str(tmp_path / 'hub')])
    exported = timm.create_model(f'local-dir:{tmp_path / "hub"}',
                                 pretrained=True).eval()
    with torch.no_grad():
        assert_close(exported.forward_features(images), expected)

    onnx_file = str(tmp_path / 'backbone.onnx')
    load_tool('rope_vit2onnx', 'deployment').main(
        [ckpt, onnx_file, '--size', *map(str, size), '--out-type', 'raw',
         '--dynamic-batch'])
    session = ort.InferenceSession(onnx_file,
                                   providers=['CPUExecutionProvider'])
    for batch in (1, 3):  # one file, two batch sizes
        out, = session.run(None, {'images': images[:batch].numpy()})
        assert_close(torch.from_numpy(out), expected[:batch])


def test_masked_backbone_config_maps_to_the_plain_vit():
    """``MAERoPEViT`` -> ``RoPEVisionTransformer``: ``mask_ratio`` left
    out, its ``out_type='raw'`` default kept, the rest as given; the state
    dicts have the same keys and shapes."""
    cfg = dict(type='mmpos.MAERoPEViT', arch='small', img_size=32,
               patch_size=8, mask_ratio=0.6, rope=dict(type='mixed'))
    plain = plain_backbone_config(cfg)
    assert plain == dict(type='RoPEVisionTransformer', arch='small',
                         img_size=32, patch_size=8, out_type='raw',
                         rope=dict(type='mixed'))
    assert plain_backbone_config(plain) == plain
    kwargs = {k: v for k, v in plain.items() if k != 'type'}
    ours = RoPEVisionTransformer(**kwargs).state_dict()
    theirs = MAERoPEViT(**kwargs, mask_ratio=0.6).state_dict()
    assert {k: v.shape for k, v in ours.items()} == \
        {k: v.shape for k, v in theirs.items()}


def test_exporters_refuse_other_backbones_naming_them(tmp_path, capsys):
    config = tmp_path / 'mobileformer.py'
    Config(dict(model=dict(backbone=dict(type='MobileFormer',
                                         arch='mf52')))).dump(str(config))
    ckpt = tmp_path / 'ckpt.pth'
    torch.save(dict(state_dict={}), ckpt)
    with pytest.raises(SystemExit) as exit_:
        load_tool('rope_vit2onnx', 'deployment').main(
            [str(ckpt), str(tmp_path / 'x.onnx'), '--size', '32', '32',
             '--config', str(config)])
    assert exit_.value.code == (
        f'rope_vit2onnx.py: error: {config} has a MobileFormer backbone; '
        'only RoPEVisionTransformer backbones export to ONNX here')
