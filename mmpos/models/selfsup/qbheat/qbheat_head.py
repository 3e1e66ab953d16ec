"""QB-Heat pixel decoder + reconstruction loss (Sec. 4.2, Fig. 2).

"We follow MAE to apply a series of transformer blocks as decoder on both
unmasked and masked quarter-blocks ... 6 transformer blocks with dimension
512." The input is the predictor's full feature map (unmasked quarter +
linear predictions), so unlike MAE's decoder there are no mask tokens and
no class token: every token already carries a feature. A fixed 2-D sin-cos
position embedding is added (as in MAE's decoder), then the blocks, a
LayerNorm and a linear layer to ``patch_size^2 * 3`` pixels per token.

The loss is mmpretrain's :class:`MAEPretrainHead` (patchify, optional
per-patch normalised pixels ``norm_pix``, masked mean of the criterion):
by default it covers the three masked quarters only, as MAE's does.
"""
import torch
import torch.nn as nn
from mmpretrain.models.backbones.vision_transformer import \
    TransformerEncoderLayer
from mmpretrain.models.heads import MAEPretrainHead
from mmpretrain.models.utils import build_2d_sincos_position_embedding
from torch import Tensor

from mmpos.registry import MODELS


@MODELS.register_module()
class QBHeatHead(MAEPretrainHead):
    """MAE-style pixel decoder on the predicted feature map.

    Args:
        loss: pixel loss config, e.g. ``PixelReconstructionLoss``.
        in_channels: width of the predictor's map (512 in the paper).
        num_layers / num_heads / mlp_ratio: decoder transformer blocks.
        patch_size: pixels per decoder token side (the encoder stride, 16).
        norm_pix: normalise each target patch (MAE's normalised pixels).
        loss_on_all: reconstruct all tokens, not only the masked ones.
    """

    def __init__(self, loss: dict, in_channels: int = 512,
                 num_layers: int = 6, num_heads: int = 16,
                 mlp_ratio: float = 4., patch_size: int = 16,
                 norm_pix: bool = False, loss_on_all: bool = False,
                 init_cfg=None):
        super().__init__(loss, norm_pix=norm_pix, patch_size=patch_size)
        self.init_cfg = init_cfg
        self.loss_on_all = loss_on_all
        self.blocks = nn.ModuleList(
            TransformerEncoderLayer(in_channels, num_heads,
                                    int(mlp_ratio * in_channels))
            for _ in range(num_layers))
        self.norm = nn.LayerNorm(in_channels)
        self.pred = nn.Linear(in_channels, patch_size**2 * 3)

    def init_weights(self):
        super().init_weights()
        if self.init_cfg is None:
            for m in self.modules():
                if isinstance(m, nn.Linear):
                    nn.init.xavier_uniform_(m.weight)
                    nn.init.zeros_(m.bias)

    def forward(self, x: Tensor) -> Tensor:
        """(B, C, h, w) feature map -> (B, h * w, patch_size^2 * 3) pixels."""
        B, C, h, w = x.shape
        pos = build_2d_sincos_position_embedding((h, w), C).to(x)
        x = x.flatten(2).transpose(1, 2) + pos
        for blk in self.blocks:
            x = blk(x)
        return self.pred(self.norm(x))

    def loss(self, x: Tensor, target: Tensor, mask: Tensor) -> Tensor:
        """Reconstruction loss.

        Args:
            x: (B, C, h, w) predictor output.
            target: (B, 3, h * p, w * p) images (square, see MAE's patchify).
            mask: (B, h, w) bool, True on the masked (predicted) tokens.
        """
        if target.shape[-2:] != (x.shape[2] * self.patch_size,
                                 x.shape[3] * self.patch_size):
            raise ValueError(
                f'QBHeatHead: feature map {tuple(x.shape[2:])} x patch_size '
                f'{self.patch_size} does not cover the image '
                f'{tuple(target.shape[-2:])}; set patch_size to the encoder '
                f'stride')
        mask = torch.ones_like(mask) if self.loss_on_all else mask
        return super().loss(self(x), target, mask.flatten(1).float())
