"""Matching a state dict against a model: one key report, three policies.

:func:`compare` sorts every key into a :class:`KeyReport`:

* ``matched``: in both, with the model's shape (or a ``resizable`` key,
  whose shape the module's own load hook adapts, e.g. an APE table);
* ``missing``: the model's keys that the state dict lacks;
* ``unexpected``: the state dict's keys the model has no place for;
* ``mismatched``: in both with another shape, as
  ``(key, checkpoint shape, model shape)``.

:meth:`KeyReport.enforce` applies a policy:

=============  ===============================================================
``strict``     every model tensor present with its shape and nothing
               unexpected (resume, test, inference, export, analysis of a
               whole model)
``lenient``    at least one key matches and no matched key has another
               shape; missing keys keep their initialisation, unexpected
               ones are ignored (``init_cfg`` Pretrained backbones,
               converters)
``partial``    at least one tensor fits by name and shape; the rest keeps
               its initialisation (``load_from`` for fine-tuning, where a
               new head of another size is expected)
=============  ===============================================================

and raises :class:`~mmpos.errors.CheckpointMismatchError`, one line
``<source> does not fit <Model>: <what>`` naming up to three keys of each
kind (shapes included), and the converter to run when the keys are in
another project's layout (:data:`FOREIGN_LAYOUTS`). :func:`load_state` = compare, enforce, copy the
fitting tensors, log the report.
"""
import logging
from dataclasses import dataclass, field
from typing import Iterable, List, Mapping, Tuple, Union

import torch
import torch.nn as nn
from mmengine.logging import print_log

from mmpos.errors import CheckpointMismatchError

POLICIES = ('strict', 'lenient', 'partial')
SHOWN = 3  # keys named per kind in a message

#: ``(key, whose layout, converter in tools/model_converters/)``: a
#: checkpoint holding ``key`` (at its top level, or under a ``module.`` /
#: ``model.`` wrapper) was written by another project; the first row that
#: matches names the converter
FOREIGN_LAYOUTS = (
    ('rope_embed.periods', "facebookresearch/dinov3's DinoVisionTransformer",
     'dinov3_official2mmpos.py'),
    ('freqs', "the RoPE-ViT authors' (naver-ai/rope-vit)",
     'rope_vit_official2mmpos.py'),
    ('freqs_t_x', "the RoPE-ViT authors' (naver-ai/rope-vit)",
     'rope_vit_official2mmpos.py'),
    ('patch_embed.proj.weight', "timm's (VisionTransformer, Eva)",
     'timm2mmpos.py'),
)


def converter_hint(keys: Iterable[str]) -> str:
    """How to convert a checkpoint whose ``keys`` are in a layout of
    :data:`FOREIGN_LAYOUTS` (empty when none matches)."""
    keys = {k.split('.', 1)[1] if k.startswith(('module.', 'model.')) else k
            for k in keys}
    for key, whose, tool in FOREIGN_LAYOUTS:
        if key in keys:
            return (f'its keys are in {whose} layout ({key!r}); convert it '
                    f'first: python tools/model_converters/{tool} SRC DST')
    return ''


def _names(keys, shown=SHOWN) -> str:
    keys = list(keys)
    more = f' (+{len(keys) - shown} more)' if len(keys) > shown else ''
    return ', '.join(keys[:shown]) + more


def _shape(shape) -> Tuple[int, ...]:
    return tuple(int(s) for s in shape)


