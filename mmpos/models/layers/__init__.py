from .attention import RoPEAttention
from .masking import (Masking, drop_positions, gather_tokens, num_kept,
                      random_masking)
from .relative_coords import relative_coords
from .block_masking import (MASKINGS, boxwise_masks, crosswise_masks,
                            sample_num_masked)
from .positional_field import (PositionalField, field_to_pos_embed,
                               sample_field, sample_scales, scale_shift_boxes)
from .rope import (RoPE2D, StaticRoPE, apply_rope, apply_rope_phasors,
                   axial_frequencies, clear_rope_cache,
                   frequency_magnitudes, grid_coords, mixed_frequencies,
                   rope_angles, rope_cache_info, rope_phasors, rope_tables,
                   sincos_pos_embed_2d)
from .rope_positions import (COORD_FRAMES, RoPEPositions, box_coords,
                             frame_coords)

__all__ = [
    'Masking', 'drop_positions', 'gather_tokens', 'num_kept',
    'random_masking', 'relative_coords',
    'COORD_FRAMES', 'RoPEPositions', 'StaticRoPE', 'box_coords', 'frame_coords', 'frequency_magnitudes',
    'MASKINGS', 'PositionalField', 'RoPE2D', 'RoPEAttention', 'apply_rope',
    'apply_rope_phasors', 'rope_phasors',
    'axial_frequencies', 'boxwise_masks', 'clear_rope_cache',
    'crosswise_masks', 'field_to_pos_embed', 'grid_coords',
    'mixed_frequencies', 'rope_angles', 'rope_cache_info', 'rope_tables',
    'sample_field', 'sample_num_masked', 'sample_scales',
    'scale_shift_boxes', 'sincos_pos_embed_2d'
]
