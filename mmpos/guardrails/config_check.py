"""Config keys, constructor arguments and ``type``\ s checked before
anything is built, and what a constructor rejects while the runner builds
reported in one line.

mmengine ignores a top-level key nobody reads (``trian_dataloader`` leaves
the real ``train_dataloader`` of a base config in place) and reports a
misspelled constructor argument as a ``TypeError`` from deep inside the
registry. :func:`config_key_problems` finds both, with a close match from
:mod:`difflib`:

* a top-level key close to one the Runner reads, or any unknown top-level
  key that ``--cfg-options`` adds, with the closest key of the config one
  level down (``max_iter`` -> ``train_cfg.max_iters``; configs may hold
  helper variables such as ``train_pipeline``, so other unknown keys of
  the file pass);
* the keys of the dataloaders (torch's ``DataLoader`` and mmengine's
  own), and of every dict the runner builds from a registry with its keys
  (:data:`BUILT_DICTS`: the backbone and its position scheme, datasets,
  pipeline transforms, samplers, hooks, parameter schedulers, the
  optimizer): an unregistered ``type`` there, or an argument its class
  does not take (:func:`accepted_arguments`);
* a DropPos head whose ``num_patches`` is not the backbone's patch grid
  (:func:`patch_grid_problem`);
* an argument of ``model.backbone``, any key that ``--cfg-options`` adds to
  a dict with a ``type``, every key of a dict whose ``type`` it sets, and
  every key of the dicts with a ``type`` inside a dict value it gives
  (``model.backbone.rope=dict(type='axial', ...)``), that the registered
  class's ``__init__`` does not take (classes taking ``**kwargs`` are not
  checked).

While the runner builds, :func:`blame_config` turns a ``type`` no registry
holds into a line naming its config key, and a value that a constructor
rejects (e.g. ``optim_wrapper.optimizer.lr=-1``) into a line naming the
class being built and its error. :func:`config_dicts` is the one walk over
a config's nested dicts and lists that mmpos' checks share.
"""
import ast
import contextlib
import difflib
import functools
import inspect
import re
import textwrap
from typing import Iterable, Iterator, List, Optional, Tuple

from mmengine.config import Config
from mmengine.registry import (DATA_SAMPLERS, DATASETS, EVALUATOR, HOOKS,
                               LOG_PROCESSORS, LOOPS, METRICS, MODELS,
                               OPTIM_WRAPPER_CONSTRUCTORS, OPTIM_WRAPPERS,
                               OPTIMIZERS, PARAM_SCHEDULERS, RUNNERS,
                               TASK_UTILS, TRANSFORMS, VISBACKENDS,
                               VISUALIZERS)
from mmengine.registry.build_functions import build_from_cfg
from mmengine.runner import Runner
from torch.utils.data import DataLoader

from mmpos.errors import BadInputError
from mmpos.registry import POSITION_ENCODINGS

# Top-level keys read by something other than Runner.__init__'s arguments.
OTHER_TOP_LEVEL_KEYS = frozenset({
    'activation_checkpointing', 'compile', 'custom_imports',
    'efficient_conv_bn_eval', 'find_unused_parameters', 'model_wrapper_cfg',
    'runner_type', 'strategy', 'sync_bn'
})
# Read by mmdet's / mmseg's test tools with --tta; never suggested (helper
# variables such as 'train_pipeline' are close to 'tta_pipeline').
TTA_KEYS = frozenset({'tta_model', 'tta_pipeline'})
# Searched in this order for the class of a config dict's ``type`` (in the
# config's scope), then mmpos' position schemes (``rope=dict(type=...)``).
REGISTRIES = (MODELS, TASK_UTILS, DATASETS, TRANSFORMS, DATA_SAMPLERS, LOOPS,
              HOOKS, OPTIM_WRAPPERS, OPTIM_WRAPPER_CONSTRUCTORS, OPTIMIZERS,
              PARAM_SCHEDULERS, METRICS, EVALUATOR, VISUALIZERS, VISBACKENDS,
              LOG_PROCESSORS)
