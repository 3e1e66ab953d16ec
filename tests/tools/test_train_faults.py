"""Faults at cluster scale, on the demo's shipped pretraining config run by
the real tools in real processes (issue 38): a kill between writing a
checkpoint and renaming it, Slurm's SIGTERM (requeue and resume), a full
disk, a rank that dies under dist_train.sh and slurm_train.sh.

Slurm itself is not installed here: ``srun`` and ``scontrol`` are small
stand-ins on the PATH that start the tasks with Slurm's variables, pass
signals on to them and record ``scontrol requeue``. ``srun``'s own
``--kill-on-bad-exit`` is not imitated, so the surviving rank must stop by
itself.
"""
import os
import re
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from conftest import REPO, free_port, run_tool
from mmpos.checkpoint import checkpoint_problem
from mmpos.engine.hooks import PREEMPTED_EXIT_CODE

DEMO = 'configs/demo/droppos_vit-tiny-rope-mixed_mini.py'  # max_keep_ckpts=1
LOST_RANK_SECONDS = 60  # a dead rank ends its job within this


def options(mini_data, iters, interval):
    return [
        f'train_dataloader.dataset.data_root={mini_data}/unlabeled/',
        f'train_cfg.max_iters={iters}',
        f'default_hooks.checkpoint.interval={interval}',
        'default_hooks.logger.interval=1',
        'default_hooks.online_probe.interval=0',
        'default_hooks.health_monitor.interval=0',
    ]


def steps(work_dir):
    return sorted(int(p.stem[5:]) for p in work_dir.glob('iter_*.pth'))


def last_checkpoint(work_dir):
    return (work_dir / 'last_checkpoint').read_text()


ENV = {'OMP_NUM_THREADS': '1', 'PYTHONUNBUFFERED': '1'}

# tools/train.py whose rename of the finished temporary file onto TARGET
# dies with SIGKILL: the checkpoint is complete on disk, not yet in place.
KILLED_AT_RENAME = '''
import os, runpy, signal, sys
target, replace = sys.argv[1], os.replace
def replace_or_die(src, dst, *args, **kwargs):
    if os.path.basename(str(dst)) == target:
        os.kill(os.getpid(), signal.SIGKILL)
    return replace(src, dst, *args, **kwargs)
os.replace = replace_or_die
sys.argv = ['tools/train.py', *sys.argv[2:]]
runpy.run_path('tools/train.py', run_name='__main__')
'''


def test_kill_between_write_and_rename_leaves_a_checkpoint_to_resume(
        tmp_path, mini_data):
    """The demo's pretraining config (max_keep_ckpts=1) killed while saving
    iter_4.pth keeps iter_2.pth, named by last_checkpoint; --resume ends
    the run (mmengine's CheckpointHook would have deleted iter_2.pth)."""
    work_dir = tmp_path / 'run'
    args = [DEMO, '--work-dir', work_dir, '--cfg-options',
            *options(mini_data, 6, 2)]
    killed = run_tool('-c', KILLED_AT_RENAME, 'iter_4.pth', *args, env=ENV)
    assert killed.returncode == -signal.SIGKILL, killed.stderr[-3000:]
    assert steps(work_dir) == [2]
    assert last_checkpoint(work_dir) == str(work_dir / 'iter_2.pth')
    assert checkpoint_problem(work_dir / 'iter_2.pth') is None

    resumed = run_tool('tools/train.py', *args, '--resume', env=ENV)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert 'resumed epoch: 0, iter: 2' in resumed.stdout + resumed.stderr
    assert steps(work_dir) == [6]
    assert last_checkpoint(work_dir) == str(work_dir / 'iter_6.pth')


@pytest.fixture
def fake_slurm(tmp_path):
    """A folder with ``srun`` and ``scontrol`` stand-ins (module
    docstring) for the PATH; ``requeued`` lists ``scontrol requeue``
    calls."""
    bin_dir = tmp_path / 'fake_slurm'
    bin_dir.mkdir()
    srun = bin_dir / 'srun'
    srun.write_text(f'#!{sys.executable}\n' + textwrap.dedent('''
        import os, signal, subprocess, sys
        args, ntasks, i = sys.argv[1:], 1, 0
        while args[i].startswith('-'):
            if args[i] == '-p':
                i += 1
            elif args[i].startswith('--ntasks='):
                ntasks = int(args[i].split('=')[1])
            i += 1
        tasks = [subprocess.Popen(args[i:], env=dict(
            os.environ, SLURM_PROCID=str(rank), SLURM_LOCALID=str(rank),
            SLURM_NTASKS=str(ntasks), SLURM_NODELIST='localhost'))
            for rank in range(ntasks)]
        signal.signal(signal.SIGTERM,
                      lambda signum, frame: [t.send_signal(signum)
                                             for t in tasks])
        codes = [t.wait() for t in tasks]
        sys.exit(max(128 - c if c < 0 else c for c in codes))
        '''))
    scontrol = bin_dir / 'scontrol'
    scontrol.write_text(textwrap.dedent(f'''\
        #!/bin/sh
        case "$1" in
            show) echo 127.0.0.1 ;;
            requeue) echo "$@" >> {bin_dir}/requeued ;;
        esac
        '''))
    for tool in (srun, scontrol):
        tool.chmod(0o755)
    return bin_dir


