"""Statistics of attention maps ``(B, heads, N, N)`` with ``num_prefix``
leading non-patch tokens (class token) and an ``(h, w)`` patch grid.

Patch statistics use the patch-to-patch block renormalised over patch keys
(the class token has no position), as in the mean-attention-distance of
Dosovitskiy et al. and Park et al.:

* :func:`attention_distance` (RoPE-ViT Fig. 2; MAD of ICPF App. A.1):
  ``sum_k a(q, k) ||p_q - p_k||`` averaged over queries, in patch units
  (times the patch size for pixels).
* :func:`attention_entropy` (RoPE-ViT Fig. 3): ``-sum_k a(q, k) log a(q, k)``
  over *all* keys of the softmax (class token included), averaged over
  queries (nats).
* :func:`attention_nmi` (ICPF App. A.1 after Park et al.): with ``p(q)``
  uniform over the patch queries and ``p(k | q) = a(q, k)``, the joint is
  ``p(q, k) = a(q, k) / N``; ``NMI = I(Q; K) / sqrt(H(Q) H(K))`` (Strehl &
  Ghosh). 0: every query attends alike; 1: every query has its own keys.

All return per-head values ``(heads,)`` averaged over the batch, in float64.
"""
import torch
from torch import Tensor

from mmpos.models.layers.positions import grid_coords

EPS = 1e-12


def patch_block(attn: Tensor, num_prefix: int) -> Tensor:
    """Patch-to-patch attention renormalised over patch keys."""
    block = attn[..., num_prefix:, num_prefix:].double()
    return block / block.sum(-1, keepdim=True).clamp_min(EPS)


def attention_distance(attn: Tensor, hw, num_prefix: int = 1) -> Tensor:
    """Mean attention distance per head, ``(heads,)``, patch units."""
    coords = grid_coords(*hw, dtype=torch.float64, device=attn.device)
    if attn.shape[-1] - num_prefix != coords.shape[0]:
        raise ValueError(f'{attn.shape[-1]} tokens do not match grid {hw} '
                         f'with {num_prefix} prefix tokens')
    dist = torch.cdist(coords, coords)
    return (patch_block(attn, num_prefix) * dist).sum(-1).mean((0, 2))


def attention_entropy(attn: Tensor, num_prefix: int = 1) -> Tensor:
    """Mean entropy of the patch queries' attention, ``(heads,)``, nats."""
    a = attn[..., num_prefix:, :].double()
    return -(a * a.clamp_min(EPS).log()).sum(-1).mean((0, 2))


def attention_nmi(attn: Tensor, num_prefix: int = 1) -> Tensor:
    """Normalised mutual information between query and key patches,
    ``(heads,)``, computed per image then averaged."""
    a = patch_block(attn, num_prefix)  # (B, heads, N, N) = p(k | q)
    n = a.shape[-1]
    p_k = a.mean(-2)  # (B, heads, N)
    h_k = -(p_k * p_k.clamp_min(EPS).log()).sum(-1)
    h_q = torch.log(torch.tensor(float(n), dtype=torch.float64))
    ratio = a / p_k.unsqueeze(-2).clamp_min(EPS)
    mutual = (a * ratio.clamp_min(EPS).log()).sum((-2, -1)) / n
    return (mutual / (h_q * h_k).clamp_min(EPS).sqrt()).mean(0)
