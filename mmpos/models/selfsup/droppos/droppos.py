"""DropPos: pre-training ViTs by reconstructing dropped positions (Wang et
al., NeurIPS 2023), §3, Eq. 1-9, Alg. 1.

Per image: keep ``(1 - gamma) N`` random patches (Eq. 1, MAE shuffle); of
those, drop the position embedding of ``gamma_pos`` (Eq. 2) and add the
learnable ``pos_mask_token`` instead (Eq. 3); the class token always keeps
its own embedding ``p_0``. The encoder runs on ``[cls; x_vis] + p'`` and
:class:`DropPosHead` classifies every visible patch into one of the ``N``
positions; the loss (Eq. 4-8) covers the dropped-position patches only.

Backbone (``backbone`` config): mmpos' ViT token API (``patchify``,
``patch_pos_embed``, ``forward_kept``), ``out_type='raw'``:

* the paper's ViT: :class:`~mmpos.models.backbones.MAERoPEViT` with
  ``rope=None, use_ape=True, ape_type='sincos'`` (fixed 2-D sin-cos APE,
  frozen; MAE's init, as the authors' code), whose state dict has
  mmpretrain's ViT layout, so ``backbone.*`` of a DropPos checkpoint is a
  downstream ``VisionTransformer`` / ``RoPEVisionTransformer`` (RoPE off);
* a RoPE ViT, with or without APE. Anchor patches are rotated with their
  grid coordinates; a dropped-position patch gets **no rotation** (a
  ``NaN`` coordinate: the identity rotation the class token gets, in any
  coordinate frame) plus the additive ``pos_mask_token``, which marks it as
  position-less. No rotation is the RoPE analogue of "no position
  embedding"; a learnable mask coordinate would only move all dropped
  patches to one shared learnt place. Register tokens, if any, are left
  out of the features the head sees.

Attentive weights (Eq. 9) use the encoder features of the class token and
the patches. ``affinity_source='full'`` (default) takes them from an extra
gradient-free forward pass of the whole image with all position embeddings
(``f`` has ``N`` rows in Eq. 9; the authors' code does the same) and keeps
the visible patches; ``'visible'`` reuses the (detached) features of the
masked forward pass, which costs nothing extra. Without attentive weights
(``head.tau`` infinite) neither is computed.
"""
from typing import Dict, List, Optional

import torch
import torch.nn as nn
from mmengine.model.weight_init import trunc_normal_
from mmpretrain.models.selfsup.base import BaseSelfSupervisor
from mmpretrain.structures import DataSample
from torch import Tensor

from mmpos.registry import MODELS
from ...layers.masking import drop_positions, gather_tokens, random_masking

AFFINITY_SOURCES = ('full', 'visible')


