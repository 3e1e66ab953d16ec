"""DropPos (Wang et al., NeurIPS 2023) on NaFlex batches: images of their
own sizes and aspect ratios, padded to the batch's longest sequence
(:func:`~mmpos.datasets.naflex_collate`).

Image ``b`` has its own grid ``h_b x w_b`` of ``n_b`` patches, so its own
``N`` of the paper. Per image, as :class:`DropPos` per batch:

* Eq. 1: keep ``K_b = max(1, floor((1 - gamma) n_b))`` of its real patches
  (:func:`~mmpos.models.layers.masking.naflex_masking`); padding is never
  kept, the kept sequences are padded to ``max K_b``;
* Eq. 2-3: of those, drop the position of ``K_b - floor((1 - gamma_pos)
  K_b)``: they get ``pos_mask_token`` instead of their APE and no rotation
  (``NaN`` coordinates), as in :class:`DropPos`;
* Eq. 4: the position classes of image ``b`` are the ``n_b`` positions of
  its own grid. :class:`NaFlexDropPosHead` has one output per position
  ``(y, x)`` of a canvas ``max_grid = (H, W)`` (output ``y W + x``, the
  paper's linear classifier on every grid that fits); a batch reads the
  outputs of its bounding grid ``(max h_b, max w_b)`` and gives the
  positions outside image ``b``'s grid the lowest logit (probability 0
  after the softmax), so image ``b``'s softmax runs over exactly its
  ``n_b`` positions;
* Eq. 5: ``w*(y, :)`` over image ``b``'s own positions (distances in patch
  units, normalised over its grid);
* Eq. 8-9: ``A`` is Eq. 9's softmax over image ``b``'s own visible
  patches (``tau = inf``: ``1 / K_b``), so each image's weights sum to 1;
  Eq. 8 is then :func:`droppos_loss`'s weighted mean over the dropped real
  patches of the batch. Padding has weight 0 and no token attends to it
  (encoder and decoder key masks).

So every image gets the logits, targets and weights it gets alone, and on
a batch of one grid with ``max_grid`` that grid, with the same weights and
random draws, the loss is :class:`DropPos`'s (tested).
"""
from typing import Dict, List, Optional, Sequence, Tuple, Union

import torch
import torch.nn.functional as F
from torch import Tensor

from mmpos.registry import MODELS
from ...backbones.rope_vit import RoPETransformerEncoderLayer, naflex_grids
from ...layers.masking import gather_tokens, naflex_masking
from .droppos import DropPos
from .droppos_head import (DropPosHead, attentive_weights, droppos_loss,
                           position_accuracy, smoothed_position_targets)


def inside_grids(grids: Tensor, hw: Sequence[int]) -> Tensor:
    """``(B, h w)`` bool: position ``j`` of the row-major ``hw`` grid
    (``(j // w, j % w)``) lies in image ``b``'s grid ``grids[b]`` ``(h_b,
    w_b)``."""
    ys = torch.arange(hw[0], device=grids.device).repeat_interleave(hw[1])
    xs = torch.arange(hw[1], device=grids.device).repeat(hw[0])
    return (ys < grids[:, :1]) & (xs < grids[:, 1:])


