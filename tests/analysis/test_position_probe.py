"""Linear position probing (DropPos §4.3, Table 7): the probe learns
positions that the frozen features carry, and cannot learn positions they do
not carry (no position embedding leaks into a dropped patch)."""
import importlib.util
import json
from pathlib import Path

import pytest
import torch

from mmpos.analysis.position_probe import (LinearPositionProbe,
                                           evaluate_position_probe,
                                           token_vit_config,
                                           train_position_probe)
from mmpos.models.selfsup.droppos import DropPos

ROOT = Path(__file__).resolve().parents[2]
ARCH = dict(embed_dims=48, num_layers=2, num_heads=3, feedforward_channels=96)
SIZE, PATCH = 32, 8
NUM = (SIZE // PATCH)**2
BACKBONES = {
    'sincos-ape': dict(type='MAEViT', arch=ARCH, img_size=SIZE,
                       patch_size=PATCH),
    'rope-mixed': dict(type='RoPEVisionTransformer', arch=ARCH,
                       img_size=SIZE, patch_size=PATCH,
                       rope=dict(type='mixed'),
                       out_type='raw'),
}


def _probe(name):
    torch.manual_seed(0)
    encoder = DropPos(backbone=token_vit_config(BACKBONES[name]), head=None)
    encoder.init_weights()
    return LinearPositionProbe(encoder, NUM)


@pytest.mark.parametrize('peer', [
    dict(type='MAEViT', arch=ARCH, img_size=SIZE, patch_size=PATCH),
    dict(type='VisionTransformer', arch=ARCH, img_size=SIZE,
         patch_size=PATCH, layer_scale_init_value=0.1, out_type='raw'),
])
def test_mmpretrain_vits_are_probed_through_their_twin(peer):
    """An mmpretrain ViT is probed as the RoPE-less RoPEVisionTransformer
    of its shape: the peer's weights load strictly and the tokens are the
    peer's."""
    from mmengine.registry import DefaultScope
    from mmpretrain.registry import MODELS
    cfg = token_vit_config(peer)
    assert cfg['rope'] is None and cfg['ape_type'] == (
        'sincos' if peer['type'] == 'MAEViT' else 'learnable')
    with DefaultScope.overwrite_default_scope('mmpretrain'):
        theirs, ours = MODELS.build(peer), MODELS.build(cfg)
    theirs.init_weights()
    ours.load_state_dict(theirs.state_dict(), strict=True)
    theirs.eval(), ours.eval()
    img = torch.randn(2, 3, SIZE, SIZE)
    with torch.no_grad():
        expected = theirs(img, mask=None) if peer['type'] == 'MAEViT' \
            else theirs(img)
        torch.testing.assert_close(ours(img)[0], expected[0])
    with pytest.raises(ValueError, match='not a ViT'):
        token_vit_config(dict(type='ResNet', depth=18))


def _ramp_images(batch):
    """Red encodes the column, green the row, plus a per-image offset and
    noise: the position of a patch is in its colour."""
    xs = torch.linspace(-1, 1, SIZE)
    img = torch.stack([xs.expand(SIZE, SIZE), xs[:, None].expand(SIZE, SIZE),
                       torch.zeros(SIZE, SIZE)])
    return img + 0.1 * torch.randn(batch, 3, 1, 1) + 0.05 * torch.randn(
        batch, 3, SIZE, SIZE)


def _flat_images(batch):
    """One random colour per image: nothing in the content says where a
    patch is."""
    return torch.randn(batch, 3, 1, 1).expand(-1, -1, SIZE, SIZE)


def _batches(make, batch=16):
    while True:
        yield make(batch)


@pytest.mark.parametrize('name', sorted(BACKBONES))
def test_probe_reads_positions_the_features_carry(name):
    probe = _probe(name)
    frozen = {k: v.clone() for k, v in probe.encoder.state_dict().items()}
    losses = train_position_probe(probe, _batches(_ramp_images), 150,
                                  lr=0.05)
    assert sum(losses[-10:]) < 0.5 * sum(losses[:10])
    acc = evaluate_position_probe(probe, (_ramp_images(16)
                                          for _ in range(4)))
    assert acc > 60, acc  # chance: 100 / 16 = 6.25
    # the encoder is frozen: only the head learnt
    for key, value in probe.encoder.state_dict().items():
        assert torch.equal(value, frozen[key]), key


@pytest.mark.parametrize('name', sorted(BACKBONES))
def test_dropped_patches_get_no_position(name):
    """On flat images every dropped-position patch has the same input, so
    a dropped patch is only distinguishable through a leaked position: the
    probe must stay near chance (12 dropped patches of one image share one
    prediction, at most 1 of 12 right)."""
    probe = _probe(name)
    train_position_probe(probe, _batches(_flat_images), 100, lr=0.05)
    acc = evaluate_position_probe(probe, (_flat_images(16)
                                          for _ in range(4)))
    assert acc < 100 / 12 + 1e-6, acc


def test_probe_rejects_wrong_grid_and_ratio():
    encoder = _probe('sincos-ape').encoder
    with pytest.raises(ValueError, match='pos_mask_ratio'):
        LinearPositionProbe(encoder, NUM, pos_mask_ratio=0.)
    probe = LinearPositionProbe(encoder, NUM + 1)
    with pytest.raises(ValueError, match='16 patches per image'):
        probe(_ramp_images(2))


def _tool():
    spec = importlib.util.spec_from_file_location(
        'position_linear_probe',
        ROOT / 'tools/analysis_tools/position_linear_probe.py')
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_tool_on_mini_images_with_a_droppos_checkpoint(mini_data, tmp_path):
    """The CLI probes the backbone of a DropPos training checkpoint on the
    mini unlabeled images and writes its JSON; a missing checkpoint is a
    clear error, never a random backbone."""
    from mmengine.config import Config
    from mmpretrain.registry import MODELS
    config = 'configs/droppos/droppos_vit-tiny_mini.py'
    cfg = Config.fromfile(ROOT / config)
    model = MODELS.build(cfg.model)
    ckpt = tmp_path / 'droppos.pth'
    torch.save(dict(state_dict=model.state_dict()), ckpt)
    out = tmp_path / 'probe.json'
    tool = _tool()
    result = tool.main([
        str(ROOT / config), str(ckpt), '--images',
        str(mini_data / 'unlabeled'), '--img-size', '32', '--iters', '5',
        '--batch-size', '8', '--train-images', '24', '--val-images', '8',
        '--out', str(out)
    ])
    saved = json.loads(out.read_text())
    assert saved == result
    assert saved['num_positions'] == 16 and saved['val_images'] == 8
    assert 0 <= saved['val_top1'] <= 100
    assert saved['chance'] == pytest.approx(6.25)
    with pytest.raises(SystemExit, match=r'^position_linear_probe.py: error: '
                       r'.*missing.pth'):
        tool.main([str(ROOT / config), str(tmp_path / 'missing.pth'),
                   '--images', str(mini_data / 'unlabeled'),
                   '--img-size', '32', '--iters', '1'])
