"""DINO projection head (DINO / iBOT / DINOv2 / ICPF)."""
from typing import Optional

import torch
import torch.nn as nn
import torch.nn.functional as F
from mmengine.model import BaseModule
from torch import Tensor

from mmpos.registry import MODELS


@MODELS.register_module()
class DINOProjectionHead(BaseModule):
    """MLP -> L2-normalised bottleneck -> prototype layer ``P(.)``.

    ``x (..., C_in) -> MLP (num_layers linear layers, GELU between) ->
    (..., C_b) -> x / ||x|| -> x @ W^T (..., K)``. The prototype layer is
    DINO's weight-normalised linear layer without bias: ``W = g * V / ||V||``
    row-wise, with ``g = 1`` fixed when ``norm_last_layer`` (Table 6) and
    learnable otherwise. With ``norm_last_layer`` both factors are unit
    vectors, so the logits are cosines in ``[-1, 1]``.

    The algorithms build one head for the image objective (class token) and,
    with "separate heads" (Table 6), another for the patch objectives.

    Args:
        in_channels: backbone width ``C_in``.
        out_channels: prototypes ``K`` (65536 in the paper).
        hidden_channels: MLP width (2048).
        bottleneck_channels: ``C_b`` (256).
        num_layers: linear layers of the MLP (3).
        norm_last_layer: fix the prototype norms to 1.
        init_cfg: default: truncated normal (std 0.02) linear weights.
    """

    def __init__(self,
                 in_channels: int,
                 out_channels: int = 65536,
                 hidden_channels: int = 2048,
                 bottleneck_channels: int = 256,
                 num_layers: int = 3,
                 norm_last_layer: bool = True,
                 init_cfg: Optional[dict] = dict(
                     type='TruncNormal', layer='Linear', std=.02, bias=0.)):
        super().__init__(init_cfg=init_cfg)
        if num_layers < 1:
            raise ValueError(f'DINOProjectionHead num_layers must be >= 1, '
                             f'got {num_layers}')
        dims = [in_channels] + [hidden_channels] * (num_layers - 1) + \
            [bottleneck_channels]
        layers = []
        for i, (d_in, d_out) in enumerate(zip(dims[:-1], dims[1:])):
            if i:
                layers.append(nn.GELU())
            layers.append(nn.Linear(d_in, d_out))
        self.mlp = nn.Sequential(*layers)
        self.prototypes = nn.Parameter(
            torch.empty(out_channels, bottleneck_channels))
        nn.init.trunc_normal_(self.prototypes, std=.02)
        self.gain = None if norm_last_layer else nn.Parameter(
            torch.ones(out_channels, 1))

    def forward(self, x: Tensor) -> Tensor:
        """``(..., C_in)`` -> logits ``(..., K)``."""
        x = F.normalize(self.mlp(x), dim=-1, eps=1e-6)
        weight = F.normalize(self.prototypes, dim=-1)
        if self.gain is not None:
            weight = weight * self.gain
        return F.linear(x, weight)
