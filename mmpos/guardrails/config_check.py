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

A value that a constructor rejects while the runner builds (e.g.
``model.backbone.rope.type='spirall'``, ``optim_wrapper.optimizer.lr=-1``)
is reported with the config key that carried it by :func:`blame_config`.
"""
import contextlib
import difflib
import inspect
import re
from typing import Iterable, List, Optional, Tuple

from mmengine.registry import (DATA_SAMPLERS, DATASETS, EVALUATOR, HOOKS,
                               LOG_PROCESSORS, LOOPS, METRICS, MODELS,
                               OPTIM_WRAPPER_CONSTRUCTORS, OPTIM_WRAPPERS,
                               OPTIMIZERS, PARAM_SCHEDULERS, RUNNERS,
                               TASK_UTILS, TRANSFORMS, VISBACKENDS,
                               VISUALIZERS)
from mmengine.registry.build_functions import build_from_cfg
from mmengine.runner import Runner

from mmpos.errors import BadInputError

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
    that are not checked (or has no inspectable signature). An mmpos class
    hands its ``**kwargs`` to its base class (e.g. ``MAERoPEViT`` to
    ``RoPEVisionTransformer``), so it takes the arguments of its classes up
    to the first without ``**kwargs``."""
    names = []
    for klass in cls.__mro__:
        if '__init__' not in vars(klass):
            continue
        named, open_ended = _init_arguments(klass.__init__)
        if named is None:
            return None
        names += [n for n in named if n != 'self' and n not in names]
        if not open_ended:
            return names
        if not klass.__module__.startswith('mmpos.'):
            return None
    return None


def _init_arguments(func) -> Tuple[Optional[List[str]], bool]:
    """The named arguments of ``func`` (a class: of its construction) and
    whether it also takes ``**kwargs`` (``None, True``: not inspectable)."""
    try:
        params = inspect.signature(func).parameters.values()
    except (TypeError, ValueError):
        return None, True
    named = [p.name for p in params
             if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]
    return named, any(p.kind is p.VAR_KEYWORD for p in params)


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
    for split in ('train', 'val', 'test'):
        size = (cfg.get(f'{split}_dataloader') or {}).get('batch_size')
        if size is not None and (not isinstance(size, int) or size < 1):
            problems.append(f'{split}_dataloader.batch_size={size!r}: '
                            'needs a positive number of samples')
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


# What a constructor raises for an argument it rejects.
CONSTRUCTOR_ERRORS = (ValueError, TypeError, AssertionError, KeyError)
_FAILED_BUILD = '_mmpos_failed_build'  # attribute set on the exception


def _type_name(type_) -> Optional[str]:
    """``'mmdet.FPN'`` -> ``'FPN'``; a class -> its name."""
    if inspect.isclass(type_) or inspect.isfunction(type_):
        return type_.__name__
    return type_.rsplit('.', 1)[-1] if isinstance(type_, str) else None


def _typed_dicts(node, where):
    """``(where, dict)`` of every dict with a ``type`` under ``node``."""
    if isinstance(node, dict):
        if 'type' in node:
            yield where, node
        for key, value in node.items():
            yield from _typed_dicts(value, f'{where}.{key}' if where else key)
    elif isinstance(node, (list, tuple)):
        for i, value in enumerate(node):
            yield from _typed_dicts(value, f'{where}.{i}')


def _mentions(message: str, key: str, value) -> bool:
    """Whether ``message`` names ``key`` (quoted) or shows ``value``."""
    if f"'{key}'" in message:
        return True
    if isinstance(value, bool) or value is None:
        return False
    if isinstance(value, str):
        return repr(value) in message or (len(value) > 2 and
                                          value in message)
    if isinstance(value, (int, float)):
        shown = {str(value), repr(value)}
        return any(re.search(rf'(?<![\w.]){re.escape(v)}(?![\w]|\.\d)',
                             message) for v in shown)
    return False


def _equal(a, b) -> bool:
    try:
        return bool(a == b)
    except Exception:  # e.g. tensors of several elements
        return False


