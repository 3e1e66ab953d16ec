"""The benchmark runner (``benchmarks/run.py``): the JSON / Markdown summary
of a tiny run, failure recording, and the measurement claims the benchmarks
rest on (memory is really measured, RoPE tables are built once, both
pipelines draw the same crops). Nothing here asserts a time."""
import copy
import importlib
import json
import math
from pathlib import Path

import numpy as np
import pytest
import torch
from scipy import stats as scipy_stats
from statsmodels.stats.multitest import multipletests

BENCH = Path(__file__).resolve().parents[1] / 'benchmarks'


@pytest.fixture
def bench(monkeypatch):
    """Import a ``benchmarks/`` script as the runner does (siblings on
    ``sys.path``)."""
    monkeypatch.syspath_prepend(str(BENCH))
    return importlib.import_module


def test_sdpa_summary_json_and_markdown(bench, tmp_path):
    run = bench('run')
    # --malloc system: 'reuse' would change this test process's allocator
    # for the rest of the suite (tested in a process of its own below)
    argv = ['--only', 'sdpa', '--quick', '--iters', '3', '--warmup', '0',
            '--device', 'cpu', '--malloc', 'system', '--out', str(tmp_path),
            '--name', 'tiny']
    assert run.main(argv) == 0
    summary = json.loads((tmp_path / 'tiny.json').read_text())
    settings = summary['settings']
    assert settings['device'] == 'cpu' and settings['argv'] == argv
    assert settings['amp'] == 'off (fp32)' and settings['threads'] >= 1
    assert settings['malloc'] == 'system'
    for key in ('torch', 'load_start', 'load_end', 'total_s'):
        assert key in settings
    # where it came from (mmpos_harness.provenance): the benchmark's own
    # module and the runner's are among the paths that make it stale
    record = settings['provenance']
    assert record['command'] == 'python benchmarks/run.py ' + ' '.join(argv)
    from mmpos_harness import provenance
    files = {f for p in record['depends'] for f in provenance.files_under(p)}
    assert {'benchmarks/sdpa_attention.py', 'benchmarks/_timing.py',
            'benchmarks/run.py', 'mmpos/models/backbones/rope_vit.py',
            'mmpos/models/layers/attention.py',
            'mmpos_positions/linear.py'} <= files
    # the scheme files of schemes the benchmark does not build are left out
    assert 'mmpos_positions/matrix.py' not in files
    assert list(summary['benchmarks']) == ['sdpa']
    assert 'error' not in summary['benchmarks']['sdpa']
    rows = summary['rows']
    assert [r['benchmark'] for r in rows] == [
        'sdpa_attention N=196 (B=4)', 'sdpa_attention N=784 (B=1)']
    for row in rows:
        assert (row['ours'], row['baseline']) == ('torch SDPA',
                                                  'naive attention')
        for key in ('ours_ms', 'baseline_ms', 'time_ratio', 'ours_peak_mib',
                    'baseline_peak_mib', 'mem_ratio', 'ours_images_per_s',
                    'baseline_images_per_s', 'throughput_ratio'):
            assert math.isfinite(row[key]) and row[key] > 0, key
        assert row['mem_ratio'] == pytest.approx(row['ours_peak_mib'] /
                                                 row['baseline_peak_mib'])
    # the time ratio: geometric mean of the per-round ratios and scipy's
    # paired t interval on the log times of the stored rounds
    for key, row in zip(('N=196', 'N=784'), rows):
        stats = summary['benchmarks']['sdpa']['result'][key]
        ours, base = (np.log(stats[k]['times_ms']) for k in ('SDPA', 'naive'))
        assert len(ours) == 3
        assert row['ours_ms'] == pytest.approx(
            np.median(stats['SDPA']['times_ms']))
        assert row['time_ratio'] == pytest.approx(np.exp((ours - base).mean()))
        ci = scipy_stats.ttest_rel(ours, base).confidence_interval()
        assert (row['time_ratio_low'], row['time_ratio_high']) == \
            pytest.approx(tuple(np.exp([ci.low, ci.high])))
    # Naive attention keeps the fp32 (B, 12, N, N) matrix (and its softmax)
    # for backward: its measured peak holds at least one of them, and the
    # fused kernel needs less.
    big = rows[1]
    assert big['baseline_peak_mib'] * 2**20 >= 12 * 784 * 784 * 4
    assert big['mem_ratio'] < 1
    md = (tmp_path / 'tiny.md').read_text()
    assert md.startswith('# Benchmark summary')
    assert f'at commit {record["commit"][:10]}' in md
    table = [line for line in md.splitlines()
             if line.startswith('| sdpa_attention')]
    assert len(table) == 2
    cells = table[1].split(' | ')
    assert cells[1:3] == ['torch SDPA', 'naive attention']
    assert cells[5] == (f"{big['time_ratio']:.3f} [{big['time_ratio_low']:.3f}"
                        f", {big['time_ratio_high']:.3f}]")


