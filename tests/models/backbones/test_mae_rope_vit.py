"""MAERoPEViT: mmpretrain's MAE masking on the RoPE ViT.

Peers: mmpretrain's ``MAEViT`` (same return contract, and the same mask and
restore indices from the same random state) and timm's RoPE-Mixed ViT,
whose patch dropout keeps each kept patch's own RoPE table rows
(``apply_keep_indices_nlc``): given our kept patches, timm's tokens are
ours. Weights are timm's, re-drawn so that position matters
(``test_timm_parity.redraw``). Then the method-ranking config runs a short
MAE pretraining through mmengine's Runner, converts with the method
ranking's extraction path and loads into the demo's transfer backbones.
"""
import math
import os.path as osp
import sys

import pytest
import torch
from mmengine.config import Config
from mmengine.runner import Runner

from conftest import REPO, read_scalars
from mmpos.models.backbones import MAERoPEViT, RoPEVisionTransformer
from mmpos.models.utils.pretrained import load_pretrained
from mmpos.checkpoint import strip_prefix
from mmpos.converters import convert_timm_vit, infer_vit_config
from mmpos_harness.comparison import runs
from test_timm_parity import SMALL, assert_close, redraw, timm

sys.path.insert(0, str(REPO / 'tools' / 'model_converters'))
import mmpos2backbone  # noqa: E402

ARCH = dict(embed_dims=96, num_layers=4, num_heads=3,
            feedforward_channels=384)
CONFIG = 'configs/method_ranking/mae_vit-tiny-rope-mixed_mini.py'
TIMM_MIXED = 'vit_small_patch16_rope_mixed_224'


class KeepPatches(torch.nn.Module):
    """timm's ``PatchDropoutWithIndices`` contract with given kept patches
    ``(B, K)``: the class token, then those patches, and their indices."""

    def __init__(self, ids_keep):
        super().__init__()
        self.ids_keep = ids_keep

    def forward(self, x):
        rows = torch.arange(x.shape[0])[:, None]
        return torch.cat((x[:, :1], x[:, 1:][rows, self.ids_keep]),
                         dim=1), self.ids_keep


def timm_and_ours(name, **ours):
    """timm's ``name`` (SMALL, re-drawn weights) and the same weights in
    :class:`MAERoPEViT` (``ours`` options) and
    :class:`RoPEVisionTransformer`, all in eval mode."""
    theirs = timm.create_model(name, pretrained=False, num_classes=0,
                               **SMALL).eval()
    converted = convert_timm_vit(redraw(theirs))
    cfg = infer_vit_config(converted, None, 'mixed')['backbone']
    cfg.pop('type')
    state = strip_prefix(converted, 'backbone.')
    mae = MAERoPEViT(**cfg, **ours).eval()
    plain = RoPEVisionTransformer(**dict(cfg, out_type='raw')).eval()
    for model in (mae, plain):
        model.load_state_dict(state, strict=True)
    return theirs, mae, plain


def test_contract_matches_mmpretrain_maevit():
    from mmpretrain.models import MAEViT
    peer = MAEViT(arch=ARCH, img_size=32, patch_size=8, mask_ratio=0.75)
    ours = MAERoPEViT(arch=ARCH, img_size=32, patch_size=8, mask_ratio=0.75)
    img = torch.randn(3, 3, 32, 32)
    outs = []
    for model in (peer, ours):
        torch.manual_seed(0)
        outs.append(model(img))
    (x0, mask0, restore0), (x, mask, restore) = outs
    assert x.shape == x0.shape == (3, 1 + 4, 96)
    assert mask.dtype == mask0.dtype and restore.dtype == restore0.dtype
    # the same draw from the same random state: the same patches removed
    assert torch.equal(mask, mask0) and torch.equal(restore, restore0)
    assert mask.sum(1).tolist() == [0.75 * 16] * 3
    # ids_restore undoes the shuffle: the kept come first, in mask order
    shuffled = torch.cat((torch.zeros(3, 4), torch.ones(3, 12)), 1)
    assert torch.equal(shuffled.gather(1, restore), mask)
    # unmasked (MAE.extract_feat, the online probe): whole-image tokens
    assert ours(img, mask=None)[0].shape == peer(img, mask=None)[0].shape


