"""NaFlex batches in mmpos equal timm 1.0.31's ``NaFlexVit`` on identical
weights and inputs (nothing downloaded).

timm builds each NaFlexViT with random init (depth 2, width 192, 3 heads),
every tensor is re-drawn so position matters (``redraw`` of
test_timm_parity), its NaFlex keys are put in the classic timm layout
(``embeds.*``; the linear patch projection in ``(row, column, channel)``
order becomes the convolution it equals) and go through mmpos' converter
(:func:`~mmpos.converters.convert_timm_vit`). Both models then run the
same padded batch of three images of their own sizes (timm's NaFlex dict,
built by :func:`~mmpos.datasets.naflex.pad_naflex`). timm resamples APE
with antialias by default; the model is built with
``pos_embed_antialias=False`` (mmpretrain's plain bicubic, see
test_timm_parity).
"""
import pytest
import torch

from test_timm_parity import assert_close, redraw, timm

from mmpos.checkpoint import strip_prefix
from mmpos.converters import convert_timm_vit, infer_vit_config
from mmpos.models.backbones import RoPEVisionTransformer
from mmpos.datasets.naflex import pad_naflex
from mmpos.datasets.transforms import patchify

from timm.models.naflexvit import NaFlexVit, NaFlexVitCfg  # noqa: E402

ARCH = dict(patch_size=16, embed_dim=192, depth=2, num_heads=3,
            embed_proj_type='linear', pos_embed_grid_size=(14, 14),
            pos_embed_antialias=False)
GRIDS = [(14, 14), (8, 20), (5, 9)]  # patch grids of the three images
# (timm NaFlexVitCfg options, mmpos rope_type of infer_vit_config)
CASES = {
    'ape_token': (dict(pos_embed='learned', class_token=True,
                       global_pool='token'), 'none'),
    'ape_avg': (dict(pos_embed='learned', class_token=False,
                     global_pool='avg'), 'none'),
    'rope_axial': (dict(pos_embed='none', class_token=True,
                        global_pool='token', rope_type='axial',
                        rope_temperature=100., rope_grid_indexing='xy'),
                   'axial'),
    'rope_mixed_ape': (dict(pos_embed='learned', class_token=True,
                            global_pool='token', rope_type='mixed',
                            rope_temperature=10., rope_grid_indexing='xy'),
                       'mixed'),
    'dinov3_reg': (dict(pos_embed='none', class_token=True, reg_tokens=2,
                        global_pool='token', rope_type='dinov3',
                        rope_temperature=100., rope_rotate_half=True),
                   'dinov3'),
}


def classic_layout(state: dict, patch: int = 16) -> dict:
    """timm NaFlexViT keys -> timm ``VisionTransformer`` / ``Eva`` keys:
    ``embeds.`` dropped, the linear patch projection ``(C, p p c)`` as the
    convolution ``(C, c, p, p)``, the APE grid ``(1, h, w, C)`` as tokens
    ``(1, h w, C)``."""
    out = {}
    for key, value in state.items():
        key = key.removeprefix('embeds.')
        if key == 'proj.weight':
            key = 'patch_embed.proj.weight'
            value = value.reshape(value.shape[0], patch, patch,
                                  -1).permute(0, 3, 1, 2)
        elif key == 'proj.bias':
            key = 'patch_embed.proj.bias'
        elif key == 'pos_embed':
            value = value.flatten(1, 2)
        out[key] = value
    return out


def mmpos_backbone(converted: dict, rope_type: str, pooled: bool):
    """The backbone :func:`infer_vit_config` gives (``'raw'`` tokens, or
    ``'avg_featmap'`` for timm's average pooling with ``fc_norm``), loaded
    strictly. LayerNorm eps 1e-6: timm's NaFlexViT's (DINOv3's own models
    use 1e-5)."""
    cfg = infer_vit_config(converted, None, rope_type,
                           norm_cfg=dict(type='LN', eps=1e-6))['backbone']
    cfg.pop('type')
    cfg['out_type'] = 'avg_featmap' if pooled else 'raw'
    cfg['with_cls_token'] = 'backbone.cls_token' in converted
    model = RoPEVisionTransformer(**cfg).eval()
    model.load_state_dict(strip_prefix(converted, 'backbone.'), strict=True)
    return model


def naflex_batch(seed: int = 0) -> dict:
    g = torch.Generator().manual_seed(seed)
    samples = []
    for h, w in GRIDS:
        img = torch.randn(h * 16, w * 16, 3, generator=g).numpy()
        patches, coord = patchify(img, 16)
        samples.append(dict(patches=torch.from_numpy(patches),
                            patch_coord=torch.from_numpy(coord)))
    return pad_naflex(samples)


@pytest.mark.parametrize('case', CASES)
def test_naflex_batch_matches_timm_naflexvit(case):
    options, rope_type = CASES[case]
    theirs = NaFlexVit(NaFlexVitCfg(**ARCH, **options), num_classes=0).eval()
    state = redraw(theirs)
    pooled = options['global_pool']
    ours = mmpos_backbone(convert_timm_vit(classic_layout(state)), rope_type,
                          pooled == 'avg')
    batch = naflex_batch()
    valid = batch['patch_valid']
    with torch.no_grad():
        if pooled == 'avg':  # fc_norm after the masked mean
            assert_close(ours(batch)[0], theirs(batch))
            return
        expected = theirs.forward_features(**batch)['patches']
        got = ours(batch)[0]
    prefix = got.shape[1] - valid.shape[1]
    for i in range(len(GRIDS)):  # each image's own tokens
        keep = torch.cat((torch.ones(prefix, dtype=torch.bool), valid[i]))
        assert_close(got[i, keep], expected[i, keep])
    # position matters: without the per-image coordinates it differs
    if rope_type != 'none':
        ours.rope = None
        with torch.no_grad():
            plain = ours(batch)[0]
        assert (plain[0] - expected[0]).abs().max() > \
            0.05 * expected[0].abs().max()
