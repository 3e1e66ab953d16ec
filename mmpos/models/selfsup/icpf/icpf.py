"""ICPF: DINOv2 with a cropped positional vector field and masked position
prediction (ICPF paper §3, Eq. 6).

On top of :class:`DINOv2`:

* Position encoding tied to cropping (§3.2.1): every view's patch position
  embeddings are the learnable field ``P`` (:class:`PositionalField`, 50 x 50
  by default) cropped with the view's crop box and sampled bilinearly at its
  patch centres, for global and local views, student and teacher (the
  teacher averages the field too). The class token keeps the backbone's
  ``pos_embed[:, :1]``.
* Position / scale augmentation (§3.2.2): per image, the rectangle ``A``
  enclosing its views' boxes (``scale_box='all'``: all views, our default,
  so that every view stays inside the virtual image; ``'globals'``: the
  global views only, the two views ``p_u, p_v`` of the paper's text) is
  rescaled to area ``s`` (Beta(2, 5) on ``[0.2, 1]`` by default) and moved
  uniformly inside the virtual image; the same map moves every view's box
  (:func:`scale_shift_boxes`). Training only.
* Masked position prediction (Eq. 4): on the global views of the images
  picked for it, the position embeddings of cross-wise masked patches are
  replaced by ``pos_mask_token``; the student's patch-head outputs there are
  distilled from the unmasked teacher's. Content masking (Eq. 5) and position
  masking take disjoint shares of the global-view images (``mask_split``,
  50/50 by default, footnote 3).
* Eq. 4 uses the patch head (shared with Eq. 5; the paper's "separate heads"
  separates image and patch heads) and one teacher centering over the union
  of content- and position-masked tokens.

Crop boxes come from the data samples (``boxes_key``, ``(V, 4)`` per image,
``(x1, y1, x2, y2)`` in ``[0, 1]`` of the source image, ``x1 > x2`` for a
flipped view), written by the multi-view crop transforms of
``mmpos/datasets/transforms/crop_boxes.py``.

After pretraining the backbone is a standard ViT; its APE for a grid is the
field resized to it (:func:`field_to_pos_embed`, used by
:meth:`ICPF.backbone_state_dict` and by the checkpoint converter
``tools/model_converters/mmpos2backbone.py``; the backbone's own
``pos_embed`` only contributes its class-token slot during pretraining).

Ablation switches (Tables 3-5): ``pos_field=None`` (no field sampling: APE
as DINOv2), ``mask_split=(0.5, 0.)`` (no L_pos), ``(1., 0.)`` / ``(0., 1.)``
(100/0, 0/100), ``scale_aug=None`` or ``distribution='const' | 'uniform' |
'beta'``, ``pos_field.size=19`` vs 50, ``pos_masking='box' | 'cross'``.
"""
from collections import OrderedDict
from typing import Dict, List, Optional, Sequence, Tuple

import torch
import torch.nn as nn
from mmengine.model.weight_init import trunc_normal_
from mmpretrain.structures import DataSample
from torch import Tensor

from mmpos.datasets.transforms.crop_boxes import stack_crop_boxes
from mmpos.registry import MODELS
from ...layers.positions import box_coords, grid_coords
from ..dinov2 import DINOv2
from .positional_field import sample_scales, scale_shift_boxes


