from .attention import RoPEAttention
from .rope import (RoPE2D, apply_rope, axial_frequencies, clear_rope_cache,
                   grid_coords, mixed_frequencies, rope_angles,
                   rope_cache_info, rope_tables, sincos_pos_embed_2d)

__all__ = [
    'RoPE2D', 'RoPEAttention', 'apply_rope', 'axial_frequencies',
    'clear_rope_cache', 'grid_coords', 'mixed_frequencies', 'rope_angles',
    'rope_cache_info', 'rope_tables', 'sincos_pos_embed_2d'
]
