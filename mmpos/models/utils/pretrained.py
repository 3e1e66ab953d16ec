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

:func:`load_backbone_pretrained` is that load plus a check of the position
scheme: a checkpoint whose position tensors (``pos_embed``: APE;
``rope.*``: a scheme's learned parameters, e.g. RoPE-Mixed's
``rope.freqs.<i>``) differ from the backbone's -- an APE checkpoint into a
RoPE config, RoPE into APE, one scheme's frequencies into another's --
gets one WARNING line naming both schemes and the tensors re-initialised
and dropped, and the key report's per-key warnings leave those tensors to
it (a line of position keys only goes to DEBUG; other keys keep their
warning); with ``strict=True`` in the ``Pretrained`` entry it is refused
in one line (and so is any other missing or unexpected key).
Schemes that save no tensors (``axial``, ``dinov3``, ``spiral``,
``lookhere``, ``golden_gate``) cannot be told apart by a checkpoint's
keys.
"""
import contextlib
import functools
import logging
import re
from typing import FrozenSet, Iterable, List, Optional, Tuple

import torch.nn as nn
from mmengine.logging import MMLogger, print_log
from mmpos_positions import PositionScheme, saved_tensors, scheme_name

from mmpos.checkpoint.load import load_pretrained
from mmpos.checkpoint.match import KeyReport, _names
from mmpos.errors import BadInputError, CheckpointMismatchError

# `map_location` is accepted for mmengine compatibility; loading is on CPU.
# `strict`: refuse a checkpoint that does not hold exactly the backbone's
# tensors (a position scheme of another kind included).
PRETRAINED_KEYS = ('type', 'checkpoint', 'prefix', 'map_location', 'strict')


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
    if not isinstance(pretrained[0].get('strict', False), bool):
        raise BadInputError('Pretrained init_cfg strict must be True or '
                            f'False, got {pretrained[0]["strict"]!r}')
    rest = [c for c in cfgs if c is not pretrained[0] and c is not None]
    return rest or default, dict(pretrained[0])


def _is_position_key(key: str) -> bool:
    return key == 'pos_embed' or key.startswith('rope.')


def _stems(keys: Iterable[str]) -> FrozenSet[str]:
    """Parameter names of ``rope.*`` keys without block / stage indices
    (``rope.freqs.3`` and ``rope.0.freqs.1`` -> ``freqs``)."""
    return frozenset('.'.join(p for p in k.split('.')[1:]
                              if not re.fullmatch(r'\d+', p))
                     for k in keys if k.startswith('rope.'))


@functools.lru_cache(maxsize=None)
def _scheme_stems() -> Tuple[Tuple[str, FrozenSet[str]], ...]:
    """``(name, stems of its saved tensors)`` of every registered scheme
    (built at a small size with its default options)."""
    return tuple((name, _stems(f'rope.{k}' for k in keys))
                 for name, keys in saved_tensors().items())


def _checkpoint_scheme(keys: Iterable[str]) -> str:
    """Words for the position tensors among a checkpoint's ``keys``: the
    schemes whose saved tensors have the same names (:func:`_stems`), and
    APE where ``pos_embed`` is present."""
    keys = list(keys)
    stems = _stems(keys)
    names = '/'.join(n for n, s in _scheme_stems() if s == stems)
    ape = 'pos_embed' in keys
    if not stems:
        return ('APE (pos_embed) and no RoPE tensors' if ape else
                'no position tensors (no position encoding, or a RoPE '
                f'that saves none: {names})')
    scheme = (f'RoPE {names!r}' if names else
              f'RoPE tensors {sorted(stems)} of no known scheme')
    return scheme + (' + APE (pos_embed)' if ape else '')


def _module_scheme(module: nn.Module) -> str:
    """Words for a backbone's position encoding: its ``rope`` scheme's
    registered name and / or APE."""
    rope = getattr(module, 'rope', None)
    scheme = next((m for m in rope.modules() if isinstance(
        m, PositionScheme)), None) if rope is not None else None
    parts = [] if scheme is None else ['RoPE ' + repr(scheme_name(scheme))]
    if getattr(module, 'pos_embed', None) is not None:
        parts.append('APE (pos_embed)')
    return ' + '.join(parts) or 'no position encoding'


def position_mismatch(module: nn.Module, report: KeyReport,
                      source: str) -> str:
    """One line on how the position tensors of a checkpoint (``report``
    of loading it into ``module``, a backbone with ``pos_embed`` and / or a
    ``rope`` scheme) differ from the module's, naming both schemes and the
    tensors that keep their initialisation (re-initialised) and that are
    dropped; empty when they agree."""
    missing = [k for k in report.missing if _is_position_key(k)]
    dropped = [k for k in report.unexpected if _is_position_key(k)]
    if not missing and not dropped:
        return ''
    theirs = _checkpoint_scheme(report.matched + report.unexpected + [
        k for k, _, _ in report.mismatched])
    own = _module_scheme(module)
    fate = [f'{len(keys)} {what} ({_names(keys)})' for keys, what in (
        (missing, 're-initialised'), (dropped, 'dropped')) if keys]
    return (f'{type(module).__name__}: POSITION MISMATCH: {source} holds '
            f'{theirs}, the config builds {own}; {", ".join(fate)}')


@contextlib.contextmanager
def _held_records():
    """Hold back the records of mmengine's current logger inside the block
    (the block gets their list and may change them); they are logged, in
    order, when it ends (also when it raises)."""
    logger = MMLogger.get_current_instance()
    held: List[logging.LogRecord] = []

    def hold(record: logging.LogRecord) -> bool:
        held.append(record)
        return False

    logger.addFilter(hold)
    try:
        yield held
    finally:
        logger.removeFilter(hold)
        for record in held:
            if logger.isEnabledFor(record.levelno):
                logger.handle(record)


def _fold_position_keys(records: List[logging.LogRecord],
                        report: KeyReport) -> None:
    """Leave the position keys out of the key report's WARNING lines
    (``<Target>: N missing keys (<fate>): k1, k2, ...``, one per kind):
    the POSITION MISMATCH line names them. A line of position keys only
    goes to DEBUG; a line with other keys keeps those, and their count."""
    for record in records:
        head, sep, listed = record.getMessage().rpartition('): ')
        for keys in (report.missing, report.unexpected):
            others = [k for k in keys if not _is_position_key(k)]
            if (record.levelno != logging.WARNING or not sep
                    or listed != ', '.join(keys) or others == keys):
                continue
            if others:
                record.msg = head.replace(f': {len(keys)} ',
                                          f': {len(others)} ', 1) \
                    + sep + ', '.join(others)
                record.args = ()
            else:
                record.levelno, record.levelname = logging.DEBUG, 'DEBUG'


def load_backbone_pretrained(module: nn.Module, pretrained_cfg: dict,
                             resizable: Iterable[str] = ()
                             ) -> Optional[KeyReport]:
    """Load a backbone's ``Pretrained`` entry (:func:`split_pretrained_cfg`)
    with :func:`load_pretrained`, then check its position scheme
    (:func:`position_mismatch`): a mismatch is one WARNING line (the key
    report's lines leave the position keys to it), or, with
    ``strict=True`` in the entry, a :class:`CheckpointMismatchError`
    (``strict`` also refuses any other missing or unexpected key).

    Returns:
        The key report (``None`` for ``checkpoint=None``).
    """
    strict = pretrained_cfg.get('strict', False)
    checkpoint = pretrained_cfg.get('checkpoint')
    source = f'pretrained checkpoint {checkpoint}'
    with _held_records() as report_lines:
        report = load_pretrained(
            module, checkpoint,
            prefix=pretrained_cfg.get('prefix', 'backbone.'),
            resizable=resizable)
        mismatch = '' if report is None else position_mismatch(
            module, report, source)
        if mismatch:
            _fold_position_keys(report_lines, report)
    if report is None:
        return None
    if mismatch and strict:
        raise CheckpointMismatchError(
            f'{mismatch}; refused (init_cfg strict=True)')
    if strict:
        report.enforce('strict', source, type(module).__name__)
    if mismatch:
        print_log(f'{mismatch}: the pretrained positions are not '
                  'transferred (init_cfg strict=True refuses such a '
                  'checkpoint)', logger='current', level=logging.WARNING)
    return report


__all__ = [
    'load_backbone_pretrained', 'load_pretrained', 'position_mismatch',
    'split_pretrained_cfg'
]
