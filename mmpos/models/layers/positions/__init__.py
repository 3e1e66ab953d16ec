"""mmpos' binding of the torch-only position schemes
(:mod:`mmpos_positions`): registers :data:`mmpos_positions.SCHEMES` to
:data:`mmpos.registry.POSITION_ENCODINGS` in their order and builds a
backbone's ``rope=dict(type=...)``. The names below are those mmpos' models
and benchmarks import from here."""
from typing import Optional

from mmpos_positions import (SCHEMES, PositionScheme, PositionTable, RoPETable,
                             box_coords, grid_coords, linear,
                             sincos_pos_embed_2d)

from mmpos.registry import POSITION_ENCODINGS

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
    'PositionTable', 'RoPETable', 'box_coords', 'build_position_scheme',
    'grid_coords', 'linear', 'sincos_pos_embed_2d'
]