# the paper ViT of MAE and DropPos: no RoPE, fixed sin-cos APE
SINCOS_APE = dict(arch=ARCH, img_size=32, patch_size=8, rope=None,
                  use_ape=True, ape_type='sincos')


def test_sincos_ape_vit_equals_mmpretrain_maevit():
    """Without RoPE and with the fixed sin-cos APE, MAERoPEViT is
    ``MAEViT``: its state dict loads strictly (the APE table included: the
    same fixed values in another channel order), and the masked and
    unmasked outputs are equal."""
    from mmpretrain.models import MAEViT
    torch.manual_seed(0)
    peer = MAEViT(arch=ARCH, img_size=32, patch_size=8)
    peer.init_weights()
    ours = MAERoPEViT(**SINCOS_APE)
    peer.eval(), ours.eval()
    # the same fixed values per token, in another channel order (mmpos
    # interleaves sin x, cos x, sin y, cos y per frequency; MAEViT's blocks
    # hold sin, cos of the row, then of the column)
    torch.testing.assert_close(ours.pos_embed.sort(-1).values,
                               peer.pos_embed.sort(-1).values)
    assert not torch.equal(ours.pos_embed, peer.pos_embed)
    ours.load_state_dict(peer.state_dict(), strict=True)
    assert not ours.pos_embed.requires_grad
    img = torch.randn(2, 3, 32, 32)
    with torch.no_grad():
        for mask in (True, None):
            outs = []
            for model in (peer, ours):
                torch.manual_seed(3)
                outs.append(model(img, mask=mask))
            assert_close(outs[1][0], outs[0][0])


def test_random_init_is_maes():
    """MAE's ``initialize_weights`` (which DropPos' code keeps): every
    linear weight Xavier-uniform over its whole matrix (qkv as one
    ``(3C, C)`` matrix), zero biases, the patch projection Xavier-uniform
    as a flat ``(C, 3 p p)`` matrix, the class token normal(0, 0.02), unit
    LayerNorms. DeiT's init (RoPEVisionTransformer) differs."""
    arch = dict(embed_dims=256, num_layers=2, num_heads=4,
                feedforward_channels=1024)
    options = dict(SINCOS_APE, arch=arch, img_size=64, patch_size=16)
    torch.manual_seed(0)
    ours, deit = MAERoPEViT(**options), RoPEVisionTransformer(**options)
    for model in (ours, deit):
        model.init_weights()
    xavier = [ours.patch_embed.projection.weight.flatten(1)]
    xavier += [m.weight for m in ours.modules()
               if isinstance(m, torch.nn.Linear)]
    for weight in xavier:
        bound = math.sqrt(6 / sum(weight.shape))
        assert weight.abs().max() <= bound
        assert weight.std().item() == pytest.approx(bound / math.sqrt(3),
                                                    rel=0.05)
    for m in ours.modules():
        if isinstance(m, torch.nn.Linear):
            assert not m.bias.any()
        if isinstance(m, torch.nn.LayerNorm):
            assert (m.weight == 1).all() and not m.bias.any()
    assert ours.cls_token.std().item() == pytest.approx(0.02, rel=0.2)
    qkv = ours.layers[0].attn.qkv.weight
    assert deit.layers[0].attn.qkv.weight.std() < 0.6 * qkv.std()


def test_ratio_zero_gives_the_backbone_tokens():
    _, mae, plain = timm_and_ours(TIMM_MIXED, mask_ratio=0.)
    img = torch.randn(2, 3, 224, 224)
    with torch.no_grad():
        x, mask, restore = mae(img)
        expected = plain(img)[0]
        # the same shuffled tokens at the grid's coordinates in order
        tokens, hw = plain.embed(img)
        shuffled = tokens.gather(1, restore.argsort(1)[..., None].expand(
            -1, -1, tokens.shape[-1]))
        misplaced = plain.forward_tokens(shuffled, hw=hw)[0]
    assert not mask.any() and not torch.equal(
        restore[0], torch.arange(196))  # shuffled
    patches = x[:, 1:].gather(1, restore[..., None].expand(-1, -1, 192))
    assert_close(torch.cat((x[:, :1], patches), 1), expected)
    # position matters with these weights: misplaced tokens differ
    assert (misplaced[:, 0] - expected[:, 0]).abs().max() > \
        0.05 * expected.abs().max()


