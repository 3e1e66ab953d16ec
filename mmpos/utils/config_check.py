"""Misspelled config keys, reported before anything is built.

mmengine ignores a top-level key nobody reads (``trian_dataloader`` leaves
the real ``train_dataloader`` of a base config in place) and reports a
misspelled constructor argument as a ``TypeError`` from deep inside the
registry. :func:`config_key_problems` finds both, with a close match from
:mod:`difflib`:

* a top-level key close to one the Runner reads, or any unknown top-level
  key that ``--cfg-options`` adds (configs may hold helper variables such
  as ``train_pipeline``, so other unknown keys of the file pass);
* an argument of ``model.backbone``, and any key that ``--cfg-options`` adds
  to a dict with a ``type``, that the registered class's ``__init__`` does
  not take (classes taking ``**kwargs`` are not checked).
"""
import difflib
import inspect
from typing import Iterable, List, Optional

from mmengine.registry import (DATA_SAMPLERS, DATASETS, EVALUATOR, HOOKS,
                               LOG_PROCESSORS, LOOPS, METRICS, MODELS,
                               OPTIM_WRAPPER_CONSTRUCTORS, OPTIM_WRAPPERS,
                               OPTIMIZERS, PARAM_SCHEDULERS, RUNNERS,
                               TASK_UTILS, TRANSFORMS, VISBACKENDS,
                               VISUALIZERS)
from mmengine.runner import Runner

# Top-level keys read by something other than Runner.__init__'s arguments.
OTHER_TOP_LEVEL_KEYS = frozenset({
    'activation_checkpointing', 'compile', 'custom_imports',
    'efficient_conv_bn_eval', 'find_unused_parameters', 'model_wrapper_cfg',
    'runner_type', 'strategy', 'sync_bn'
})
# Read by mmdet's / mmseg's test tools with --tta; never suggested (helper
# variables such as 'train_pipeline' are close to 'tta_pipeline').
TTA_KEYS = frozenset({'tta_model', 'tta_pipeline'})
# Searched in this order for the class of a config dict's ``type``.
REGISTRIES = (MODELS, TASK_UTILS, DATASETS, TRANSFORMS, DATA_SAMPLERS, LOOPS,
              HOOKS, OPTIM_WRAPPERS, OPTIM_WRAPPER_CONSTRUCTORS, OPTIMIZERS,
              PARAM_SCHEDULERS, METRICS, EVALUATOR, VISUALIZERS, VISBACKENDS,
              LOG_PROCESSORS)
TOP_LEVEL_CUTOFF = 0.8  # difflib ratio; 'trian_dataloader' scores 0.94


def _suggest(word: str, choices: Iterable[str], cutoff: float) -> str:
    close = difflib.get_close_matches(word, list(choices), n=1, cutoff=cutoff)
    return f' (did you mean {close[0]!r}?)' if close else ''


def resolve_type(type_, scope: Optional[str]):
    """The class a config ``type`` names in ``scope`` (``None``: unknown)."""
    if inspect.isclass(type_):
        return type_
    if not isinstance(type_, str):
        return None
    for registry in REGISTRIES:
        with registry.switch_scope_and_registry(scope) as scoped:
            cls = scoped.get(type_)
        if cls is not None:
            return cls
    return None


def accepted_arguments(cls) -> Optional[List[str]]:
    """Keyword arguments of ``cls(...)``; ``None`` if it takes ``**kwargs``
    (or has no inspectable signature)."""
    try:
        params = inspect.signature(cls).parameters.values()
    except (TypeError, ValueError):
        return None
    if any(p.kind is p.VAR_KEYWORD for p in params):
        return None
    return [p.name for p in params if p.kind is not p.VAR_POSITIONAL]


def unknown_arguments(cfg_dict, where: str, scope: Optional[str],
                      keys: Optional[Iterable[str]] = None) -> List[str]:
    """Problems for ``keys`` (default: all) of a dict with a ``type`` that
    its class does not accept."""
    cls = resolve_type(cfg_dict.get('type'), scope)
    accepted = accepted_arguments(cls) if cls is not None else None
    if accepted is None:
        return []
    keys = [k for k in (cfg_dict if keys is None else keys)
            if k != 'type' and not k.startswith('_')]
    return [f'{where}.{key}: {cls.__name__} takes no argument {key!r}'
            f'{_suggest(key, accepted, 0.6)}'
            for key in keys if key not in accepted]


def top_level_keys(cfg) -> frozenset:
    """Top-level keys that the (configured) runner reads."""
    runner_cls = Runner
    if cfg.get('runner_type'):
        runner_cls = resolve_runner(cfg.runner_type, cfg.get('default_scope'))
    params = inspect.signature(runner_cls.__init__).parameters
    return frozenset(params) - {'self', 'cfg'} | OTHER_TOP_LEVEL_KEYS


def resolve_runner(runner_type, scope):
    if inspect.isclass(runner_type):
        return runner_type
    with RUNNERS.switch_scope_and_registry(scope) as registry:
        return registry.get(runner_type) or Runner


def _lookup(cfg, parts):
    """``(parent, found)`` for a dotted path; parent is ``None`` when a
    container on the way is missing."""
    node = cfg
    for part in parts[:-1]:
        if isinstance(node, (list, tuple)) and part.isdigit() \
                and int(part) < len(node):
            node = node[int(part)]
        elif isinstance(node, dict) and part in node:
            node = node[part]
        else:
            return None, False
    return node, isinstance(node, dict) and parts[-1] in node


def new_option_keys(cfg, options: dict) -> List[str]:
    """The ``--cfg-options`` keys that do not exist in ``cfg`` (call before
    merging them)."""
    return [key for key in options if not _lookup(cfg, key.split('.'))[1]]


def config_key_problems(cfg, new_keys: Iterable[str] = ()) -> List[str]:
    """Problems of the merged ``cfg`` (see the module docstring).

    Args:
        cfg: the config with ``--cfg-options`` merged.
        new_keys: dotted keys that ``--cfg-options`` added
            (:func:`new_option_keys`).
    """
    scope = cfg.get('default_scope')
    known = top_level_keys(cfg)
    new_keys = list(new_keys)
    new_top = {k for k in new_keys if '.' not in k}
    problems = []
    for key in cfg.keys():
        if key in known or key in TTA_KEYS:
            continue
        hint = _suggest(key, known, TOP_LEVEL_CUTOFF)
        if hint or key in new_top:
            problems.append(f'unknown top-level key {key!r}{hint}')
    backbone = cfg.get('model', {}).get('backbone')
    if isinstance(backbone, dict):
        problems += unknown_arguments(backbone, 'model.backbone', scope)
    for key in new_keys:
        parts = key.split('.')
        parent, _ = _lookup(cfg, parts)
        if len(parts) > 1 and isinstance(parent, dict) and \
                key.rsplit('.', 1)[0] != 'model.backbone':
            problems += unknown_arguments(parent, key.rsplit('.', 1)[0],
                                          scope, [parts[-1]])
    return problems


__all__ = [
    'accepted_arguments', 'config_key_problems', 'new_option_keys',
    'resolve_type', 'top_level_keys', 'unknown_arguments'
]
