"""DropPos position decoder and loss (DropPos paper §3.2, Eq. 4-9).

* :class:`DropPosHead`: the lightweight decoder ``g_psi`` (a linear
  embedding to width 512, 2 pre-norm transformer blocks, LayerNorm and a
  linear classifier to the ``N`` patch positions) and the loss on the
  dropped-position patches with position smoothing and attentive weights.
* :func:`smoothed_position_targets` (Eq. 5), :func:`attentive_weights`
  (Eq. 9), :func:`droppos_loss` (Eq. 8).

Choices where the paper is open (also in ``configs/droppos/README.md``):

* Eq. 4's softmax is over all ``N`` positions (the text's
  ``(1 - gamma) N`` upper limit is a typo: the logits are ``N``-way).
* ``dist(i, j)`` is the Euclidean distance between the patch centres in
  patch units (Eq. 5 as written); ``distance='squared'`` gives the squared
  distance of the authors' code (a Gaussian kernel), which the ImageNet
  configs use.
* Eq. 8 is a sum; we divide it by ``sum_i (1 - M_pos^i) A_i`` over the
  batch (the authors' code), i.e. a weighted mean that does not scale with
  the batch size or ``N``. With ``tau = inf`` (uniform ``A``) it is the mean
  of Eq. 6 over the dropped patches.
* The attentive weights are a constant of the loss (no gradient), and are
  normalised over the *visible* patches of each image (Eq. 9 over the
  patches that have a prediction; the authors' code likewise renormalises
  the full-image softmax over the visible patches).
* ``sigma`` is a persistent buffer, so checkpoints carry the value of the
  smoothing schedule (set each iteration by ``DropPosSigmaHook``).
"""
import math
from typing import Dict, Optional, Sequence

import torch
import torch.nn as nn
import torch.nn.functional as F
from mmengine.model import BaseModule, ModuleList
from mmpretrain.models.backbones.vision_transformer import \
    TransformerEncoderLayer
from mmpretrain.models.utils import build_norm_layer
from torch import Tensor

from mmpos.registry import MODELS
from ...layers.positions import grid_coords

DISTANCES = ('euclidean', 'squared')


def smoothed_position_targets(labels: Tensor,
                              hw: Sequence[int],
                              sigma: float,
                              squared: bool = False) -> Tensor:
    """Rows ``w*(y, :)`` of the normalised smoothing matrix (Eq. 5).

    ``w(i, j) = exp(-dist(i, j) / sigma^2)``, normalised to sum 1 over
    ``j``; ``sigma = 0`` gives one-hot rows (no smoothing). Patch ``i`` of
    the row-major ``(h, w)`` grid sits at ``(i % w, i // w)``.

    Args:
        labels: ``(...,)`` long positions ``y`` in ``[0, h * w)``.
        hw: the patch grid ``(h, w)``.
        sigma: smoothing width, ``>= 0`` (checked by :class:`DropPosHead`
            and ``DropPosSigmaHook``, which set it).
        squared: ``dist`` is the squared Euclidean distance (the authors'
            code) instead of the Euclidean one (Eq. 5).

    Returns:
        ``(..., h * w)`` float targets.
    """
    sigma = float(sigma)
    num = int(hw[0]) * int(hw[1])
    if sigma == 0:
        return F.one_hot(labels, num).float()
    coords = grid_coords(*hw, device=labels.device)
    sq_dist = (coords[labels][..., None, :] - coords).square().sum(-1)
    dist = sq_dist if squared else sq_dist.sqrt()
    weights = torch.exp(-dist / sigma**2)
    return weights / weights.sum(-1, keepdim=True)