@MODELS.register_module()
class ICPF(DINOv2):
    """DINOv2 + positional field + masked position prediction (Eq. 6).

    Args:
        pos_field: :class:`PositionalField` config without ``embed_dims``;
            ``None`` keeps the backbone's APE (Table 3, no sampling).
        scale_aug: ``dict(distribution, scale_range, beta)`` for
            :func:`sample_scales`; ``None`` disables §3.2.2.
        scale_box: views whose boxes define ``A`` of §3.2.2: ``'all'`` or
            ``'globals'`` (module docstring).
        mask_split: shares ``(content, position)`` of the global-view images
            with content / position masking; disjoint, sum <= 1.
        pos_masking: ``'cross'`` (Fig. 4) or ``'box'``.
        pos_loss: Eq. 4 loss config.
        boxes_key: data-sample field holding the crop boxes.
        view_consistent_rope: with a RoPE backbone, rotate every view's
            patches at their crop-box source coordinates
            (:func:`~mmpos.models.layers.positions.box_coords`, the boxes the field is
            cropped with) instead of each view's own grid; ``False``: each
            view's grid. Either way, position-masked patches get no
            rotation (``NaN`` coordinates), as they get no field.
        **kwargs: :class:`DINOv2` arguments except ``mask_sample_prob``.
    """

    def __init__(self,
                 *args,
                 pos_field: Optional[dict] = dict(
                     type='PositionalField', size=50),
                 scale_aug: Optional[dict] = dict(
                     distribution='beta', scale_range=(0.2, 1.0),
                     beta=(2., 5.)),
                 mask_split: Tuple[float, float] = (0.5, 0.5),
                 pos_masking: str = 'cross',
                 pos_loss: dict = dict(type='iBOTPatchLoss'),
                 boxes_key: str = 'crop_boxes',
                 scale_box: str = 'all',
                 view_consistent_rope: bool = False,
                 **kwargs):
        if 'mask_sample_prob' in kwargs:
            raise ValueError('ICPF sets the content share with mask_split, '
                             'not mask_sample_prob')
        content, position = mask_split
        if min(mask_split) < 0 or content + position > 1 + 1e-6:
            raise ValueError(f'mask_split must be two shares >= 0 with sum '
                             f'<= 1, got {mask_split}')
        super().__init__(*args, mask_sample_prob=content, **kwargs)
        self.pos_share = position
        self.maskings['pos'] = self._masking(pos_masking)
        self.pos_loss = MODELS.build(pos_loss)
        self.scale_aug = dict(scale_aug) if scale_aug else None
        if self.scale_aug:  # fail at build time on a bad distribution/range
            sample_scales(1, **self.scale_aug)
        self.boxes_key = boxes_key
        if scale_box not in ('all', 'globals'):
            raise ValueError(f"scale_box must be 'all' or 'globals', got "
                             f'{scale_box!r}')
        self.scale_box = scale_box
        self.view_consistent_rope = view_consistent_rope
        if view_consistent_rope and (
                getattr(self.backbone, 'rope', None) is None
                or not pos_field):
            raise ValueError('view_consistent_rope needs a RoPE backbone and '
                             'the positional field (crop boxes)')
        self.pos_mask_token = nn.Parameter(
            torch.zeros(1, 1, self.backbone.embed_dims))
        self.pos_field = MODELS.build(
            dict(pos_field,
                 embed_dims=self.backbone.embed_dims)) if pos_field else None
        if self.pos_field is not None:
            self._build_teacher()  # the teacher averages the field too

    def init_weights(self):
        super().init_weights()
        trunc_normal_(self.pos_mask_token, std=.02)

    def _distilled_modules(self) -> nn.ModuleDict:
        modules = super()._distilled_modules()
        if getattr(self, 'pos_field', None) is not None:
            modules['pos_field'] = self.pos_field
        return modules

    def _mask_shares(self) -> Dict[str, float]:
        return dict(content=self.mask_sample_prob, pos=self.pos_share)

    def _masked_losses(self) -> Dict[str, nn.Module]:
        return dict(super()._masked_losses(), pos=self.pos_loss)

    def _view_geometry(self, data_samples: Optional[List[DataSample]],
                       batch_size: int, device) -> Optional[Tensor]:
        """Crop boxes ``(B, V, 4)``, scale/shift-augmented when training."""
        if self.pos_field is None:
            return None
        boxes = stack_crop_boxes(data_samples, self.boxes_key, 'ICPF', device)
        if self.training and self.scale_aug:
            boxes = scale_shift_boxes(
                boxes, sample_scales(batch_size, device=device,
                                     **self.scale_aug),
                self.num_global_crops if self.scale_box == 'globals'
                else None)
        return boxes

    def _positions(self, net: nn.Module, hw: Sequence[int], views: slice,
                   geometry: Optional[Tensor]) -> Tensor:
        """Field crops ``(n_views * B, N, C)`` (view-major, as the images
        are concatenated), or the APE without a field."""
        field = getattr(net, 'pos_field', None)
        if field is None:
            return super()._positions(net, hw, views, geometry)
        boxes = geometry[:, views]
        if boxes.shape[1] != views.stop - views.start:
            raise ValueError(f'{self.boxes_key} holds {geometry.shape[1]} '
                             f'boxes per image, fewer than the views')
        return field(boxes.transpose(0, 1).reshape(-1, 4), hw)

    def _rope_coords(self, net: nn.Module, hw: Sequence[int], views: slice,
                     geometry: Optional[Tensor],
                     masks: Optional[Dict[str, Tensor]] = None
                     ) -> Optional[Tensor]:
        """``(n_views * B, N, 2)`` RoPE coordinates (view-major): crop-box
        source positions with ``view_consistent_rope``, else the grid;
        ``NaN`` (no rotation) where the position mask is set. ``None`` (each
        view's grid) when neither applies or the backbone has no RoPE."""
        pos_mask = (masks or {}).get('pos')
        if getattr(net.backbone, 'rope', None) is None or (
                pos_mask is None and not self.view_consistent_rope):
            return None
        if self.view_consistent_rope:
            boxes = geometry[:, views].transpose(0, 1).reshape(-1, 4)
            coords = box_coords(boxes, hw)
        else:
            n = pos_mask.shape[0]
            coords = grid_coords(*hw, device=pos_mask.device).expand(
                n, -1, -1)
        if pos_mask is not None:
            coords = coords.masked_fill(pos_mask[..., None], float('nan'))
        return coords

    def _student_positions(self, hw: Sequence[int], views: slice, geometry,
                           masks: Dict[str, Tensor]) -> Tensor:
        """Eq. 4 input: ``pos_mask_token`` where the position mask is set."""
        pos = self._positions(self, hw, views, geometry)
        pos_mask = masks.get('pos')
        if pos_mask is None:
            return pos
        return torch.where(pos_mask[..., None],
                           self.pos_mask_token.to(pos.dtype), pos)

    def extract_feat(self, inputs: Tensor, **kwargs) -> Tensor:
        """Class + patch tokens ``(B, 1 + N, C)`` of whole images, i.e. with
        the field exported as APE (as after conversion)."""
        if self.pos_field is None:
            return super().extract_feat(inputs)
        hw = self._grid(inputs)
        return self._encode(self, inputs, self.pos_field.to_pos_embed(hw))

    def backbone_state_dict(self, use_teacher: bool = False,
                            hw: Optional[Sequence[int]] = None
                            ) -> 'OrderedDict[str, Tensor]':
        """A plain ViT state dict for downstream use: the student's (or the
        teacher's) backbone with ``pos_embed`` replaced by its field exported
        for the patch grid ``hw`` (default: the backbone's own); the
        class-token entry is kept."""
        net = self.teacher.module if use_teacher else self
        state = OrderedDict((k, v.detach().clone())
                            for k, v in net.backbone.state_dict().items())
        field = getattr(net, 'pos_field', None)
        if field is not None:
            extra = net.backbone.num_extra_tokens
            state['pos_embed'] = field.to_pos_embed(
                hw or net.backbone.patch_resolution,
                state['pos_embed'][:, :extra]).detach()
        return state
