"""Classification decoders of QB-Heat's *decoder probing* (Sec. 5, App.
B.1, Tab. 10-11): the encoder is frozen, only these heads learn. They take
the last backbone output, a map (B, C, h, w) or pooled features (B, C), so
they serve every backbone of the suite.

* :class:`BNLinearClsHead` -- linear probing: global average pooling, an
  extra BatchNorm without affine parameters (MAE's protocol, App. B.1), a
  linear classifier.
* :class:`TransformerClsHead` -- ``tran-<n>`` probing (``tran-1`` in the
  paper): a linear projection of every map position to the decoder width
  (192 / 384 / 768 for MF-285M / 1.0G / 3.7G), ``num_layers`` pre-norm
  transformer blocks over the positions, LayerNorm, global average pooling,
  dropout and a linear classifier. The paper does not specify a position
  embedding; none is added (convolutional features already carry position,
  and probing at other resolutions needs no interpolation).

Deviation: the Mobile-Former classifier of the paper pools the map *and*
concatenates the first global token ("pool concat", 912 / 1696 / 3136-d);
these heads use the map only (720 / 1440 / 2880-d), to stay usable with any
backbone.
"""
from typing import Tuple

import torch.nn as nn
from mmpretrain.models.backbones.vision_transformer import \
    TransformerEncoderLayer
from mmpretrain.models.heads import ClsHead, LinearClsHead
from torch import Tensor

from mmpos.registry import MODELS


def _last_map_or_vector(feats: Tuple[Tensor, ...], name: str) -> Tensor:
    x = feats[-1]
    if x.dim() not in (2, 4):
        raise ValueError(f'{name}: expects the last backbone output as '
                         f'(B, C, h, w) or (B, C), got {tuple(x.shape)}')
    return x


@MODELS.register_module()
class BNLinearClsHead(LinearClsHead):
    """Pool -> BatchNorm1d(affine=False) -> Linear (linear probing).

    Shapes: feats[-1] (B, C, h, w) or (B, C) -> logits (B, num_classes).
    """

    def __init__(self, num_classes: int, in_channels: int, **kwargs):
        super().__init__(num_classes, in_channels, **kwargs)
        self.bn = nn.BatchNorm1d(in_channels, affine=False, eps=1e-6)

    def pre_logits(self, feats: Tuple[Tensor, ...]) -> Tensor:
        x = _last_map_or_vector(feats, 'BNLinearClsHead')
        return self.bn(x.mean((2, 3)) if x.dim() == 4 else x)


@MODELS.register_module()
class TransformerClsHead(ClsHead):
    """Projection + transformer blocks + pooling + Linear (tran-n probing).

    Args:
        num_classes: classes.
        in_channels: channels of the backbone map.
        embed_dims: decoder width (192 / 384 / 768 in Tab. 11 / Fig. 8).
        num_layers: transformer blocks (1 for tran-1, 4 for tran-4).
        num_heads: attention heads (default ``embed_dims // 64``).
        dropout: dropout before the classifier (Tab. 11: 0.1 / 0.2).
        drop_path_rate: stochastic depth in the blocks.

    Shapes: feats[-1] (B, C, h, w) -> logits (B, num_classes).
    """

    def __init__(self, num_classes: int, in_channels: int,
                 embed_dims: int = 192, num_layers: int = 1,
                 num_heads: int = None, mlp_ratio: float = 4.,
                 dropout: float = 0.1, drop_path_rate: float = 0.,
                 init_cfg=dict(type='TruncNormal', layer='Linear', std=.02),
                 **kwargs):
        super().__init__(init_cfg=init_cfg, **kwargs)
        num_heads = num_heads or max(embed_dims // 64, 1)
        if embed_dims % num_heads:
            raise ValueError(f'TransformerClsHead: embed_dims={embed_dims} '
                             f'is not divisible by num_heads={num_heads}')
        self.proj = nn.Linear(in_channels, embed_dims)
        self.blocks = nn.ModuleList(
            TransformerEncoderLayer(embed_dims, num_heads,
                                    int(mlp_ratio * embed_dims),
                                    drop_path_rate=drop_path_rate)
            for _ in range(num_layers))
        self.norm = nn.LayerNorm(embed_dims)
        self.dropout = nn.Dropout(dropout)
        self.fc = nn.Linear(embed_dims, num_classes)

    def pre_logits(self, feats: Tuple[Tensor, ...]) -> Tensor:
        x = _last_map_or_vector(feats, 'TransformerClsHead')
        if x.dim() != 4:
            raise ValueError(f'TransformerClsHead: needs a feature map '
                             f'(B, C, h, w), got {tuple(x.shape)}')
        x = self.proj(x.flatten(2).transpose(1, 2))
        for blk in self.blocks:
            x = blk(x)
        return self.norm(x).mean(1)

    def forward(self, feats: Tuple[Tensor, ...]) -> Tensor:
        return self.fc(self.dropout(self.pre_logits(feats)))