# Keys of a dict built from a registry that mmengine's builder takes for
# itself (by the registry's name).
BUILDER_KEYS = {
    OPTIM_WRAPPERS.name: frozenset({'constructor', 'paramwise_cfg'}),
    PARAM_SCHEDULERS.name: frozenset({'convert_to_iter_based'}),
}
_SPLIT = r'(train|val|test)_dataloader'
# The dicts with a ``type`` that the runner builds with their keys as the
# arguments of the class a registry holds (by their config key).
BUILT_DICTS = tuple((re.compile(pattern), registry) for pattern, registry in (
    (r'model\.backbone', MODELS),
    (r'model\.backbone\.rope', POSITION_ENCODINGS),
    (_SPLIT + r'\.dataset', DATASETS),
    (_SPLIT + r'\.dataset\.pipeline\.\d+', TRANSFORMS),
    (_SPLIT + r'\.sampler', DATA_SAMPLERS),
    (r'default_hooks\.\w+|custom_hooks\.\d+', HOOKS),
    (r'param_scheduler(\.\d+)?', PARAM_SCHEDULERS),
    (r'optim_wrapper', OPTIM_WRAPPERS),
    (r'optim_wrapper\.optimizer', OPTIMIZERS),
))
# The keys of ``*_dataloader`` that mmengine's Runner.build_dataloader takes
# besides torch's DataLoader arguments.
DATALOADER_KEYS = frozenset(
    inspect.signature(DataLoader.__init__).parameters) - {'self'} | {
        'num_batch_per_epoch', 'disable_subprocess_warning'}
TOP_LEVEL_CUTOFF = 0.8  # difflib ratio; 'trian_dataloader' scores 0.94


def config_dicts(node, where: str = '') -> Iterator[Tuple[str, dict]]:
    """``(key, dict)`` of ``node`` (if a dict) and of every dict nested in
    it through dicts, lists and tuples, parents first; ``key`` is the dotted
    path from ``where`` (list items by index: ``'model.backbone'``,
    ``'train_dataloader.dataset.pipeline.0'``).

    A caller may change a dict it is given (its new values are walked).
    """
    if isinstance(node, dict):
        yield where, node
        items = list(node.items())
    elif isinstance(node, (list, tuple)):
        items = list(enumerate(node))
    else:
        return
    for key, value in items:
        yield from config_dicts(value, f'{where}.{key}' if where else str(key))


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
        if inspect.isclass(cls):  # not a module of the same name
            return cls
    return POSITION_ENCODINGS.get(type_)


def accepted_arguments(cls) -> Optional[List[str]]:
    """Keyword arguments of ``cls(...)``; ``None`` if it takes ``**kwargs``
    that are not checked (or has no inspectable signature). A class
    whose ``__init__`` only hands its ``**kwargs`` on to
    ``super().__init__`` (:func:`forwards_kwargs`; e.g. ``MAERoPEViT`` to
    ``RoPEVisionTransformer``, mmpretrain's ``CustomDataset`` to mmengine's
    ``BaseDataset``) takes the arguments of its classes up to the first
    without ``**kwargs``."""
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
        if not forwards_kwargs(klass.__init__):
            return None
    return None


@functools.lru_cache(maxsize=None)
def forwards_kwargs(init) -> bool:
    """Whether the ``**kwargs`` of the function ``init`` are used only
    passed whole to ``super().__init__(...)`` (at least once; besides
    ``.get`` / ``.setdefault`` on them), so that the next ``__init__`` in
    the class' MRO takes them."""
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(init)))
    except (OSError, TypeError, SyntaxError):
        return False
    func = tree.body[0]
    if not isinstance(func, (ast.FunctionDef, ast.AsyncFunctionDef)) or \
            func.args.kwarg is None:
        return False
    name = func.args.kwarg.arg
    forwarded = set()
    for node in ast.walk(func):
        if isinstance(node, ast.Call) and \
                isinstance(node.func, ast.Attribute) and \
                node.func.attr == '__init__' and \
                isinstance(node.func.value, ast.Call) and \
                isinstance(node.func.value.func, ast.Name) and \
                node.func.value.func.id == 'super':
            forwarded |= {id(k.value) for k in node.keywords
                          if k.arg is None and isinstance(k.value, ast.Name)
                          and k.value.id == name}
    # reading a key or giving a default (``kwargs.setdefault('init_cfg',
    # ...)``, MAERoPEViT's) leaves every given argument to the next class
    reads = {id(node.value) for node in ast.walk(func)
             if isinstance(node, ast.Attribute)
             and node.attr in ('get', 'setdefault')
             and isinstance(node.value, ast.Name) and node.value.id == name}
    uses = [id(node) for node in ast.walk(func)
            if isinstance(node, ast.Name) and node.id == name
            and id(node) not in reads]
    return bool(forwarded) and set(uses) == forwarded


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