def attentive_weights(cls_feat: Tensor, patch_feats: Tensor,
                      tau: float, valid: Optional[Tensor] = None) -> Tensor:
    """Affinity ``A`` of the class token to each patch (Eq. 9).

    ``softmax_j(cos(f_cls, f_j) / tau)`` over the given patches; ``tau =
    inf`` gives uniform weights ``1 / K``. No gradient flows through ``A``.

    Args:
        cls_feat: ``(B, C)``.
        patch_feats: ``(B, K, C)``.
        tau: temperature, ``> 0`` (checked by :class:`DropPosHead`).
        valid: optional ``(B, K)`` bool, ``False`` for padding (NaFlex
            batches): weight 0, each row's softmax (``1 / K_b``) over its
            valid patches only.

    Returns:
        ``(B, K)``, each row summing to 1.
    """
    patch_feats = patch_feats.detach()
    if math.isinf(tau):
        if valid is None:
            return patch_feats.new_full(patch_feats.shape[:2],
                                        1. / patch_feats.shape[1])
        share = valid.to(patch_feats.dtype)
        return share / share.sum(1, keepdim=True)
    cos = F.cosine_similarity(cls_feat.detach()[:, None], patch_feats, dim=-1)
    logits = cos.float() / tau
    if valid is not None:
        logits = logits.masked_fill(~valid, float('-inf'))
    return logits.softmax(dim=-1)


def droppos_loss(logits: Tensor,
                 targets: Tensor,
                 dropped: Tensor,
                 weights: Optional[Tensor] = None) -> Tensor:
    """Smoothed, attentive position loss (Eq. 8), as a weighted mean.

    ``sum_{b,i} d_bi A_bi CE(w*_bi, o_bi) / sum_{b,i} d_bi A_bi`` with
    ``CE(t, o) = -sum_j t_j log softmax(o)_j``.

    Args:
        logits: ``(B, K, N)`` position logits ``o`` of the visible patches.
        targets: ``(B, K, N)`` soft targets ``w*(y, :)``.
        dropped: ``(B, K)`` bool, ``True`` where the position was dropped.
        weights: ``(B, K)`` attentive weights ``A`` (``None`` = uniform).
    """
    ce = -(targets * logits.float().log_softmax(dim=-1)).sum(-1)
    scale = dropped.float()
    if weights is not None:
        scale = scale * weights
    total = scale.sum()
    if total <= 0:
        raise ValueError('DropPos loss: no dropped position in the batch '
                         '(pos_mask_ratio too small for the visible patches)')
    return (ce * scale).sum() / total


