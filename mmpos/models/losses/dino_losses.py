"""Self-distillation objectives of DINO / iBOT / DINOv2 and ICPF.

Equation numbers refer to the ICPF paper (``icpf_intertwined_content_
positional``): Eq. 1 image-level distillation, Eq. 2 (iBOT) / Eq. 5
(content) / Eq. 4 (position) masked patch distillation, Eq. 3 / Eq. 6 the
sums, KoLeo from Sablayrolles et al. (2019).

Teacher targets are made by :class:`TeacherCentering`: Sinkhorn-Knopp
(DINOv2) or softmax with a running-mean centre (DINO / iBOT). Both reduce
over all processes when ``torch.distributed`` is initialised (through
``mmengine.dist``, a no-op otherwise).
"""
from typing import Optional

import torch
import torch.nn as nn
import torch.nn.functional as F
from mmengine import dist
from torch import Tensor

from mmpos.registry import MODELS


def _all_reduce_sum(x: Tensor) -> Tensor:
    dist.all_reduce(x, op='sum')
    return x


@torch.no_grad()
def sinkhorn_knopp(logits: Tensor, temp: float, n_iters: int = 3) -> Tensor:
    """Sinkhorn-Knopp teacher targets (DINOv2 / SwAV).

    ``Q = exp(logits / temp)`` (``M`` samples x ``K`` prototypes) is scaled
    alternately so that every prototype receives mass ``1 / K`` and every
    sample ``1 / M`` (``M`` summed over processes); the result is returned
    per sample, i.e. rows sum to 1.

    Args:
        logits: ``(M, K)`` teacher logits.
        temp: teacher temperature.
        n_iters: number of (prototype, sample) normalisation rounds.

    Returns:
        ``(M, K)`` float32 targets.
    """
    if logits.dim() != 2:
        raise ValueError(f'sinkhorn_knopp expects (M, K) logits, got shape '
                         f'{tuple(logits.shape)}')
    scores = logits.float() / temp
    shift = scores.max().detach().clone()
    dist.all_reduce(shift, op='max')  # a common shift cancels exactly
    q = torch.exp(scores - shift).t()  # (K, M)
    num_prototypes = q.shape[0]
    num_samples = _all_reduce_sum(
        torch.tensor(float(q.shape[1]), device=q.device))
    q /= _all_reduce_sum(q.sum())
    for _ in range(n_iters):
        q /= _all_reduce_sum(q.sum(dim=1, keepdim=True))
        q /= num_prototypes
        q /= q.sum(dim=0, keepdim=True)
        q /= num_samples
    return (q * num_samples).t()


@MODELS.register_module()
class TeacherCentering(nn.Module):
    """Turn teacher logits into target distributions.

    Args:
        out_channels: number of prototypes ``K``.
        mode: ``'sinkhorn'`` (DINOv2, :func:`sinkhorn_knopp`) or
            ``'centering'`` (DINO: ``softmax((t - c) / temp)`` with a running
            centre ``c <- m c + (1 - m) mean(t)`` updated after use while
            training; ``c`` is a buffer, so it is checkpointed).
        momentum: centre momentum ``m`` for ``'centering'``.
        n_iters: Sinkhorn-Knopp rounds for ``'sinkhorn'``.
    """
    MODES = ('sinkhorn', 'centering')

    def __init__(self,
                 out_channels: int,
                 mode: str = 'sinkhorn',
                 momentum: float = 0.9,
                 n_iters: int = 3):
        super().__init__()
        if mode not in self.MODES:
            raise ValueError(f'TeacherCentering mode={mode!r}, choose from '
                             f'{self.MODES}')
        self.mode = mode
        self.momentum = momentum
        self.n_iters = n_iters
        if mode == 'centering':
            self.register_buffer('center', torch.zeros(1, out_channels))

    @torch.no_grad()
    def forward(self, logits: Tensor, temp: float) -> Tensor:
        """``logits`` ``(M, K)`` -> targets ``(M, K)`` (rows sum to 1)."""
        if self.mode == 'sinkhorn':
            return sinkhorn_knopp(logits, temp, self.n_iters)
        probs = F.softmax((logits.float() - self.center) / temp, dim=-1)
        if self.training:
            total = _all_reduce_sum(logits.float().sum(dim=0, keepdim=True))
            count = _all_reduce_sum(
                torch.tensor(float(logits.shape[0]), device=logits.device))
            self.center.mul_(self.momentum).add_(
                total / count, alpha=1 - self.momentum)
        return probs


def _cross_entropy(student_logits: Tensor, targets: Tensor,
                   student_temp: float) -> Tensor:
    """``-sum_k t_k log softmax(s / temp)_k`` over the last dim."""
    log_p = F.log_softmax(student_logits.float() / student_temp, dim=-1)
    return -(targets * log_p).sum(dim=-1)


class DistillationLoss(nn.Module):
    """Base of the cross-entropy distillation losses (:class:`DINOLoss`,
    :class:`iBOTPatchLoss`).

    Args:
        student_temp: student temperature (0.1).
        loss_weight: multiplier.
    """

    def __init__(self, student_temp: float = 0.1, loss_weight: float = 1.0):
        super().__init__()
        self.student_temp = student_temp
        self.loss_weight = loss_weight


