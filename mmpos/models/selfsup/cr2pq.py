"""CR2PQ: continuous relative rotary positional query (§3.2, Eq. 3-10).

One training step for a batch of image pairs (view A, view B, with their crop
boxes from :mod:`mmpos.datasets.transforms.crop_boxes`):

1. Student: the RoPE ViT on view A, rotations from A's integer grid
   (Eq. 5/7), patch tokens ``h_A`` ``(B, K_A^H K_A^W, C)``.
2. Teacher on view B (no gradient) -> targets ``z'_B`` ``(B, N_B, D_tea)``
   on its own output grid ``K_B``:

   * ``target='ema'``: the student backbone averaged with mmpretrain's
     :class:`CosineEMA` (momentum ``base_momentum -> end_momentum``, cosine
     over the run, as BYOL / MoCo v3); ``K_B = K_A`` for equal view sizes.
   * ``target=dict(...)``: a frozen pretrained network built from the
     config (any mmpretrain backbone returning feature maps: ViT with
     ``out_type='featmap'``, ResNet, ...), loaded through its ``init_cfg``;
     ``K_B`` is its output grid (7 x 7 for ResNet-50 at 224, i.e. the
     ``224 / 7 = 32`` scaling of §4.2).
   * ``target='pixel'``: B's normalised pixels patchified with the
     student's patch size (``D_tea = 3 p^2``).

   The teacher always runs in eval mode (no drop-path, frozen BN).
3. Relative coordinates of B's ``K_B`` patches in A's grid (Eq. 4,
   :func:`relative_coords`) from the two boxes.
4. Neck (:class:`CR2PQNeck`): mask-token queries rotated at those
   coordinates cross-attend to ``h_A`` (Eq. 8), local projector -> ``z_B``,
   global projector.
5. Loss (:class:`CR2PQLoss`): ``L_patch + lambda L_global`` (Eq. 9-10).

``symmetric=True`` also predicts A from B (both directions in one batched
pass, twice the cost); the paper describes one direction, the default.
"""
from typing import Dict, List, Optional, Tuple, Union

import torch
import torch.nn.functional as F
from mmpretrain.models.selfsup.base import BaseSelfSupervisor
from mmpretrain.models.utils import CosineEMA
from mmpretrain.structures import DataSample
from torch import Tensor

from mmpos.registry import MODELS
from ..layers.relative_coords import ALIGNS, relative_coords


def patchify(img: Tensor, patch_size: int) -> Tensor:
    """``(B, C, H, W)`` -> ``(B, (H/p)(W/p), p * p * C)``, row-major patches,
    channels last within a patch (MAE order)."""
    B, C, H, W = img.shape
    if H % patch_size or W % patch_size:
        raise ValueError(f'image {H}x{W} is not divisible by the patch size '
                         f'{patch_size}')
    h, w = H // patch_size, W // patch_size
    x = img.reshape(B, C, h, patch_size, w, patch_size)
    return x.permute(0, 2, 4, 3, 5, 1).reshape(B, h * w, -1)


def featmap_to_tokens(feat: Tensor) -> Tensor:
    """``(B, C, h, w)`` -> ``(B, h * w, C)`` row-major."""
    if feat.dim() != 4:
        raise ValueError(f'CR2PQ needs feature maps (B, C, h, w) from the '
                         f'backbone and teacher (ViT: out_type="featmap"), '
                         f'got shape {tuple(feat.shape)}')
    return feat.flatten(2).transpose(1, 2)