def blamed_keys(cfg_dict: dict, built: dict, message: str,
                option_keys: Iterable[str] = ()) -> List[str]:
    """Config keys (dotted) that may carry the value ``message`` rejects.

    Args:
        cfg_dict: the config as a plain dict.
        built: the dict whose build raised (its ``type`` and arguments).
        message: the error message.
        option_keys: ``--cfg-options`` keys, listed first when they match.

    Returns:
        Keys of the config dicts of the same class whose value is the one
        passed to the build and is shown (or whose name is quoted) in the
        message.
    """
    name = _type_name(built.get('type'))
    found = []
    for where, node in _typed_dicts(cfg_dict, ''):
        if _type_name(node.get('type')) != name:
            continue
        for key, value in node.items():
            if key == 'type' or isinstance(value, (dict, list, tuple)):
                continue
            if key in built and not _equal(built[key], value):
                continue
            if _mentions(message, key, value):
                found.append(f'{where}.{key}')
    options = set(option_keys)
    return sorted(found, key=lambda k: k not in options)


def failed_build(err: BaseException):
    """``(config dict, registry)`` of the innermost registry build that
    ``err`` went through (read from its traceback: the frames of mmengine's
    ``build_from_cfg``), or ``(None, None)``."""
    found = None, None
    tb = err.__traceback__
    while tb is not None:
        frame = tb.tb_frame
        if frame.f_code is build_from_cfg.__code__:
            cfg = frame.f_locals.get('cfg')
            if isinstance(cfg, dict):
                found = dict(cfg), frame.f_locals.get('registry')
        tb = tb.tb_next
    return found


def _registered_names(registry, type_: str) -> List[str]:
    """Names a ``type`` like ``type_`` can take from ``registry``: its
    modules and its parents'; for ``'scope.Name'`` those of ``scope``'s
    registry, with the prefix."""
    prefix = ''
    if '.' in type_:
        scope = type_.split('.', 1)[0]
        registry = registry._get_root_registry()._search_child(scope)
        prefix = f'{scope}.'
    names = []
    while registry is not None:
        names += [prefix + name for name in registry.module_dict]
        registry = registry.parent
    return names


def unknown_type_error(cfg_dict: dict, built: dict, registry):
    """:class:`BadInputError` naming the config key of a ``type`` that is
    not registered, with the closest registered name."""
    type_ = built.get('type')
    where = [w for w, node in _typed_dicts(cfg_dict, '')
             if node.get('type') == type_]
    key = f'{where[0]}.type' if where else 'type'
    hint = _suggest(type_, _registered_names(registry, type_), 0.7)
    return BadInputError(
        f'{key}={type_!r} is not registered in {registry.scope}::'
        f'{registry.name}{hint}; if a module defines it, the config must '
        'import that module (custom_imports)')


@contextlib.contextmanager
def blame_config(cfg, cfg_options: Optional[dict] = None):
    """Report a value that a constructor rejects with its config key.

    While the block runs (building the runner, training, testing), an error
    of :data:`CONSTRUCTOR_ERRORS` raised by building a config dict through a
    registry (:func:`failed_build`) becomes a
    :class:`~mmpos.errors.BadInputError`
    ``<key>=<value>: <Class> rejected it: <message>`` when a key of that
    dict in ``cfg`` can be named (:func:`blamed_keys`); a ``type`` no
    registry holds becomes ``<key>.type='X' is not registered ... (did you
    mean 'Y'?)``. Anything else, e.g. an error no config value explains,
    keeps its traceback.
    """
    cfg_dict = cfg.to_dict() if hasattr(cfg, 'to_dict') else dict(cfg)
    try:
        yield
    except CONSTRUCTOR_ERRORS as err:
        built, registry = failed_build(err)
        if built is None or isinstance(err, BadInputError):
            raise
        type_ = built.get('type')
        if isinstance(err, KeyError) and isinstance(type_, str) and \
                registry is not None and registry.get(type_) is None:
            raise unknown_type_error(cfg_dict, built, registry) from err
        message = ' '.join(str(err).split())
        keys = blamed_keys(cfg_dict, built, message, cfg_options or {})
        if not keys:
            raise
        value = _lookup_value(cfg_dict, keys[0])
        raise BadInputError(
            f'{keys[0]}={value!r}: {_type_name(type_)} rejected '
            f'it: {type(err).__name__}: {message}') from err


def _lookup_value(cfg_dict, key):
    parent, _ = _lookup(cfg_dict, key.split('.'))
    return parent[key.rsplit('.', 1)[-1]]


__all__ = [
    'accepted_arguments', 'blame_config', 'blamed_keys',
    'config_key_problems', 'failed_build', 'new_option_keys', 'resolve_type',
    'top_level_keys', 'unknown_arguments'
]
