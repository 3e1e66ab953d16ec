"""Position schemes of vision transformers, importable with torch alone.

* :mod:`.base`: the interface (:class:`PositionScheme`,
  :class:`PositionTable`) and the patch coordinates (grid, frames,
  augmentation, crop boxes, the sin-cos absolute embedding);
* :mod:`.linear`: linear-angle RoPE (axial, mixed, DINOv3, spiral, Golden
  Gate, STRING) and test-time frequency scaling;
* :mod:`.matrix`: matrix RoPE (ComRoPE, LieRE);
* :mod:`.lookhere`: LookHere;
* :mod:`.pape`: PaPE and PaPE-RI (biases that read the tokens:
  :mod:`.tokens`);
* :mod:`.wrappers`: opt-in eval-table cache and export-frozen tables;
* :mod:`.window`: ViTDet's window partition.

:data:`SCHEMES` is the one list of scheme names (``rope=dict(type=name)``),
in registration order; mmpos binds it to its registry
(:mod:`mmpos.models.layers.positions`).
"""
from .base import (PatchCoords, PositionScheme, PositionTable, box_coords,
                   frame_coords, grid_coords, sincos_pos_embed_2d)
from .linear import (AxialRoPE, DINOv3RoPE, FrequencyScaling,
                     GoldenGateRoPE, MixedRoPE, RoPETable, SpiralRoPE,
                     STRINGRoPE, frequency_magnitudes,
                     golden_gate_frequencies, mixed_frequencies, rope_angles,
                     scale_frequencies, spiral_frequencies)
from .lookhere import LookHere, lookhere_bias
from .matrix import ComRoPE, LieRE
from .pape import PaPE, PaPERI
from .tokens import TokenTable, adds_bias, reads_tokens
from .wrappers import CachedTables, FrozenTables

#: ``{name: class}`` of every scheme, in registration order
SCHEMES = {
    'axial': AxialRoPE, 'mixed': MixedRoPE, 'dinov3': DINOv3RoPE,
    'spiral': SpiralRoPE, 'string': STRINGRoPE, 'comrope': ComRoPE,
    'liere': LieRE, 'lookhere': LookHere, 'pape': PaPE, 'pape_ri': PaPERI,
    'golden_gate': GoldenGateRoPE
}



def scheme_name(scheme: PositionScheme) -> str:
    """The name of ``scheme``'s class in :data:`SCHEMES` (its class name
    where it is not registered)."""
    return next((name for name, cls in SCHEMES.items()
                 if type(scheme) is cls), type(scheme).__name__)


def saved_tensors() -> dict:
    """``{name: state-dict keys}`` of every scheme of :data:`SCHEMES` built
    at a small size with its default options (one block): the tensors a
    checkpoint of that scheme holds, e.g. ``freqs.0`` for RoPE-Mixed."""
    return {name: tuple(cls(head_dim=16, num_heads=2, depth=1).state_dict())
            for name, cls in SCHEMES.items()}


__all__ = [
    'AxialRoPE', 'CachedTables', 'ComRoPE', 'DINOv3RoPE', 'FrequencyScaling',
    'FrozenTables', 'GoldenGateRoPE', 'LieRE', 'LookHere', 'MixedRoPE', 'PaPE', 'PaPERI',
    'PatchCoords', 'PositionScheme', 'PositionTable', 'RoPETable', 'SCHEMES',
    'SpiralRoPE', 'STRINGRoPE', 'TokenTable', 'adds_bias', 'box_coords',
    'frame_coords', 'frequency_magnitudes', 'golden_gate_frequencies',
    'grid_coords', 'lookhere_bias',
    'mixed_frequencies', 'reads_tokens', 'rope_angles', 'saved_tensors',
    'scale_frequencies', 'scheme_name', 'sincos_pos_embed_2d',
    'spiral_frequencies'
]
