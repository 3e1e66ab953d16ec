"""Mixed precision on CPU (issue 10): RoPE attention and every pretraining
loss stay finite under bf16 and fp16 autocast, and the losses reduce in fp32.

CPU autocast runs the same lower-precision matmuls/linears as CUDA autocast
(``torch.autocast('cpu', dtype=...)``); the fp32 islands checked here (RoPE
angles, loss reductions) are device independent.
"""
import copy
import importlib
import math

import pytest
import torch
from mmengine.config import Config
from mmengine.logging import MessageHub
from mmengine.registry import init_default_scope
from mmengine.runner import Runner
from mmpretrain.models.heads import MAEPretrainHead
from mmpretrain.registry import MODELS

from mmpos.models.layers.attention import RoPEAttention
from mmpos.models.layers.positions import build_position_scheme, grid_coords
from mmpos.models.selfsup.cr2pq import CR2PQLoss
from mmpos.models.selfsup.droppos import (droppos_loss,
                                          smoothed_position_targets)
from mmpos.models.selfsup.qbheat import QBHeatHead
from mmpos.models.losses.dino_losses import (DINOLoss, KoLeoLoss,
                                             iBOTPatchLoss, sinkhorn_knopp)

from conftest import PRETRAIN_MINI_CONFIGS, start_ema_teachers

DTYPES = [torch.bfloat16, torch.float16]
ids = {torch.bfloat16: 'bf16', torch.float16: 'fp16'}.get


def autocast(dtype):
    return torch.autocast('cpu', dtype=dtype)


def all_finite(*tensors):
    return all(bool(torch.isfinite(t).all()) for t in tensors)


# --- RoPE attention ---------------------------------------------------------


@pytest.mark.parametrize('dtype', DTYPES, ids=ids)
@pytest.mark.parametrize('rope_type', ['axial', 'mixed'])
def test_rope_attention_far_positions(rope_type, dtype):
    """Patch tokens only, so attention is shift invariant (Eq. 15): moved by
    (1000.5, -700.25) under autocast it must match the fp32 output at the
    original positions up to the dtype's precision. This needs the angles
    in fp32 (bf16 rounds 1000.5 to 1000). Measured max relative error:
    4e-3 (bf16), 6e-4 (fp16)."""
    torch.manual_seed(0)
    attn = RoPEAttention(64, 4)
    rope = build_position_scheme(dict(type=rope_type), 16, 4, 1)
    x = torch.randn(2, 64, 64)  # unit scale, as after a LayerNorm
    coords = grid_coords(8, 8)[None]
    ref = attn(x, rope=rope.block_table(0, coords))
    with autocast(dtype):  # tables computed under autocast, as in forward
        out = attn(x, rope=rope.block_table(
            0, coords + torch.tensor([1000.5, -700.25])))
    assert out.dtype == dtype
    err = (out.float() - ref).abs().max() / ref.abs().max()
    assert err < {torch.bfloat16: 2e-2, torch.float16: 4e-3}[dtype]


@pytest.mark.parametrize('dtype', DTYPES, ids=ids)
def test_rope_attention_saturated_logits_stay_finite(dtype):
    """Inputs 300x the unit scale give attention logits up to ~2e5, beyond
    fp16's 65504: output and all gradients stay finite (the attention
    kernel accumulates the scores in fp32)."""
    torch.manual_seed(0)
    attn = RoPEAttention(64, 4)
    rope = build_position_scheme(dict(type='mixed'), 16, 4, 1)
    x = (torch.randn(2, 1 + 64, 64) * 300).requires_grad_()
    q, k = attn.qkv(x.detach()).unflatten(-1, (3, 4, 16))[:, :, :2].unbind(2)
    logits = torch.einsum('bnhd,bmhd->bhnm', q, k) / 4
    assert logits.abs().max() > torch.finfo(torch.float16).max
    with autocast(dtype):
        out = attn(x, rope=rope.block_table(0, grid_coords(8, 8)[None]))
    out.float().square().mean().backward()
    assert all_finite(out, x.grad, *(p.grad for p in attn.parameters()),
                      *(p.grad for p in rope.parameters()))


# --- losses: fp32 reductions, finite at the edges ---------------------------


def _dino(s, t):
    return DINOLoss()(s, t.float().softmax(-1))


def _ibot(s, t):
    probs = t.flatten(0, 1).float().softmax(-1)
    image_index = torch.arange(s.shape[1]).repeat(s.shape[0])
    return iBOTPatchLoss()(s.flatten(0, 1), probs, image_index,
                           num_images=s.shape[1])


def _koleo(s, t):
    return KoLeoLoss()(s.flatten(0, 1))


def _cr2pq(s, t):
    return sum(CR2PQLoss(norm='l2')(s, s[:, 0], t).values())


def _droppos(s, t):
    hw = (4, 4)
    positions = torch.randperm(16)[:s.shape[1]].expand(s.shape[0], -1)
    targets = smoothed_position_targets(positions, hw, sigma=0.5)
    dropped = torch.rand(positions.shape) < 0.75
    return droppos_loss(s[..., :16], targets, dropped)