def _stats(times):
    return dict(step_ms=float(np.median(times)), times_ms=list(times))


@pytest.mark.parametrize('target, bound', [
    ('<= 1.5', 1.5), ('<= 1.03 (CPU fp32)', 1.03), ('< 2', 2.),
    ('mem <= 0.5, time < 1.35', 1.35), ('~0.25', None),
    ('1.3 (paper, per epoch)', None), ('mem <= 0.5', None), (None, None)])
def test_time_bound_reads_only_bounds_on_time(bench, target, bound):
    assert bench('_timing').time_bound(target) == bound


def test_targets_are_tested_and_adjusted_as_one_family(bench):
    """A row whose target bounds the time is tested against the bound
    (scipy's one-sample t on the per-round log ratios), the run's target
    rows adjusted by Holm (statsmodels), and read as met / missed / no
    verdict; a row without a bound is not tested."""
    timing, run = bench('_timing'), bench('run')
    rng = np.random.default_rng(0)
    base = 100 * np.exp(rng.normal(0, 0.05, 12))
    noise = rng.normal(0, 0.02, 12)
    ours = {'fast': base * 1.2 * np.exp(noise),
            'slow': base * 1.8 * np.exp(noise),
            'close': base * 1.5 * np.exp(noise + rng.normal(0, 0.05, 12))}
    rows = [timing.comparison('b', name, _stats(t), 'base', _stats(base),
                              target='<= 1.5') for name, t in ours.items()]
    rows.append(timing.comparison('b', 'free', _stats(base * 2),
                                  'base', _stats(base), target='~0.25'))
    run.judge_targets(rows)
    assert 'target_test' not in rows[-1] and 'target_verdict' not in rows[-1]
    logs = [np.log(t / base) for t in ours.values()]
    p = [scipy_stats.ttest_1samp(x, np.log(1.5)).pvalue for x in logs]
    holm = multipletests(p, method='holm')[1]
    for row, x, p_raw, p_adj in zip(rows, logs, p, holm):
        test = row['target_test']
        assert test['pvalue'] == pytest.approx(p_raw)
        assert test['p_adj'] == pytest.approx(p_adj)
        assert test['family_size'] == 3
        assert row['time_ratio'] == pytest.approx(np.exp(x.mean()))
    assert [r['target_verdict'] for r in rows[:3]] == [
        'met', 'missed', 'no verdict']
    cell = run._cell(rows[1], 'target_test', None)
    assert cell == f"missed ({rows[1]['target_test']['p_adj']:.2g})"


def test_benchmarks_with_targets_judge_them(bench, tmp_path):
    """The benchmarks whose rows carry a target, at quick size with 2
    rounds: every row has its interval around its ratio, and every bounded
    target a test and a verdict."""
    run = bench('run')
    names = ['droppos', 'icpf', 'online_probe', 'checkpointing',
             'position_schemes']
    assert run.main(['--only', *names, '--quick', '--iters', '2',
                     '--warmup', '0', '--device', 'cpu', '--malloc',
                     'system', '--out', str(tmp_path), '--name',
                     'targets']) == 0
    rows = json.loads((tmp_path / 'targets.json').read_text())['rows']
    assert {r['benchmark'].split()[0] for r in rows} == {
        'droppos_step', 'icpf_step', 'online_probe', 'checkpointing',
        'position_schemes'}
    for row in rows:
        assert row['time_ratio_low'] <= row['time_ratio'] <= \
            row['time_ratio_high']
    bounded = [r for r in rows
               if bench('_timing').time_bound(r.get('target'))]
    assert len(bounded) == 5  # DropPos, N = 50, with_cp, ComRoPE, LieRE
    for row in bounded:
        assert row['target_test']['family_size'] == 5
        assert row['target_verdict'] in ('met', 'missed', 'no verdict')


