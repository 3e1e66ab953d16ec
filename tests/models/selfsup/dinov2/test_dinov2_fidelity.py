"""DINOv2 / ICPF configs against DINOv2's code (facebookresearch/dinov2): the
loss weighting of ``ssl_meta_arch.py`` (masked-token loss divided by all
global images, ``ibot_patch_loss.forward_masked``; KoLeo summed over the
two globals), LayerScale 1e-5 (against timm's ``Block(init_values=...)`` on
identical weights), no weight decay on LayerScale, bicubic crops, and the
box ``A`` of ICPF §3.2.2."""
from functools import partial

import pytest
import torch
import torch.nn as nn
from mmengine.config import Config
from mmengine.logging import MessageHub
from mmpretrain.registry import MODELS

import mmpos  # noqa: F401
from mmpos.models.selfsup.icpf import scale_shift_boxes
from mmpos.models.losses.dino_losses import iBOTPatchLoss
from mmpos.models.selfsup.dinov2 import DINOv2
from mmpos.models.selfsup.icpf import ICPF

from conftest import (DINO_BACKBONE, DINO_HEAD, build_dino, dino_batch,
                      weight_decays)

DINOV2 = ('configs/dinov2/dinov2_vit-small-p16_4xb128-100e_in1k.py',
          'configs/dinov2/dinov2_vit-base-p16_8xb64-100e_in1k.py')
ICPF_CFGS = ('configs/icpf/icpf_vit-small-p16_4xb128-100e_in1k.py',
             'configs/icpf/icpf_vit-base-p16_8xb64-100e_in1k.py')
@pytest.fixture(autouse=True)
def max_iters():
    MessageHub.get_current_instance().update_info('max_iters', 8)


def _dinov2_forward_masked(s_logits, t_probs, masks, temp):
    """DINOv2's iBOTPatchLoss.forward_masked as its code computes it, on
    ``(n_img, N, K)`` token logits / targets and ``(n_img, N)`` masks."""
    ce = torch.sum(t_probs[masks] * torch.log_softmax(
        s_logits[masks] / temp, dim=-1), dim=-1)
    weight = (1 / masks.sum(-1).clamp(min=1.0)).unsqueeze(-1).expand_as(
        masks)[masks]
    return -(ce * weight).sum() / masks.shape[0]


def test_ibot_loss_matches_dinov2_forward_masked():
    torch.manual_seed(0)
    n_img, n_tok, k = 8, 16, 32
    masks = torch.rand(n_img, n_tok) < 0.3
    masks[::2] = False  # half the images unmasked, as mask_sample_prob 0.5
    s = torch.randn(n_img, n_tok, k)
    t = torch.randn(n_img, n_tok, k).softmax(-1)
    index = torch.arange(n_img)[:, None].expand(n_img, n_tok)[masks]
    ours = iBOTPatchLoss(student_temp=0.1)(s[masks], t[masks], index,
                                           num_images=n_img)
    torch.testing.assert_close(
        ours, _dinov2_forward_masked(s, t, masks, 0.1))
    # the mean over the masked images only is 1 / (share of masked images)
    mean = iBOTPatchLoss(student_temp=0.1, normalize='masked_images')(
        s[masks], t[masks], index)
    share = masks.any(-1).float().mean()
    torch.testing.assert_close(ours, mean * share)


def _losses(cls, **kwargs):
    model = build_dino(cls, **kwargs)
    torch.manual_seed(1)  # same batch, masks and drop path for every model
    inputs, samples = dino_batch()
    return model.loss(inputs, samples)


