from .attention import RoPEAttention
from .masking import (Masking, drop_positions, gather_tokens, num_kept,
                      random_masking)
from .block_masking import (MASKINGS, boxwise_masks, crosswise_masks,
                            sample_num_masked)
from .position import (COORD_FRAMES, PatchCoords, PositionScheme,
                       PositionTable, box_coords, build_position_scheme,
                       frame_coords, grid_coords)
from .rope import (AxialRoPE, DINOv3RoPE, MixedRoPE, RoPETable, apply_rope,
                   apply_rope_phasors, axial_frequencies,
                   frequency_magnitudes, mixed_frequencies,
                   rope_angles, rope_cfg_from_legacy, rope_phasors,
                   rope_tables, sincos_pos_embed_2d)
# registers the ComRoPE / LieRE / STRING / Spiral / LookHere schemes
from . import rope_schemes  # noqa: F401,E402

__all__ = [
    'Masking', 'drop_positions', 'gather_tokens', 'num_kept',
    'random_masking', 'COORD_FRAMES', 'PatchCoords',
    'PositionScheme', 'PositionTable', 'build_position_scheme',
    'frame_coords', 'AxialRoPE', 'DINOv3RoPE', 'MixedRoPE', 'RoPETable',
    'box_coords', 'frequency_magnitudes', 'MASKINGS',
    'RoPEAttention', 'apply_rope', 'apply_rope_phasors', 'rope_phasors',
    'axial_frequencies', 'boxwise_masks', 'crosswise_masks',
    'grid_coords', 'mixed_frequencies', 'rope_angles',
    'rope_cfg_from_legacy', 'rope_tables', 'sample_num_masked',
    'sincos_pos_embed_2d'
]