def _qbheat(s, t):
    """QB-Heat's criterion (mmpretrain's MAE head, normalised pixels)."""
    head = QBHeatHead(loss=dict(type='PixelReconstructionLoss',
                                criterion='L2'), in_channels=32,
                      num_layers=1, num_heads=2, patch_size=2, norm_pix=True)
    pred = s[..., :12]  # 3 * 2 * 2 pixels per token, 4 x 4 tokens
    target = t.float().flatten(1)[:, :192].reshape(-1, 3, 8, 8)  # images
    mask = (torch.rand(s.shape[0], 16) < 0.75).float()
    return MAEPretrainHead.loss(head, pred, target, mask)


LOSSES = dict(dino=_dino, ibot=_ibot, koleo=_koleo, cr2pq=_cr2pq,
              droppos=_droppos, qbheat=_qbheat)


@pytest.mark.parametrize('dtype', DTYPES, ids=ids)
@pytest.mark.parametrize('name', sorted(LOSSES))
def test_losses_reduce_in_fp32(name, dtype):
    """Low-precision network outputs in, fp32 loss out: under autocast each
    loss equals its fp32 computation on the same (upcast) values."""
    torch.manual_seed(0)
    student = torch.randn(2, 16, 64).to(dtype)
    teacher = torch.randn(2, 16, 64).to(dtype)

    def loss(*inputs):
        torch.manual_seed(1)  # same masks / positions in both calls
        return LOSSES[name](*inputs)

    ref = loss(student.float(), teacher.float())
    with autocast(dtype):
        low = loss(student, teacher)
    assert low.dtype == torch.float32 and math.isfinite(low.item())
    assert torch.allclose(low, ref, rtol=1e-6, atol=0), (low.item(),
                                                         ref.item())


@pytest.mark.parametrize('dtype', DTYPES, ids=ids)
def test_loss_edge_cases_stay_finite(dtype):
    """A collapsed teacher at temperature 0.04 (exp(-50) underflows in fp16),
    student logits at fp16's limit, identical and all-zero features."""
    # the range of DINOProjectionHead's logits: [-1, 1]
    collapsed = torch.full((6, 32), -1.).to(dtype)
    collapsed[:, 0] = 1.
    extreme = torch.full((2, 3, 32), -65504.).to(dtype)
    extreme[..., 1] = 65504.
    with autocast(dtype):
        targets = sinkhorn_knopp(collapsed, temp=0.04)
        dino = DINOLoss()(extreme, targets.view(2, 3, 32))
        koleo = KoLeoLoss()(torch.ones(4, 8, dtype=dtype))
        zeros = torch.zeros(2, 4, 8, dtype=dtype)
        cr2pq = CR2PQLoss()(zeros, zeros[:, 0], zeros)
    assert all_finite(targets, dino, koleo, *cr2pq.values())
    assert torch.allclose(targets.sum(-1), torch.ones(6))
    assert koleo.item() == pytest.approx(-math.log(1e-8), rel=1e-6)


# --- every algorithm's mini model on a real batch ---------------------------


@pytest.mark.parametrize('algo', sorted(PRETRAIN_MINI_CONFIGS))
def test_algorithm_losses_under_autocast(algo, mini_data):
    """One batch of the mini config's own pipeline, forward + backward in
    fp32, bf16 and fp16 autocast from the same state and random draws:
    finite losses and gradients everywhere; fp16 losses within 1% of fp32
    (measured <= 2e-4). bf16 is checked for finiteness only: KoLeo on the
    untrained, nearly collapsed ICPF class tokens moves by 26% with bf16
    features (nearest-neighbour distances at the bf16 noise level)."""
    cfg = Config.fromfile(PRETRAIN_MINI_CONFIGS[algo])
    for module in cfg.custom_imports.imports:
        importlib.import_module(module)
    init_default_scope('mmpretrain')
    MessageHub.get_current_instance().update_info('max_iters', 8)  # EMA
    cfg.train_dataloader.batch_size = 4
    cfg.train_dataloader.dataset.data_root = f'{mini_data}/unlabeled/'
    torch.manual_seed(0)
    batch = next(iter(Runner.build_dataloader(cfg.train_dataloader)))
    model = MODELS.build(cfg.model)
    model.init_weights()
    start_ema_teachers(model.train())
    data = model.data_preprocessor(batch, True)

    losses = {}
    for dtype in (None, *DTYPES):
        run = copy.deepcopy(model)
        torch.manual_seed(1)
        with torch.autocast('cpu', dtype=dtype or torch.bfloat16,
                            enabled=dtype is not None):
            out = run(**data, mode='loss')
        out = {k: v for k, v in out.items() if k.startswith('loss')}
        assert out and all_finite(*out.values()), (dtype, out)
        sum(out.values()).backward()
        grads = [p.grad for p in run.parameters() if p.grad is not None]
        assert grads and all_finite(*grads), dtype
        losses[dtype] = {k: v.item() for k, v in out.items()}
    for key, ref in losses[None].items():
        assert losses[torch.float16][key] == pytest.approx(ref, rel=1e-2), key