@pytest.mark.parametrize('cls', [DINOv2, ICPF])
def test_algorithm_weights_losses_as_dinov2(cls):
    """Same model, batch and masks: DINOv2's weighting divides the masked
    losses by all 2B = 8 global images (4 of them masked: DINOv2's 50%;
    ICPF's 50/50 split gives 4 content- and 4 position-masked images) and
    sums KoLeo over the two globals."""
    ours = _losses(cls)
    alt = _losses(cls, koleo_reduction='mean',
                  patch_loss=dict(type='iBOTPatchLoss',
                                  normalize='masked_images'),
                  **({} if cls is DINOv2 else dict(
                      pos_loss=dict(type='iBOTPatchLoss',
                                    normalize='masked_images'))))
    torch.testing.assert_close(ours['loss_koleo'], 2 * alt['loss_koleo'])
    masked = 4
    for key in ('loss_content', ) + (('loss_pos', ) if cls is ICPF else ()):
        torch.testing.assert_close(ours[key], alt[key] * masked / 8)
    torch.testing.assert_close(ours['loss_image'], alt['loss_image'])
    with pytest.raises(ValueError, match='koleo_reduction'):
        DINOv2(backbone=DINO_BACKBONE, head=DINO_HEAD, koleo_reduction='max')


def test_layer_scale_block_matches_timm():
    torch.manual_seed(0)
    ours = MODELS.build(dict(DINO_BACKBONE, layer_scale_init_value=1e-5))
    from timm.models.vision_transformer import Block
    layer = ours.layers[0].eval()  # no drop path
    peer = Block(48, 3, mlp_ratio=2., qkv_bias=True, init_values=1e-5,
                 norm_layer=partial(nn.LayerNorm, eps=layer.ln1.eps)).eval()
    params = list(layer.parameters())
    assert len(params) == len(list(peer.parameters()))
    torch.testing.assert_close(layer.attn.gamma1.weight,
                               torch.full((48, ), 1e-5))
    with torch.no_grad():
        for p in params:
            p.normal_(std=0.5)  # large gammas: differences would show
        for theirs, mine in zip(peer.parameters(), params):
            theirs.copy_(mine)
    x = torch.randn(2, 17, 48)
    torch.testing.assert_close(layer(x), peer(x), atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize('path', DINOV2 + ICPF_CFGS)
def test_paper_configs_follow_dinov2(path):
    cfg = Config.fromfile(path)
    assert cfg.model.backbone.layer_scale_init_value == 1e-5
    assert cfg.model.patch_loss.get('normalize') == 'all_images'
    assert cfg.model.koleo_reduction == 'sum'
    if cfg.model.type == 'ICPF':
        assert cfg.model.pos_loss.get('normalize') == 'all_images'
    crops = [step for view in cfg.train_pipeline[1].transforms
             for step in view if 'RandomResizedCrop' in step.type]
    assert len(crops) == 3 and all(c.interpolation == 'bicubic'
                                   for c in crops)
    # DINOv2's decay rule: none on biases, norms and LayerScale gammas
    model = DINOv2(backbone=dict(DINO_BACKBONE, layer_scale_init_value=1e-5),
                   head=DINO_HEAD)
    for name, decay in weight_decays(model, cfg.optim_wrapper).items():
        if not name.startswith('teacher'):
            no_decay = name.endswith('.bias') or 'ln' in name or \
                'norm' in name or 'gamma' in name
            assert (decay == 0) == no_decay, name


def test_scale_box_of_two_views_or_all():
    torch.manual_seed(0)
    boxes = torch.rand(64, 4, 4) * 0.5
    boxes[..., 2:] += 0.5  # x2 > x1, y2 > y1
    scales = torch.full((64, ), 0.3)
    for ref in (None, 2):
        out = scale_shift_boxes(boxes, scales, num_ref_views=ref)
        sel = out[:, :ref]
        corners = sel.reshape(64, -1, 2)
        area = (corners.amax(1) - corners.amin(1)).prod(-1)
        # the box A of the reference views gets area s (Sec. 3.2.2) and
        # stays inside the virtual image
        torch.testing.assert_close(area, scales)
        assert corners.min() >= 0 and corners.max() <= 1 + 1e-6
    # with A of all views every view stays inside; with A of the globals
    # only, the other views may leave the virtual image
    out = scale_shift_boxes(boxes, scales, num_ref_views=2)
    assert ((out < 0) | (out > 1)).any()
    with pytest.raises(ValueError, match='scale_box'):
        ICPF(backbone=DINO_BACKBONE, head=DINO_HEAD, scale_box='locals')
