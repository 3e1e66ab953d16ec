"""tools/test.py --tta (the config's tta_pipeline and tta_model, as in
mmdet's and mmseg's tools) and tools/train.py --auto-scale-lr (mmengine
scales the lr by the real total batch / auto_scale_lr.base_batch_size)."""
import importlib.util
import json

import pytest
import torch
from mmengine.config import Config

from conftest import REPO, data_root_options, run_tool
from mmpos.guardrails.run import ready_config

SEG_CONFIG = 'configs/demo/upernet_vit-tiny-rope-mixed_mini-ade.py'


def tool(name):
    spec = importlib.util.spec_from_file_location(
        name, REPO / 'tools' / f'{name}.py')
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_tta_wraps_the_model_and_reads_the_tta_pipeline(tmp_path):
    test = tool('test')
    checkpoint = tmp_path / 'seg.pth'
    torch.save(dict(state_dict={}), checkpoint)  # read before the run
    args = test.parse_args([SEG_CONFIG, str(checkpoint), '--tta', '--work-dir',
                            str(tmp_path / 'run'), '--skip-data-check'])
    cfg = Config.fromfile(REPO / SEG_CONFIG)
    model, tta_pipeline = cfg.model.copy(), cfg.tta_pipeline
    cfg = ready_config(SEG_CONFIG, args, 'test')
    assert cfg.model.type == 'SegTTAModel' and cfg.model.module == model
    pipeline = cfg.test_dataloader.dataset.pipeline  # images loaded safely
    assert pipeline[0].type == 'mmpretrain.SafeLoadImageFromFile'
    assert pipeline[1:] == tta_pipeline[1:]
    config = tmp_path / 'no_tta.py'
    config.write_text(f"_base_ = ['{REPO / SEG_CONFIG}']\ntta_model = None\n")
    with pytest.raises(Exception, match='--tta: the config defines no '
                       'tta_model'):
        ready_config(str(config), args, 'test')


@pytest.mark.slow
def test_test_py_tta_scores_a_checkpoint_with_multi_scale_flip(
        tmp_path, mini_data):
    """A segmentor checkpoint is loaded into the model inside SegTTAModel
    (checked by CheckpointFitHook) and IoUMetric scores the merged
    predictions of 6 scales x 2 flips."""
    from mmengine.registry import init_default_scope
    from mmseg.registry import MODELS
    cfg = Config.fromfile(REPO / SEG_CONFIG)
    init_default_scope('mmseg')
    torch.manual_seed(0)
    model = MODELS.build(cfg.model)
    ckpt = tmp_path / 'seg.pth'
    torch.save(dict(state_dict=model.state_dict()), ckpt)
    out = tmp_path / 'metrics.json'
    result = run_tool('tools/test.py', SEG_CONFIG, ckpt, '--tta', '--out',
                      out, '--work-dir', tmp_path / 'test', '--cfg-options',
                      *data_root_options(mini_data, 'ade'), timeout=900)
    assert result.returncode == 0, (result.stdout + result.stderr)[-3000:]
    assert 'tensors fit' in result.stdout + result.stderr
    metrics = json.loads(out.read_text())
    assert {'mIoU', 'mAcc', 'aAcc'} <= set(metrics), metrics
    dumped = next((tmp_path / 'test').glob('*/vis_data/config.py'))
    assert "type='SegTTAModel'" in dumped.read_text()
    assert "type='TestTimeAug'" in dumped.read_text()


def test_auto_scale_lr_scales_by_the_real_batch(tmp_path):
    """The mini config's lr is set for its batch of 4; with base 16,
    tools/train.py's --auto-scale-lr makes mmengine's ``Runner.scale_lr``
    (called by ``Runner.train`` on the built optimizer, before the
    schedulers) scale every parameter group's lr by 4 / 16. The runner is
    stood in for by what ``scale_lr`` reads of it: the config's train
    dataloader, one process, unbuilt schedulers and a logger."""
    from types import SimpleNamespace

    from mmengine.optim import build_optim_wrapper
    from mmengine.registry import DefaultScope
    from mmengine.runner import Runner
    from mmseg.registry import MODELS
    train = tool('train')
    args = train.parse_args([
        SEG_CONFIG, '--auto-scale-lr', '--work-dir', str(tmp_path / 'run'),
        '--skip-data-check', '--cfg-options',
        'auto_scale_lr.base_batch_size=16'])
    cfg = ready_config(SEG_CONFIG, args, 'train')
    assert cfg.auto_scale_lr.enable
    with DefaultScope.overwrite_default_scope('mmseg'):
        optim_wrapper = build_optim_wrapper(MODELS.build(cfg.model),
                                            cfg.optim_wrapper)
    groups = optim_wrapper.optimizer.param_groups
    base = [g['lr'] for g in groups]
    assert base[0] == cfg.optim_wrapper.optimizer.lr
    logs = []
    runner = SimpleNamespace(
        _train_dataloader=cfg.train_dataloader, world_size=1,
        param_schedulers=cfg.param_scheduler,
        logger=SimpleNamespace(info=logs.append))
    Runner.scale_lr(runner, optim_wrapper, cfg.auto_scale_lr)
    assert [g['lr'] for g in groups] == pytest.approx(
        [lr * 4 / 16 for lr in base])
    assert logs[0].endswith('Scaling the original LR by 0.25.')


def test_auto_scale_lr_needs_a_base_batch(tmp_path):
    train = tool('train')
    config = tmp_path / 'no_base.py'
    config.write_text(f"_base_ = ['{REPO / SEG_CONFIG}']\n"
                      "auto_scale_lr = dict(_delete_=True, enable=False)\n")
    args = train.parse_args([str(config), '--auto-scale-lr', '--work-dir',
                             str(tmp_path / 'run'), '--skip-data-check'])
    with pytest.raises(Exception, match='no auto_scale_lr.base_batch_size'):
        ready_config(args.config, args, 'train')


def test_manifest_multi_scale_rows_launch_test_py_with_tta(tmp_path):
    """RoPE-ViT Table 3's multi-scale rows test the single-scale runs'
    checkpoints with tools/test.py --tta; tta needs a test_of run."""
    from mmpos_harness.paper_tables.commands import plan
    from mmpos_harness.paper_tables.manifest import (ManifestError,
                                                     _parse_run,
                                                     load_manifest)
    manifest = load_manifest(str(REPO / 'tools/paper_tables/manifest.yaml'))
    run = manifest.runs['deit3_vit-b_rope-mixed_upernet_ms']
    assert run.tta and run.test_of == 'deit3_vit-b_rope-mixed_upernet'
    assert run.config == manifest.runs[run.test_of].config
    steps = {s.run.id: s for s in plan(manifest, [run.id], str(tmp_path))}
    command = steps[run.id].command
    assert command[1] == 'tools/test.py' and '--tta' in command
    assert '--tta' not in steps[run.test_of].command
    with pytest.raises(ManifestError, match='tta'):
        _parse_run('x', dict(config=run.config, tta=True))