def test_ratio_of_one_round_has_no_interval(bench):
    timing = bench('_timing')
    r = timing.ratio(_stats([12.]), _stats([10.]))
    assert r == dict(time_ratio=pytest.approx(1.2), time_ratio_low=None,
                     time_ratio_high=None)
    assert timing.format_ratio(r) == '1.200 [-]'
    with pytest.raises(ValueError, match='without per-round times'):
        timing.ratio(dict(step_ms=1.), _stats([1., 2.]))


def test_vitdet_window_models_subset_sees_attention_matrices(bench, tmp_path):
    """``--models`` measures a subset (rows only for the pairs present);
    the allocator-level peak of the model that stores its attention
    matrices (SDPA's math backend) holds the 4 blocks' (3, 784, 784) fp32
    matrices on top of the fused model's, and windows (2 of the 4 blocks,
    4 windows of 196 tokens) need less."""
    run = bench('run')
    argv = ['--only', 'vitdet_window', '--quick', '--iters', '1', '--warmup',
            '0', '--device', 'cpu', '--malloc', 'system', '--out',
            str(tmp_path), '--name', 'win',
            '--models', 'global', 'global+math', 'windowed+math']
    assert run.main(argv) == 0
    summary = json.loads((tmp_path / 'win.json').read_text())
    result = summary['benchmarks']['vitdet_window']['result']
    assert sorted(k for k in result if k != 'settings') == [
        'global', 'global+math', 'windowed+math']
    assert [(r['ours'], r['baseline']) for r in summary['rows']] == [
        ('windowed+math', 'global+math'), ('global+math', 'global')]
    matrices = 4 * 3 * 784**2 * 4 / 2**20
    assert (result['global+math']['peak_mib'] -
            result['global']['peak_mib']) >= matrices
    assert summary['rows'][0]['mem_ratio'] < 1
    assert run.main(argv[:-3] + ['windowed', 'nope']) == 1
    failed = json.loads((tmp_path / 'win.json').read_text())
    assert 'unknown models' in failed['benchmarks']['vitdet_window']['error']


MALLOC_PROBE = """
import sys
import torch
import _timing
_timing.use_malloc(sys.argv[1])
size = int(sys.argv[2]) << 18  # MiB of fp32
def step():
    a, b, c = (torch.ones(size) for _ in range(3))
first = _timing.minor_faults()
step()
first = _timing.minor_faults() - first
stats = _timing.measure(dict(step=step), torch.device('cpu'), 10, 5,
                        memory=False)
print(first, stats['step']['faults'],
      _timing.settings(torch.device('cpu'), None)['malloc'])
"""


def malloc_probe(mode: str, mib: int) -> tuple:
    """Page faults of the first step that allocates three ``mib`` MiB
    tensors (all its pages, whatever their size), the median of later steps
    after 10 warm-up steps, and the recorded mode, in a process of its own
    (the mode holds for the rest of a process)."""
    import subprocess
    import sys
    out = subprocess.run([sys.executable, '-c', MALLOC_PROBE, mode,
                          str(mib)], cwd=BENCH, capture_output=True,
                         text=True, check=True).stdout.split()
    return int(out[0]), float(out[1]), out[2]


def test_malloc_reuse_keeps_freed_memory(bench):
    """glibc maps a tensor above 32 MiB (its largest dynamic threshold)
    afresh on every allocation in both modes, so every step faults in all
    its pages again, and ``measure`` counts them; below it, ``--malloc
    reuse`` keeps the freed memory and, after warm-up, a step faults none
    (with glibc's defaults such a step faults whenever the freed heap was
    trimmed)."""
    for mode in ('system', 'reuse'):
        first, later, recorded = malloc_probe(mode, 40)
        assert recorded == mode and first > 0 and later >= 0.9 * first
    first, later, recorded = malloc_probe('reuse', 24)
    assert recorded == 'reuse' and first > 0 and later < 0.01 * first


