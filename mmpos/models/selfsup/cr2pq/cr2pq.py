"""CR2PQ: continuous relative rotary positional query (§3.2, Eq. 3-10).

One training step for a batch of image pairs (view A, view B, with their crop
boxes from :mod:`mmpos.datasets.transforms.crop_boxes`):

1. Student: the RoPE ViT on view A, rotations from A's integer grid
   (Eq. 5/7), patch tokens ``h_A`` ``(B, K_A^H K_A^W, C)``.
2. Teacher on view B (no gradient) -> targets ``z'_B`` ``(B, N_B, D_tea)``
   on its own output grid ``K_B``:

   * ``target='ema'``: the student backbone averaged with mmpretrain's
     :class:`CosineEMA` (momentum ``base_momentum -> end_momentum``, cosine
     over the run, as BYOL / MoCo v3), updated between steps by
     :class:`~mmpos.engine.hooks.EMATeacherHook` (:meth:`CR2PQ.ema_teachers`);
     ``K_B = K_A`` for equal view sizes.
   * ``target=dict(...)``: a frozen pretrained network built from the
     config (any mmpretrain backbone returning feature maps: ViT with
     ``out_type='featmap'``, ResNet, ...), its weights loaded from
     ``teacher_checkpoint`` (or through its own ``init_cfg``); ``K_B`` is
     its output grid (7 x 7 for ResNet-50 at 224, i.e. the ``224 / 7 = 32``
     scaling of §4.2).
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

``view_consistent_rope=True`` (not in the paper; the deterministic
counterpart of DINOv3's random coordinate jitter, as ICPF's option of the
same name) rotates every view at its crop-box source coordinates
(:func:`~mmpos.models.layers.positions.box_coords`) instead of its own grid: the
student's A patches at A's source positions (in the backbone's coordinate
frame), the EMA teacher's B patches at B's, and in the neck the queries at
B's source positions among A's keys at A's, both in the patch units of A's
grid (the source image spread over ``K_A^H x K_A^W`` patches). A source
pixel seen in both views then has one coordinate in every network; the
neck's query-key offsets are source-image distances (times ``K_A``) rather
than Eq. 4's distances in A's patches, which grow as A zooms in.

Table 6's *discrete* rows (``mask_ratio``, e.g. 0.75): "the discrete
position can not represent the relative positions of two views", so the
paper trains them MAE-style on one view with teacher targets instead of
pixels. The student encodes a random ``1 - mask_ratio`` share of view A's
patches at their integer grid positions, the neck queries the masked
positions (integer coordinates) from the visible tokens, and the targets are
the teacher's tokens of the whole view A at the masked positions. With the
neck's ``pos_type='rope'`` this is "discrete RoPE", with ``'sincos'`` (and a
sin-cos APE student) "discrete sin-cos"; view B and the boxes are unused.
"""
import os.path as osp
from typing import Dict, List, Optional, Tuple, Union

import torch
import torch.nn as nn
import torch.nn.functional as F
from mmpretrain.models.selfsup.base import BaseSelfSupervisor
from mmpretrain.models.utils import CosineEMA
from mmpretrain.structures import DataSample
from torch import Tensor

