"""DINO / iBOT / KoLeo / Sinkhorn-Knopp objectives and the DINO head,
checked against hand computations on tiny tensors."""
import math

import pytest
import torch

from mmpos.models.heads.dino_projection_head import DINOProjectionHead
from mmpos.models.losses.dino_losses import (DINOLoss, KoLeoLoss,
                                             TeacherCentering, iBOTPatchLoss,
                                             sinkhorn_knopp)


def test_sinkhorn_one_round_by_hand():
    # exp(logits) = [[1, 2], [1, 1]]; Q = exp^T / 5 = [[.2, .2], [.4, .2]].
    # Prototype rows / K: [[.25, .25], [1/3, 1/6]]; sample columns / M:
    # [[3/14, 3/10], [2/7, 1/5]]; times M, per sample:
    logits = torch.tensor([[0., math.log(2.)], [0., 0.]])
    q = sinkhorn_knopp(logits, temp=1., n_iters=1)
    expected = torch.tensor([[3 / 7, 4 / 7], [3 / 5, 2 / 5]])
    assert torch.allclose(q, expected, atol=1e-6)


def test_sinkhorn_balances_prototypes():
    torch.manual_seed(0)
    logits = torch.randn(12, 4) * 3
    q = sinkhorn_knopp(logits, temp=0.5, n_iters=50)
    assert torch.allclose(q.sum(1), torch.ones(12), atol=1e-5)
    # every prototype gets M / K of the mass
    assert torch.allclose(q.sum(0), torch.full((4, ), 3.), atol=1e-3)
    # shift invariance (large logits / small temperature do not overflow)
    # (exp(200) overflows float32 without the shift)
    q2 = sinkhorn_knopp(logits + 100., temp=0.5, n_iters=50)
    assert torch.allclose(q, q2, atol=1e-4)


def test_running_mean_centering_by_hand():
    centering = TeacherCentering(2, mode='centering', momentum=0.9).train()
    logits = torch.tensor([[1., 3.], [3., 5.]])
    probs = centering(logits, temp=1.)
    # the old centre (0) is used, then c = 0.9 * 0 + 0.1 * [2, 4]
    assert torch.allclose(probs, torch.softmax(logits, -1))
    assert torch.allclose(centering.center, torch.tensor([[.2, .4]]))
    probs = centering(logits, temp=.5)
    assert torch.allclose(probs,
                          torch.softmax((logits - torch.tensor([.2, .4])) / .5,
                                        -1))
    assert torch.allclose(centering.center,
                          torch.tensor([[.38, .76]]))  # .9 * .2 + .1 * 2
    centering.eval()
    centering(logits, temp=1.)
    assert torch.allclose(centering.center, torch.tensor([[.38, .76]]))
    assert 'center' not in TeacherCentering(2).state_dict()
    with pytest.raises(ValueError, match='mode'):
        TeacherCentering(2, mode='bogus')


def test_koleo_by_hand():
    # normalised: e1, e2, (e1 + e2) / sqrt 2; each nearest neighbour is at
    # distance sqrt(2 - sqrt 2) -> loss = -log(sqrt(2 - sqrt 2)).
    feats = torch.tensor([[3., 0.], [0., 2.], [1., 1.]], requires_grad=True)
    loss = KoLeoLoss(eps=0.)(feats)
    assert loss.item() == pytest.approx(-0.5 * math.log(2 - math.sqrt(2)),
                                        abs=1e-6)
    loss.backward()
    assert torch.isfinite(feats.grad).all()
    # spreading the points apart lowers the loss
    spread = torch.tensor([[1., 0.], [0., 1.], [-1., -1.]])
    assert KoLeoLoss()(spread) < KoLeoLoss()(feats.detach())
    with pytest.raises(ValueError, match='n >= 2'):
        KoLeoLoss()(torch.ones(1, 3))


def test_dino_loss_pairs_by_hand():
    torch.manual_seed(0)
    student = torch.randn(3, 2, 5)  # 2 global + 1 local view, B = 2
    teacher = torch.softmax(torch.randn(2, 2, 5), -1)
    loss = DINOLoss(student_temp=0.1)(student, teacher)
    log_p = torch.log_softmax(student / 0.1, -1)
    terms = [-(teacher[t] * log_p[s]).sum(-1).mean()
             for t in range(2) for s in range(3) if s != t]
    assert len(terms) == 4
    assert loss.item() == pytest.approx(torch.stack(terms).mean().item(),
                                        rel=1e-6)
    with pytest.raises(ValueError, match='does not match'):
        DINOLoss()(student, teacher[:, :1])


def test_ibot_patch_loss_per_image_average():
    # student temp 1; one-hot targets on class 0.
    # image 0: one token with logits [0, 0]         -> CE log 2
    # image 1: three tokens with logits [log 3, 0]  -> CE -log(3/4) each
    logits = torch.tensor([[0., 0.]] + [[math.log(3.), 0.]] * 3)
    targets = torch.tensor([[1., 0.]] * 4)
    index = torch.tensor([0, 1, 1, 1])
    loss = iBOTPatchLoss(student_temp=1., normalize='masked_images')(
        logits, targets, index)
    expected = (math.log(2.) - math.log(.75)) / 2
    assert loss.item() == pytest.approx(expected, rel=1e-6)
    # DINOv2's weighting: the same sum over all 4 images of the batch
    loss = iBOTPatchLoss(student_temp=1.)(logits, targets, index,
                                          num_images=4)
    assert loss.item() == pytest.approx(expected * 2 / 4, rel=1e-6)
    with pytest.raises(ValueError, match='num_images'):
        iBOTPatchLoss()(logits, targets, index)
    with pytest.raises(ValueError, match='normalize'):
        iBOTPatchLoss(normalize='tokens')
    empty = iBOTPatchLoss()(torch.zeros(0, 2, requires_grad=True),
                            torch.zeros(0, 2), torch.zeros(0).long(),
                            num_images=4)
    assert empty.item() == 0 and empty.requires_grad


def test_dino_head():
    torch.manual_seed(0)
    head = DINOProjectionHead(8, out_channels=32, hidden_channels=16,
                    bottleneck_channels=4)
    head.init_weights()
    x = torch.randn(5, 8)
    out = head(x)
    assert out.shape == (5, 32)
    # normalised bottleneck and prototypes: logits are cosines
    assert out.abs().max() <= 1 + 1e-5
    with torch.no_grad():
        head.prototypes.mul_(7.)
    assert torch.allclose(head(x), out, atol=1e-6)
    assert head.gain is None
    names = {n for n, _ in head.named_parameters()}
    assert names == {'prototypes', 'mlp.0.weight', 'mlp.0.bias',
                     'mlp.2.weight', 'mlp.2.bias', 'mlp.4.weight',
                     'mlp.4.bias'}
    free = DINOProjectionHead(8, 32, 16, 4, norm_last_layer=False)
    assert free.gain.shape == (32, 1)
    single = DINOProjectionHead(8, 32, 16, 4, num_layers=1)
    assert single.mlp[0].out_features == 4
    with pytest.raises(ValueError, match='num_layers'):
        DINOProjectionHead(8, 32, num_layers=0)