def launch(script_args, env, tmp_path):
    """Start a launcher script in its own process group; output to a
    file."""
    out = open(tmp_path / 'launcher.out', 'w')
    return subprocess.Popen(
        ['bash', *map(str, script_args)], cwd=REPO, stdout=out,
        stderr=subprocess.STDOUT, start_new_session=True,
        env={**os.environ, **ENV, 'PYTHON': sys.executable, **env})


def output(tmp_path):
    return (tmp_path / 'launcher.out').read_text(errors='replace')


def wait_for_training(work_dir, timeout=300):
    """Block until the run's log shows a training iteration."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if any('Iter(train)' in log.read_text(errors='replace')
               for log in work_dir.glob('*/*.log')):
            return
        time.sleep(0.2)
    raise AssertionError(f'no training iteration logged in {work_dir}')


def train_processes(marker):
    """``{rank: pid}`` of the tools/train.py processes whose environment
    holds ``MMPOS_TEST_JOB=marker``."""
    found = {}
    for pid in filter(str.isdigit, os.listdir('/proc')):
        try:
            with open(f'/proc/{pid}/cmdline', 'rb') as f:
                if b'tools/train.py' not in f.read():
                    continue
            with open(f'/proc/{pid}/environ', 'rb') as f:
                env = dict(item.split(b'=', 1) for item in
                           f.read().split(b'\0') if b'=' in item)
        except OSError:
            continue
        rank = env.get(b'RANK', env.get(b'SLURM_PROCID'))  # a task
        if env.get(b'MMPOS_TEST_JOB') == marker.encode() and rank:
            found[int(rank)] = int(pid)
    return found


@pytest.mark.parametrize('allocation', ['srun', 'sbatch'])
def test_sigterm_saves_requeues_and_resumes(tmp_path, mini_data, fake_slurm,
                                            allocation):
    """Slurm's SIGTERM during training: train.py saves after the iteration
    in progress and exits 75; slurm_train.sh runs srun again with
    --auto-resume (srun's own allocation) or requeues the batch job, whose
    next start (SLURM_RESTART_COUNT=1) resumes; the run ends at its last
    iteration from the saved one."""
    work_dir = tmp_path / 'run'
    script = ['tools/slurm_train.sh', 'part', 'job', DEMO, work_dir,
              '--cfg-options', *options(mini_data, 100, 100)]
    env = {'PATH': f'{fake_slurm}:{os.environ["PATH"]}', 'GPUS': '1',
           'GPUS_PER_NODE': '1', 'MASTER_PORT': str(free_port())}
    if allocation == 'sbatch':
        env['SLURM_JOB_ID'] = '42'
    job = launch(script, {**env, 'MMPOS_TEST_JOB': str(tmp_path)}, tmp_path)
    wait_for_training(work_dir)
    for pid in train_processes(str(tmp_path)).values():
        os.kill(pid, signal.SIGTERM)  # what Slurm sends every task
    assert job.wait(timeout=300) == 0, output(tmp_path)[-3000:]
    text = output(tmp_path)
    saved = int(re.search(r'preempted by SIGTERM after iteration (\d+)',
                          text).group(1))
    assert 1 <= saved < 100
    assert (f'train.py: preempted by SIGTERM after iteration {saved}: saved '
            f'{work_dir}/iter_{saved}.pth; continue with --resume') in text
    if allocation == 'sbatch':
        assert (fake_slurm / 'requeued').read_text() == 'requeue 42\n'
        assert steps(work_dir) == [saved]
        assert last_checkpoint(work_dir) == str(work_dir /
                                                f'iter_{saved}.pth')
        job = launch(script, {**env, 'SLURM_RESTART_COUNT': '1'}, tmp_path)
        assert job.wait(timeout=300) == 0, output(tmp_path)[-3000:]
        text = output(tmp_path)
    else:
        assert 'slurm_train.sh: preempted; resuming' in text
    assert f'resumed epoch: 0, iter: {saved}' in text
    assert steps(work_dir) == [100]


def test_preempted_exit_code_is_what_slurm_train_sh_requeues_on():
    script = (REPO / 'tools/slurm_train.sh').read_text()
    assert f'PREEMPTED={PREEMPTED_EXIT_CODE}' in script


@pytest.mark.parametrize('launcher', ['dist_train.sh', 'slurm_train.sh'])
def test_a_dying_rank_ends_the_job_with_one_line(tmp_path, mini_data,
                                                 fake_slurm, launcher):
    """Rank 1 of 2 (gloo) SIGKILLed during training: rank 0 stops within
    LOST_RANK_SECONDS with one line naming rank 1, instead of waiting in a
    collective; also where no launcher tears the job down (the srun
    stand-in waits for every task)."""
    work_dir = tmp_path / 'run'
    marker = str(tmp_path)
    train_args = [DEMO, '--cfg-options', *options(mini_data, 5000, 5000)]
    if launcher == 'dist_train.sh':
        script = ['tools/dist_train.sh', DEMO, '2', '--work-dir', work_dir,
                  *train_args[1:]]
        env = {'PORT': str(free_port())}
    else:
        script = ['tools/slurm_train.sh', 'part', 'job', DEMO, work_dir,
                  *train_args[1:]]
        env = {'PATH': f'{fake_slurm}:{os.environ["PATH"]}', 'GPUS': '2',
               'GPUS_PER_NODE': '2', 'MASTER_PORT': str(free_port())}
    job = launch(script, {**env, 'MMPOS_TEST_JOB': marker}, tmp_path)
    try:
        wait_for_training(work_dir)
        ranks = train_processes(marker)
        assert sorted(ranks) == [0, 1], ranks
        os.kill(ranks[1], signal.SIGKILL)
        killed = time.monotonic()
        status = job.wait(timeout=LOST_RANK_SECONDS)
        assert time.monotonic() - killed < LOST_RANK_SECONDS
    finally:
        if job.poll() is None:
            os.killpg(job.pid, signal.SIGKILL)
    assert status != 0
    text = output(tmp_path)
    lines = [line for line in text.splitlines()
             if line.startswith('train.py: error:')]
    assert len(lines) == 1 and lines[0].startswith(
        f'train.py: error: rank 0 of 2 stopped: rank 1 (pid {ranks[1]} on '
        f'{os.uname().nodename}) has ended, and the job cannot go on without '
        f'it '), text[-3000:]
    assert 'Connection' in lines[0] or 'peer' in lines[0], lines[0]


def _tmpfs_command(folder, size):
    """A command prefix that runs its arguments with a ``size`` tmpfs
    mounted on ``folder`` (in a private mount namespace), or None where
    this machine allows no such mount."""
    mount = f'mount -t tmpfs -o size={size} tmpfs "$0" && exec "$@"'
    for prefix in (['unshare', '-rm'], ['unshare', '-m']):
        probe = subprocess.run([*prefix, 'sh', '-c', mount, str(folder),
                                'true'], capture_output=True)
        if probe.returncode == 0:
            return [*prefix, 'sh', '-c', mount, str(folder)]
    return None


def test_a_full_disk_keeps_the_previous_checkpoint(tmp_path, mini_data):
    """A 16 MiB file system holds one checkpoint of the demo model (10.7
    MB) but not a second one beside it: the save of iter_4.pth fails with
    ENOSPC, iter_2.pth stays intact and named by last_checkpoint, and the
    run stops with one line naming the path and the bytes needed."""
    disk, kept = tmp_path / 'disk', tmp_path / 'kept'
    disk.mkdir()
    prefix = _tmpfs_command(disk, '16m')
    if prefix is None:
        pytest.skip('this machine allows no tmpfs mount (unshare -m)')
    work_dir = disk / 'run'
    # the tmpfs ends with its namespace: copy what the run left there
    train = (f'"{sys.executable}" tools/train.py {DEMO} --work-dir '
             f'{work_dir} --cfg-options '
             + ' '.join(options(mini_data, 4, 2))
             + f'; status=$?; cp -a {disk}/. {kept}/; exit $status')
    result = subprocess.run(
        [*prefix, 'sh', '-c', train], cwd=REPO, capture_output=True,
        text=True, timeout=600, env={**os.environ, **ENV})
    assert result.returncode == 1, result.stderr[-3000:]
    line = result.stderr.strip().splitlines()[-1]
    assert line.startswith(f'train.py: error: {work_dir}/iter_4.pth: No '
                           'space left on device: the file needs '), line
    assert 'bytes' in line and 'free there' in line
    run = kept / 'run'
    assert steps(run) == [2]
    assert last_checkpoint(run) == str(work_dir / 'iter_2.pth')
    assert checkpoint_problem(run / 'iter_2.pth') is None
    assert not list(run.glob('.*.part'))
