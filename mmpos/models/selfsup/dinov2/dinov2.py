"""DINOv2 / iBOT self-distillation (the base of ICPF), ICPF Eqs. 1-3.

Multi-crop: ``inputs`` is a list of views, the first ``num_global_crops``
global (``(B, 3, H, W)`` each, same size), the rest local (same size among
themselves). The student sees every view, the teacher (an EMA of student
backbone + heads, :class:`mmpretrain.models.utils.CosineEMA`, momentum
``0.992 -> 1`` cosine over the run) only the globals. The teacher is
updated between steps, after the optimizer step, by
:class:`~mmpos.engine.hooks.EMATeacherHook` (:meth:`DINOv2.ema_teachers`;
under FSDP shard by shard, see :mod:`mmpos.models.utils.ema`).

* Image loss (Eq. 1): :class:`DINOLoss` between the image-head outputs of
  every student view and the other global teacher views.
* Masked patch loss (Eq. 2): ``mask_sample_prob`` of the global-view images
  (an exact share, chosen by a random permutation) get box-wise masks with a
  ratio drawn per image in ``mask_ratio_range``; masked patch embeddings are
  replaced by ``mask_token`` before the position embedding is added; the
  student's patch-head outputs there are distilled from the unmasked
  teacher's (:class:`iBOTPatchLoss`).
* KoLeo on the student's class tokens (backbone output), per global view,
  summed over the global views as DINOv2 does (``koleo_reduction='sum'``;
  ``'mean'`` averages them, half the weight with two globals).
* Masked-token losses are divided by all ``num_global_crops * B`` global
  images, masked or not, as DINOv2 (``iBOTPatchLoss(normalize=
  'all_images')``; ``'masked_images'`` averages over the masked images).
* Teacher targets: :class:`TeacherCentering` (Sinkhorn-Knopp by default)
  with ``teacher_temp`` (set by ``TeacherTempHook`` when warmed up).

The backbone must expose ``patch_embed`` and ``forward_tokens(x, hw=...)``
returning ``(B, 1 + N, C)`` (``out_type='raw'``), e.g.
``RoPEVisionTransformer(rope=None, use_ape=True, out_type='raw')``,
whose parameter names are mmpretrain's ``VisionTransformer``'s: the student
backbone (keys ``backbone.*``) transfers to downstream ViT configs. The
algorithm drives the backbone's stem itself so that subclasses can supply
per-token position embeddings (:meth:`DINOv2._positions`).
"""
from typing import Dict, List, Optional, Sequence, Tuple

import torch
import torch.nn as nn
import torch.nn.functional as F
from mmengine.model.weight_init import trunc_normal_
from mmpretrain.models.selfsup import BaseSelfSupervisor
from mmpretrain.models.utils import CosineEMA, resize_pos_embed
from mmpretrain.structures import DataSample
from torch import Tensor

from mmpos.registry import MODELS
from ...layers.block_masking import MASKINGS, sample_num_masked
from ...utils.ema import check_teachers_set