@MODELS.register_module()
class NaFlexDropPosHead(DropPosHead):
    """:class:`DropPosHead` on NaFlex batches (module docstring).

    Args:
        max_grid: ``(H, W)``, the largest patch grid an image may have; the
            classifier has ``H W`` outputs, position ``(y, x)`` is output
            ``y W + x``. A batch whose grids reach beyond it is refused.
        in_channels, embed_dims, num_layers, num_heads, mlp_ratio, sigma,
            tau, distance, norm_cfg, init_cfg: as :class:`DropPosHead`.

    The decoder's blocks take the key mask of the kept sequence's padding.
    """
    layer_type = RoPETransformerEncoderLayer

    def __init__(self, max_grid: Sequence[int], in_channels: int, **kwargs):
        height, width = (int(v) for v in max_grid)
        super().__init__(num_patches=height * width, in_channels=in_channels,
                         **kwargs)
        self.max_grid = (height, width)

    def bounding_grid(self, grids: Tensor) -> Tuple[int, int]:
        """The batch's bounding grid ``(max h_b, max w_b)``; refused in one
        line beyond ``max_grid``."""
        hw = tuple(int(v) for v in grids.amax(0))
        if hw[0] > self.max_grid[0] or hw[1] > self.max_grid[1]:
            raise ValueError(
                f'NaFlexDropPosHead: the batch has grids of up to {hw[0]} '
                f'rows and {hw[1]} columns of patches, beyond head.max_grid='
                f'{self.max_grid}; raise max_grid to hold every image grid')
        return hw

    def logits(self, feats: Tensor, kept_valid: Tensor,
               grids: Tensor) -> Tensor:
        """Position logits ``(B, K, h w)`` over the bounding grid ``(h, w)``
        of encoder tokens ``(B, 1 + K, D)`` (class token first; kept
        sequence padding: ``kept_valid`` ``(B, K)`` ``False``); positions
        outside image ``b``'s grid ``grids[b]`` get the dtype's lowest
        value."""
        hw = self.bounding_grid(grids)
        x = self.embed(feats)
        key_mask = F.pad(kept_valid.bool(), (1, 0), value=True)
        for layer in self.layers:
            x = layer(x, key_mask=key_mask)
        x = self.ln1(x)[:, 1:]
        rows = (torch.arange(hw[0], device=x.device)[:, None] *
                self.max_grid[1] +
                torch.arange(hw[1], device=x.device)).flatten()
        logits = F.linear(x, self.fc.weight[rows], self.fc.bias[rows])
        return logits.masked_fill(~inside_grids(grids, hw)[:, None],
                                  torch.finfo(logits.dtype).min)

    def loss(self,
             feats: Tensor,
             coords: Tensor,
             dropped: Tensor,
             kept_valid: Tensor,
             grids: Tensor,
             affinity_feats: Optional[Tensor] = None) -> Dict[str, Tensor]:
        """Eq. 8 on a NaFlex batch.

        Args:
            feats: encoder output ``(B, 1 + K, D)`` of the kept patches.
            coords: ``(B, K, 2)`` their true ``(y, x)`` (targets ``y`` of
                Eq. 4 in each image's own grid).
            dropped: ``(B, K)`` bool, position dropped.
            kept_valid: ``(B, K)`` bool, ``False`` for padding.
            grids: ``(B, 2)`` each image's grid ``(h_b, w_b)``.
            affinity_feats: as :meth:`DropPosHead.loss`.

        Returns:
            ``loss``, ``acc_pos`` and ``sigma``, as :meth:`DropPosHead.loss`.
        """
        logits = self.logits(feats, kept_valid, grids)
        hw = self.bounding_grid(grids)
        labels = self.labels(coords, kept_valid, hw)
        f = feats if affinity_feats is None else affinity_feats
        weights = attentive_weights(f[:, 0], f[:, 1:], self.tau, kept_valid)
        targets = smoothed_position_targets(
            labels, hw, self.sigma.item(), self.distance == 'squared')
        targets = targets * inside_grids(grids, hw)[:, None]
        targets = targets / targets.sum(-1, keepdim=True)  # Eq. 5 per image
        return dict(
            loss=droppos_loss(logits, targets, dropped, weights),
            acc_pos=position_accuracy(logits.detach(), labels, dropped),
            sigma=self.sigma.detach().clone())

    def predict(self, feats: Tensor, coords: Tensor, dropped: Tensor,
                kept_valid: Tensor, grids: Tensor) -> Dict[str, Tensor]:
        """Predicted positions ``pred`` ``(B, K, 2)`` long ``(y, x)`` of
        the kept patches, each in its image's grid, and ``acc``, their
        top-1 accuracy over the dropped ones (arguments as
        :meth:`loss`)."""
        logits = self.logits(feats, kept_valid, grids)
        hw = self.bounding_grid(grids)
        index = logits.argmax(-1)
        return dict(pred=torch.stack((index // hw[1], index % hw[1]), -1),
                    acc=position_accuracy(
                        logits, self.labels(coords, kept_valid, hw), dropped))

    @staticmethod
    def labels(coords: Tensor, kept_valid: Tensor,
               hw: Sequence[int]) -> Tensor:
        """``(B, K)`` classes of the kept patches' ``(y, x)`` ``coords`` in
        the row-major bounding grid ``hw`` (padding: 0)."""
        return (coords[..., 0] * hw[1] + coords[..., 1]).masked_fill(
            ~kept_valid, 0)


@MODELS.register_module()
class NaFlexDropPos(DropPos):
    """:class:`DropPos` on NaFlex batches (module docstring).

    Args:
        backbone: a :class:`~mmpos.models.backbones.RoPEVisionTransformer`
            config with the class token and ``out_type='raw'`` (global
            attention), any position scheme, with or without APE.
        head: :class:`NaFlexDropPosHead` config.
        mask_ratio, pos_mask_ratio, affinity_source: as :class:`DropPos`,
            per image.
        data_preprocessor: :class:`~mmpos.datasets.NaFlexDataPreprocessor`.

    ``extract_feat`` gives the class and patch tokens ``(B, 1 + N, C)`` of
    the padded batch (padding tokens included; ``patch_valid`` marks
    them).
    """

    def encode_full(self, inputs: Union[dict, Tensor]) -> Tensor:
        """All patches of a NaFlex batch (or of images ``(B, 3, H, W)``)
        with all positions: ``(B, 1 + N, C)`` (class token first, register
        tokens left out)."""
        return self.backbone.without_registers(self.backbone(inputs)[-1])

    def encode_masked(self, inputs: dict, mask_ratio: float,
                      pos_mask_ratio: float, noise: Optional[Tensor] = None,
                      pos_noise: Optional[Tensor] = None
                      ) -> Dict[str, Tensor]:
        """Eq. 1-3 per image and the encoder on a NaFlex batch.

        ``noise`` ``(B, N)`` / ``pos_noise`` ``(B, K)``: optional scores of
        the two draws (:func:`naflex_masking`; for tests). Returns a dict
        with ``feats`` ``(B, 1 + K, C)``, ``ids_keep``, ``coords`` ``(B, K,
        2)`` (the targets), ``kept_valid``, ``dropped`` ``(B, K)`` and
        ``grids`` ``(B, 2)``.
        """
        patches, coord = inputs['patches'], inputs['patch_coord']
        valid = inputs['patch_valid'].bool()
        grids = naflex_grids(coord, valid)
        kept = naflex_masking(valid, mask_ratio, noise=noise)
        dropped = naflex_masking(kept.kept_valid, pos_mask_ratio, min_kept=0,
                                 noise=pos_noise).removed
        ids, kept_valid = kept.ids_keep, kept.kept_valid
        coords = gather_tokens(coord, ids)
        bb = self.backbone
        x = bb.embed_patches(gather_tokens(patches, ids))
        pos = bb.naflex_pos_embed(coords, kept_valid, grids, x.dtype)
        x = x + torch.where(dropped[..., None],
                            self.pos_mask_token.to(x.dtype), pos)  # Eq. 3
        feats = bb.forward_naflex_tokens(x, coords, kept_valid, grids,
                                         unplaced=dropped)[-1]
        return dict(feats=bb.without_registers(feats), ids_keep=ids,
                    coords=coords, kept_valid=kept_valid, dropped=dropped,
                    grids=grids)

    def loss(self, inputs: dict, data_samples: List,
             noise: Optional[Tensor] = None,
             pos_noise: Optional[Tensor] = None,
             **kwargs) -> Dict[str, Tensor]:
        """Eq. 8 on a NaFlex batch (``noise``, ``pos_noise``: as
        :meth:`encode_masked`): ``loss``, ``acc_pos``, ``sigma``."""
        out = self.encode_masked(inputs, self.mask_ratio, self.pos_mask_ratio,
                                 noise, pos_noise)
        affinity = (self.affinity_feats(inputs, out['ids_keep'])
                    if self.head.attentive else None)
        return self.head.loss(out['feats'], out['coords'], out['dropped'],
                              out['kept_valid'], out['grids'], affinity)

    @torch.no_grad()
    def position_predictions(self, inputs: dict, mask_ratio: float,
                             pos_mask_ratio: float) -> Dict[str, Tensor]:
        """As :meth:`DropPos.position_predictions`, with positions as
        ``(y, x)``: ``pred``, ``target`` ``(B, K, 2)``, ``dropped`` ``(B,
        K)`` (real patches only) and ``acc``."""
        out = self.encode_masked(inputs, mask_ratio, pos_mask_ratio)
        pred = self.head.predict(out['feats'], out['coords'], out['dropped'],
                                 out['kept_valid'], out['grids'])
        return dict(pred=pred['pred'], target=out['coords'],
                    dropped=out['dropped'], acc=pred['acc'])
