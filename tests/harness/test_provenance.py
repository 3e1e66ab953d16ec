"""mmpos_harness.provenance: a result's record names the tree that ran, and
a later commit touching what it depends on (only that) makes it stale."""
import subprocess

import pytest

from mmpos_harness import provenance

REPO = provenance.ROOT


def git(root, *args):
    subprocess.run(['git', '-C', str(root), *args], check=True,
                   capture_output=True)


def test_record_and_changed_since(tmp_path):
    git(tmp_path, 'init', '-q')
    git(tmp_path, 'config', 'user.email', 't@t')
    git(tmp_path, 'config', 'user.name', 't')
    (tmp_path / 'code').mkdir()
    (tmp_path / 'code' / 'a.py').write_text('x = 1\n')
    (tmp_path / 'other.py').write_text('y = 1\n')
    git(tmp_path, 'add', '-A')
    git(tmp_path, 'commit', '-qm', 'first')
    (tmp_path / 'code' / 'a.py').write_text('x = 2\n')  # uncommitted
    record = provenance.record('python run.py', ['code'], root=str(tmp_path))
    assert record['dirty'] == ['code/a.py']
    assert len(record['commit']) == 40 and record['depends'] == ['code']
    assert record['machine'] and len(record['load']) == 3
    git(tmp_path, 'checkout', '-q', '--', 'code/a.py')
    (tmp_path / 'other.py').write_text('y = 2\n')
    git(tmp_path, 'commit', '-qam', 'elsewhere')
    assert provenance.changed_since(record, root=str(tmp_path)) == []
    (tmp_path / 'code' / 'a.py').write_text('x = 3\n')
    git(tmp_path, 'commit', '-qam', 'the measured code')
    (changed, ) = provenance.changed_since(record, root=str(tmp_path))
    assert changed.endswith(' the measured code')
    # reverted: the code is again what was measured
    git(tmp_path, 'revert', '--no-edit', 'HEAD')
    assert provenance.changed_since(record, root=str(tmp_path)) == []
    (tmp_path / 'code' / 'a.py').write_text('x = 4\n')
    git(tmp_path, 'commit', '-qam', 'changed again')
    assert len(provenance.changed_since(record, root=str(tmp_path))) == 3
    assert not provenance.shallow(root=str(tmp_path))
    with pytest.raises(LookupError, match='is not in'):
        provenance.changed_since(dict(record, commit='0' * 40),
                                 root=str(tmp_path))
    with pytest.raises(ValueError, match='do not exist: nowhere'):
        provenance.record('python run.py', ['nowhere'], root=str(tmp_path))
    (tmp_path / 'code' / 'b.py').write_text('')  # untracked: not listed
    assert provenance.files_under('code', root=str(tmp_path)) == [
        'code/a.py']


def test_config_sources_follow_the_base_chain():
    """The demo's detection config reads its two demo files and the shared
    bases; mmdet's own bases are not followed."""
    found = provenance.config_sources(
        'configs/demo/mask-rcnn_vit-tiny-rope-mixed_mini-objects.py')
    assert 'configs/demo/mask-rcnn_vit-tiny-rope-mixed_mini-coco.py' in found
    assert 'configs/_base_/schedules/mmdet_mini_300it.py' in found
    assert not any('::' in p for p in found)


def test_scheme_files_run_only_for_their_schemes():
    """LieRE's and LookHere's files are imported only by the positions
    package, so a RoPE-Mixed result does not depend on them; the linear
    schemes' file is shared (ComRoPE uses it) and stays."""
    modules = provenance.scheme_modules()
    matrix = 'mmpos_positions/matrix.py'
    lookhere = 'mmpos_positions/lookhere.py'
    assert modules['liere'] == modules['comrope'] == matrix
    assert modules['lookhere'] == lookhere and 'mixed' not in modules
    depends = ['mmpos_positions', 'mmpos/models', 'tools/train.py']
    mixed = provenance.without_schemes(depends, {'mixed'})
    liere = provenance.without_schemes(['mmpos_positions'], {'liere'})
    assert matrix not in mixed and lookhere not in mixed
    assert 'mmpos_positions/linear.py' in mixed
    assert 'mmpos/models' in mixed and 'tools/train.py' in mixed
    assert matrix in liere and lookhere not in liere
    every = {f for p in depends for f in provenance.files_under(p)}
    listed = {f for p in mixed for f in provenance.files_under(p)}
    # every scheme module (PaPE's too) but RoPE-Mixed's, which has none
    assert listed == every - set(modules.values())
    assert provenance.without_schemes(depends, modules) == depends


def test_a_name_taken_from_the_positions_package_counts_as_its_file(
        tmp_path):
    (tmp_path / 'mmpos').mkdir()
    (tmp_path / 'mmpos' / 'x.py').write_text(
        'from .models.layers.positions import LieRE\n')
    (line, module), = provenance.imported_modules('mmpos/x.py',
                                                  str(tmp_path))
    assert (line, module) == (1, 'mmpos.models.layers.positions.LieRE')
    matrix = 'mmpos/models/layers/positions/matrix.py'
    found = provenance._import_files(module, {module: matrix})
    assert found == {matrix, 'mmpos/models/layers/positions/__init__.py'}