@MODELS.register_module()
class DINOv2(BaseSelfSupervisor):
    """DINOv2 (iBOT + KoLeo + Sinkhorn-Knopp), ICPF Eq. 3.

    Args:
        backbone: ViT config (see the module docstring).
        head: image (class-token) :class:`DINOProjectionHead` config.
        patch_head: patch :class:`DINOProjectionHead` config; ``None``
            shares ``head``
            (Table 6 "Separate heads": True, i.e. give one).
        image_loss, patch_loss, koleo_loss: loss configs; ``koleo_loss=None``
            drops KoLeo.
        centering: :class:`TeacherCentering` config without
            ``out_channels`` (taken from each head); one instance per head.
        teacher_temp: teacher temperature (0.04, Table 6).
        teacher_momentum: initial EMA momentum (0.992), cosine to
            ``end_teacher_momentum`` (1.0) over ``max_iters``.
        num_global_crops: leading views that are global.
        mask_sample_prob: share of global-view images with content masks.
        mask_ratio_range: per-image mask ratio range.
        content_masking: ``'box'`` (default) or ``'cross'``.
        koleo_reduction: ``'sum'`` (DINOv2) or ``'mean'`` of the per-global-
            view KoLeo losses.
    """

    def __init__(self,
                 backbone: dict,
                 head: dict,
                 patch_head: Optional[dict] = None,
                 image_loss: dict = dict(type='DINOLoss'),
                 patch_loss: dict = dict(type='iBOTPatchLoss'),
                 koleo_loss: Optional[dict] = dict(type='KoLeoLoss'),
                 centering: dict = dict(type='TeacherCentering'),
                 teacher_temp: float = 0.04,
                 teacher_momentum: float = 0.992,
                 end_teacher_momentum: float = 1.0,
                 num_global_crops: int = 2,
                 mask_sample_prob: float = 0.5,
                 mask_ratio_range: Tuple[float, float] = (0.1, 0.5),
                 content_masking: str = 'box',
                 koleo_reduction: str = 'sum',
                 data_preprocessor: Optional[dict] = None,
                 init_cfg: Optional[dict] = None):
        super().__init__(
            backbone=backbone,
            head=head,
            data_preprocessor=data_preprocessor,
            init_cfg=init_cfg)
        for attr in ('patch_embed', 'forward_tokens'):
            if not hasattr(self.backbone, attr):
                raise TypeError(f'{type(self).__name__} needs a backbone with '
                                f'`{attr}` (e.g. RoPEVisionTransformer), got '
                                f'{type(self.backbone).__name__}')
        if getattr(self.backbone, 'out_type', 'raw') != 'raw':
            raise ValueError(f'backbone.out_type must be "raw" (class + patch '
                             f'tokens), got {self.backbone.out_type!r}')
        if not 0 <= mask_sample_prob <= 1:
            raise ValueError(f'mask_sample_prob must lie in [0, 1], got '
                             f'{mask_sample_prob}')
        if koleo_reduction not in ('sum', 'mean'):
            raise ValueError(f"koleo_reduction must be 'sum' or 'mean', got "
                             f'{koleo_reduction!r}')
        self.koleo_reduction = koleo_reduction
        if num_global_crops < 2:
            raise ValueError(f'num_global_crops must be >= 2, got '
                             f'{num_global_crops}')
        self.patch_head = MODELS.build(patch_head) if patch_head else None
        self.image_loss = MODELS.build(image_loss)
        self.patch_loss = MODELS.build(patch_loss)
        self.koleo_loss = MODELS.build(koleo_loss) if koleo_loss else None
        self.image_centering = MODELS.build(
            dict(centering, out_channels=self.head.prototypes.shape[0]))
        self.patch_centering = MODELS.build(
            dict(centering,
                 out_channels=self._patch_head(self).prototypes.shape[0]))
        self.teacher_temp = teacher_temp
        self.num_global_crops = num_global_crops
        self.mask_sample_prob = mask_sample_prob
        self.mask_ratio_range = tuple(mask_ratio_range)
        self.maskings = dict(content=self._masking(content_masking))
        self.mask_token = nn.Parameter(
            torch.zeros(1, 1, self.backbone.embed_dims))
        self.teacher_momentum = (teacher_momentum, end_teacher_momentum)
        self._build_teacher()

    def _build_teacher(self):
        """(Re)build the EMA teacher from :meth:`_distilled_modules`."""
        start, end = self.teacher_momentum
        self.teacher = CosineEMA(
            self._distilled_modules(), momentum=1 - start,
            end_momentum=1 - end)

    @staticmethod
    def _masking(name: str):
        if name not in MASKINGS:
            raise ValueError(f'masking {name!r} is not one of '
                             f'{sorted(MASKINGS)}')
        return MASKINGS[name]

    def init_weights(self):
        super().init_weights()
        trunc_normal_(self.mask_token, std=.02)

    def train(self, mode: bool = True):
        """The teacher always runs in eval mode (no drop path)."""
        super().train(mode)
        self.teacher.train(False)
        return self

    # -- structure -------------------------------------------------------
    def ema_teachers(self) -> List[Tuple[nn.Module, nn.Module]]:
        """``[(teacher, student modules)]`` that
        :class:`~mmpos.engine.hooks.EMATeacherHook` updates with
        :func:`~mmpos.models.utils.update_ema`."""
        return [(self.teacher, self._distilled_modules())]

    def _distilled_modules(self) -> nn.ModuleDict:
        """Student modules that the teacher averages (same names)."""
        modules = dict(backbone=self.backbone, head=self.head)
        if self.patch_head is not None:
            modules['patch_head'] = self.patch_head
        return nn.ModuleDict(modules)

    @staticmethod
    def _patch_head(net: nn.Module) -> nn.Module:
        return getattr(net, 'patch_head', None) or net.head

    # -- token pipeline --------------------------------------------------
    def _positions(self, net: nn.Module, hw: Sequence[int], views: slice,
                   geometry) -> Tensor:
        """Patch position embeddings ``(1 or n, N, C)`` of ``net`` (student
        or teacher) for the images of ``views``: the backbone's APE resized
        to ``hw``. ``geometry``: see :meth:`_view_geometry`."""
        backbone = net.backbone
        if backbone.pos_embed is None:
            raise ValueError('DINOv2 needs a backbone with use_ape=True')
        pos = resize_pos_embed(backbone.pos_embed, backbone.patch_resolution,
                               hw, backbone.interpolate_mode,
                               backbone.num_extra_tokens)
        return pos[:, backbone.num_extra_tokens:]

    def _student_positions(self, hw: Sequence[int], views: slice, geometry,
                           masks: Dict[str, Tensor]) -> Tensor:
        """Student position embeddings; subclasses mask them here."""
        return self._positions(self, hw, views, geometry)

    def _view_geometry(self, data_samples: Optional[List[DataSample]],
                       batch_size: int, device):
        """Per-view geometry that positions depend on (none for DINOv2)."""
        return None

    def _rope_coords(self, net: nn.Module, hw: Sequence[int], views: slice,
                     geometry, masks: Optional[Dict[str, Tensor]] = None
                     ) -> Optional[Tensor]:
        """RoPE coordinates of the patches of ``views`` (``None``: each
        view's own grid; subclasses place or hide positions here)."""
        return None

    @staticmethod
    def _encode(net: nn.Module,
                img: Tensor,
                pos: Tensor,
                content_mask: Optional[Tensor] = None,
                mask_token: Optional[Tensor] = None,
                coords: Optional[Tensor] = None) -> Tensor:
        """Embed ``img`` ``(n, 3, H, W)``, replace masked patch embeddings by
        ``mask_token``, add ``pos`` and run the blocks (RoPE at ``coords``
        ``(n, N, 2)``, or the grid).

        Returns:
            ``(n, 1 + N, C)`` class + patch tokens after the final norm
            (register tokens left out).
        """
        x, hw = net.backbone.patch_embed(img)
        if content_mask is not None:
            x = torch.where(content_mask[..., None], mask_token.to(x.dtype), x)
        return net.backbone.without_registers(
            net.backbone.forward_tokens(x + pos, coords=coords, hw=hw)[0])

    def _grid(self, img: Tensor) -> Tuple[int, int]:
        patch = self.backbone.patch_size
        return img.shape[-2] // patch[0], img.shape[-1] // patch[1]

    # -- masks -----------------------------------------------------------
    def _mask_shares(self) -> Dict[str, float]:
        """Share of the global-view images per masking objective."""
        return dict(content=self.mask_sample_prob)

    def _sample_masks(self, num: int, hw: Sequence[int],
                      device) -> Dict[str, Tensor]:
        """Disjoint per-objective masks ``(num, N)`` bool: the images of each
        objective are consecutive slices of one random permutation."""
        num_patches = hw[0] * hw[1]
        order = torch.randperm(num, device=device)
        masks, start = {}, 0
        for key, share in self._mask_shares().items():
            chosen = order[start:start + round(share * num)]
            start += chosen.numel()
            mask = torch.zeros(num, num_patches, dtype=torch.bool,
                               device=device)
            counts = sample_num_masked(chosen.numel(), num_patches,
                                       self.mask_ratio_range, device)
            mask[chosen] = self.maskings[key](counts, hw)
            masks[key] = mask
        return masks

    # -- training --------------------------------------------------------
    def _split_views(self, inputs: List[Tensor]):
        if not isinstance(inputs, (list, tuple)) or \
                len(inputs) < self.num_global_crops:
            raise ValueError(f'{type(self).__name__} expects a list of at '
                             f'least num_global_crops={self.num_global_crops}'
                             f' views, got {type(inputs).__name__}')
        g = self.num_global_crops
        globals_ = torch.cat(inputs[:g])
        locals_ = torch.cat(inputs[g:]) if len(inputs) > g else None
        return globals_, locals_

    def loss(self, inputs: List[Tensor], data_samples: List[DataSample],
             **kwargs) -> Dict[str, Tensor]:
        """ICPF Eq. 3 (and Eq. 6 through :meth:`_mask_shares`).

        Args:
            inputs: views, globals first, each ``(B, 3, H, W)``.
            data_samples: one per image.
        """
        globals_ = self._split_views(inputs)[0]
        geometry = self._view_geometry(data_samples, inputs[0].shape[0],
                                       globals_.device)
        if self.training:
            check_teachers_set(self)
        hw = self._grid(globals_)
        masks = self._sample_masks(self.num_global_crops * len(inputs[0]),
                                   hw, globals_.device)
        targets = self.teacher_targets(globals_, hw, geometry, masks)
        return self.student_losses(inputs, geometry, masks, targets)

    def teacher_network(self) -> nn.Module:
        """The network that gives the targets: the EMA teacher's."""
        return self.teacher.module

    @torch.no_grad()
    def teacher_targets(self, globals_: Tensor, hw: Sequence[int], geometry,
                        masks: Dict[str, Tensor]) -> Dict[str, Tensor]:
        """The teacher's outputs on the global views ``(num_g * B, 3, H,
        W)`` (patch grid ``hw``), unmasked.

        Returns:
            ``logits`` ``(num_g * B, K)`` of the image head before
            centering, ``image`` its centered targets, ``patch`` the
            centered patch-head targets ``(M, K')`` of the ``M`` patches
            that some mask of ``masks`` selects (``selected``, ``(num_g *
            B, N)`` bool).
        """
        teacher = self.teacher_network()
        selected = torch.stack(list(masks.values())).any(dim=0)  # (nB, N)
        g_views = slice(0, self.num_global_crops)
        t_tokens = self._encode(
            teacher, globals_, self._positions(teacher, hw, g_views,
                                               geometry),
            coords=self._rope_coords(teacher, hw, g_views, geometry))
        t_logits = teacher.head(t_tokens[:, 0])
        return dict(
            logits=t_logits, selected=selected,
            image=self.image_centering(t_logits, self.teacher_temp),
            patch=self.patch_centering(
                self._patch_head(teacher)(t_tokens[:, 1:][selected]),
                self.teacher_temp))

    def student_losses(self, inputs: List[Tensor], geometry,
                       masks: Dict[str, Tensor],
                       targets: Dict[str, Tensor]) -> Dict[str, Tensor]:
        """This network's losses against the teacher's ``targets``
        (:meth:`teacher_targets`): the image loss on every view (Eq. 1),
        the masked-patch losses on the masked global views (Eq. 2) and
        KoLeo on the global class tokens."""
        num_g = self.num_global_crops
        batch = len(targets['logits']) // num_g  # images per view
        globals_, locals_ = self._split_views(inputs)
        hw = self._grid(globals_)
        selected = targets['selected']
        g_views = slice(0, num_g)
        s_tokens = self._encode(
            self, globals_,
            self._student_positions(hw, g_views, geometry, masks),
            masks.get('content'), self.mask_token,
            self._rope_coords(self, hw, g_views, geometry, masks))
        s_cls = [s_tokens[:, 0]]
        if locals_ is not None:
            l_views = slice(num_g, len(inputs))
            l_hw = self._grid(locals_)
            s_cls.append(
                self._encode(self, locals_,
                             self._student_positions(l_hw, l_views, geometry,
                                                     {}),
                             coords=self._rope_coords(self, l_hw, l_views,
                                                      geometry))[:, 0])
        s_image = self.head(torch.cat(s_cls)).view(len(inputs), batch, -1)
        losses = dict(
            loss_image=self.image_loss(
                s_image, targets['image'].view(num_g, batch, -1)))

        s_patch = self._patch_head(self)(s_tokens[:, 1:][selected])
        image_index = selected.nonzero()[:, 0]
        for key, mask in masks.items():
            token_sel = mask[selected]
            losses[f'loss_{key}'] = self._masked_losses()[key](
                s_patch[token_sel], targets['patch'][token_sel],
                image_index[token_sel], num_images=num_g * batch)
        losses['teacher_entropy'] = self.teacher_entropy(
            targets['logits'], self.teacher_temp)
        if self.koleo_loss is not None:
            cls = s_tokens[:, 0].view(num_g, batch, -1)
            koleo = torch.stack([self.koleo_loss(c) for c in cls])
            losses['loss_koleo'] = koleo.sum() \
                if self.koleo_reduction == 'sum' else koleo.mean()
        return losses

    @staticmethod
    @torch.no_grad()
    def teacher_entropy(logits: Tensor, temp: float) -> Tensor:
        """Entropy (nats) of the batch-mean teacher distribution
        ``softmax(logits / temp)`` before centering: near 0 when the teacher
        collapses onto a few prototypes, ``log K`` at most. Logged (it has
        no ``loss`` in its name, so it is not optimised)."""
        mean = F.softmax(logits.float() / temp, dim=-1).mean(dim=0)
        return -(mean * mean.clamp_min(1e-12).log()).sum()

    def _masked_losses(self) -> Dict[str, nn.Module]:
        return dict(content=self.patch_loss)

    def extract_feat(self, inputs: Tensor, **kwargs) -> Tensor:
        """Class + patch tokens ``(B, 1 + N, C)`` of the student."""
        return self.backbone(inputs)[0]
