"""Compare every shipped config with itself at another git revision.

A refactor of ``configs/`` (moving blocks into ``_base_`` files, turning
copies into deltas) must leave every config resolving to the same dict.
For every ``configs/**/*.py`` outside ``_base_`` folders this loads the
config with ``mmengine.config.Config.fromfile`` both in the working tree
and at git revision ``REV`` (materialised with ``git archive REV configs``
into a temporary folder, removed afterwards), as ``tests/test_configs.py``
loads it (its ``custom_imports`` imported, its ``default_scope`` made
current), and compares ``cfg.to_dict()`` serialised with
``json.dumps(..., sort_keys=True, default=str)``.

    python tools/misc/compare_configs.py REV [--root DIR]

Prints one line per config that differs, with the first differing key path
(``model.backbone.arch``, ``param_scheduler[1].begin``), or that exists on
one side only, then a summary line. Exits 1 if any differs, 0 otherwise.
"""
import argparse
import functools
import json
import os
import os.path as osp
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

MISSING = object()


def shipped_configs(root):
    """``configs/**/*.py`` relative to ``root``, outside ``_base_``."""
    base = Path(root, 'configs')
    return sorted(
        str(p.relative_to(root)) for p in base.rglob('*.py')
        if '_base_' not in p.relative_to(root).parts)


def load(path):
    """The config's dict, loaded as ``mmpos_harness.tiny_models.load``
    loads it; an exception while loading is returned as its text."""
    from mmengine.config import Config
    from mmengine.registry import init_default_scope
    from mmengine.utils import import_modules_from_strings
    try:
        cfg = Config.fromfile(path)
        if cfg.get('custom_imports'):
            import_modules_from_strings(**cfg.custom_imports)
        init_default_scope(cfg.get('default_scope', 'mmpretrain'))
        return json.loads(
            json.dumps(cfg.to_dict(), sort_keys=True, default=str))
    except Exception as error:  # reported as a difference, not a crash
        return {'<load error>': f'{type(error).__name__}: {error}'}


def first_difference(a, b, path=''):
    """The key path of the first place where ``a`` and ``b`` differ (in
    sorted key order), or ``None`` if they are equal."""
    if a == b:
        return None
    if isinstance(a, dict) and isinstance(b, dict):
        for key in sorted(set(a) | set(b)):
            found = first_difference(
                a.get(key, MISSING), b.get(key, MISSING),
                f'{path}.{key}' if path else str(key))
            if found is not None:
                return found
    if isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            return f'{path} (length {len(b)} -> {len(a)})'
        for i, (x, y) in enumerate(zip(a, b)):
            found = first_difference(x, y, f'{path}[{i}]')
            if found is not None:
                return found
    return path or '<root>'


def materialise(root, rev, dest):
    """``configs/`` of ``rev`` extracted under ``dest``."""
    archive = subprocess.run(['git', 'archive', rev, 'configs'], cwd=root,
                             check=True, capture_output=True).stdout
    subprocess.run(['tar', '-x', '-C', dest], input=archive, check=True)


def compare(root, rev):
    """``[(config, message)]`` for each config that differs."""
    from mmengine.config import utils
    from mmengine.logging import MMLogger
    # init_default_scope warns on every change of scope
    logger = MMLogger.get_current_instance()
    level, load_yaml = logger.level, utils.load
    logger.setLevel('ERROR')
    # Each ``pkg::`` base makes mmengine parse the package's metafiles
    # again; they do not change during a run (tests/test_configs.py does
    # the same).
    utils.load = functools.lru_cache(maxsize=None)(load_yaml)
    differences = []
    tmp = tempfile.mkdtemp(prefix='compare_configs_')
    try:
        materialise(root, rev, tmp)
        new, old = set(shipped_configs(root)), set(shipped_configs(tmp))
        for config in sorted(new | old):
            if config not in old:
                differences.append((config, f'only in the working tree, '
                                    f'not at {rev}'))
                continue
            if config not in new:
                differences.append((config, f'only at {rev}, not in the '
                                    'working tree'))
                continue
            cfg_new = load(osp.join(root, config))
            path = first_difference(cfg_new, load(osp.join(tmp, config)))
            if path == '<load error>':
                path += f" ({cfg_new.get(path, 'at ' + rev)})"
            if path is not None:
                differences.append((config, f'differs at {path}'))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
        utils.load = load_yaml
        logger.setLevel(level)
    return differences, len(new | old)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('rev', help='git revision to compare with')
    parser.add_argument(
        '--root', default=None,
        help='repository root (default: the git top level of the cwd)')
    args = parser.parse_args(argv)
    root = args.root or subprocess.run(
        ['git', 'rev-parse', '--show-toplevel'], check=True,
        capture_output=True, text=True).stdout.strip()
    root = osp.abspath(root)
    os.environ.setdefault('OMP_NUM_THREADS', '1')
    differences, total = compare(root, args.rev)
    for config, message in differences:
        print(f'{config}: {message}')
    print(f'{len(differences)} of {total} configs differ from {args.rev}')
    return 1 if differences else 0


if __name__ == '__main__':
    sys.exit(main())