def test_malloc_mode_is_checked(bench, capsys):
    timing = bench('_timing')
    with pytest.raises(ValueError, match="got 'jemalloc'"):
        timing.use_malloc('jemalloc')
    with pytest.raises(SystemExit):
        bench('run').main(['--malloc', 'jemalloc'])
    assert "invalid choice: 'jemalloc'" in capsys.readouterr().err


def test_failed_benchmark_is_recorded(bench, tmp_path):
    run = bench('run')
    logs = []
    entries = run.run_all(['sdpa'], dict(quick=True, device='cpu',
                                         amp='fp8'), log=logs.append)
    assert entries['sdpa']['error'].startswith('ValueError: amp must be')
    assert 'FAILED' in logs[-1]
    from mmpos_harness import provenance
    summary = run.write_summary(entries, dict(
        device='cpu', torch=torch.__version__, threads=1, amp='off',
        malloc='system', load_start=[], load_end=[], total_s=0.,
        argv=['--only', 'sdpa'],
        provenance=provenance.record('python benchmarks/run.py --only sdpa',
                                     run.depends(['sdpa']))),
        str(tmp_path), 'failed')
    assert summary['rows'] == []
    md = (tmp_path / 'failed.md').read_text()
    assert '## Failed' in md and '`sdpa`: ValueError: amp must be' in md
    assert json.loads((tmp_path / 'failed.json').read_text())[
        'benchmarks']['sdpa']['error'] == entries['sdpa']['error']


def test_depends_follows_sibling_imports(bench):
    """A benchmark that imports a sibling module (``rope_fast`` takes
    ``rope_overhead``'s models) depends on both."""
    run = bench('run')
    found = run.depends(['rope_fast'])
    assert {'benchmarks/rope_fast.py', 'benchmarks/rope_overhead.py',
            'benchmarks/_timing.py'} <= set(found)
    assert 'benchmarks/sdpa_attention.py' not in found


def test_fit_exponent_recovers_power_law(bench):
    fit = bench('rope_scaling').fit_exponent
    tokens = [196, 784, 3136, 4096]
    assert fit(tokens, [3 * n**1.5 for n in tokens]) == pytest.approx(1.5)
    assert fit(tokens, [n + 1e-3 * n**2 for n in tokens]) > 1


@pytest.mark.parametrize('rope_type', ['axial', 'mixed'])
def test_rope_tables_built_once_per_forward_in_training_steps(bench,
                                                              rope_type):
    """Training steps of a RoPE ViT at two resolutions compute the position
    tables once per forward: one for all blocks (RoPE-Axial), one per block
    (RoPE-Mixed), none inside the blocks."""
    from mmpos.models.backbones import RoPEVisionTransformer
    timing, scaling = bench('_timing'), bench('rope_scaling')
    model = RoPEVisionTransformer(
        arch=dict(embed_dims=32, num_layers=2, num_heads=2,
                  feedforward_channels=64),
        img_size=32, patch_size=8, rope=dict(type=rope_type), use_ape=False)
    cpu = torch.device('cpu')
    steps = [
        timing.train_step(model, lambda s=s: model(torch.randn(
            2, 3, s, s))[-1].square().mean(), cpu)
        for s in (32, 48)
    ]
    counts = scaling.count_table_builds(steps, calls=2)
    assert counts['forwards'] == 2 * 2  # calls x sizes
    per_forward = 1 if rope_type == 'axial' else 2  # layers
    assert counts['tables'] == counts['forwards'] * per_forward


def test_rope_scaling_result_structure(bench):
    result = bench('rope_scaling').run(quick=True, iters=1, warmup=0,
                                       device='cpu', sizes=(32, 64))
    assert [result[k]['tokens'] for k in ('32px', '64px')] == [4, 16]
    assert set(result['fit']) == {'APE', 'RoPE-mixed', 'RoPE-axial'}
    for fit in result['fit'].values():
        assert all(math.isfinite(v) for v in fit.values())
    # 2 calls x 2 sizes of a 1-block model in eval mode: the tables of the
    # warm-up call are reused
    assert result['rope_tables']['RoPE-axial'] == dict(tables=0, forwards=4)
    assert '| RoPE-axial | 4 | 0 |' in bench('rope_scaling').markdown(result)


