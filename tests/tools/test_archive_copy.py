"""The quick start's first steps in a tree without ``.git`` (a ``git
archive`` copy, as a zip download or the Docker image, whose
``.dockerignore`` drops ``.git``): a short training through
``tools/train.py`` talks (loss lines, once each; ``--quiet`` leaves the
config dump out), ``plot_curves.py`` draws its loss, and its provenance
record says "no git"."""
import json
import os
import subprocess
import sys

import pytest

from conftest import REPO

CONFIG = 'configs/droppos/droppos_vit-tiny_mini.py'


@pytest.fixture(scope='module')
def archive(tmp_path_factory):
    """``git archive HEAD`` unpacked: the committed tree without ``.git``."""
    root = tmp_path_factory.mktemp('archive')
    tar = subprocess.run(['git', 'archive', 'HEAD'], cwd=REPO, check=True,
                         capture_output=True).stdout
    subprocess.run(['tar', '-x', '-C', str(root)], input=tar, check=True)
    assert not (root / '.git').exists()
    return root


def run_in(root, *args):
    """``python ARGS`` in ``root``, importing its own packages."""
    env = dict(os.environ, PYTHONPATH=str(root), OMP_NUM_THREADS='1')
    return subprocess.run([sys.executable, *map(str, args)], cwd=root,
                          capture_output=True, text=True, timeout=600,
                          env=env)


def test_a_short_run_talks_in_a_tree_without_git(archive, mini_data,
                                                   tmp_path):
    work_dir = tmp_path / 'run'
    result = run_in(archive, 'tools/train.py', CONFIG, '--work-dir',
                    work_dir, '--quiet', '--cfg-options',
                    'train_cfg.max_iters=2',
                    'default_hooks.checkpoint.interval=2',
                    'train_dataloader.batch_size=4',
                    f'train_dataloader.dataset.data_root={mini_data}/'
                    'unlabeled/')
    out = result.stdout + result.stderr
    assert result.returncode == 0, out[-3000:]
    loss_lines = [line for line in out.splitlines()
                  if 'Iter(train)' in line and 'loss:' in line]
    # max_iters=2 < the config's logger interval 10: every iteration logs
    assert [line.split('Iter(train) ')[1].split(']')[0].strip('[ ')
            for line in loss_lines] == ['1/2', '2/2'], out[-3000:]
    saving = [line for line in out.splitlines()
              if 'Saving checkpoint' in line]
    assert len(saving) == 1, saving
    assert 'Config:' not in out and 'Hooks will be executed' not in out
    assert (work_dir / 'iter_2.pth').is_file()
    assert (work_dir / 'droppos_vit-tiny_mini.py').is_file()
    # plot_curves reads the short run's loss lines
    plot = run_in(archive, 'tools/analysis_tools/plot_curves.py', work_dir,
                  '--keys', 'loss', '--out-dir', tmp_path / 'plots')
    assert plot.returncode == 0, plot.stderr[-3000:]
    rows = (tmp_path / 'plots' / 'curves.csv').read_text().splitlines()
    assert len(rows) == 3, rows  # a header and the two iterations
    # the provenance of a result made in this tree
    record = run_in(archive, '-c',
                    'import json; from mmpos_harness import provenance; '
                    f"print(json.dumps(provenance.record('demo', ['{CONFIG}'])))")
    assert record.returncode == 0, record.stderr[-3000:]
    provenance = json.loads(record.stdout.splitlines()[-1])
    assert provenance['commit'] == 'no git', provenance
