"""Linear position probing of a frozen backbone (DropPos §4.3, Table 7).

The backbone is frozen; the position embeddings of a random ``gamma_pos``
(0.75) of the patches are dropped, no patch is masked, and a linear head
classifies every dropped-position patch into one of the ``N`` grid positions
with plain cross-entropy. Its top-1 accuracy on held-out images measures how
well the frozen features locate a patch from content and the remaining
anchors ("Position prediction" columns of Table 7).

Choices where the paper is brief:

* **A dropped position gets nothing.** The patch keeps its patch embedding
  only (no APE; for a RoPE backbone, no rotation, as in
  :class:`~mmpos.models.selfsup.DropPos`). A DropPos checkpoint's learnt
  ``pos_mask_token`` is not used: MAE / MoCo v3 backbones have none, and the
  probe must feed every backbone the same input.
* **Head**: ``BatchNorm1d(affine=False)`` + ``Linear(D, N)`` on the final
  patch features, the linear-probing head of MAE/MoCo v3 (no bias-free
  tricks, no hidden layer).
* The encoder pass reuses :meth:`DropPos.encode_masked` with ``gamma = 0``,
  so the probe drops positions exactly as pretraining does. DropPos runs
  mmpos' ViT token API; an mmpretrain ViT backbone (MAE's ``MAEViT``, MoCo
  v3's, a fine-tuned classifier's ``VisionTransformer``) is probed as the
  :class:`~mmpos.models.backbones.RoPEVisionTransformer` without RoPE of
  the same shape, which holds the same state dict
  (:func:`token_vit_config`).
"""
from typing import Dict, Iterable, Iterator

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch import Tensor

from mmpos.models.selfsup.droppos import DropPos, position_accuracy
from mmpos.errors import BadInputError
from mmpos.evaluation.frozen import with_progress


def token_vit_config(backbone: dict) -> dict:
    """The backbone config of ``backbone`` that :class:`DropPos` runs.

    An mmpos ViT (with ``forward_tokens``) is kept, with ``out_type='raw'``
    and the last block as output. An mmpretrain ``VisionTransformer`` (or a
    subclass: ``MAEViT``, ``MoCoV3ViT``) becomes the ``RoPEVisionTransformer``
    with ``rope=None`` and its APE (learnable, or a fixed sin-cos table) of
    the same shape: the converters'
    :func:`~mmpos.converters.infer_vit_config` reads it off the
    built model's state dict (the layouts are the same), plus the heads,
    input size and norm eps, which the weights do not hold. The state dict
    must load into the new backbone strictly (else ``BadInputError``).
    """
    from mmengine.registry import DefaultScope
    from mmpretrain.registry import MODELS

    from mmpos.converters import infer_vit_config

    cfg = dict(backbone, type=backbone['type'].split('.')[-1])
    cls = MODELS.get(cfg['type'])
    if cls is not None and hasattr(cls, 'forward_tokens'):
        return dict(cfg, out_type='raw', out_indices=-1)
    with DefaultScope.overwrite_default_scope('mmpretrain'):
        model = MODELS.build(cfg)
    layers = getattr(model, 'layers', None)
    if getattr(model, 'pos_embed', None) is None or not layers or \
            getattr(model, 'cls_token', None) is None:
        raise BadInputError(f'{cfg["type"]}: not a ViT with a class token and '
                            'an APE; the position probe runs ViTs')
    state = model.state_dict()
    vit = infer_vit_config(
        {f'backbone.{k}': v for k, v in state.items()},
        layers[0].attn.num_heads, 'none',
        img_size=tuple(model.patch_embed.init_input_size),
        ape_type='learnable' if model.pos_embed.requires_grad else 'sincos',
        norm_cfg=dict(type='LN', eps=layers[0].ln1.eps),
        out_type='raw')['backbone']
    with DefaultScope.overwrite_default_scope('mmpretrain'):
        ours = MODELS.build(vit)
    try:
        ours.load_state_dict(state, strict=True)
    except RuntimeError as err:
        raise BadInputError(f'{cfg["type"]} has no RoPEVisionTransformer '
                            f'twin: {str(err).splitlines()[0]}') from None
    return vit


