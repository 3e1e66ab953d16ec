"""mmpos_harness.provenance: a result's record names the tree that ran, and
a later commit touching what it depends on (only that) makes it stale."""
import subprocess

import pytest

from mmpos_harness import provenance


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
