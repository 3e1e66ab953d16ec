from .attention import RoPEAttention
from .masking import (Masking, drop_positions, gather_tokens, num_kept,
                      random_masking)
from .relative_coords import relative_coords
from .block_masking import (MASKINGS, boxwise_masks, crosswise_masks,
                            sample_num_masked)
from .positional_field import (PositionalField, field_to_pos_embed,
                               sample_field, sample_scales, scale_shift_boxes)
from .position import (COORD_FRAMES, PatchCoords, PositionScheme,
                       PositionTable, build_position_scheme, frame_coords)
from .rope import (AxialRoPE, DINOv3RoPE, MixedRoPE, RoPETable, apply_rope,
                   apply_rope_phasors, axial_frequencies,
                   frequency_magnitudes, grid_coords, mixed_frequencies,
                   rope_angles, rope_cfg_from_legacy, rope_phasors,
                   rope_tables, sincos_pos_embed_2d)
from .rope_positions import box_coords
# registers the ComRoPE / LieRE / STRING / Spiral / LookHere schemes
from . import rope_schemes  # noqa: F401,E402

__all__ = [
    'Masking', 'drop_positions', 'gather_tokens', 'num_kept',
    'random_masking', 'relative_coords', 'COORD_FRAMES', 'PatchCoords',
    'PositionScheme', 'PositionTable', 'build_position_scheme',
    'frame_coords', 'AxialRoPE', 'DINOv3RoPE', 'MixedRoPE', 'RoPETable',
    'box_coords', 'frequency_magnitudes', 'MASKINGS', 'PositionalField',
    'RoPEAttention', 'apply_rope', 'apply_rope_phasors', 'rope_phasors',
    'axial_frequencies', 'boxwise_masks', 'crosswise_masks',
    'field_to_pos_embed', 'grid_coords', 'mixed_frequencies', 'rope_angles',
    'rope_cfg_from_legacy', 'rope_tables', 'sample_field',
    'sample_num_masked', 'sample_scales', 'scale_shift_boxes',
    'sincos_pos_embed_2d'
]