def lookup_path(cfg, parts):
    """``(parent, found)`` for a dotted path in a config (or dict); parent
    is ``None`` when a container on the way is missing."""
    node = cfg
    for part in parts[:-1]:
        if isinstance(node, (list, tuple)) and part.isdigit() \
                and int(part) < len(node):
            node = node[int(part)]
        elif isinstance(node, (dict, Config)) and part in node:
            node = node[part]
        else:
            return None, False
    return node, isinstance(node, (dict, Config)) and parts[-1] in node


def new_option_keys(cfg, options: dict) -> List[str]:
    """The ``--cfg-options`` keys that do not exist in ``cfg`` (call before
    merging them)."""
    return [key for key in options if not lookup_path(cfg, key.split('.'))[1]]


def type_switch_problem(cfg, options: dict) -> Optional[str]:
    """When an option sets a key inside a value of ``cfg`` (before merging)
    that is not a dict (e.g. ``model.backbone.rope.type=axial`` on an APE
    config, whose ``rope`` is ``None``): one line naming the option, the
    value it would go into and the options that replace that value as a
    whole (mmengine's ``_delete_``); otherwise None."""
    for key, value in options.items():
        parts = key.split('.')
        for depth in range(1, len(parts)):
            parent, found = lookup_path(cfg, parts[:depth])
            if not found:
                break
            node = parent[parts[depth - 1]]
            if isinstance(node, (dict, Config, list, tuple)):
                continue
            whole = '.'.join(parts[:depth])
            if options.get(whole + '._delete_'):
                break
            siblings = [f'{k}={v}' for k, v in options.items()
                        if k.startswith(whole + '.')]  # ordered as given
            return (f'--cfg-options {key}={value}: {whole} is {node!r} in '
                    f'this config, not a dict, so its keys cannot be set '
                    f'one by one; replace it as a whole: --cfg-options '
                    f'{whole}._delete_=True {" ".join(siblings)}')
    return None


def built_dicts(cfg) -> Iterator[Tuple[str, dict, object]]:
    """``(key, dict, registry)`` for every dict with a ``type`` that the
    runner builds with exactly its keys from a registry, in a config with a
    ``default_scope`` (without one, the tool reading it picks the scope):
    the backbone and
    its position scheme (``model.backbone.rope``), the datasets, their
    pipelines' transforms and the samplers of the dataloaders, the hooks,
    the parameter schedulers and the optimizer (see :data:`BUILT_DICTS`).
    """
    if not cfg.get('default_scope'):
        return
    for key in cfg.keys():
        for where, node in config_dicts(cfg[key], key):
            if not isinstance(node.get('type'), str):
                continue
            for pattern, registry in BUILT_DICTS:
                if pattern.fullmatch(where):
                    yield where, node, registry
                    break


def registered_type_problem(where: str, node: dict, registry,
                            scope: Optional[str]) -> Optional[str]:
    """``<key>.type='X' is not registered in <registry> (did you mean
    'Y'?)`` when ``registry`` (in the dict's ``_scope_``, else ``scope``)
    does not hold the dict's ``type``; ``None`` when it does."""
    type_ = node['type']
    scope = node.get('_scope_', scope)
    if registry is POSITION_ENCODINGS:
        if registry.get(type_) is not None:
            return None
        names = list(registry.module_dict)
    else:
        with registry.switch_scope_and_registry(scope) as scoped:
            if scoped.get(type_) is not None:
                return None
            names = _registered_names(scoped, type_)
    return (f'{where}.type={type_!r} is not registered in {registry.name}'
            f'{_suggest(type_, names, 0.6)}; if a module defines it, the '
            'config must import that module (custom_imports)')