def test_resolve_adds_named_configs_and_leaves_out_unbuilt_schemes():
    """CR2PQ's ranking config builds RoPE-Mixed (backbone) and RoPE-Axial
    (its neck): resolved, its depends leave out LieRE's file and keep the
    config; a LieRE config, or a module naming LieRE, keeps LieRE's file; a
    module naming a config brings the config's chain."""
    config = 'configs/method_ranking/cr2pq_vit-tiny-rope-mixed_mini.py'
    matrix = 'mmpos_positions/matrix.py'
    lookhere = 'mmpos_positions/lookhere.py'
    assert provenance.config_schemes(config) == {'mixed', 'axial'}
    # the scheme files (the package's __init__ names every scheme)
    linear = 'mmpos_positions/linear.py'
    found = provenance.resolve([config, 'tools/train.py', linear, matrix])
    assert matrix not in found and linear in found
    assert config in found
    assert 'tools/train.py' in found and found == sorted(found)
    liere = 'configs/position_schemes/droppos_vit-tiny-liere_mini.py'
    assert 'liere' in provenance.config_schemes(liere)
    found = provenance.resolve([liere, matrix, lookhere])
    assert matrix in found and lookhere not in found
    # benchmarks/position_schemes.py names every scheme, and so does the
    # position study's module inside a listed folder
    for named in ('benchmarks/position_schemes.py', 'mmpos_harness'):
        assert 'mmpos/models' in provenance.resolve([named, 'mmpos/models'])
    probe = provenance.resolve(['benchmarks/online_probe_overhead.py'])
    assert {'configs/demo/droppos_vit-tiny-rope-mixed_mini.py',
            'configs/_base_/schedules/pretrain_mini.py'} <= set(probe)


def test_a_tree_without_git_records_no_git(tmp_path):
    """An unpacked archive or the Docker image's copy (no .git): the record
    says so instead of failing after the run, and lists the files there."""
    (tmp_path / 'code').mkdir()
    (tmp_path / 'code' / 'a.py').write_text('x = 1\n')
    (tmp_path / 'code' / '__pycache__').mkdir()
    (tmp_path / 'code' / '__pycache__' / 'a.pyc').write_bytes(b'')
    assert not provenance.has_git(str(tmp_path))
    record = provenance.record('python run.py', ['code'], root=str(tmp_path))
    assert record['commit'] == provenance.NO_GIT and record['dirty'] == []
    assert record['depends'] == ['code']
    assert provenance.files_under('code', root=str(tmp_path)) == [
        'code/a.py']
    with pytest.raises(LookupError, match='is not in'):
        provenance.changed_since(record, root=str(REPO))


def test_a_moved_module_and_the_imports_that_follow_it_change_nothing(
        tmp_path):
    """A module moved with ``git mv`` (perhaps edited) and a file whose
    only change is to import it, and name it in its docstring, from its
    new place: the file holds the code it held (``moved_only``), so a
    record that depends on it is current; a change of what either
    computes is not."""
    git(tmp_path, 'init', '-q')
    git(tmp_path, 'config', 'user.email', 't@t')
    git(tmp_path, 'config', 'user.name', 't')
    (tmp_path / 'pkg').mkdir()
    (tmp_path / 'pkg' / '__init__.py').write_text('')
    (tmp_path / 'pkg' / 'stats.py').write_text(
        'def double(x):\n    """Twice ``x``."""\n    return 2 * x\n\n\n'
        'def half(x):\n    return x / 2\n')
    (tmp_path / 'tool.py').write_text(
        '"""Prints :func:`pkg.stats.double` of 1 (pkg/stats.py)."""\n'
        'import os\nfrom pkg import stats\n\nprint(stats.double(1), os.sep)\n')
    git(tmp_path, 'add', '-A')
    git(tmp_path, 'commit', '-qm', 'first')
    root = str(tmp_path)
    record = dict(command='python tool.py', depends=['pkg', 'tool.py'],
                  commit=provenance._git('rev-parse', 'HEAD', root=root))
    (tmp_path / 'newstats').mkdir()
    git(tmp_path, 'mv', 'pkg/stats.py', 'newstats/__init__.py')
    (tmp_path / 'tool.py').write_text(
        '"""Prints :func:`newstats.double` of 1 (newstats/__init__.py)."""\n'
        'import os\n\nimport newstats as stats  # moved\n\n'
        'print(stats.double(1), os.sep)\n')
    git(tmp_path, 'commit', '-qam', 'statistics as a package of their own')
    renames = provenance.renames_since(record['commit'], root)
    assert dict(renames) == {'pkg/stats.py': 'newstats/__init__.py'}
    assert provenance.undo_renames(
        'see newstats.double in newstats/__init__.py', renames) == \
        'see pkg.stats.double in pkg/stats.py'
    assert provenance.renamed_depends(['pkg'], record['commit'], root) == [
        'newstats/__init__.py', 'pkg']
    assert provenance.moved_only('tool.py', record['commit'], root)
    assert provenance.moved_only('pkg/stats.py', record['commit'], root)
    assert provenance.changed_since(record, root=root) == []
    # the moved module computes something else
    (tmp_path / 'newstats' / '__init__.py').write_text(
        'def double(x):\n    """Twice ``x``."""\n    return 3 * x\n\n\n'
        'def half(x):\n    return x / 2\n')
    git(tmp_path, 'commit', '-qam', 'thrice')
    provenance.moved_only.cache_clear()
    assert not provenance.moved_only('pkg/stats.py', record['commit'], root)
    assert provenance.changed_since(record, root=root)[0].endswith(' thrice')
    git(tmp_path, 'revert', '--no-edit', 'HEAD')
    provenance.moved_only.cache_clear()
    assert provenance.changed_since(record, root=root) == []
    # the tool computes something else
    (tmp_path / 'tool.py').write_text(
        (tmp_path / 'tool.py').read_text().replace('double(1)', 'double(2)'))
    git(tmp_path, 'commit', '-qam', 'of 2')
    provenance.moved_only.cache_clear()
    assert not provenance.moved_only('tool.py', record['commit'], root)
    assert provenance.changed_since(record, root=root)[0].endswith(' of 2')
