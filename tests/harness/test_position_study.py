"""mmpos_harness.position_study (tools/paper_tables/position_study.py):
the study's runs, resume, table (mean +- std, "clear" vs noise against
APE) and plot, on a tiny budget; one study per result folder, and a study
SIGKILLed while it writes resumes to the same table."""
import json
import os
import subprocess
import sys
import time

import pytest

from conftest import REPO
from mmpos_harness import position_study as study


def test_summary_marks_differences_beyond_twice_the_pooled_std():
    runs = {
        'APE': {s: dict(acc={'64': v}) for s, v in enumerate([50, 51, 49])},
        'Far': {s: dict(acc={'64': v}) for s, v in enumerate([60, 61, 59])},
        'Near': {s: dict(acc={'64': v}, acc_ntk={'96': v})
                 for s, v in enumerate([50.5, 49, 51])},
    }
    rows = study.summarise(runs, [64, 96], 64)['rows']
    assert rows['Far']['64']['clear'] is True
    assert rows['Far']['64']['diff'] == pytest.approx(10.)
    assert rows['Near']['64']['clear'] is False
    assert rows['Near +NTK']['96']['mean'] == pytest.approx(50.1667, 1e-3)
    assert rows['Near +NTK']['96']['diff'] is None  # no APE at 96
    assert rows['Near +NTK']['64']['mean'] is None
    md = study.markdown(dict(study.summarise(runs, [64, 96], 64)), [0, 1, 2],
                        10)
    assert '| Far | 60.0 ± 1.0 (+10.0 clear) | - |' in md


def test_tiny_study_runs_resumes_and_writes_table_and_plot(tmp_path):
    argv = [str(tmp_path), '--schemes', 'APE', 'RoPE-Mixed', '--seeds', '0',
            '1', '--iters', '2', '--sizes', '32', '64', '96',
            '--num-train', '12', '--num-val', '9']
    study.main(argv)
    summary = json.loads((tmp_path / 'position_study.json').read_text())
    rows = summary['rows']
    assert set(rows) == {'APE', 'RoPE-Mixed', 'RoPE-Mixed +NTK',
                         'RoPE-Mixed +YARN'}
    assert len(rows['RoPE-Mixed']['96']['values']) == 2
    assert rows['RoPE-Mixed +NTK']['32']['mean'] is None  # larger only
    assert all(0 <= v <= 100 for v in rows['APE']['64']['values'])
    assert (tmp_path / 'position_study.png').stat().st_size > 0
    assert '32 px (train)' in (tmp_path / 'position_study.md').read_text()
    run = tmp_path / 'runs' / 'APE' / 'seed0.json'
    before = run.stat().st_mtime_ns
    study.main(argv)  # resumes: nothing retrained
    assert run.stat().st_mtime_ns == before


def test_random_resized_crops_keep_their_area_share():
    """Crops of a bright centre square (a quarter of the area) on black:
    a crop of >= 25% of the area with aspect ratio in [3/4, 4/3] is >= 0.43
    of the side wide and high, so wherever it lies it overlaps the square;
    a whole-image crop (scale 1) shows the square's quarter share."""
    import torch
    images = torch.zeros(64, 3, 64, 64)
    images[:, :, 16:48, 16:48] = 255.  # a quarter of the area
    gen = torch.Generator().manual_seed(0)
    crops = study.random_resized_crop(images, 32, 0.25, gen)
    assert crops.shape == (64, 3, 32, 32)
    bright = (crops * 0.25 + 0.5).mean(dim=(1, 2, 3))  # share of 255
    # overlap >= 11.7 px per axis of <= 64: share >= (11.7 / 64)^2
    assert bright.min() > 0.02 and bright.max() <= 1. + 1e-6
    assert bright.std() > 0.05  # the crops differ
    whole = study.random_resized_crop(images[:1], 32, 1., gen)
    assert abs((whole * 0.25 + 0.5).mean().item() - 0.25) < 0.05


def test_tiny_study_with_random_resized_crops(tmp_path):
    study.main([str(tmp_path), '--schemes', 'APE', '--seeds', '0',
                '--iters', '2', '--sizes', '32', '--num-train', '12',
                '--num-val', '9', '--crop-scale', '0.35'])
    summary = json.loads((tmp_path / 'position_study.json').read_text())
    assert summary['crop_scale'] == 0.35
    assert 'random resized crops of 0.35-1' in (
        tmp_path / 'position_study.md').read_text()


# Stops the study tool (a subprocess) at the rename that would land its
# result file ``target``: the file is written in full to its temporary name,
# ``ready`` is created, and the process waits there to be killed.
HOLD_AT_RENAME = """
import os, runpy, sys, time
tool, ready, target, *argv = sys.argv[1:]
rename = os.replace
def replace(src, dst):
    if dst.endswith(target):
        open(ready, 'w').close()
        time.sleep(600)
    rename(src, dst)
os.replace = replace
sys.argv = [tool, *argv]
runpy.run_path(tool, run_name='__main__')
"""


def test_second_study_refused_and_a_killed_one_resumes_to_the_same_table(
        tmp_path):
    """A study stopped as it writes its third run (RoPE-Mixed seed 0) holds
    its folder: a second study there is refused with one line naming it.
    SIGKILLed at that moment it leaves no partial result; the same command
    then retrains only that run and the next one, and its table is byte for
    byte the one of an uninterrupted study."""
    argv = ['--schemes', 'APE', 'RoPE-Mixed', '--seeds', '0', '1', '--iters',
            '2', '--sizes', '32', '64', '--num-train', '12', '--num-val', '9']
    out, ready = tmp_path / 'out', tmp_path / 'ready'
    target = os.path.join('runs', 'RoPE-Mixed', 'seed0.json')
    proc = subprocess.Popen(
        [sys.executable, '-c', HOLD_AT_RENAME,
         'tools/paper_tables/position_study.py', str(ready), target,
         str(out), *argv], cwd=REPO, env=dict(os.environ, OMP_NUM_THREADS='1'))
    try:
        deadline = time.time() + 120
        while not ready.exists():
            assert proc.poll() is None and time.time() < deadline
            time.sleep(0.05)
        with pytest.raises(SystemExit) as refused:
            study.main([str(out), *argv])
        message = str(refused.value)
        assert message.startswith('position_study.py: error: work dir ')
        assert f'in use by another run (pid {proc.pid} ' in message
        assert '\n' not in message
    finally:
        proc.kill()  # SIGKILL
        proc.wait()
    runs = out / 'runs'
    assert not (out / target).exists()  # not half there: not there at all
    # the killed write's temporary file: hidden, never read as a result
    assert [p.name.startswith('.seed0.json.')
            for p in (runs / 'RoPE-Mixed').iterdir()] == [True]
    assert not (out / 'position_study.md').exists()
    finished = {p: p.stat().st_mtime_ns for p in runs.glob('APE/*.json')}
    assert len(finished) == 2

    study.main([str(out), *argv])  # resumes: the killed lock is no lock
    assert {p: p.stat().st_mtime_ns for p in finished} == finished
    assert (out / target).is_file()
    study.main([str(tmp_path / 'whole'), *argv])
    table = (out / 'position_study.md').read_bytes()
    assert table == (tmp_path / 'whole' / 'position_study.md').read_bytes()
