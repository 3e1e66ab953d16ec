"""FSDP (mmengine FlexibleRunner + FSDPStrategy, configs/_base_/fsdp.py) on
CPU: 2 gloo processes train the DropPos and ICPF mini models, save full
checkpoints, resume from them, and the checkpoints convert to backbones that
load. ICPF: its EMA teacher (updated shard by shard after each optimizer
step) is the EMA of the saved students, and the online kNN probe runs."""
import math
import os
import re
import subprocess
import sys

import pytest
import torch
from mmengine.config import Config

from conftest import REPO, free_port, read_scalars, run_tool, weight_decays

MINI_FSDP = 'configs/droppos/droppos_vit-tiny_mini_fsdp.py'
ICPF_MINI = 'configs/icpf/icpf_vit-tiny_mini.py'


def fsdp_config(tmp_path, base, extra='', strategy='fsdp'):
    """A mini config trained on CPU by the FlexibleRunner with
    ../_base_/fsdp.py (``strategy='fsdp'``) or with mmengine's DDP strategy
    (``'ddp'``)."""
    config = tmp_path / f'{strategy}_mini.py'
    if strategy == 'fsdp':
        head = (f"_base_ = ['{REPO / base}', "
                f"'{REPO / 'configs/_base_/fsdp.py'}']\n"
                "strategy = dict(model_wrapper=dict(device_id='cpu'))\n")
    else:
        head = (f"_base_ = ['{REPO / base}']\n"
                "runner_type = 'FlexibleRunner'\n"
                "strategy = dict(type='DDPStrategy', "
                "model_wrapper=dict(device_ids=None))\n")
    config.write_text(head + extra)
    return config


def dist_train(config, work_dir, mini_data, iters, *extra,
               checkpoint_interval=2, options=()):
    """``tools/dist_train.sh`` with 2 processes; returns the run's logs."""
    options = [
        f'train_dataloader.dataset.data_root={mini_data}/unlabeled/',
        f'train_cfg.max_iters={iters}', 'default_hooks.logger.interval=1',
        f'default_hooks.checkpoint.interval={checkpoint_interval}', *options
    ]
    # PYTHONFAULTHANDLER: a rank that aborts prints where each thread was
    env = {**os.environ, 'PYTHON': sys.executable, 'PORT': str(free_port()),
           'OMP_NUM_THREADS': '1', 'PYTHONFAULTHANDLER': '1'}
    result = subprocess.run(
        ['bash', 'tools/dist_train.sh', str(config), '2', '--work-dir',
         str(work_dir), *extra, '--cfg-options', *options],
        cwd=REPO, capture_output=True, text=True, timeout=600, env=env)
    assert result.returncode == 0, failure_lines(result.stdout +
                                                 result.stderr)
    return '\n'.join(p.read_text() for p in work_dir.glob('*/*.log'))


def failure_lines(output: str) -> str:
    """What says why a distributed run failed: its error lines (a C++
    ``terminate`` / ``what()`` and the fault handler's stacks included, not
    the config's ``on_error`` keys) and the last 20 lines of its output."""
    lines = output.splitlines()
    errors = [line for line in lines if re.search(
        r'Error\b|terminate|what\(\)|Signal|Fatal Python|Thread 0x|'
        r'^\s+File "', line)]
    return '\n'.join(errors[-30:] + ['...'] + lines[-20:])[-6000:]


@pytest.mark.slow
def test_fsdp_train_resume_convert_on_cpu(tmp_path, mini_data):
    """The shipped mini FSDP config (the probe off: see the ICPF test)."""
    config = REPO / MINI_FSDP
    work_dir = tmp_path / 'run'
    probe_off = ['default_hooks.online_probe.interval=0']
    log = dist_train(config, work_dir, mini_data, 2, options=probe_off)
    assert 'MMPosFSDPStrategy' in log
    assert 'layers.0._fsdp_wrapped_module' in log  # blocks are FSDP units
    first = torch.load(work_dir / 'iter_2.pth', map_location='cpu',
                       weights_only=False)
    state = first['state_dict']
    assert not any('_fsdp' in key or 'module.' in key for key in state)
    assert first['meta']['iter'] == 2 and first['optimizer']['state']

    # resume: iterations 3-4 continue from the full checkpoint
    log = dist_train(config, work_dir, mini_data, 4, '--resume',
                     str(work_dir / 'iter_2.pth'), options=probe_off)
    assert 'resumed epoch: 0, iter: 2' in log
    assert 'Iter(train) [3/4]' in log and 'Iter(train) [4/4]' in log
    resumed = torch.load(work_dir / 'iter_4.pth', map_location='cpu',
                         weights_only=False)
    key = 'backbone.layers.0.attn.qkv.weight'
    assert not torch.equal(resumed['state_dict'][key], state[key])
    # AdamW's moments were loaded into the shards: 4 steps, not 2
    assert first['optimizer']['state'][key]['step'].item() == 2
    assert resumed['optimizer']['state'][key]['step'].item() == 4

    backbone = convert_and_load(config, work_dir / 'iter_4.pth', tmp_path)
    assert torch.equal(backbone['layers.0.attn.qkv.weight'],
                       resumed['state_dict'][key])