@MODELS.register_module()
class DropPosHead(BaseModule):
    """Position decoder ``g_psi`` and DropPos loss.

    Args:
        num_patches: ``N``, the number of positions (patch grid size).
        in_channels: encoder width ``D``.
        embed_dims: decoder width (paper: 512).
        num_layers: decoder blocks (paper: 2).
        num_heads: decoder heads (authors' code: 16).
        mlp_ratio: FFN expansion of the decoder blocks.
        sigma: initial smoothing width (Eq. 5); ``DropPosSigmaHook`` decays
            it (Eq. 7). ``0`` = no smoothing (Table 3).
        tau: temperature of the attentive weights (Eq. 9); ``None`` or
            ``float('inf')`` = no attentive reconstruction (Table 4).
        distance: ``'euclidean'`` (Eq. 5) or ``'squared'`` (authors' code).
        norm_cfg: decoder norm layers.

    The decoder has no position embedding: it sees the encoder tokens of
    the visible patches (class token first) and classifies each patch.
    """
    layer_type = TransformerEncoderLayer  # the decoder's block

    def __init__(self,
                 num_patches: int,
                 in_channels: int,
                 embed_dims: int = 512,
                 num_layers: int = 2,
                 num_heads: int = 16,
                 mlp_ratio: float = 4.,
                 sigma: float = 1.,
                 tau: Optional[float] = 0.1,
                 distance: str = 'euclidean',
                 norm_cfg: dict = dict(type='LN', eps=1e-6),
                 init_cfg: Optional[dict] = [
                     dict(type='Xavier', layer='Linear',
                          distribution='uniform'),
                     dict(type='Constant', layer='LayerNorm', val=1.,
                          bias=0.)
                 ]):
        super().__init__(init_cfg=init_cfg)
        if distance not in DISTANCES:
            raise ValueError(f'distance must be one of {DISTANCES}, got '
                             f'{distance!r}')
        self.tau = float('inf') if tau is None else float(tau)
        if not self.tau > 0:
            raise ValueError(f'tau must be > 0 (or None/inf), got {tau}')
        if sigma < 0:
            raise ValueError(f'sigma must be >= 0, got {sigma}')
        self.num_patches = num_patches
        self.distance = distance
        self.register_buffer('sigma', torch.tensor(float(sigma)))
        self.embed = nn.Linear(in_channels, embed_dims)
        self.layers = ModuleList([
            self.layer_type(
                embed_dims,
                num_heads,
                int(mlp_ratio * embed_dims),
                qkv_bias=True,
                norm_cfg=norm_cfg) for _ in range(num_layers)
        ])
        self.ln1 = build_norm_layer(norm_cfg, embed_dims)
        self.fc = nn.Linear(embed_dims, num_patches)

    @property
    def attentive(self) -> bool:
        """Whether Eq. 8's attentive weights are used (finite ``tau``)."""
        return not math.isinf(self.tau)

    def forward(self, feats: Tensor) -> Tensor:
        """Encoder tokens ``(B, 1 + K, D)`` -> logits ``(B, K, N)``."""
        x = self.embed(feats)
        for layer in self.layers:
            x = layer(x)
        return self.fc(self.ln1(x))[:, 1:]

    def _logits(self, feats: Tensor, hw: Sequence[int]) -> Tensor:
        """:meth:`forward` on the features of an ``hw`` patch grid, which
        must have ``num_patches`` positions."""
        if hw[0] * hw[1] != self.num_patches:
            raise ValueError(
                f'DropPosHead: num_patches={self.num_patches} does not match '
                f'the {hw[0]}x{hw[1]} patch grid of the input')
        return self(feats)

    def loss(self,
             feats: Tensor,
             positions: Tensor,
             dropped: Tensor,
             hw: Sequence[int],
             affinity_feats: Optional[Tensor] = None) -> Dict[str, Tensor]:
        """DropPos loss and metrics.

        Args:
            feats: encoder output ``(B, 1 + K, D)`` of the visible patches.
            positions: ``(B, K)`` their true positions ``y``.
            dropped: ``(B, K)`` bool, position dropped.
            hw: patch grid, ``h * w`` must equal ``num_patches``.
            affinity_feats: ``(B, 1 + K, D)`` class-token and visible-patch
                features ``f`` of the attentive weights (Eq. 9); ``None``:
                ``feats``. Unused without attentive weights.

        Returns:
            ``loss`` (Eq. 8), ``acc_pos`` (top-1 position accuracy on the
            dropped patches, unweighted) and the current ``sigma``.
        """
        logits = self._logits(feats, hw)
        weights = None
        if self.attentive:
            f = feats if affinity_feats is None else affinity_feats
            weights = attentive_weights(f[:, 0], f[:, 1:], self.tau)
        targets = smoothed_position_targets(positions, hw, self.sigma.item(),
                                            self.distance == 'squared')
        loss = droppos_loss(logits, targets, dropped, weights)
        return dict(
            loss=loss,
            acc_pos=position_accuracy(logits.detach(), positions, dropped),
            sigma=self.sigma.detach().clone())

    def predict(self, feats: Tensor, positions: Tensor, dropped: Tensor,
                hw: Sequence[int]) -> Dict[str, Tensor]:
        """Predicted positions ``pred`` ``(B, K)`` long of the visible
        patches and ``acc``, their top-1 accuracy over the dropped ones
        (arguments as :meth:`loss`)."""
        logits = self._logits(feats, hw)
        return dict(pred=logits.argmax(-1),
                    acc=position_accuracy(logits, positions, dropped))


def position_accuracy(logits: Tensor, positions: Tensor,
                      dropped: Tensor) -> Tensor:
    """Top-1 accuracy of ``argmax(logits)`` against ``positions`` over the
    dropped patches (a 0-d tensor; NaN if none is dropped)."""
    correct = (logits.argmax(-1) == positions) & dropped
    return correct.sum().float() / dropped.sum().float()
