"""Position schemes of mmpos' backbones, by concept:

* :mod:`.base`: the interface (:class:`PositionScheme`,
  :class:`PositionTable`) and the patch coordinates (grid, frames,
  augmentation, crop boxes, the sin-cos absolute embedding);
* :mod:`.linear`: linear-angle RoPE (axial, mixed, DINOv3, spiral, STRING)
  and test-time frequency scaling;
* :mod:`.matrix`: matrix RoPE (ComRoPE, LieRE);
* :mod:`.lookhere`: LookHere.

Import the names from this package. It binds the schemes to
:data:`mmpos.registry.POSITION_ENCODINGS` (the files themselves need only
torch) and builds them from a backbone's ``rope=dict(type=...)``.
"""
from typing import Optional

from mmpos.registry import POSITION_ENCODINGS
from .base import (PatchCoords, PositionScheme, PositionTable, box_coords,
                   frame_coords, grid_coords, sincos_pos_embed_2d)
from .linear import (AxialRoPE, DINOv3RoPE, FrequencyScaling, MixedRoPE,
                     RoPETable, SpiralRoPE, STRINGRoPE, frequency_magnitudes,
                     mixed_frequencies, rope_angles, scale_frequencies,
                     spiral_frequencies)
from .lookhere import LookHere, lookhere_bias
from .matrix import ComRoPE, LieRE

SCHEMES = {
    'axial': AxialRoPE, 'mixed': MixedRoPE, 'dinov3': DINOv3RoPE,
    'spiral': SpiralRoPE, 'string': STRINGRoPE, 'comrope': ComRoPE,
    'liere': LieRE, 'lookhere': LookHere
}
for _name, _cls in SCHEMES.items():
    POSITION_ENCODINGS.register_module(name=_name, module=_cls)


def build_position_scheme(cfg: Optional[dict], head_dim: int,
                          num_heads: int, depth: int
                          ) -> Optional[PositionScheme]:
    """The scheme of ``cfg = dict(type=..., **options)`` for ``depth``
    blocks of ``num_heads`` heads of ``head_dim`` channels; ``None`` for
    ``cfg=None``."""
    if cfg is None:
        return None
    cfg = dict(cfg)
    # looked up directly: Registry.build would first search the caller's
    # default scope (mmpretrain, mmdet, mmseg) and warn
    name = cfg.pop('type', None)
    cls = POSITION_ENCODINGS.get(name) if isinstance(name, str) else None
    if cls is None:
        choices = sorted(POSITION_ENCODINGS.module_dict)
        raise ValueError(f'rope type {name!r} is not a position scheme; '
                         f'choose from {choices} or rope=None')
    return cls(head_dim=head_dim, num_heads=num_heads, depth=depth, **cfg)


__all__ = [
    'AxialRoPE', 'ComRoPE', 'DINOv3RoPE', 'FrequencyScaling', 'LieRE',
    'LookHere', 'MixedRoPE', 'PatchCoords', 'PositionScheme', 'PositionTable',
    'RoPETable', 'SCHEMES', 'SpiralRoPE', 'STRINGRoPE', 'box_coords',
    'build_position_scheme', 'frame_coords', 'frequency_magnitudes',
    'grid_coords', 'lookhere_bias', 'mixed_frequencies', 'rope_angles',
    'scale_frequencies', 'sincos_pos_embed_2d', 'spiral_frequencies'
]
