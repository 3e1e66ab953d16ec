"""ICPF (algorithm, :mod:`.icpf`) and its learnable positional field
(:mod:`.positional_field`)."""
from .icpf import ICPF
from .positional_field import (PositionalField, field_to_pos_embed,
                               sample_field, sample_scales, scale_shift_boxes)

__all__ = ['ICPF', 'PositionalField', 'field_to_pos_embed', 'sample_field',
           'sample_scales', 'scale_shift_boxes']