def dataloader_problems(cfg) -> List[str]:
    """Keys of ``{train,val,test}_dataloader`` that neither torch's
    ``DataLoader`` nor mmengine's ``Runner.build_dataloader`` takes, and
    batch sizes that are not a positive number."""
    problems = []
    for split in ('train', 'val', 'test'):
        loader = cfg.get(f'{split}_dataloader') or {}
        for key in loader:
            if key not in DATALOADER_KEYS and not key.startswith('_'):
                problems.append(
                    f'{split}_dataloader.{key}: a dataloader takes no '
                    f'argument {key!r}'
                    f'{_suggest(key, DATALOADER_KEYS, 0.6)}')
        size = loader.get('batch_size')
        if size is not None and (not isinstance(size, int) or size < 1):
            problems.append(f'{split}_dataloader.batch_size={size!r}: '
                            'needs a positive number of samples')
    return problems


def patch_grid_problem(cfg) -> Optional[str]:
    """One line when ``model.head.num_patches`` (DropPos' position
    classes) is not the patch grid of ``model.backbone``'s ``img_size``
    and ``patch_size``, or that size is not a whole number of patches: the
    backbone pads such an image to a larger grid, while DropPos (as its
    authors' code, whose patch embedding takes whole patches only) predicts
    one of ``num_patches`` positions per patch; ``None`` otherwise."""
    model = cfg.get('model') or {}
    head, backbone = model.get('head'), model.get('backbone')
    if not (isinstance(head, dict) and isinstance(backbone, dict)) or \
            head.get('type') != 'DropPosHead' or \
            not isinstance(head.get('num_patches'), int):
        return None
    size, patch = backbone.get('img_size'), backbone.get('patch_size')
    sizes = (size, size) if isinstance(size, int) else size
    if not (isinstance(patch, int) and isinstance(sizes, (list, tuple))):
        return None
    if any(s % patch for s in sizes):
        below = sizes[0] // patch * patch
        fits = f'{below} or {below + patch}' if below else str(patch)
        return (f'model.backbone.img_size={size!r} is not a multiple of '
                f'patch_size={patch}: DropPos predicts each patch\'s position '
                'on a grid of whole patches (model.head.num_patches); use '
                f'img_size={fits}')
    grid = (sizes[0] // patch) * (sizes[1] // patch)
    if head['num_patches'] != grid:
        return (f'model.head.num_patches={head["num_patches"]} is not the '
                f'{sizes[0] // patch}x{sizes[1] // patch} patch grid of '
                f'model.backbone.img_size={size!r}, patch_size={patch}; use '
                f'num_patches={grid}')
    return None


def _nested_suggestion(key: str, cfg) -> str:
    """`` (did you mean 'a.b'?)`` for the dotted key of ``cfg`` (below the
    top level) whose last part is closest to ``key`` (``max_iter`` ->
    ``train_cfg.max_iters``); empty when none is close."""
    paths = {}
    for top in cfg.keys():
        value = cfg[top]
        if isinstance(value, dict):
            for sub in value:
                paths.setdefault(str(sub), f'{top}.{sub}')
    close = difflib.get_close_matches(key, list(paths), n=1,
                                      cutoff=TOP_LEVEL_CUTOFF)
    return f' (did you mean {paths[close[0]]!r}?)' if close else ''


def config_key_problems(cfg, options: Optional[dict] = None,
                        new_keys: Iterable[str] = ()) -> List[str]:
    """Problems of the merged ``cfg`` (see the module docstring).

    Args:
        cfg: the config with ``--cfg-options`` merged.
        options: the ``--cfg-options`` (dotted key -> value).
        new_keys: the keys of ``options`` that were not in the config
            before (:func:`new_option_keys`).
    """
    scope = cfg.get('default_scope')
    known = top_level_keys(cfg)
    new_keys = set(new_keys)
    problems = []
    for key in cfg.keys():
        if key in known or key in TTA_KEYS:
            continue
        hint = _suggest(key, known, TOP_LEVEL_CUTOFF)
        if key in new_keys and not hint:
            hint = _nested_suggestion(key, cfg)
        if hint or key in new_keys:
            problems.append(f'unknown top-level key {key!r}{hint}')
    problems += dataloader_problems(cfg)
    grid = patch_grid_problem(cfg)
    if grid:
        problems.append(grid)
    for where, node, registry in built_dicts(cfg):
        unregistered = registered_type_problem(where, node, registry, scope)
        if unregistered:
            problems.append(unregistered)
            continue
        keys = [k for k in node if k not in BUILDER_KEYS.get(
            registry.name, ())]
        problems += unknown_arguments(node, where, node.get('_scope_', scope),
                                      keys)
    for key in options or {}:
        parts = key.split('.')
        parent, found = lookup_path(cfg, parts)
        if not found:
            continue
        owner = key.rsplit('.', 1)[0] if len(parts) > 1 else None
        if owner is not None:
            if parts[-1] == 'type':  # another class: all its arguments
                problems += unknown_arguments(parent, owner, scope)
            elif key in new_keys:
                problems += unknown_arguments(parent, owner, scope,
                                              [parts[-1]])
        for where, node in config_dicts(parent[parts[-1]], key):
            problems += unknown_arguments(node, where, scope)
    return list(dict.fromkeys(problems))  # each once


# What a constructor raises for an argument it rejects.
CONSTRUCTOR_ERRORS = (ValueError, TypeError, AssertionError, KeyError)
# mmengine's build_from_cfg for a ``type`` its registry does not hold.
UNREGISTERED = re.compile(r"^'?(?P<type>\S+) is not in the "
                          r'(?P<scope>[\w.-]+)::(?P<name>[\w ]+?) registry\.')


def built_class(err: BaseException) -> Optional[str]:
    """The name of the class (or function) that raised ``err`` while a
    registry built it: the callee of the innermost mmengine
    ``build_from_cfg`` in ``err``'s traceback (of a class, the ``__init__``
    it ran); ``None`` when ``err`` was not raised by one."""
    callee, tb = None, err.__traceback__
    while tb is not None:
        if tb.tb_frame.f_code is build_from_cfg.__code__:
            callee = tb.tb_next
        tb = tb.tb_next
    # ManagerMixin classes are built through their get_instance
    while callee is not None and callee.tb_next is not None and \
            callee.tb_frame.f_code.co_name == 'get_instance':
        callee = callee.tb_next
    if callee is None:
        return None
    name = callee.tb_frame.f_code.co_qualname
    return name.removesuffix('.__init__').rsplit('.', 1)[-1]


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


def unknown_type_error(cfg, match) -> BadInputError:
    """:class:`BadInputError` naming the config key of the ``type`` that
    mmengine's message (``match`` of :data:`UNREGISTERED`) reports, with
    the closest registered name."""
    type_, scope = match['type'], match['scope']
    where = [w for w, node in config_dicts(cfg.to_dict() if hasattr(
        cfg, 'to_dict') else cfg) if node.get('type') == type_]
    key = f'{where[0]}.type' if where else 'type'
    roots = [r for r in REGISTRIES if r.name == match['name']]
    registry = roots[0]._search_child(scope) if roots else None
    hint = _suggest(type_, _registered_names(registry, type_), 0.7) \
        if registry is not None else ''
    return BadInputError(
        f'{key}={type_!r} is not registered in {scope}::{match["name"]}'
        f'{hint}; if a module defines it, the config must import that module '
        '(custom_imports)')


@contextlib.contextmanager
def blame_config(cfg):
    """One line for what the config gives that a registry build refuses.

    While the block runs (building the runner, training, testing), an error
    of :data:`CONSTRUCTOR_ERRORS` raised by a class that a registry builds
    (:func:`built_class`) becomes a :class:`~mmpos.errors.BadInputError`
    ``<Class> rejected its config arguments: <Error>: <message>``, and a
    ``type`` no registry holds ``<key>.type='X' is not registered in
    <scope>::<registry> (did you mean 'Y'?)``. Anything else keeps its
    traceback.
    """
    try:
        yield
    except CONSTRUCTOR_ERRORS as err:
        if isinstance(err, BadInputError):
            raise
        message = ' '.join(str(err).split())
        match = UNREGISTERED.match(message) \
            if isinstance(err, KeyError) else None
        if match:
            raise unknown_type_error(cfg, match) from err
        name = built_class(err)
        if name is None:
            raise
        raise BadInputError(f'{name} rejected its config arguments: '
                            f'{type(err).__name__}: {message}') from err


__all__ = [
    'accepted_arguments', 'blame_config', 'built_class', 'config_dicts',
    'config_key_problems', 'lookup_path', 'new_option_keys', 'resolve_type',
    'top_level_keys', 'unknown_arguments'
]
