"""Shared fixtures: mini datasets generated once per session, and a runner
for the command-line tools."""
import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(autouse=True)
def isolate_default_scope():
    """Runners set mmengine's *current* default scope globally, and registries
    resolve names in it; restore it after each test so no test depends on
    which ran before."""
    from mmengine.registry import DefaultScope
    saved = dict(DefaultScope._instance_dict)
    yield
    DefaultScope._instance_dict.clear()
    DefaultScope._instance_dict.update(saved)


@pytest.fixture(scope='session')
def mini_data(tmp_path_factory):
    """``{coco,ade,unlabeled}`` mini datasets, small enough for CPU tests."""
    from mmpos.datasets.mini_data import make_all
    root = tmp_path_factory.mktemp('mini') / 'data'
    make_all(str(root), num_train=48, num_val=16, num_unlabeled=64,
             img_size=128, seed=0)
    return root


def run_tool(*args, timeout=600, env=None):
    """Run ``python <args>`` from the repo root; returns CompletedProcess."""
    return subprocess.run([sys.executable, *map(str, args)],
                          cwd=REPO,
                          capture_output=True,
                          text=True,
                          timeout=timeout,
                          env={**os.environ, **(env or {})})


def data_root_options(mini_data, task):
    """``--cfg-options`` pointing a demo config at the session's mini data."""
    root = f'{mini_data}/{task}/'
    options = [f'{split}_dataloader.dataset.data_root={root}'
               for split in ('train', 'val', 'test')]
    if task == 'coco':
        ann = f'{root}annotations/instances_val2017.json'
        options += [f'val_evaluator.ann_file={ann}',
                    f'test_evaluator.ann_file={ann}']
    return options


def read_scalars(work_dir):
    """All records of mmengine's ``vis_data/scalars.json`` under work_dir."""
    files = sorted(Path(work_dir).glob('*/vis_data/scalars.json'))
    assert files, f'no scalars.json under {work_dir}'
    return [json.loads(line) for line in files[-1].read_text().splitlines()]


def free_port():
    with socket.socket() as sock:
        sock.bind(('127.0.0.1', 0))
        return sock.getsockname()[1]