@pytest.mark.parametrize('name', [TIMM_MIXED,
                                  'vit_small_patch16_rope_mixed_ape_224'])
def test_kept_patches_rotated_at_their_own_coordinates_as_timm(name):
    theirs, mae, plain = timm_and_ours(name, mask_ratio=0.75)
    img = torch.randn(2, 3, 224, 224)
    with torch.no_grad():
        torch.manual_seed(1)
        x, mask, restore = mae(img)
        ids_keep = restore.argsort(1)[:, :49]
        theirs.patch_drop = KeepPatches(ids_keep)
        expected = theirs.forward_features(img)
        # the plain backbone on the kept patches alone, placed explicitly:
        # at patch k's (x, y) = (k mod 14, k div 14), or at the first 49
        # grid places instead
        kept = plain.embed(img)[0][torch.arange(2)[:, None], ids_keep]
        placed, misplaced = (
            plain.forward_tokens(kept, coords=torch.stack(
                (ids % 14, ids // 14), -1).float())[0]
            for ids in (ids_keep, torch.arange(49)))
    assert x.shape == (2, 1 + 49, 192)
    assert_close(x, expected)
    assert_close(placed, expected)
    assert (misplaced - expected).abs().max() > 0.05 * expected.abs().max()


def test_bad_options_are_named():
    for options, words in [(dict(mask_ratio=1.), 'mask_ratio'),
                           (dict(out_type='featmap'), 'out_type'),
                           (dict(with_cls_token=False,
                                 out_type='raw'), 'with_cls_token')]:
        with pytest.raises(ValueError, match=words):
            MAERoPEViT(arch=ARCH, img_size=32, patch_size=8, **options)


@pytest.mark.slow
def test_mini_mae_run_loss_falls_and_loads_into_demo_backbones(
        tmp_path, mini_data, capsys):
    cfg = Config.fromfile(REPO / CONFIG)
    cfg.work_dir = str(tmp_path)
    cfg.train_dataloader.dataset.data_root = f'{mini_data}/unlabeled/'
    cfg.train_dataloader.batch_size = 8
    max_iters = 20
    cfg.train_cfg.max_iters = max_iters
    cfg.default_hooks.logger.interval = 1
    cfg.default_hooks.checkpoint.interval = max_iters
    cfg.randomness = dict(seed=0)
    runner = Runner.from_cfg(cfg)
    runner.train()
    records = [r for r in read_scalars(tmp_path) if 'loss' in r]
    losses = [r['loss'] for r in records]
    assert len(losses) == max_iters and all(map(math.isfinite, losses))
    # measured (seed 0, batch 8, this fixture): 1.46 over the first 5
    # iterations (warm-up), 1.09 over the last 5, falling at every step
    # (norm-pix L2: predicting each patch's mean scores 1)
    assert sum(losses[-5:]) / 5 < 0.85 * sum(losses[:5]) / 5, losses
    # the online probe ran the unmasked backbone (MAE.extract_feat's path)
    assert 'knn_cls_top1' in records[-1]

    # the method ranking's extraction (runs.pretrain's converter call),
    # then the demo's transfer backbones as their configs load it
    backbone_file = str(tmp_path / 'backbone.pth')
    mmpos2backbone.main([osp.join(tmp_path, f'iter_{max_iters}.pth'),
                         backbone_file, '--config',
                         runs.TASKS['detection']['config'],
                         '--drop-unexpected'])
    assert '0 missing key(s)' in capsys.readouterr().out
    img = torch.randn(1, 3, 64, 64)
    with torch.no_grad():
        pretrained = runner.model.backbone.eval()(img, mask=None)[0]
    for task in runs.TASKS.values():
        spec = Config.fromfile(REPO / task['config']).model.backbone
        assert spec.pop('type') == 'mmpretrain.RoPEVisionTransformer'
        transfer = RoPEVisionTransformer(**dict(spec, init_cfg=None)).eval()
        report = load_pretrained(transfer, backbone_file, prefix='')
        assert report['missing'] == []
        # the segmentor's multi-level backbone has no final norm
        assert set(report['unexpected']) <= {'ln1.weight', 'ln1.bias'}
        if transfer.final_norm:  # the pretrained encoder's own patch tokens
            with torch.no_grad():
                feats = transfer(img)[-1]
            assert_close(feats.flatten(2).transpose(1, 2), pretrained[:, 1:])