@MODELS.register_module()
class DropPos(BaseSelfSupervisor):
    """DropPos algorithm.

    Args:
        backbone: ViT config (see the module docstring).
        head: :class:`DropPosHead` config.
        mask_ratio: patch mask ratio ``gamma`` (Eq. 1), in ``[0, 1)``.
        pos_mask_ratio: position mask ratio ``gamma_pos`` (Eq. 2), in
            ``(0, 1]`` (1 = no anchor patch, Table 2).
        affinity_source: ``'full'`` or ``'visible'`` (module docstring).
        pretrained, data_preprocessor, init_cfg: as ``BaseSelfSupervisor``.
    """

    def __init__(self,
                 backbone: dict,
                 head: dict,
                 mask_ratio: float = 0.75,
                 pos_mask_ratio: float = 0.75,
                 affinity_source: str = 'full',
                 pretrained: Optional[str] = None,
                 data_preprocessor: Optional[dict] = None,
                 init_cfg: Optional[dict] = None):
        super().__init__(
            backbone=backbone,
            head=head,
            pretrained=pretrained,
            data_preprocessor=data_preprocessor,
            init_cfg=init_cfg)
        if not 0. <= mask_ratio < 1.:
            raise ValueError(f'mask_ratio must lie in [0, 1), got '
                             f'{mask_ratio}')
        if not 0. < pos_mask_ratio <= 1.:
            raise ValueError(f'pos_mask_ratio must lie in (0, 1], got '
                             f'{pos_mask_ratio}')
        if affinity_source not in AFFINITY_SOURCES:
            raise ValueError(f'affinity_source must be one of '
                             f'{AFFINITY_SOURCES}, got {affinity_source!r}')
        if not hasattr(self.backbone, 'forward_kept'):
            raise TypeError(
                f'DropPos needs a backbone with mmpos\' token API '
                f'(RoPEVisionTransformer, MAERoPEViT), got '
                f'{type(self.backbone).__name__}; the paper\'s ViT is '
                f'MAERoPEViT(rope=None, use_ape=True, ape_type="sincos")')
        self.backbone.check_kept_forward('DropPos')
        self.mask_ratio = mask_ratio
        self.pos_mask_ratio = pos_mask_ratio
        self.affinity_source = affinity_source
        self.pos_mask_token = nn.Parameter(
            torch.zeros(1, 1, self.backbone.embed_dims))

    def init_weights(self):
        super().init_weights()
        trunc_normal_(self.pos_mask_token, std=.02)

    # -- encoder ------------------------------------------------------------
    def encode_full(self, inputs: Tensor) -> Tensor:
        """All patches with all position embeddings: ``(B, 1 + N, C)``
        (class token first, register tokens left out)."""
        bb = self.backbone
        x, hw = bb.embed(inputs)
        return bb.without_registers(bb.forward_tokens(x, hw=hw)[-1])

    def encode_masked(self, inputs: Tensor, mask_ratio: float,
                      pos_mask_ratio: float) -> Dict[str, Tensor]:
        """Patch masking, position dropping and the encoder (Alg. 1).

        Returns a dict with ``feats`` ``(B, 1 + K, C)``, ``ids_keep``
        ``(B, K)`` (the visible patches, i.e. the position targets ``y``),
        ``dropped`` ``(B, K)`` bool and ``hw``.
        """
        x, hw = self.backbone.patchify(inputs)
        batch_size, num_patches, _ = x.shape
        ids_keep = random_masking(batch_size, num_patches, mask_ratio,
                                  x.device).ids_keep
        dropped = drop_positions(ids_keep, pos_mask_ratio)
        x = gather_tokens(x, ids_keep)
        pos = self.backbone.patch_pos_embed(hw)
        mask_token = self.pos_mask_token.to(x.dtype)
        if pos is None:  # RoPE only: the mask token marks dropped patches
            x = x + dropped[..., None].to(x.dtype) * mask_token
        else:  # Eq. 3
            x = x + torch.where(dropped[..., None], mask_token,
                                gather_tokens(pos, ids_keep).to(x.dtype))
        # dropped patches: no rotation either
        feats = self.backbone.forward_kept(x, ids_keep, hw, unplaced=dropped)
        return dict(feats=feats, ids_keep=ids_keep, dropped=dropped, hw=hw)

    def extract_feat(self, inputs: Tensor) -> Tensor:
        """Class + patch features ``(B, 1 + N, C)`` of whole images with all
        position embeddings (as the backbone runs downstream)."""
        return self.encode_full(inputs)

    # -- training / evaluation ----------------------------------------------
    def affinity_feats(self, inputs: Tensor,
                       ids_keep: Tensor) -> Optional[Tensor]:
        """The features of Eq. 9 for ``affinity_source='full'``: class token
        and visible patches ``(B, 1 + K, C)`` of a gradient-free forward
        pass of the whole image; ``None`` for ``'visible'`` (the head then
        uses the masked pass's features)."""
        if self.affinity_source == 'visible':
            return None
        with torch.no_grad():
            full = self.encode_full(inputs)
        return torch.cat((full[:, :1], gather_tokens(full[:, 1:], ids_keep)),
                         dim=1)

    def loss(self, inputs: Tensor, data_samples: List[DataSample],
             **kwargs) -> Dict[str, Tensor]:
        """Eq. 8 on a batch ``(B, 3, H, W)``: ``loss``, ``acc_pos``,
        ``sigma``."""
        out = self.encode_masked(inputs, self.mask_ratio, self.pos_mask_ratio)
        affinity = (self.affinity_feats(inputs, out['ids_keep'])
                    if self.head.attentive else None)
        return self.head.loss(out['feats'], out['ids_keep'], out['dropped'],
                              out['hw'], affinity)

    @torch.no_grad()
    def position_predictions(self, inputs: Tensor, mask_ratio: float,
                             pos_mask_ratio: float) -> Dict[str, Tensor]:
        """Predicted and true positions of the dropped-position patches
        under the given ratios (Tables S3-S5): ``pred``, ``target``
        ``(B, K)`` long, ``dropped`` ``(B, K)`` bool, ``acc`` (top-1 over
        the dropped patches)."""
        out = self.encode_masked(inputs, mask_ratio, pos_mask_ratio)
        pred = self.head.predict(out['feats'], out['ids_keep'],
                                 out['dropped'], out['hw'])
        return dict(pred=pred['pred'], target=out['ids_keep'],
                    dropped=out['dropped'], acc=pred['acc'])
