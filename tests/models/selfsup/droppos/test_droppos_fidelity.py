"""DropPos paper configs against the authors' pretraining code
(Haochen-Wang409/DropPos): the squared-distance smoothing kernel of
``engine_pretrain._get_label_smoothing_map``, the per-tensor gradient clip of
``util/utils.clip_gradients``, fp32 training (``--use_fp16`` off) and the
weight-decay rule of timm's ``add_weight_decay`` (no decay on 1-D tensors and
biases only)."""
import math

import pytest
import torch
import torch.nn as nn
from mmengine.config import Config

import mmpos  # noqa: F401
from mmpos.engine.optimizers import (PerTensorClipOptimWrapper,
                                     clip_grad_norm_per_tensor_)
from mmpos.models.selfsup.droppos import DropPos, smoothed_position_targets

from conftest import weight_decays

PAPER = ('configs/droppos/droppos_vit-base-p16_8xb512-coslr-200e_in1k.py',
         'configs/droppos/droppos_vit-base-p16_8xb512-coslr-800e_in1k.py',
         'configs/droppos/droppos_vit-small-p16_8xb512-coslr-200e_in1k.py')


def _authors_kernel(w, sigma):
    """Unnormalised smoothing weights as the authors' loop writes them:
    patch i at (i // w, i % w), exp(-squared distance / sigma^2)."""
    n = w * w
    out = torch.zeros(n, n, dtype=torch.float64)
    for i in range(n):
        for j in range(n):
            d = (i // w - j // w)**2 + (i % w - j % w)**2
            out[i, j] = math.exp(-d / sigma**2)
    return out


@pytest.mark.parametrize('sigma', [1.0, 0.5])
def test_squared_kernel_matches_authors_rows_normalised_as_eq5(sigma):
    ref = _authors_kernel(14, sigma)
    ours = smoothed_position_targets(torch.arange(196), (14, 14), sigma,
                                     squared=True).double()
    # Eq. 5: each row (the target of one true position) sums to 1
    torch.testing.assert_close(ours, ref / ref.sum(1, keepdim=True),
                               atol=1e-6, rtol=1e-5)
    # the reference divides element (i, j) by the sum of row j (= column j,
    # the kernel is symmetric): equal to Eq. 5 inside, not at the border
    theirs = ref / ref.sum(-1)
    inner = 7 * 14 + 7
    torch.testing.assert_close(ours[inner, 5 * 14 + 5:5 * 14 + 10],
                               theirs[inner, 5 * 14 + 5:5 * 14 + 10],
                               atol=1e-6, rtol=1e-5)
    assert not torch.allclose(theirs.sum(1), torch.ones(196, dtype=ref.dtype))


def test_kernel_choice_changes_the_target_weight_on_the_true_position():
    labels = torch.arange(196)
    own = {d: smoothed_position_targets(labels, (14, 14), 1.,
                                        squared=d == 'squared').diagonal()
           for d in ('squared', 'euclidean')}
    # sigma = 1 on 14 x 14: 0.32-0.52 with the authors' kernel, 0.15-0.34
    # with Eq. 5's plain distance (a much flatter target)
    assert own['squared'].min() == pytest.approx(0.318, abs=1e-3)
    assert own['squared'].max() == pytest.approx(0.520, abs=1e-3)
    assert own['euclidean'].min() == pytest.approx(0.154, abs=1e-3)
    assert own['euclidean'].max() == pytest.approx(0.338, abs=1e-3)


def _authors_clip(params, clip):
    for p in params:
        norm = p.grad.norm(2)
        coef = clip / (norm + 1e-6)
        if coef < 1:
            p.grad.mul_(coef)


def test_per_tensor_clip_matches_authors_and_differs_from_global():
    torch.manual_seed(0)
    params = [nn.Parameter(torch.randn(s)) for s in [(8, 4), (4,), (3, 3)]]
    grads = [torch.randn_like(p) * s for p, s in zip(params, (3., .1, 1.))]
    ref = [nn.Parameter(p.detach().clone()) for p in params]
    glob = [nn.Parameter(p.detach().clone()) for p in params]
    for group in (params, ref, glob):
        for p, g in zip(group, grads):
            p.grad = g.clone()
    total = clip_grad_norm_per_tensor_(params, 2.0)
    _authors_clip(ref, 2.0)
    nn.utils.clip_grad_norm_(glob, 2.0)
    for a, b in zip(params, ref):
        torch.testing.assert_close(a.grad, b.grad)
    assert total.item() == pytest.approx(
        torch.stack([g.norm() for g in grads]).norm().item(), rel=1e-6)
    # the large tensor is cut to 2, the small one untouched; a global clip
    # would shrink the small one as well
    assert params[0].grad.norm().item() == pytest.approx(2.0, rel=1e-5)
    torch.testing.assert_close(params[1].grad, grads[1])
    assert glob[1].grad.norm() < grads[1].norm() * 0.5


def test_per_tensor_wrapper_steps_with_clipped_gradients():
    torch.manual_seed(0)
    model = nn.Linear(4, 3)
    wrapper = PerTensorClipOptimWrapper(
        optimizer=torch.optim.SGD(model.parameters(), lr=1.),
        clip_grad=dict(max_norm=0.5))
    before = model.weight.detach().clone()
    wrapper.update_params((model(torch.randn(16, 4)) * 100).sum())
    assert (before - model.weight).norm().item() == pytest.approx(0.5,
                                                                  rel=1e-4)
    with pytest.raises(ValueError, match='max_norm'):
        PerTensorClipOptimWrapper(
            optimizer=torch.optim.SGD(model.parameters(), lr=1.),
            clip_grad=dict(type='value', clip_value=1.))


@pytest.mark.parametrize('path', PAPER)
def test_paper_configs_train_like_the_authors(path):
    cfg = Config.fromfile(path)
    assert cfg.model.head.distance == 'squared'
    assert cfg.optim_wrapper.type == 'PerTensorClipOptimWrapper'  # fp32
    assert cfg.optim_wrapper.clip_grad == dict(max_norm=5.0)
    # the weight-decay rule on a small DropPos with the config's paramwise
    torch.manual_seed(0)
    arch = dict(embed_dims=48, num_layers=2, num_heads=3,
                feedforward_channels=96)
    model = DropPos(
        backbone=dict(cfg.model.backbone, arch=arch, img_size=32,
                      patch_size=8),
        head=dict(type='DropPosHead', num_patches=16, in_channels=48,
                  embed_dims=32, num_heads=4))
    decays = weight_decays(model, cfg.optim_wrapper)
    for name, p in model.named_parameters():
        if p.requires_grad:  # timm 0.3.2 add_weight_decay (main_pretrain.py)
            expected = 0. if (name.endswith('.bias') or p.ndim == 1) \
                else 0.05
            assert decays[name] == pytest.approx(expected), name
    assert decays['pos_mask_token'] == decays['backbone.cls_token'] == 0.05