class LinearPositionProbe(nn.Module):
    """Frozen encoder + ``BN(affine=False)`` + linear ``N``-way classifier.

    Args:
        encoder: a :class:`DropPos` model whose backbone is probed (built
            with ``head=None`` for a backbone that was not DropPos
            pretrained); frozen and kept in eval mode.
        num_patches: ``N``, the patch grid size of the probing images.
        pos_mask_ratio: share of patches whose position is dropped.
    """

    def __init__(self, encoder: DropPos, num_patches: int,
                 pos_mask_ratio: float = 0.75):
        super().__init__()
        if not 0. < pos_mask_ratio <= 1.:
            raise ValueError(f'pos_mask_ratio must lie in (0, 1], got '
                             f'{pos_mask_ratio}')
        self.encoder = encoder.requires_grad_(False).eval()
        with torch.no_grad():
            self.encoder.pos_mask_token.zero_()  # dropped = no position
        self.pos_mask_ratio = pos_mask_ratio
        dims = encoder.backbone.embed_dims
        self.norm = nn.BatchNorm1d(dims, affine=False)
        self.fc = nn.Linear(dims, num_patches)
        nn.init.trunc_normal_(self.fc.weight, std=0.01)
        nn.init.zeros_(self.fc.bias)

    def train(self, mode: bool = True):
        super().train(mode)
        self.encoder.eval()  # frozen: no dropout / drop path / BN updates
        return self

    def forward(self, inputs: Tensor) -> Dict[str, Tensor]:
        """Images ``(B, 3, H, W)`` -> ``loss`` (CE on the dropped-position
        patches), ``acc`` (their top-1), ``correct`` and ``count`` (hits and
        number of dropped-position patches, for pooling)."""
        with torch.no_grad():
            out = self.encoder.encode_masked(inputs, 0., self.pos_mask_ratio)
        feats = out['feats'][:, 1:]
        batch, num, dims = feats.shape
        if num != self.fc.out_features:
            raise ValueError(f'LinearPositionProbe: {num} patches per image, '
                             f'the head classifies {self.fc.out_features} '
                             f'positions')
        logits = self.fc(self.norm(feats.reshape(-1, dims))).view(
            batch, num, -1)
        dropped, positions = out['dropped'], out['ids_keep']
        loss = F.cross_entropy(logits[dropped], positions[dropped])
        hits = (logits.detach().argmax(-1) == positions) & dropped
        return dict(loss=loss,
                    acc=position_accuracy(logits.detach(), positions,
                                          dropped),
                    correct=hits.sum(), count=dropped.sum())


def train_position_probe(probe: LinearPositionProbe,
                         batches: Iterator[Tensor],
                         iters: int,
                         lr: float = 0.1,
                         weight_decay: float = 0.) -> list:
    """SGD (momentum 0.9, cosine lr) on the head for ``iters`` batches drawn
    from ``batches`` (a progress bar when there are many,
    :func:`~mmpos.evaluation.frozen.with_progress`); returns the
    per-iteration losses."""
    params = [p for p in probe.parameters() if p.requires_grad]
    optim = torch.optim.SGD(params, lr=lr, momentum=0.9,
                            weight_decay=weight_decay)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(optim, iters)
    probe.train()
    losses = []
    for _ in with_progress(range(iters)):
        loss = probe(next(batches))['loss']
        optim.zero_grad()
        loss.backward()
        optim.step()
        sched.step()
        losses.append(loss.item())
    return losses


@torch.no_grad()
def evaluate_position_probe(probe: LinearPositionProbe,
                            batches: Iterable[Tensor],
                            seed: int = 0) -> float:
    """Top-1 accuracy (%) on the dropped-position patches of ``batches``,
    pooled; the dropped positions are drawn from ``seed``."""
    probe.eval()
    torch.manual_seed(seed)
    correct = count = 0
    for inputs in batches:
        out = probe(inputs)
        correct += int(out['correct'])
        count += int(out['count'])
    if count == 0:
        raise ValueError('no dropped-position patch in the evaluation images')
    return 100. * correct / count
