"""QB-Heat: quarter-block prediction guided by the heat equation (Chen et
al.), Sec. 4, Fig. 2-5, Eq. 5.

Per batch, every image keeps one unmasked quarter-block (75% masking). The
encoder (a CNN, e.g. :class:`MobileFormer`) runs on the quarters only; the
:class:`QBHeatPredictor` projects their features to 512-d and extrapolates
the three masked quarters linearly (Eq. 5 / App. A); the
:class:`QBHeatHead` decodes the whole map to pixels.

Quarter sampling lives here (not in a data transform) so that the mix of
scales is exact per batch: ``position='mixed'`` (paper default, Tab. 2a)
gives the first ``B // 2`` images of the batch a corner quarter (one of the
four, uniformly) and the rest the centre quarter; ``'corner'`` and
``'center'`` use one scale only. Image sides must be divisible by
``4 * stride`` (64 for the stride-16 Mobile-Former; the paper uses 256^2):
the quarter is half the side and each of its 2 x 2 cells (side / 4) must be
a whole number of encoder positions, so that the centre quarter splits into
four whole sub-blocks; the
encoder stride is the decoder's ``patch_size`` (one decoded patch per
encoder position).
"""
from typing import Dict, List

import torch
from mmpretrain.models.selfsup.base import BaseSelfSupervisor
from mmpretrain.structures import DataSample
from torch import Tensor

from mmpos.registry import MODELS
from .qbheat_predictor import CENTER, crop_quarter_blocks

POSITIONS = {'mixed': ('corner', 'center'), 'corner': ('corner', ),
             'center': ('center', )}


@MODELS.register_module()
class QBHeat(BaseSelfSupervisor):
    """QB-Heat pre-training.

    Args:
        backbone: encoder config; its last output is used.
        neck: :class:`QBHeatPredictor` config.
        head: :class:`QBHeatHead` config.
        position: ``'mixed'``, ``'corner'`` or ``'center'`` (see module
            docstring); the predictor must hold models for those scales.
    """

    def __init__(self, backbone: dict, neck: dict, head: dict,
                 position: str = 'mixed', pretrained=None,
                 data_preprocessor=None, init_cfg=None):
        if position not in POSITIONS:
            raise ValueError(f'QBHeat: position={position!r} is not one of '
                             f'{tuple(POSITIONS)}')
        super().__init__(backbone=backbone, neck=neck, head=head,
                         pretrained=pretrained,
                         data_preprocessor=data_preprocessor,
                         init_cfg=init_cfg)
        missing = set(POSITIONS[position]) - set(self.neck.positions)
        if missing:
            raise ValueError(f'QBHeat: position={position!r} needs predictor '
                             f'models for {sorted(missing)}; neck.positions '
                             f'is {self.neck.positions}')
        self.position = position

    def sample_layouts(self, batch_size: int, device=None) -> Tensor:
        """(B,) layout ids: 0-3 corner quarters, 4 the centre quarter."""
        corners = torch.randint(0, 4, (batch_size, ), device=device)
        if self.position == 'corner':
            return corners
        n_corner = batch_size // 2 if self.position == 'mixed' else 0
        corners[n_corner:] = CENTER
        return corners

    def extract_feat(self, inputs: Tensor) -> tuple:
        """Encoder features of whole images (for probing/downstream)."""
        return self.backbone(inputs)

    def loss(self, inputs: Tensor, data_samples: List[DataSample],
             **kwargs) -> Dict[str, Tensor]:
        """inputs (B, 3, H, W) normalised images -> ``dict(loss=...)``."""
        if isinstance(inputs, (list, tuple)):
            inputs = inputs[0]
        H, W = inputs.shape[-2:]
        unit = 4 * self.head.patch_size
        if H % unit or W % unit:
            raise ValueError(
                f'QBHeat: image size {H}x{W} must be divisible by 4 x '
                f'encoder stride = {unit}: each of the 4 x 4 cells (side / 4) '
                f'must be a whole number of {self.head.patch_size}-px '
                f'encoder positions (the encoder stride is '
                f'head.patch_size)')
        layouts = self.sample_layouts(inputs.shape[0], inputs.device)
        feats = self.backbone(crop_quarter_blocks(inputs, layouts))[-1]
        canvas, mask = self.neck(feats, layouts)
        return dict(loss=self.head.loss(canvas, inputs, mask))
