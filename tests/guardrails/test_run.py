"""mmpos.guardrails.run: the config that prepare() hands to the tools."""
import importlib.util

import pytest
import torch

from conftest import REPO
from mmpos.errors import LaunchError
from mmpos.guardrails.run import ready_config

SEG_CONFIG = 'configs/demo/upernet_vit-tiny-rope-mixed_mini-ade.py'
_spec = importlib.util.spec_from_file_location('guardrails_train_tool',
                                               REPO / 'tools/train.py')
train_tool = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(train_tool)


def test_resume_and_auto_resume(tmp_path):
    """--resume on a work dir without checkpoint stops; --auto-resume starts
    fresh there and resumes the newest checkpoint where there is one;
    --resume CKPT resumes that checkpoint, also into another work dir."""
    def merged(*options, work_dir=tmp_path):
        args = train_tool.parse_args([SEG_CONFIG, '--work-dir', str(work_dir),
                                      '--skip-data-check', *options])
        return ready_config(SEG_CONFIG, args, 'train')

    with pytest.raises(LaunchError, match=f'nothing to resume in {tmp_path}'):
        merged('--resume')
    cfg = merged('--auto-resume')
    assert not cfg.resume and cfg.load_from is None
    torch.save({'state_dict': {}}, tmp_path / 'iter_2.pth')
    (tmp_path / 'last_checkpoint').write_text(str(tmp_path / 'iter_2.pth'))
    for option in ('--resume', '--auto-resume'):
        cfg = merged(option)
        assert cfg.resume and cfg.load_from == str(tmp_path / 'iter_2.pth')
    elsewhere = tmp_path / 'elsewhere'
    cfg = merged('--resume', str(tmp_path / 'iter_2.pth'), work_dir=elsewhere)
    assert cfg.resume and cfg.load_from == str(tmp_path / 'iter_2.pth')
    assert cfg.work_dir == str(elsewhere)


def test_distributed_run_frees_its_model_before_the_process_group(
        tmp_path, mini_data, monkeypatch):
    """A rank's model (its DDP / FSDP wrappers and their collectives' work
    objects) is collected before the process group is released, not left to
    the interpreter's exit (where gloo aborts a rank: "terminate called
    without an active exception"); 1 gloo process, DropPos mini, 1 step."""
    import weakref

    import torch.distributed as torch_dist

    from conftest import free_port
    from mmpos.guardrails import run as run_module
    for key, value in dict(RANK='0', LOCAL_RANK='0', WORLD_SIZE='1',
                           MASTER_ADDR='127.0.0.1',
                           MASTER_PORT=str(free_port())).items():
        monkeypatch.setenv(key, value)
    models, alive_at_release = [], []
    build = run_module.Run.build

    def recording_build(self):
        runner = build(self)
        models.append(weakref.ref(runner.model))
        return runner

    destroy = torch_dist.destroy_process_group

    def recording_destroy(*args, **kwargs):
        alive_at_release.append(models[0]() is not None)
        destroy(*args, **kwargs)

    monkeypatch.setattr(run_module.Run, 'build', recording_build)
    monkeypatch.setattr(torch_dist, 'destroy_process_group', recording_destroy)
    train_tool.main([
        'configs/droppos/droppos_vit-tiny_mini.py', '--work-dir',
        str(tmp_path), '--launcher', 'pytorch', '--cfg-options',
        f'train_dataloader.dataset.data_root={mini_data}/unlabeled/',
        'train_cfg.max_iters=1', 'default_hooks.checkpoint.interval=1',
        'default_hooks.online_probe.interval=0'])
    assert (tmp_path / 'iter_1.pth').is_file()
    assert alive_at_release == [False]
    assert not torch_dist.is_initialized()


def lines_printed_twice(out: str) -> list:
    """Lines of a run's output printed twice: a line right after its equal,
    or a timestamped log line anywhere again (blank lines, separators,
    progress bars and the indented lines of the config dump aside)."""
    lines = [line for line in out.splitlines()
             if any(c.isalnum() for c in line) and 'task/s' not in line
             and not line[:1].isspace()]
    again = [b for a, b in zip(lines, lines[1:]) if a == b]
    logged = [line for line in lines if ' - mmengine - ' in line]
    return again + sorted({line for line in logged if logged.count(line) > 1})


def test_a_short_guide_run_prints_no_line_twice(tmp_path, mini_data, capsys):
    """#58: the guides' short run (DropPos mini, fewer iterations than its
    logger interval, the online probe and health monitor on, config and
    hook dumps) and its --resume print every line once: one loss line per
    iteration, one 'Saving checkpoint' line per run."""
    options = [f'train_dataloader.dataset.data_root={mini_data}/unlabeled/',
               'train_dataloader.batch_size=4']
    for argv, iters in (([], 2), (['--resume'], 4)):
        train_tool.main(['configs/droppos/droppos_vit-tiny_mini.py',
                         '--work-dir', str(tmp_path), *argv, '--cfg-options',
                         f'train_cfg.max_iters={iters}', *options])
        out = capsys.readouterr().out
        assert 'Hooks will be executed' in out and 'OnlineProbeHook: iter ' \
            f'{iters}' in out, out[-3000:]
        assert not lines_printed_twice(out), lines_printed_twice(out)
        done = [line.split('Iter(train) [')[1].split(']')[0] for line in
                out.splitlines() if 'Iter(train) [' in line]
        assert done == [f'{i}/{iters}' for i in range(iters // 2 + 1 if argv
                                                       else 1, iters + 1)]
        assert out.count('Saving checkpoint at') == 1, out[-3000:]