@dataclass(frozen=True)
class KeyReport:
    """How a state dict's keys meet a model's (sorted key lists).

    ``report['missing']`` works as ``report.missing`` does."""
    matched: List[str] = field(default_factory=list)
    missing: List[str] = field(default_factory=list)
    unexpected: List[str] = field(default_factory=list)
    mismatched: List[Tuple[str, tuple, tuple]] = field(default_factory=list)

    def __getitem__(self, kind: str):
        return getattr(self, kind)

    def mismatch_lines(self) -> List[str]:
        """``key: checkpoint (..) vs model (..)`` per mismatched key."""
        return [f'{k}: checkpoint {a} vs model {b}'
                for k, a, b in self.mismatched]

    def __str__(self) -> str:
        """One line per kind: ``N <kind> key(s)[: k1, k2, ...]``."""
        lines = [f'{len(self.matched)} matched key(s)']
        for kind, keys in (('missing', self.missing),
                           ('unexpected', self.unexpected),
                           ('of another shape', self.mismatch_lines())):
            lines.append(f'{len(keys)} {kind} key(s)' +
                         (': ' + ', '.join(keys) if keys else ''))
        return '\n'.join(lines)

    def problems(self, policy: str) -> List[str]:
        """What ``policy`` refuses in this report (empty: it fits)."""
        if policy not in POLICIES:
            raise ValueError(f'policy must be one of {POLICIES}, got '
                             f'{policy!r}')
        named = len(self.matched) + len(self.mismatched)
        own = named + len(self.missing)
        total = named + len(self.unexpected)
        if policy == 'partial' and not self.matched:
            return [f'none of its {total} tensors matches the model\'s '
                    f'{own} by name and shape (checkpoint keys: '
                    f'{_names(self.unexpected + self.mismatch_lines())}; '
                    f'model keys: {_names(self.missing)})']
        if not named:
            return [f'none of its {total} tensors matches the model\'s '
                    f'{own} by name (checkpoint keys: '
                    f'{_names(self.unexpected)}; model keys: '
                    f'{_names(self.missing)})']
        found = []
        if policy == 'strict' and self.missing:
            found.append(f'{len(self.missing)} model tensors missing '
                         f'({_names(self.missing)})')
        if policy != 'partial' and self.mismatched:
            found.append(f'{len(self.mismatched)} of another shape '
                         f'({_names(self.mismatch_lines())})')
        if policy == 'strict' and self.unexpected:
            found.append(f'{len(self.unexpected)} unexpected '
                         f'({_names(self.unexpected)})')
        return found

    def enforce(self, policy: str, source: str, target: str,
                hint: str = '') -> None:
        """Raise :class:`CheckpointMismatchError` ``<source> does not fit
        <target>: <problems>[; <hint>]`` if ``policy`` refuses the report.
        A strict refusal of a checkpoint that holds only ``backbone.*``
        for a whole model says how such a file is used. A checkpoint in
        another project's layout is refused under every policy, naming the
        converter (:func:`converter_hint`) instead of ``hint``: a few keys
        that happen to share a name (``cls_token``) would otherwise load
        alone."""
        found = self.problems(policy)
        foreign = converter_hint(self.matched + self.unexpected + [
            k for k, _, _ in self.mismatched])
        if foreign and not found:  # a few clashing names would load alone
            found = [f'only {len(self.matched)} of its '
                     f'{len(self.matched) + len(self.unexpected)} tensors '
                     'match by name']
        if not found:
            return
        hint = foreign or hint
        if policy == 'strict' and self.backbone_only():
            hint = ('it holds only backbone weights, which initialise '
                    "model.backbone.init_cfg=dict(type='Pretrained', "
                    'checkpoint=<this file>) of a model that is then '
                    'trained; this needs a checkpoint of the whole model '
                    '(what tools/train.py writes)')
        raise CheckpointMismatchError(
            f'{source} does not fit {target}: ' + ', '.join(found) +
            (f'; {hint}' if hint else ''))

    def backbone_only(self) -> bool:
        """The checkpoint's keys all lie under ``backbone.`` while the model
        also has tensors elsewhere (neck, head, decoder)."""
        keys = self.matched + [k for k, _, _ in self.mismatched] + \
            self.unexpected
        return bool(keys) and all(
            k.startswith('backbone.') for k in keys) and \
            any(not k.startswith('backbone.') for k in self.missing)


Shapes = Mapping[str, Union[torch.Size, Tuple[int, ...]]]


def compare(state: Mapping[str, torch.Tensor],
            model: Union[nn.Module, Shapes],
            resizable: Iterable[str] = ()) -> KeyReport:
    """The :class:`KeyReport` of ``state`` against ``model`` (a module, or
    its ``{key: shape}``); keys in ``resizable`` match whatever their
    shape."""
    own = ({k: v.shape for k, v in model.state_dict().items()}
           if isinstance(model, nn.Module) else dict(model))
    resizable = set(resizable)
    common = sorted(set(state) & set(own))
    mismatched = [(k, _shape(state[k].shape), _shape(own[k]))
                  for k in common if k not in resizable and
                  _shape(state[k].shape) != _shape(own[k])]
    wrong = {k for k, _, _ in mismatched}
    return KeyReport(
        matched=[k for k in common if k not in wrong],
        missing=sorted(set(own) - set(state)),
        unexpected=sorted(set(state) - set(own)),
        mismatched=mismatched)


def log_report(report: KeyReport, source: str, target: str) -> None:
    """One INFO line with the counts; WARNING lines only for keys that are
    missing (left as initialised), unexpected (ignored) or of another shape
    (not loaded)."""
    own = len(report.matched) + len(report.missing) + len(report.mismatched)
    print_log(f'{target}: loaded {len(report.matched)} of its {own} tensors '
              f'from {source} ({len(report.missing)} missing keys, '
              f'{len(report.unexpected)} unexpected keys, '
              f'{len(report.mismatched)} keys of another shape)',
              logger='current')
    for kind, keys, fate in (
            ('missing', report.missing, 'left as initialised'),
            ('unexpected', report.unexpected, 'ignored'),
            ('of another shape', report.mismatch_lines(), 'not loaded')):
        if keys:
            print_log(f'{target}: {len(keys)} {kind} keys ({fate}): '
                      + ', '.join(keys), logger='current',
                      level=logging.WARNING)


def load_state(module: nn.Module,
               state: Mapping[str, torch.Tensor],
               policy: str,
               source: str,
               resizable: Iterable[str] = (),
               hint: str = '') -> KeyReport:
    """Compare ``state`` with ``module``, :meth:`~KeyReport.enforce`
    ``policy``, copy the matched tensors into ``module`` and log the report.

    Returns:
        The :class:`KeyReport`.
    """
    target = type(module).__name__
    report = compare(state, module, resizable)
    report.enforce(policy, source, target, hint)
    module.load_state_dict({k: state[k] for k in report.matched},
                           strict=False)
    log_report(report, source, target)
    return report