def convert_and_load(config, checkpoint, tmp_path):
    """``mmpos2backbone.py checkpoint`` loaded strictly into the config's
    backbone; returns the backbone's state dict."""
    out = tmp_path / 'backbone.pth'
    result = run_tool('tools/model_converters/mmpos2backbone.py', checkpoint,
                      out)
    assert result.returncode == 0, result.stderr[-2000:]
    from mmpretrain.registry import MODELS
    backbone = MODELS.build(Config.fromfile(config).model.backbone)
    weights = torch.load(out, map_location='cpu', weights_only=False)
    backbone.load_state_dict(weights.get('state_dict', weights), strict=True)
    return backbone.state_dict()


@pytest.mark.slow
def test_fsdp_icpf_ema_teacher_probe_resume_convert_on_cpu(
        tmp_path, mini_data):
    """ICPF mini under FSDP: the teacher's blocks and DINO heads are FSDP
    units like the student's. The run equals mmengine's DDP on the same
    seed and data, step by step (losses, gradient norm clipped across
    shards, student and EMA teacher after 3 steps); after each optimizer
    step each teacher tensor is ``(1 - m) teacher + m student`` of the
    saved checkpoints (``m = m0 (cos(pi k / T) + 1) / 2``, CosineEMA); the
    online probe logs a finite top-1 of the teacher; ``flat_decay_mult=0``
    (the ImageNet configs' rule) spares the matrices as without FSDP;
    resume continues the teacher's step counter; the checkpoint converts."""
    extra = (
        # a fast teacher so that every update is far above rounding
        'model = dict(teacher_momentum=0.5)\n'
        'optim_wrapper = dict(paramwise_cfg=dict(flat_decay_mult=0.))\n'
        'default_hooks = dict(online_probe=dict(interval=2), '
        'checkpoint=dict(max_keep_ckpts=4))\n'
        # the frozen teacher's parameters are named only in the optimizer
        # builder's requires_grad=False lines, which train.py logs at DEBUG
        "log_level = 'DEBUG'\n")
    config = fsdp_config(tmp_path, ICPF_MINI, extra)
    work_dir, ddp_dir = tmp_path / 'run', tmp_path / 'ddp'
    log = dist_train(config, work_dir, mini_data, 3, checkpoint_interval=1)
    for unit in ('teacher.module.backbone.layers.0', 'head', 'patch_head',
                 'teacher.module.patch_head'):
        assert f'{unit}._fsdp_wrapped_module.' in log, unit
    # at DEBUG every rank writes a log (`*_rank<k>.log`); rank 0 probes
    rank0 = '\n'.join(p.read_text() for p in work_dir.glob('*/*rank0.log'))
    top1 = re.findall(r'teacher backbone: knn_cls_top1 ([\d.]+)', rank0)
    assert len(top1) == 2 and all(math.isfinite(float(v)) for v in top1)

    dist_train(fsdp_config(tmp_path, ICPF_MINI, extra, 'ddp'), ddp_dir,
               mini_data, 3, checkpoint_interval=3)
    logged = [{k: v for k, v in r.items() if 'loss' in k or k == 'grad_norm'}
              for d in (work_dir, ddp_dir) for r in read_scalars(d)
              if 'loss' in r]
    assert len(logged) == 6 and 'grad_norm' in logged[0]
    for fsdp, ddp in zip(logged[:3], logged[3:]):
        assert fsdp == pytest.approx(ddp, rel=1e-5)
    ddp = {key[len('module.'):]: value for key, value in  # DDP's prefix
           load(ddp_dir / 'iter_3.pth')['state_dict'].items()}
    fsdp = load(work_dir / 'iter_3.pth')['state_dict']
    assert fsdp.keys() == ddp.keys()
    for key in fsdp:
        torch.testing.assert_close(fsdp[key], ddp[key], rtol=0, atol=1e-6,
                                   msg=key)

    first, second = (load(work_dir / f'iter_{i}.pth')['state_dict']
                     for i in (1, 2))
    k = int(second['teacher.steps']) - 1  # the step of the last update
    assert k == 2  # step 0 (before training) copied the student
    m = (1 - 0.5) * (math.cos(math.pi * k / 3) + 1) / 2
    teacher_keys = [key for key in second if key.startswith('teacher.module')]
    assert len(teacher_keys) == 69  # 4 blocks, 2 heads, the field, ...
    for key in teacher_keys:
        student = second[key[len('teacher.module.'):]]
        assert not torch.equal(first[key], second[key]), key
        torch.testing.assert_close(
            second[key], (1 - m) * first[key] + m * student, rtol=0,
            atol=1e-6, msg=key)

    decayed = {p for g in load(work_dir / 'iter_2.pth')['optimizer'][
        'param_groups'] for p in g['params'] if g['weight_decay'] > 0}
    from mmpretrain.registry import MODELS
    cfg = Config.fromfile(config)
    expected = weight_decays(MODELS.build(cfg.model), cfg.optim_wrapper)
    assert decayed == {n for n, wd in expected.items() if wd > 0}
    assert 'head.prototypes' in decayed and 'pos_field.field' in decayed

    log = dist_train(config, work_dir, mini_data, 4, '--resume',
                     str(work_dir / 'iter_3.pth'), checkpoint_interval=1)
    assert 'resumed epoch: 0, iter: 3' in log
    last = load(work_dir / 'iter_4.pth')['state_dict']
    assert int(last['teacher.steps']) == 5
    backbone = convert_and_load(config, work_dir / 'iter_4.pth', tmp_path)
    assert torch.equal(backbone['layers.3.ffn.layers.1.weight'],
                       last['backbone.layers.3.ffn.layers.1.weight'])


def load(path):
    return torch.load(path, map_location='cpu', weights_only=False)
