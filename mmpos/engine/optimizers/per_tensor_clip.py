"""Per-tensor gradient-norm clipping (DropPos authors' ``clip_gradients``).

mmengine's ``clip_grad=dict(max_norm=c)`` rescales *all* gradients together
when their global L2 norm exceeds ``c``. The DropPos authors' pretraining
(``util/utils.py`` of Haochen-Wang409/DropPos, ``--clip_grad 5``) instead
clips each parameter tensor on its own: ``g <- g * min(1, c / (||g|| +
1e-6))``. At initialisation the global norm of a ViT-B is several times any
single tensor's norm, so the two rules scale different gradients.

Use ``optim_wrapper=dict(type='PerTensorClipOptimWrapper',
clip_grad=dict(max_norm=5.0), ...)`` (fp32) or
``type='AmpPerTensorClipOptimWrapper'`` (mixed precision; gradients are
unscaled before clipping, as in mmengine's ``AmpOptimWrapper``). The logged
``grad_norm`` is the global norm before clipping, as mmengine logs it.
"""
from typing import Iterable, Optional

import torch
from mmengine.optim import AmpOptimWrapper, OptimWrapper
from torch import Tensor

from mmpos.registry import OPTIM_WRAPPERS


@torch.no_grad()
def clip_grad_norm_per_tensor_(params: Iterable[Tensor],
                               max_norm: float,
                               eps: float = 1e-6) -> Tensor:
    """Clip the gradient of every tensor in ``params`` to L2 norm
    ``max_norm`` separately, in place.

    Returns:
        The global L2 norm of all gradients before clipping (0-d tensor).
    """
    grads = [p.grad for p in params if p.grad is not None]
    if not grads:
        return torch.tensor(0.)
    norms = torch.stack([g.norm(2).float() for g in grads])
    coefs = (max_norm / (norms + eps)).clamp(max=1.)
    for g, c in zip(grads, coefs):
        g.mul_(c.to(g.dtype))
    return norms.square().sum().sqrt()


class _PerTensorClipMixin:
    """Replaces the wrapper's clip function by
    :func:`clip_grad_norm_per_tensor_`; ``clip_grad`` takes ``max_norm``
    (and optionally ``eps``) only."""

    def __init__(self, *args, clip_grad: Optional[dict] = None, **kwargs):
        if not clip_grad or set(clip_grad) - {'max_norm', 'eps'} or \
                'max_norm' not in clip_grad:
            raise ValueError(f'{type(self).__name__} needs clip_grad=dict('
                             f'max_norm=...[, eps=...]), got {clip_grad!r}')
        super().__init__(*args, clip_grad=dict(clip_grad), **kwargs)
        self.clip_func = clip_grad_norm_per_tensor_
        self.grad_name = 'grad_norm'


@OPTIM_WRAPPERS.register_module()
class PerTensorClipOptimWrapper(_PerTensorClipMixin, OptimWrapper):
    """``OptimWrapper`` (fp32) with per-tensor gradient clipping."""


@OPTIM_WRAPPERS.register_module()
class AmpPerTensorClipOptimWrapper(_PerTensorClipMixin, AmpOptimWrapper):
    """``AmpOptimWrapper`` with per-tensor gradient clipping."""