from mmpos.datasets.transforms.crop_boxes import stack_crop_boxes
from mmpos.models.utils.ema import check_teachers_set
from mmpos.models.utils.pretrained import load_pretrained
from mmpos.registry import MODELS
from mmpos.errors import BadInputError
from ...layers.masking import gather_tokens, random_masking
from ...layers.positions import box_coords, grid_coords
from .relative_coords import ALIGNS, relative_coords


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
            (see :mod:`mmpos.models.selfsup.cr2pq.relative_coords`).
        boxes_key: data-sample field with the ``(V >= 2, 4)`` crop boxes;
            views 0 and 1 are A and B.
        symmetric: add the B -> A direction.
        mask_ratio: ``None`` (CR2PQ) or the masked share of A's patches of
            the single-view discrete variant (module docstring); needs a
            :class:`RoPEVisionTransformer` student with ``out_type='raw'``
            and targets on the student's grid.
        teacher_checkpoint: weights of a frozen teacher network (``target``
            a config dict), loaded in ``init_weights`` (``backbone.``
            prefix stripped when present; every teacher key must be
            matched). A path that does not exist is a
            :class:`BadInputError` there.
        view_consistent_rope: rotate the views at their crop-box source
            coordinates instead of their own grids (module docstring;
            ``align`` then does not apply: patch centres). Needs a RoPE
            student and two views (no ``mask_ratio``).
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
                 mask_ratio: Optional[float] = None,
                 teacher_checkpoint: Optional[str] = None,
                 view_consistent_rope: bool = False,
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
        self.mask_ratio = mask_ratio
        if mask_ratio is not None:
            self._check_masked_student()
        self.view_consistent_rope = view_consistent_rope
        if view_consistent_rope and (
                getattr(self.backbone, 'rope', None) is None
                or not hasattr(self.backbone, 'forward_tokens')
                or mask_ratio is not None):
            raise ValueError(
                'view_consistent_rope needs a RoPEVisionTransformer student '
                'with RoPE and two views with crop boxes (no mask_ratio), got '
                f"{type(self.backbone).__name__}(rope="
                f"{getattr(self.backbone, 'rope', None)!r}), "
                f'mask_ratio={mask_ratio}')
        self.teacher_checkpoint = teacher_checkpoint
        if teacher_checkpoint is not None and self.target != 'teacher':
            raise BadInputError(
                f'CR2PQ: model.teacher_checkpoint is set but target='
                f'{target!r} is not a teacher network config')

    def init_weights(self):
        """Random init, then the frozen teacher's weights from
        ``teacher_checkpoint`` (checked here, so that a config builds and
        is inspected without the file)."""
        super().init_weights()
        path = self.teacher_checkpoint
        if path is None:
            return
        if not osp.isfile(path):
            raise BadInputError(
                f'CR2PQ: model.teacher_checkpoint={path!r} does not exist '
                f'(set it with --cfg-options model.teacher_checkpoint=PATH)')
        info = load_pretrained(self.target_generator, path)
        if info['missing']:
            raise BadInputError(
                f'CR2PQ: model.teacher_checkpoint={self.teacher_checkpoint!r}'
                f' lacks {len(info["missing"])} teacher weights, e.g. '
                f'{info["missing"][0]}')
        self.target_generator.requires_grad_(False)

    def _check_masked_student(self):
        bb = self.backbone
        if not 0. < self.mask_ratio < 1.:
            raise ValueError(f'mask_ratio must lie in (0, 1), got '
                             f'{self.mask_ratio}')
        if self.symmetric:
            raise ValueError('symmetric=True needs two views; the masked '
                             'variant (mask_ratio) uses one')
        if not hasattr(bb, 'forward_tokens') or bb.out_type != 'raw':
            raise ValueError(
                f'CR2PQ(mask_ratio={self.mask_ratio}) encodes a subset of '
                f'the patches and needs a RoPEVisionTransformer backbone '
                f"with out_type='raw', got {type(bb).__name__}"
                f"(out_type={getattr(bb, 'out_type', None)!r})")

    def train(self, mode: bool = True):
        super().train(mode)
        if self.target_generator is not None:
            self.target_generator.eval()
        return self

    def ema_teachers(self) -> List[Tuple[nn.Module, nn.Module]]:
        """``[(EMA teacher, student backbone)]`` with ``target='ema'``
        (updated by :class:`~mmpos.engine.hooks.EMATeacherHook`), else
        ``[]``."""
        if self.target != 'ema':
            return []
        return [(self.target_generator, self.backbone)]

    def _encode(self, net, img: Tensor,
                boxes: Optional[Tensor] = None) -> Tensor:
        """Last output of backbone ``net`` on ``img`` ``(B, 3, H, W)``;
        with ``view_consistent_rope`` and the views' ``boxes`` ``(B, 4)``,
        its patches rotated at their source coordinates
        (:func:`box_coords` on its own grid)."""
        if boxes is None or not self.view_consistent_rope:
            return net(img)[-1]
        tokens, hw = net.embed(img)
        return net.forward_tokens(tokens, coords=box_coords(boxes, hw),
                                  hw=hw)[-1]

    @torch.no_grad()
    def _targets(self, img: Tensor, boxes: Optional[Tensor] = None
                 ) -> Tuple[Tensor, Tuple[int, int]]:
        """Teacher tokens ``z'_B`` ``(B, N_B, D_tea)`` and their grid
        ``(K_B^H, K_B^W)`` (the EMA teacher rotates view B at its source
        coordinates ``boxes`` with ``view_consistent_rope``). A ViT teacher
        with ``out_type='raw'`` (the EMA copy of a masked-variant student)
        loses its class token; its grid is the image over its patch size."""
        if self.target == 'pixel':
            p = self.backbone.patch_size[0]
            return patchify(img, p), (img.shape[-2] // p, img.shape[-1] // p)
        if self.training:
            check_teachers_set(self)
        if self.target == 'ema':
            feat = self._encode(self.target_generator.module, img, boxes)
        else:
            feat = self.target_generator(img)[-1]
        if feat.dim() == 3:
            net = getattr(self.target_generator, 'module',
                          self.target_generator)
            ph, pw = net.patch_size
            return (feat[:, net.num_extra_tokens:],
                    (img.shape[-2] // ph, img.shape[-1] // pw))
        return featmap_to_tokens(feat), tuple(feat.shape[-2:])

    def loss(self, inputs: List[Tensor], data_samples: List[DataSample],
             **kwargs) -> Dict[str, Tensor]:
        """``inputs``: views ``[A, B, ...]`` each ``(B, 3, H, W)`` (with
        ``mask_ratio``: only A is used, no boxes needed).

        Returns ``loss_patch`` (Eq. 9), ``loss_global`` (Eq. 10, times
        lambda) and the logged collapse monitor ``target_std``: the
        per-channel std of the unit-normalised teacher tokens over the batch,
        times ``sqrt(D_tea)`` (about 1 for spread-out targets, 0 when they
        collapse to one vector).
        """
        if self.mask_ratio is not None:
            return self._masked_loss(inputs[0] if isinstance(
                inputs, (list, tuple)) else inputs)
        if not isinstance(inputs, (list, tuple)) or len(inputs) < 2:
            raise ValueError('CR2PQ needs a list of >= 2 views (MultiView)')
        boxes = stack_crop_boxes(data_samples, self.boxes_key, 'CR2PQ',
                                 inputs[0].device, min_views=2)
        img_a, img_b = inputs[0], inputs[1]
        box_a, box_b = boxes[:, 0], boxes[:, 1]
        if self.symmetric:
            img_a, img_b = torch.cat([img_a, img_b]), torch.cat([img_b, img_a])
            box_a, box_b = torch.cat([box_a, box_b]), torch.cat([box_b, box_a])
        target, hw_b = self._targets(img_b, box_b)
        feat_a = self._encode(self.backbone, img_a, box_a)
        hw_a = tuple(feat_a.shape[-2:])
        if self.view_consistent_rope:  # both in A's patch units
            coords_a = box_coords(box_a, hw_a)
            coords_b = box_coords(box_b, hw_b, unit_hw=hw_a)
        else:
            coords_a = None
            coords_b = relative_coords(box_a, box_b, hw_a, hw_b, self.align)
        z_b, global_b = self.neck(featmap_to_tokens(feat_a), hw_a, coords_b,
                                  coords_a=coords_a)
        return self._losses(z_b, global_b, target)

    def _losses(self, pred: Tensor, pred_global: Tensor,
                target: Tensor) -> Dict[str, Tensor]:
        losses = self.loss_module(pred, pred_global, target)
        unit = F.normalize(target.flatten(0, 1).float(), dim=-1)
        losses['target_std'] = unit.std(0).mean() * unit.shape[-1]**.5
        return losses

    def _masked_loss(self, img: Tensor) -> Dict[str, Tensor]:
        """The discrete variant on view A ``img`` ``(B, 3, H, W)``: the
        visible ``K`` patches at integer positions ``(B, K, 2)`` predict the
        teacher's tokens at the ``N - K`` masked ones."""
        bb = self.backbone
        tokens, hw = bb.embed(img)
        batch, num = tokens.shape[:2]
        masking = random_masking(batch, num, self.mask_ratio, img.device)
        ids_masked = masking.mask.nonzero()[:, 1].view(batch, -1)
        grid = grid_coords(*hw, device=img.device)[None]
        coords_vis = gather_tokens(grid, masking.ids_keep)
        target, hw_t = self._targets(img)
        if tuple(hw_t) != tuple(hw):
            raise ValueError(f'mask_ratio needs targets on the student grid '
                             f'{tuple(hw)}, the teacher gives {tuple(hw_t)}')
        feat = bb.forward_tokens(
            gather_tokens(tokens, masking.ids_keep), coords=coords_vis)[-1]
        pred, pred_global = self.neck(
            feat[:, bb.num_extra_tokens:], hw,
            gather_tokens(grid, ids_masked), coords_a=coords_vis)
        return self._losses(pred, pred_global,
                            gather_tokens(target, ids_masked))


__all__ = ['CR2PQ', 'featmap_to_tokens', 'patchify']