@MODELS.register_module()
class DINOLoss(DistillationLoss):
    """Image-level self-distillation, Eq. 1, over all view pairs.

    The cross entropy between teacher view ``t`` and student view ``s`` is
    averaged over the batch and then over every pair with ``s != t`` (student
    views ``0..T-1`` are the teacher's global views), as in DINO. Arguments:
    see :class:`DistillationLoss`.
    """

    def forward(self, student_logits: Tensor, teacher_probs: Tensor) -> Tensor:
        """
        Args:
            student_logits: ``(S, B, K)``, S views (globals first).
            teacher_probs: ``(T, B, K)`` targets of the T global views.
        """
        num_s, batch, _ = student_logits.shape
        num_t = teacher_probs.shape[0]
        if num_t > num_s or teacher_probs.shape[1] != batch:
            raise ValueError(
                f'DINOLoss: teacher_probs {tuple(teacher_probs.shape)} does '
                f'not match student_logits {tuple(student_logits.shape)}')
        log_p = F.log_softmax(student_logits.float() / self.student_temp, -1)
        with torch.autocast(log_p.device.type, enabled=False):  # fp32 sum
            ce = -torch.einsum('tbk,sbk->st', teacher_probs.float(),
                               log_p) / batch
        same_view = torch.eye(num_s, num_t, dtype=torch.bool,
                              device=ce.device)
        return self.loss_weight * ce[~same_view].mean()


@MODELS.register_module()
class iBOTPatchLoss(DistillationLoss):
    """Masked patch self-distillation: Eq. 2 (iBOT), Eq. 5 (content) and
    Eq. 4 (position) are this loss on different masks.

    Per-token cross entropies are averaged within each image (every masked
    image weighs the same whatever its mask ratio), then summed over the
    images and divided by

    * ``normalize='all_images'`` (default): ``num_images``, every image of
      the batch of global views, masked or not -- DINOv2's
      ``iBOTPatchLoss.forward_masked`` (``-loss.sum() /
      student_masks_flat.shape[0]``), which ICPF extends;
    * ``normalize='masked_images'``: the images with at least one selected
      token (a mean over the masked images; about ``1 / share`` times the
      DINOv2 value, e.g. x2 with masks on half of the images).

    Args:
        student_temp, loss_weight: see :class:`DistillationLoss`.
        normalize: ``'all_images'`` or ``'masked_images'``.
    """

    NORMALIZE = ('all_images', 'masked_images')

    def __init__(self, student_temp: float = 0.1, loss_weight: float = 1.0,
                 normalize: str = 'all_images'):
        super().__init__(student_temp, loss_weight)
        if normalize not in self.NORMALIZE:
            raise ValueError(f'iBOTPatchLoss: normalize must be one of '
                             f'{self.NORMALIZE}, got {normalize!r}')
        self.normalize = normalize

    def forward(self, student_logits: Tensor, teacher_probs: Tensor,
                image_index: Tensor,
                num_images: Optional[int] = None) -> Tensor:
        """
        Args:
            student_logits: ``(M, K)`` student logits of the selected tokens.
            teacher_probs: ``(M, K)`` teacher targets of the same tokens.
            image_index: ``(M,)`` index of the image each token belongs to.
            num_images: images in the batch (all global views); needed for
                ``normalize='all_images'``.
        """
        if self.normalize == 'all_images' and num_images is None:
            raise ValueError("iBOTPatchLoss(normalize='all_images') needs "
                             'num_images, the number of images the masks '
                             'were drawn for')
        if student_logits.shape[0] == 0:
            return student_logits.sum() * 0.
        ce = _cross_entropy(student_logits, teacher_probs, self.student_temp)
        _, inverse, counts = torch.unique(
            image_index, return_inverse=True, return_counts=True)
        weights = 1. / counts[inverse].float()
        denom = num_images if self.normalize == 'all_images' \
            else counts.numel()
        return self.loss_weight * (ce * weights).sum() / denom


@MODELS.register_module()
class KoLeoLoss(nn.Module):
    """KoLeo regulariser: ``-1/n sum_i log(min_{j != i} ||x_i - x_j|| + eps)``
    on L2-normalised features (Sablayrolles et al., 2019; DINOv2).

    Args:
        eps: added to the nearest-neighbour distance.
        loss_weight: ``lambda_KoLeo`` of Eq. 3 / Eq. 6 (1 in the paper).
    """

    def __init__(self, eps: float = 1e-8, loss_weight: float = 1.0):
        super().__init__()
        self.eps = eps
        self.loss_weight = loss_weight

    def forward(self, feats: Tensor) -> Tensor:
        """``feats``: ``(n, C)`` with ``n >= 2`` (one process's batch)."""
        if feats.dim() != 2 or feats.shape[0] < 2:
            raise ValueError(f'KoLeoLoss needs (n >= 2, C) features, got '
                             f'{tuple(feats.shape)}')
        x = F.normalize(feats.float(), dim=-1, eps=self.eps)
        with torch.no_grad(), torch.autocast(x.device.type, enabled=False):
            sims = x @ x.t()  # fp32: bf16 may pick a farther neighbour
            sims.fill_diagonal_(-float('inf'))
            nearest = sims.argmax(dim=1)
        dists = (x - x[nearest]).norm(dim=-1)
        return -self.loss_weight * torch.log(dists + self.eps).mean()