@MODELS.register_module()
class CR2PQ(BaseSelfSupervisor):
    """CR2PQ pretraining.

    Args:
        backbone: student config, a :class:`RoPEVisionTransformer` with
            ``out_type='featmap'``.
        neck: :class:`CR2PQNeck` config (its ``out_channels`` = the target's
            channels).
        loss: :class:`CR2PQLoss` config.
        target: ``'ema'``, ``'pixel'`` or a frozen teacher network config.
        base_momentum, end_momentum: :class:`CosineEMA` momenta (weight of
            the student in the update; 0.004 = BYOL's tau 0.996) for
            ``target='ema'``.
        align: coordinate convention of Eq. 4, ``'center'`` or ``'corner'``
            (see :mod:`mmpos.models.layers.relative_coords`).
        boxes_key: data-sample field with the ``(V >= 2, 4)`` crop boxes;
            views 0 and 1 are A and B.
        symmetric: add the B -> A direction.
    """

    def __init__(self,
                 backbone: dict,
                 neck: dict,
                 loss: dict = dict(type='CR2PQLoss'),
                 target: Union[str, dict] = 'ema',
                 base_momentum: float = 0.004,
                 end_momentum: float = 0.,
                 align: str = 'center',
                 boxes_key: str = 'crop_boxes',
                 symmetric: bool = False,
                 data_preprocessor: Optional[dict] = None,
                 init_cfg: Optional[dict] = None):
        if align not in ALIGNS:
            raise ValueError(f'align must be one of {ALIGNS}, got {align!r}')
        if not isinstance(target, dict) and target not in ('ema', 'pixel'):
            raise ValueError(f"target must be 'ema', 'pixel' or a teacher "
                             f'config dict, got {target!r}')
        super().__init__(
            backbone=backbone,
            neck=neck,
            target_generator=target if isinstance(target, dict) else None,
            data_preprocessor=data_preprocessor,
            init_cfg=init_cfg)
        self.loss_module = MODELS.build(loss)
        self.target = 'teacher' if isinstance(target, dict) else target
        if target == 'ema':
            self.target_generator = CosineEMA(
                self.backbone, momentum=base_momentum,
                end_momentum=end_momentum)
        if self.target_generator is not None:
            self.target_generator.requires_grad_(False)
        self.align = align
        self.boxes_key = boxes_key
        self.symmetric = symmetric

    def train(self, mode: bool = True):
        super().train(mode)
        if self.target_generator is not None:
            self.target_generator.eval()
        return self

    def _boxes(self, data_samples: Optional[List[DataSample]],
               device) -> Tensor:
        """``(B, V, 4)`` crop boxes of the batch."""
        if not data_samples or any(
                self.boxes_key not in s for s in data_samples):
            raise KeyError(f'CR2PQ needs crop boxes in every data sample '
                           f'under {self.boxes_key!r} (MultiViewWithBoxes + '
                           f"PackInputs(algorithm_keys=['crop_boxes']))")
        boxes = torch.stack([
            torch.as_tensor(s.get(self.boxes_key), dtype=torch.float32)
            for s in data_samples
        ]).to(device)
        if boxes.dim() != 3 or boxes.shape[1] < 2 or boxes.shape[2] != 4:
            raise ValueError(f'{self.boxes_key} must be (V >= 2, 4) per '
                             f'sample, got {tuple(boxes.shape[1:])}')
        return boxes

    @torch.no_grad()
    def _targets(self, img: Tensor) -> Tuple[Tensor, Tuple[int, int]]:
        """Teacher tokens ``z'_B`` ``(B, N_B, D_tea)`` and their grid
        ``(K_B^H, K_B^W)``; updates the EMA teacher first."""
        if self.target == 'pixel':
            p = self.backbone.patch_size[0]
            return patchify(img, p), (img.shape[-2] // p, img.shape[-1] // p)
        if self.target == 'ema':
            self.target_generator.update_parameters(self.backbone)
        feat = self.target_generator(img)[-1]
        return featmap_to_tokens(feat), tuple(feat.shape[-2:])

    def loss(self, inputs: List[Tensor], data_samples: List[DataSample],
             **kwargs) -> Dict[str, Tensor]:
        """``inputs``: views ``[A, B, ...]`` each ``(B, 3, H, W)``.

        Returns ``loss_patch`` (Eq. 9), ``loss_global`` (Eq. 10, times
        lambda) and the logged collapse monitor ``target_std``: the
        per-channel std of the unit-normalised teacher tokens over the batch,
        times ``sqrt(D_tea)`` (about 1 for spread-out targets, 0 when they
        collapse to one vector).
        """
        if not isinstance(inputs, (list, tuple)) or len(inputs) < 2:
            raise ValueError('CR2PQ needs a list of >= 2 views (MultiView)')
        boxes = self._boxes(data_samples, inputs[0].device)
        img_a, img_b = inputs[0], inputs[1]
        box_a, box_b = boxes[:, 0], boxes[:, 1]
        if self.symmetric:
            img_a, img_b = torch.cat([img_a, img_b]), torch.cat([img_b, img_a])
            box_a, box_b = torch.cat([box_a, box_b]), torch.cat([box_b, box_a])
        target, hw_b = self._targets(img_b)
        feat_a = self.backbone(img_a)[-1]
        hw_a = tuple(feat_a.shape[-2:])
        coords_b = relative_coords(box_a, box_b, hw_a, hw_b, self.align)
        z_b, global_b = self.neck(featmap_to_tokens(feat_a), hw_a, coords_b)
        losses = self.loss_module(z_b, global_b, target)
        unit = F.normalize(target.flatten(0, 1).float(), dim=-1)
        losses['target_std'] = unit.std(0).mean() * unit.shape[-1]**.5
        return losses


__all__ = ['CR2PQ', 'featmap_to_tokens', 'patchify']
