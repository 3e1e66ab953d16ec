"""FSDP (mmengine FlexibleRunner + FSDPStrategy, configs/_base_/fsdp.py) on
CPU: 2 gloo processes train the DropPos mini model, save a full checkpoint,
resume from it, and the checkpoint converts to a backbone that loads."""
import os
import subprocess
import sys

import torch
from mmengine.config import Config

from conftest import REPO, free_port, run_tool

MINI = 'configs/droppos/droppos_vit-tiny_mini.py'


def dist_train(config, work_dir, mini_data, iters, *extra):
    """``tools/dist_train.sh`` with 2 processes; returns the run's logs."""
    options = [
        f'train_dataloader.dataset.data_root={mini_data}/unlabeled/',
        f'train_cfg.max_iters={iters}', 'default_hooks.logger.interval=1',
        'default_hooks.checkpoint.interval=2'
    ]
    env = {**os.environ, 'PYTHON': sys.executable, 'PORT': str(free_port()),
           'OMP_NUM_THREADS': '1'}
    result = subprocess.run(
        ['bash', 'tools/dist_train.sh', str(config), '2', '--work-dir',
         str(work_dir), *extra, '--cfg-options', *options],
        cwd=REPO, capture_output=True, text=True, timeout=600, env=env)
    output = result.stdout + result.stderr
    assert result.returncode == 0, '\n'.join(
        line for line in output.splitlines() if 'rror' in line)[-3000:]
    return '\n'.join(p.read_text() for p in work_dir.glob('*/*.log'))


def test_fsdp_train_resume_convert_on_cpu(tmp_path, mini_data):
    config = tmp_path / 'droppos_fsdp_mini.py'
    config.write_text(
        f"_base_ = ['{REPO / MINI}', '{REPO / 'configs/_base_/fsdp.py'}']\n"
        "strategy = dict(model_wrapper=dict(device_id='cpu'))\n"
        # the online kNN probe runs the backbone outside the FSDP forward
        "default_hooks = dict(online_probe=dict(interval=0))\n")
    work_dir = tmp_path / 'run'
    log = dist_train(config, work_dir, mini_data, 2)
    assert 'MMPosFSDPStrategy' in log
    assert 'layers.0._fsdp_wrapped_module' in log  # blocks are FSDP units
    first = torch.load(work_dir / 'iter_2.pth', map_location='cpu',
                       weights_only=False)
    state = first['state_dict']
    assert not any('_fsdp' in key or 'module.' in key for key in state)
    assert first['meta']['iter'] == 2 and first['optimizer']['state']

    # resume: iterations 3-4 continue from the full checkpoint
    log = dist_train(config, work_dir, mini_data, 4, '--resume',
                     str(work_dir / 'iter_2.pth'))
    assert 'resumed epoch: 0, iter: 2' in log
    assert 'Iter(train) [3/4]' in log and 'Iter(train) [4/4]' in log
    resumed = torch.load(work_dir / 'iter_4.pth', map_location='cpu',
                         weights_only=False)
    key = 'backbone.layers.0.attn.qkv.weight'
    assert not torch.equal(resumed['state_dict'][key], state[key])
    # AdamW's moments were loaded into the shards: 4 steps, not 2
    assert first['optimizer']['state'][key]['step'].item() == 2
    assert resumed['optimizer']['state'][key]['step'].item() == 4

    out = tmp_path / 'backbone.pth'
    result = run_tool('tools/model_converters/mmpos2backbone.py',
                      work_dir / 'iter_4.pth', out)
    assert result.returncode == 0, result.stderr[-2000:]
    from mmpretrain.registry import MODELS
    backbone = MODELS.build(Config.fromfile(config).model.backbone)
    weights = torch.load(out, map_location='cpu', weights_only=False)
    weights = weights.get('state_dict', weights)
    backbone.load_state_dict(weights, strict=True)
    assert torch.equal(backbone.state_dict()['layers.0.attn.qkv.weight'],
                       resumed['state_dict'][key])
