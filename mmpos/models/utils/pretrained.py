"""``init_cfg=dict(type='Pretrained', checkpoint=PATH, prefix='backbone.')``
of mmpos backbones, loaded loudly.

mmengine's own ``PretrainedInit`` loads with ``strict=False`` and goes on
when no key matched, which leaves a randomly initialised backbone that trains
and evaluates as if nothing were wrong (the classic silent failure of
transfer protocols). mmpos backbones take the ``Pretrained`` entry out of
their ``init_cfg`` (:func:`split_pretrained_cfg`), run the random init of
the rest and then load the checkpoint over it with
:func:`mmpos.checkpoint.load_pretrained` (re-exported here): safe read,
prefix stripped, lenient key policy, key report logged.
"""
from typing import Optional, Tuple

from mmpos.checkpoint.load import load_pretrained

# `map_location` is accepted for mmengine compatibility; loading is on CPU.
PRETRAINED_KEYS = ('type', 'checkpoint', 'prefix', 'map_location')


def split_pretrained_cfg(init_cfg, default) -> Tuple[object, Optional[dict]]:
    """Separate a ``Pretrained`` entry from the random-init entries.

    Returns ``(random_init_cfg, pretrained_cfg)``. ``random_init_cfg`` is
    what remains of ``init_cfg`` (``default`` when nothing remains), so that
    weights the checkpoint lacks get a proper random initialisation before
    the checkpoint is loaded over it; ``pretrained_cfg`` is ``None`` without
    a ``Pretrained`` entry.
    """
    cfgs = init_cfg if isinstance(init_cfg, list) else [init_cfg]
    pretrained = [c for c in cfgs
                  if isinstance(c, dict) and c.get('type') == 'Pretrained']
    if not pretrained:
        return init_cfg, None
    if len(pretrained) > 1:
        raise ValueError(f'init_cfg has {len(pretrained)} Pretrained entries; '
                         f'give one: {init_cfg}')
    unknown = sorted(set(pretrained[0]) - set(PRETRAINED_KEYS))
    if unknown:
        raise ValueError(f'Pretrained init_cfg does not take {unknown}; its '
                         f'keys are {PRETRAINED_KEYS}')
    rest = [c for c in cfgs if c is not pretrained[0] and c is not None]
    return rest or default, dict(pretrained[0])


__all__ = ['load_pretrained', 'split_pretrained_cfg']