def test_rope_compile_times_string_as_deployed(bench, monkeypatch):
    """The inference benchmark times STRING folded into its projections
    (checked against the unfolded model first) and compares it with
    RoPE-Mixed, whose tables it keeps; a fold that misses the projections
    is refused."""
    rope_compile = bench('rope_compile')
    result = rope_compile.run(quick=True, iters=2, warmup=0, device='cpu',
                              compiled=())
    folded = result['eager']['string folded']
    assert folded['mixed_ratio_low'] <= folded['mixed_ratio'] <= \
        folded['mixed_ratio_high']
    rows = rope_compile.summarize(result)
    assert ('string folded', 'RoPE-Mixed ViT') in [
        (r['ours'], r['baseline']) for r in rows]
    assert 'string folded / mixed (eager): ' in rope_compile.markdown(result)

    from mmpos_positions import STRINGRoPE
    fold = STRINGRoPE.fold_

    def basis_dropped(self, qkv):  # P left out of the projections
        return fold(self, [copy.deepcopy(layer) for layer in qkv])

    monkeypatch.setattr(STRINGRoPE, 'fold_', basis_dropped)
    with pytest.raises(RuntimeError, match='folded STRING differs'):
        rope_compile.run(quick=True, iters=1, warmup=0, device='cpu',
                         compiled=())


def test_pipelines_with_and_without_boxes_draw_the_same_views(bench):
    """The throughput comparison's premise: with the same seed, the
    box-recording pipeline and mmpretrain's produce identical views."""
    pt = bench('pipeline_throughput')
    cfg = [dict(type='MultiViewWithBoxes', num_views=[1],
                transforms=[[dict(type='RandomResizedCropWithBox',
                                  scale=16), dict(type='RandomFlipWithBox')]
                            ]), dict(type='PackInputs',
                                     algorithm_keys=['crop_boxes'])]
    assert pt.swap_types(cfg, False) == [
        dict(type='MultiView', num_views=[1],
             transforms=[[dict(type='RandomResizedCrop', scale=16),
                          dict(type='RandomFlip')]]),
        dict(type='PackInputs')]
    assert pt.swap_types(pt.swap_types(cfg, False), True) == cfg
    pipelines = pt.build_pipelines('icpf')
    img = np.random.default_rng(0).integers(0, 255, (64, 80, 3), np.uint8)
    outputs = {}
    for key, pipeline in pipelines.items():
        pt.seed_all(3)
        outputs[key] = pipeline(dict(img=img, img_shape=(64, 80),
                                     ori_shape=(64, 80)))
    ours, base = outputs['ours'], outputs['baseline']
    assert len(ours['inputs']) == len(base['inputs']) == 10
    for a, b in zip(ours['inputs'], base['inputs']):
        assert torch.equal(a, b)
    assert tuple(ours['data_samples'].crop_boxes.shape) == (10, 4)
    assert 'crop_boxes' not in base['data_samples']


def test_device_benchmark_stores_a_record_made_in_the_repository(
        bench, tmp_path):
    """``rope_attention_device.py --provenance``: a record written where
    git is, stored with this run's machine, date and load (the device
    machine has no git)."""
    from mmpos_harness import provenance
    record = provenance.record(
        'python benchmarks/rope_attention_device.py --quick',
        ['benchmarks/rope_attention_device.py', 'benchmarks/_timing.py'])
    path = tmp_path / 'record.json'
    path.write_text(json.dumps(dict(record, machine='elsewhere')))
    bench('rope_attention_device').main([
        '--quick', '--device', 'cpu', '--amp', 'off', '--modes', 'eager',
        '--schemes', 'axial', '--iters', '1', '--warmup', '0', '--out',
        str(tmp_path), '--provenance', str(path)])
    stored = json.loads((tmp_path / 'cpu_rope_attention.json').read_text())
    got = stored['settings']['provenance']
    assert {k: got[k] for k in ('command', 'commit', 'dirty', 'depends')} \
        == {k: record[k] for k in ('command', 'commit', 'dirty', 'depends')}
    assert got['machine'].startswith('cpu, ') and got['load']
