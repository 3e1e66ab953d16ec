"""CR2PQ objectives: patch loss (Eq. 9) and global loss (Eq. 10)."""
from typing import Dict

import torch.nn.functional as F
from mmengine.model import BaseModule
from torch import Tensor

from mmpos.registry import MODELS

NORMS = ('none', 'l2', 'layernorm')


def _lp(pred: Tensor, target: Tensor, p: float) -> Tensor:
    """``||pred - target||_p^p`` summed over channels: ``(...)``."""
    return (pred - target).abs().pow(p).sum(-1)


@MODELS.register_module()
class CR2PQLoss(BaseModule):
    """``L = L_patch + lambda * L_global`` (§3.2).

    * Eq. 9: ``L_patch = mean_{h,w} ||z_B^{(h,w)} - z'_B^{(h,w)}||_p^p`` over
      B's ``K_B^H x K_B^W`` tokens, then over the batch.
    * Eq. 10: ``L_global = ||g'(mean h) - mean_{h,w} z'_B^{(h,w)}||_p^p``, the
      global projection (computed by the neck) against the teacher's
      token average, averaged over the batch.

    ``norm`` (not specified by the paper; our choice per target):

    * ``'l2'``: predictions and targets (tokens; the token average for
      Eq. 10) are unit vectors, so with ``p = 2`` each term is
      ``2 - 2 cos``, the BYOL loss (default, for the EMA teacher whose raw
      features could otherwise shrink towards a collapse).
    * ``'layernorm'``: targets only, parameter-free LayerNorm per vector
      (data2vec / MaskDistill style for frozen teachers; MAE's ``norm_pix``
      for pixel targets).
    * ``'none'``: Eq. 9 / 10 on raw values.

    Args:
        p: the norm's power ``p`` of Eq. 9/10.
        global_weight: ``lambda`` (0.5 in the paper).
        norm: ``'l2'``, ``'layernorm'`` or ``'none'``.
    """

    def __init__(self, p: float = 2., global_weight: float = .5,
                 norm: str = 'l2', init_cfg=None):
        super().__init__(init_cfg=init_cfg)
        if norm not in NORMS:
            raise ValueError(f'norm must be one of {NORMS}, got {norm!r}')
        if p <= 0:
            raise ValueError(f'p must be > 0, got {p}')
        self.p = p
        self.global_weight = global_weight
        self.norm = norm

    def _normalise(self, x: Tensor, is_target: bool) -> Tensor:
        if self.norm == 'l2':
            return F.normalize(x.float(), dim=-1)
        if self.norm == 'layernorm' and is_target:
            return F.layer_norm(x.float(), x.shape[-1:])
        return x.float()

    def forward(self, pred_patch: Tensor, pred_global: Tensor,
                target: Tensor) -> Dict[str, Tensor]:
        """
        Args:
            pred_patch: ``(B, N_B, D)`` student tokens ``z_B``.
            pred_global: ``(B, D)`` global projection ``g'(.)``.
            target: ``(B, N_B, D)`` teacher tokens ``z'_B`` (no gradient).

        Returns:
            ``loss_patch`` and ``loss_global`` (already times ``lambda``).
        """
        if pred_patch.shape != target.shape or \
                pred_global.shape != target[:, 0].shape:
            raise ValueError(
                f'CR2PQLoss: pred_patch {tuple(pred_patch.shape)} and '
                f'pred_global {tuple(pred_global.shape)} must match the '
                f'target {tuple(target.shape)} (B, N_B, D)')
        target = target.detach().float()  # token mean (Eq. 10) in fp32
        loss_patch = _lp(
            self._normalise(pred_patch, False),
            self._normalise(target, True), self.p).mean()
        loss_global = _lp(
            self._normalise(pred_global, False),
            self._normalise(target.mean(1), True), self.p).mean()
        return dict(
            loss_patch=loss_patch,
            loss_global=self.global_weight * loss_global)


__all__ = ['CR2PQLoss']
