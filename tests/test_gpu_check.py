"""benchmarks/gpu_check.sh and gpu_check.py (#59 item 5): the whole check,
planner and measurement, run as its CPU dry run (tiny models, batch 1, one
timed step); the numbers a GPU run fills, the planner's agreement with the
real step's peak on this CPU, and the halving of the batch on out of
memory. No timing is asserted."""
import importlib
import json
import os
import subprocess
import sys
import zipfile

import pytest
import torch

from conftest import REPO

BENCH = REPO / 'benchmarks'


def _wheel(folder, name, version):
    """A pure-Python wheel of the module ``name`` (one constant)."""
    info = f'{name}-{version}.dist-info'
    path = folder / f'{name}-{version}-py3-none-any.whl'
    with zipfile.ZipFile(path, 'w') as whl:
        whl.writestr(f'{name}.py', 'VALUE = 7\n')
        whl.writestr(f'{info}/METADATA', f'Metadata-Version: 2.1\nName: '
                     f'{name}\nVersion: {version}\n')
        whl.writestr(f'{info}/WHEEL', 'Wheel-Version: 1.0\nGenerator: '
                     'test\nRoot-Is-Purelib: true\nTag: py3-none-any\n')
        whl.writestr(f'{info}/RECORD', '')
    return path


@pytest.fixture
def gpu_check(monkeypatch):
    monkeypatch.syspath_prepend(str(BENCH))
    return importlib.import_module('gpu_check')


@pytest.mark.slow
def test_dry_run_of_the_script_plans_measures_and_writes(tmp_path,
                                                         gpu_check):
    """The wheel folder: a missing distribution is installed into the
    site folder, an installed one (torch; here not even a zip) is left."""
    out, wheels, site = tmp_path / 'out', tmp_path / 'wheels', tmp_path / \
        'site'
    wheels.mkdir()
    _wheel(wheels, 'gpucheckprobe', '1.0')
    (wheels / 'torch-0.0-py3-none-any.whl').write_text('not a wheel')
    env = dict(os.environ, PYTHON=sys.executable, MMPOS_SITE=str(site),
               WHEELS=str(wheels))
    done = subprocess.run(
        ['bash', str(BENCH / 'gpu_check.sh'), str(out), '--dry-run'],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
    assert 'rope_attention_device.py not run (no CUDA' in done.stderr
    assert f'installing 1 wheels from {wheels}' in done.stderr
    assert (site / 'gpucheckprobe.py').read_text() == 'VALUE = 7\n'
    report = json.loads((out / 'cpu_gpu_check.json').read_text())
    assert report['settings']['dry_run'] is True
    prov = report['provenance']
    assert (prov['kind'], prov['why']) == ('minimal', 'dry run')
    assert prov['torch'] == torch.__version__ and 'gpu_check.py' in \
        prov['command']
    assert list(report['cases']) == list(gpu_check.CASES)
    for name, case in report['cases'].items():
        assert 'error' not in case, (name, case)
        assert case['config'] == gpu_check.DRY_RUN_CASES[name][0]
        assert (case['batch'], case['oom_batches']) == (1, [])
        # the planner's numbers are filled ...
        assert case['params'] > 0
        assert 0 < case['flops_fwd_per_image'] < \
            case['flops_train_per_image']
        assert case['planned_peak_by_kind']['PARAM'] == pytest.approx(
            4 * case['params'], rel=0.01)  # fp32 parameters
        # ... and its peak is the real step's within 10 % (the target)
        assert 0 < case['state_bytes'] < case['peak_bytes']
        assert case['mem_ratio'] == pytest.approx(
            case['planned_peak_bytes'] / case['peak_bytes'])
        assert case['mem_within_10pct'], (name, case['mem_ratio'])
        assert case['achieved_tflops'] > 0 and case['step_s'] > 0
        # no GPU of the planner's list: no MFU
        assert case['gpu'] is None and 'mfu' not in case
    assert report['cases']['vitdet_vit-b_backbone_1024']['backbone_only']
    assert report['mask_rcnn']['status'] == 'skipped: no CUDA device'
    page = (out / 'cpu_gpu_check.md').read_text()
    assert all(f'| {name} | 1 (1) |' in page for name in gpu_check.CASES)


def test_out_of_memory_halves_the_batch(gpu_check, monkeypatch):
    """A step that does not fit at 8 or 4 images runs at 2; both failures
    are recorded. At batch 1 the case gives up."""
    fits = 2

    def measure_step(cfg, batch, *args):
        if batch > fits:
            raise torch.cuda.OutOfMemoryError('CUDA out of memory')
        return dict(batch=batch)

    monkeypatch.setattr(gpu_check, 'measure_step', measure_step)
    cpu = torch.device('cpu')
    assert gpu_check.measure_fitting(None, 8, (224, 224), cpu, 0, 1) == (
        2, dict(batch=2), [8, 4])
    fits = 0
    assert gpu_check.measure_fitting(None, 2, (224, 224), cpu, 0, 1) == (
        1, None, [2, 1])
