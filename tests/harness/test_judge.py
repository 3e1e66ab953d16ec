"""Judging a design's families on a runner's summary
(mmpos_harness.design.judge, tools/misc/judge_design.py): every p, adjusted
p and equivalence p equals scipy's / statsmodels' on the same per-run
values; an above-margin verdict is the correction's rejection and the
interval shown agrees with it; fewer than 2 runs is no test; a summary
without an arm or task is refused in one line naming the file and key; the
stored ranking summary is judged end to end by designs/probes.yaml and the
demo's confirmation reproduces the demo's own verdicts. A position study's
directory is judged by scipy's paired t over the confirmation seeds both
arms ran, the power reached equals statsmodels' at the observed SD, and
the stored calibration is no test under designs/resolution_study.yaml."""
import json
import os
import os.path as osp
import statistics

import numpy as np
import pytest
from scipy import stats as sps
from statsmodels.stats.multitest import multipletests
from statsmodels.stats.power import TTestPower
from statsmodels.stats.weightstats import ttost_ind

from conftest import load_tool

from mmpos.errors import BadInputError
import mmpos_stats as stats
from mmpos_harness import design

ROOT = design.ROOT
RANKING = osp.join(ROOT, 'results/method_ranking/summary.json')
DEMO = osp.join(ROOT, 'results/demo_confirm/summary.json')
KEY = 'mIoU'


def _groups(rng, mean, runs, seeds=3, sd_run=1.0, sd_seed=0.5):
    """``[[y per transfer seed] per pretraining run]``."""
    return [list(mean + sd_run * rng.standard_normal() +
                 sd_seed * rng.standard_normal(seeds)) for _ in range(runs)]


def _summary(inits, baselines=None):
    """A comparison summary with pretraining seeds: one task
    (linear-probe), the inits' and the baselines' raw groups."""
    spec = dict(label='mini-stuff linear probe', metrics={KEY: 'mIoU'},
                inits={name: {KEY: dict(groups=g)}
                       for name, g in inits.items()})
    if baselines:
        spec['baselines'] = {name: {KEY: dict(groups=g)}
                             for name, g in baselines.items()}
    runs = max(len(g) for g in inits.values())
    return dict(pretrain_seeds=list(range(runs)), seeds=[0, 1, 2],
                reference='random init', tasks={'linear-probe': spec})


def _design(families, margin=2.0):
    return dict(study='synthetic', alpha=0.05, reference='random',
                margins={'linear-probe': margin}, families=families)


def _means(groups):
    return [statistics.mean(g) for g in groups]


@pytest.fixture
def data():
    rng = np.random.default_rng(0)
    inits = {'DropPos': _groups(rng, 30.0, 5), 'MAE': _groups(rng, 21.0, 5),
             'CR2PQ': _groups(rng, 20.5, 4),
             'random init': _groups(rng, 20.0, 5)}
    pixels = [list(17.0 + 0.8 * rng.standard_normal(3))]
    return _summary(inits, {'raw pixels': pixels, 'image-free': [[5.6]]})


ARMS = (('droppos', 'DropPos'), ('mae', 'MAE'), ('cr2pq', 'CR2PQ'))


@pytest.mark.parametrize('correction, peer', [('holm', 'holm'),
                                              ('bh', 'fdr_bh')])
def test_difference_is_scipys_welch_adjusted_as_statsmodels(
        data, correction, peer):
    tests = [[arm, 'linear-probe'] for arm, _ in ARMS] + [
        ['droppos', 'linear-probe', 'mae']]
    rows = design.judge(_design({'f': dict(correction=correction,
                                           tests=tests)}), data)
    inits = data['tasks']['linear-probe']['inits']
    pairs = [(name, 'random init') for _, name in ARMS] + [('DropPos', 'MAE')]
    peers = [sps.ttest_ind(_means(inits[a][KEY]['groups']),
                           _means(inits[b][KEY]['groups']), equal_var=False)
             for a, b in pairs]
    p = [r.pvalue for r in peers]
    assert [r.pvalue for r in rows] == pytest.approx(p, rel=1e-9)
    assert [r.p_adj for r in rows] == pytest.approx(
        multipletests(p, method=peer)[1], rel=1e-9)
    assert [r.verdict for r in rows] == [
        ('higher' if d > 0 else 'lower') if q < 0.05 else 'no verdict'
        for d, q in zip([r.difference for r in rows],
                        multipletests(p, method=peer)[1])]
    assert rows[0].verdict == 'higher' and rows[0].confidence == 0.95


def test_equivalence_is_statsmodels_tost_adjusted_within_the_family(data):
    tests = [[arm, 'linear-probe'] for arm, _ in ARMS]
    rows = design.judge(_design({'eq': dict(
        correction='holm', kind='equivalence', tests=tests)}, margin=3.0),
        data)
    inits = data['tasks']['linear-probe']['inits']
    ref = _means(inits['random init'][KEY]['groups'])
    p = [ttost_ind(_means(inits[name][KEY]['groups']), ref, -3.0, 3.0,
                   usevar='unequal')[0] for _, name in ARMS]
    assert [r.pvalue for r in rows] == pytest.approx(p, rel=1e-9)
    adjusted = multipletests(p, method='holm')[1]
    assert [r.p_adj for r in rows] == pytest.approx(adjusted, rel=1e-9)
    assert [r.verdict for r in rows] == [
        'equivalent' if q < 0.05 else 'no verdict' for q in adjusted]
    assert rows[0].verdict == 'no verdict'  # DropPos is 10 above
    assert all(r.margin == 3.0 and r.confidence == 0.9 for r in rows)


def test_above_margin_is_the_one_sided_test_the_correction_rejects(data):
    """DropPos is about 10 above random init and 13 above raw pixels, far
    above the margin 2; MAE about 1 above random init: not above it."""
    tests = [[arm, 'linear-probe'] for arm, _ in ARMS] + [
        [arm, 'linear-probe', base] for arm, _ in ARMS
        for base in ('pixels', 'image-free')]
    rows = design.judge(_design({'probes': dict(
        correction='holm', kind='above_margin', tests=tests)}), data)
    task = data['tasks']['linear-probe']
    pixels = task['baselines']['raw pixels'][KEY]['groups'][0]
    ref = _means(task['inits']['random init'][KEY]['groups'])
    p = []
    for row in rows:
        arm = _means(task['inits'][dict(ARMS)[row.arm]][KEY]['groups'])
        if row.other == 'image-free':  # one value: one-sample t
            assert row.method == 'one-sample t' and row.n_b == 1
            peer = sps.ttest_1samp(arm, 5.6 + 2.0, alternative='greater')
        else:  # Welch, the other side shifted by the margin
            other = pixels if row.other == 'pixels' else ref
            assert row.method == 'welch' and row.n_b == len(other)
            peer = sps.ttest_ind(arm, np.array(other) + 2.0, equal_var=False,
                                 alternative='greater')
        p.append(peer.pvalue)
    assert [r.pvalue for r in rows] == pytest.approx(p, rel=1e-9)
    reject, adjusted, _, _ = multipletests(p, method='holm')
    assert [r.p_adj for r in rows] == pytest.approx(adjusted, rel=1e-9)
    verdicts = {(r.arm, r.other): r.verdict for r in rows}
    assert verdicts['droppos', 'random'] == 'above margin'
    assert verdicts['droppos', 'pixels'] == 'above margin'
    assert verdicts['mae', 'random'] == 'no verdict'
    assert [r.verdict == 'above margin' for r in rows] == list(reject)
    # the interval agrees with the verdict: its lower end clears the margin
    # exactly when the test is rejected, at its Holm step's level
    order = np.argsort(p, kind='stable')
    for step, i in enumerate(order, 1):
        row = rows[i]
        assert (row.low > row.margin) == reject[i]
        if reject[i]:
            assert row.confidence == pytest.approx(
                1 - 2 * 0.05 / (len(p) - step + 1))
        assert row.high - row.difference == pytest.approx(
            row.difference - row.low)


def test_fewer_than_two_runs_is_no_test_and_leaves_the_family(data):
    task = data['tasks']['linear-probe']
    # ICPF: one complete pretraining run (the other's transfer seed failed)
    groups = task['inits']['DropPos'][KEY]['groups']
    task['inits']['ICPF'] = {KEY: dict(groups=[groups[0],
                                               groups[1][:2] + [None]])}
    tests = [['icpf', 'linear-probe'], ['droppos', 'linear-probe'],
             ['icpf', 'linear-probe', 'image-free']]
    for kind in ('difference', 'equivalence', 'above_margin'):
        rows = design.judge(_design({'f': dict(
            correction='holm', kind=kind, tests=tests)}), data)
        for row in (rows[0], rows[2]):
            assert row.verdict == 'no test' and row.p_adj is None
            assert row.low is None and 'fewer than 2' in row.reason
        # the family has one test left: its p unadjusted
        assert rows[1].p_adj == rows[1].pvalue


@pytest.mark.parametrize('test, key', [
    (['dinov2', 'linear-probe'], "tasks.linear-probe.inits.'DINOv2'"),
    (['droppos', 'knn'], 'tasks.knn with metrics and inits'),
    (['droppos', 'linear-probe', 'image-free'],
     "tasks.linear-probe.baselines.'image-free'"),
])
def test_a_summary_without_the_test_is_one_line_naming_file_and_key(
        data, test, key):
    del data['tasks']['linear-probe']['baselines']['image-free']
    with pytest.raises(BadInputError) as err:
        design.judge(_design({'f': dict(correction='holm', tests=[test])}),
                     data, 'run/summary.json')
    message = str(err.value)
    assert message.startswith(f'run/summary.json: no {key}')
    assert 'family f' in message and '\n' not in message


def test_the_stored_ranking_summary_is_judged_by_the_probes_design():
    """End to end on the stored ranking (the old probes' numbers: only the
    structure and one cell recomputed with scipy are asserted)."""
    found = design.load(osp.join(ROOT, 'designs/probes.yaml'))
    rows = design.judge(found, design.read_summary(RANKING), RANKING)
    tests = found['families']['probes']['tests']
    assert [[r.arm, r.task] + ([r.other] if r.other != 'random' else [])
            for r in rows] == tests
    assert {r.verdict for r in rows} <= {'above margin', 'no verdict'}
    with open(RANKING) as f:
        task = json.load(f)['tasks']['linear-probe']
    arm = _means(task['inits']['DropPos'][KEY]['groups'])
    pixels = task['baselines']['raw pixels'][KEY]['groups'][0]
    margin = found['margins']['linear-probe']
    peer = sps.ttest_ind(arm, np.array(pixels) + margin, equal_var=False,
                         alternative='greater')
    assert rows[0].difference == pytest.approx(
        np.mean(arm) - np.mean(pixels))
    assert rows[0].pvalue == pytest.approx(peer.pvalue, rel=1e-9)
    reject, adjusted, _, _ = multipletests([r.pvalue for r in rows],
                                           method='holm')
    assert [r.p_adj for r in rows] == pytest.approx(adjusted, rel=1e-9)
    assert [r.verdict == 'above margin' for r in rows] == list(reject)
    assert [r.low > r.margin for r in rows] == list(reject)


def test_the_demo_confirmation_reproduces_the_demos_own_verdicts():
    """designs/demo_confirm.yaml's family is the demo table's (Welch on the
    per-pretraining-run values, Holm over its two tasks,
    mmpos_harness.comparison.seeds): judging it gives the stored cells."""
    found = design.load(osp.join(ROOT, 'designs/demo_confirm.yaml'))
    summary = design.read_summary(DEMO)
    rows = design.judge(found, summary, DEMO)
    for row in rows:
        stored = summary['tasks'][row.task]['inits']['DropPos']
        stored = next(iter(stored.values()))['test']
        assert row.p_adj == pytest.approx(stored['p_adj'], rel=1e-12)
        assert (row.difference, row.low, row.high, row.verdict) == \
            pytest.approx((stored['difference'], stored['low'],
                           stored['high'], stored['verdict']))
        # its MDD at the family's level, alpha / 2 (not the stored
        # table's unadjusted one)
        assert row.mdd == pytest.approx(stats.minimum_detectable_difference(
            stored['se'], stored['df'], stats.ALPHA / 2), rel=1e-12)
        assert row.mdd > stored['mdd']


def test_the_tool_prints_a_table_per_family(tmp_path, capsys):
    judge_design = load_tool('judge_design', 'misc')
    out = tmp_path / 'judged.md'
    judge_design.main([osp.join(ROOT, 'designs/demo_confirm.yaml'), DEMO,
                       '--out', str(out)])
    text = capsys.readouterr().out
    assert out.read_text() == text
    assert text.count('### headline') == 1
    assert '| DropPos − random init, detection (welch) | - |' in text
    for argv, what in (
            ([osp.join(ROOT, 'designs/probes.yaml'), DEMO],
             'no tasks.linear-probe'),
            ([osp.join(ROOT, 'designs/demo_confirm.yaml'), DEMO, '--out',
              osp.join(ROOT, 'docs/judged.md')], 'under docs/'),
            ([osp.join(ROOT, 'designs/demo_confirm.yaml'), DEMO, '--out',
              str(out)], 'exists')):
        with pytest.raises(SystemExit) as err:
            judge_design.main(argv)
        line = str(err.value.code)  # cli_main: one line, status 1
        assert line.startswith('judge_design.py: error: ') and what in line
        assert '\n' not in line


# ------------------------------------------------- a position study's runs
CALIBRATION = osp.join(ROOT, 'results/resolution_study_calibration')
TRAIN, SIZES = 128, (192, 256, 512)
#: per scheme its seeds and per-seed offsets of the change (top-1 points);
#: none lacks seed 103, PaPE ran one seed, APE also a selection seed (0)
STUDY_SEEDS = {'APE': [0, 100, 101, 102, 103],
               'RoPE-Mixed': [100, 101, 102, 103], 'none': [100, 101, 102],
               'RoPE-Axial+APE': [100, 101, 102], 'PaPE': [100]}


def _run(rng, scheme, seed):
    """One run file's accuracies: resize and pad per size, RoPE-Mixed also
    its PI scaling, the shuffled top-1 at the training size. A seed's
    shared draw moves every scheme's numbers together (the pairing)."""
    shared = np.random.default_rng(seed).normal(0, 2)
    drop = {'APE': -6.0, 'RoPE-Mixed': -2.0, 'none': -1.0,
            'RoPE-Axial+APE': -4.0, 'PaPE': 0.0}[scheme]
    intact = 60 + shared + rng.normal(0, 0.5)
    run = {'shuffled': {str(TRAIN): intact - 15 * (scheme != 'none') +
                        rng.normal(0, 1)}}
    factors = ('resize', 'pad') + (('resize_pi', 'pad_pi')
                                   if scheme == 'RoPE-Mixed' else ())
    for factor in factors:
        run[factor] = {str(s): intact + drop * (i + 1) / 3 + shared +
                       rng.normal(0, 1) for i, s in enumerate(SIZES)}
        if '_' not in factor:
            run[factor][str(TRAIN)] = intact
    return run


@pytest.fixture
def study_dir(tmp_path):
    rng = np.random.default_rng(5)
    for scheme, found in STUDY_SEEDS.items():
        folder = tmp_path / 'runs' / scheme.replace('+', '_')
        folder.mkdir(parents=True)
        for seed in found:
            (folder / f'seed{seed}.json').write_text(
                json.dumps(_run(rng, scheme, seed)))
    return str(tmp_path)


def _study_design(families, effects=()):
    return dict(study='synthetic', alpha=0.05, reference='APE',
                arms=['none', 'APE', 'RoPE-Mixed', 'RoPE-Mixed +PI', 'PaPE'],
                exploratory=dict(arms=['RoPE-Axial+APE'],
                                 seeds=[100, 101, 102]),
                seeds=dict(selection=dict(calibration=[0]),
                           confirmation=[100, 101, 102, 103]),
                families=families, power=dict(effects=list(effects)))


def _values(study, arm, task, seeds):
    """The task's per-seed values read off the run files by hand."""
    scheme, _, scaling = arm.partition(' +')
    out = []
    for seed in seeds:
        with open(osp.join(study, 'runs', scheme.replace('+', '_'),
                           f'seed{seed}.json')) as f:
            run = json.load(f)
        factor, _, what = task.rpartition('-')
        key = factor + (f'_{scaling.lower()}' if scaling else '')
        if task == 'shuffled':
            out.append(run['shuffled']['128'] - run['resize']['128'])
        elif what == 'change':
            out.append(run[key]['512'] - run[factor]['128'])
        else:
            out.append(run[key][str(int(float(what[:-1]) * 128))])
    return np.array(out)


STUDY_TESTS = {
    'headline': [['RoPE-Mixed', 'resize-change'], ['none', 'resize-change'],
                 ['RoPE-Mixed +PI', 'resize-2x'],
                 ['RoPE-Mixed', 'pad-change', 'none'],
                 ['APE', 'resize-change'], ['PaPE', 'resize-change']],
    'shuffle': [['APE', 'shuffled'], ['RoPE-Mixed', 'shuffled'],
                ['none', 'shuffled'], ['RoPE-Mixed', 'shuffled', 'none']],
    'exploratory': [['RoPE-Axial+APE', 'resize-change'],
                    ['RoPE-Axial+APE', 'resize-1.5x']]}


@pytest.mark.parametrize('correction, peer', [('holm', 'holm'),
                                              ('bh', 'fdr_bh')])
def test_a_position_study_is_scipys_paired_t_over_the_shared_seeds(
        study_dir, correction, peer):
    """Each test is scipy's ttest_rel over the confirmation seeds both
    arms ran (APE's selection seed 0 left out, none's missing seed 103
    leaves 3 pairs), against 0 for APE's own change and a model's
    shuffled top-1; PaPE's one seed is no test and leaves the family."""
    families = {name: dict(correction=correction, tests=tests)
                for name, tests in STUDY_TESTS.items()}
    rows = design.judge(_study_design(families),
                        design.read_summary(study_dir), study_dir)
    for name, tests in STUDY_TESTS.items():
        got = [r for r in rows if r.family == name]
        p = []
        for row, test in zip(got, tests):
            assert row.method == 'paired'
            if test[0] == 'PaPE':  # one pair
                assert row.verdict == 'no test' and row.p_adj is None
                assert 'fewer than 2 pairs' in row.reason
                continue
            other = test[2] if len(test) == 3 else \
                None if test[0] == 'APE' or test[1] == 'shuffled' else 'APE'
            assert row.other == (other or design.ZERO)
            seeds = [s for s in (100, 101, 102, 103)
                     if s in STUDY_SEEDS[test[0].partition(' +')[0]] and
                     s in STUDY_SEEDS[other or 'APE']]
            a = _values(study_dir, test[0], test[1], seeds)
            b = np.zeros(len(a)) if other is None else \
                _values(study_dir, other, test[1], seeds)
            peer_t = sps.ttest_rel(a, b)
            assert (row.n_a, row.n_b) == (len(seeds), len(seeds))
            assert row.difference == pytest.approx(np.mean(a - b), rel=1e-12)
            assert row.pvalue == pytest.approx(peer_t.pvalue, rel=1e-9)
            low, high = peer_t.confidence_interval(0.95)
            assert (row.low, row.high) == pytest.approx((low, high))
            assert row.se * np.sqrt(len(a)) == pytest.approx(
                np.std(a - b, ddof=1))
            p.append(peer_t.pvalue)
        adjusted = multipletests(p, method=peer)[1]
        tested = [r for r in got if r.pvalue is not None]
        assert [r.p_adj for r in tested] == pytest.approx(adjusted, rel=1e-9)
        assert [r.verdict for r in tested] == [
            ('higher' if r.difference > 0 else 'lower') if q < 0.05 else
            'no verdict' for r, q in zip(tested, adjusted)]
    assert {r.verdict for r in rows} >= {'higher', 'lower'}
    # none lacks seed 103: its tests have 3 pairs, RoPE-Mixed's 4
    assert [r.n_a for r in rows[:3]] == [4, 3, 4]


def test_the_power_reached_is_statsmodels_at_the_observed_sd(study_dir):
    effects = [dict(test=['RoPE-Mixed', 'resize-change'], delta=1.2),
               dict(test=['PaPE', 'resize-change'], delta=10.5)]
    found = _study_design({'headline': dict(
        correction='holm', tests=STUDY_TESTS['headline']), 'shuffle': dict(
        correction='holm', tests=STUDY_TESTS['shuffle'])}, effects)
    rows = design.judge(found, design.read_summary(study_dir), study_dir)
    power = design.achieved_power(found, rows)
    seeds = [100, 101, 102, 103]
    sd = np.std(_values(study_dir, 'RoPE-Mixed', 'resize-change', seeds) -
                _values(study_dir, 'APE', 'resize-change', seeds), ddof=1)
    mixed, pape = power['headline']
    level = 0.05 / len(STUDY_TESTS['headline'])
    assert (mixed['sd'], mixed['pairs'], mixed['level']) == pytest.approx(
        (sd, 4, level))
    assert mixed['power'] == pytest.approx(TTestPower().power(
        effect_size=1.2 / sd, nobs=4, alpha=level), rel=1e-6)
    assert pape['power'] is None and pape['sd'] is None  # one pair
    assert power['shuffle'] == []
    text = design.judgement_markdown(found, rows)
    assert f'- RoPE-Mixed − APE, resize-change: Δ 1.2 at α {level:.3g}: ' \
        f'over 4 pairs, SD {sd:.2f}: power {mixed["power"]:.2f}' in text
    assert 'PaPE − APE, resize-change: Δ 10.5 at α 0.00833: no paired ' \
        'test' in text
    assert text.count('The design states no effect size for this family')\
        == 1


def test_a_missing_arm_or_scaling_is_no_test_a_bad_task_one_line(study_dir):
    study = design.read_summary(study_dir)
    rows = design.judge(_study_design({'f': dict(correction='holm', tests=[
        ['RoPE-Axial', 'resize-change'], ['none +PI', 'pad-change'],
        ['RoPE-Mixed', 'resize-change']])}), study, study_dir)
    assert [r.verdict for r in rows] == ['no test', 'no test', 'higher']
    assert rows[0].reason == (f'no runs of RoPE-Axial in '
                              f'{osp.join(study_dir, "runs", "RoPE-Axial")}')
    assert rows[1].reason == "no 'pad_pi' in the run of none, seed 100"
    assert rows[2].p_adj == rows[2].pvalue  # a family of one test
    for task, what in (('resize-3x', "task 'resize-3x': the runs store "
                        'resize at [192, 256, 512] px'),
                       ('canvas-4', "task 'canvas-4' is not")):
        with pytest.raises(BadInputError) as err:
            design.judge(_study_design({'f': dict(correction='holm', tests=[
                ['RoPE-Mixed', task]])}), study, study_dir)
        assert str(err.value).startswith(f'{study_dir}: {what}')
        assert "family f, test ['RoPE-Mixed'" in str(err.value)
        assert '\n' not in str(err.value)
    line = design.study_coverage(_study_design({}), study)
    assert line == (
        'Missing runs (design seeds without a run file): none: seeds [103]; '
        'PaPE: seeds [101, 102, 103]. Left out '
        '(seeds outside seeds.confirmation): APE: seeds [0].')


def test_the_calibration_is_no_test_under_the_resolution_design():
    """The stored calibration (APE and RoPE-Mixed, selection seed 0) under
    designs/resolution_study.yaml: every test is no test; with seed 0
    counted it is one pair, still no test, its difference read off the
    run files."""
    found = design.load(osp.join(ROOT, 'designs/resolution_study.yaml'))
    study = design.read_summary(CALIBRATION)
    rows = design.judge(found, study, CALIBRATION)
    assert len(rows) == sum(len(f['tests'])
                            for f in found['families'].values())
    assert {r.verdict for r in rows} == {'no test'}
    mixed = rows[0]
    assert (mixed.arm, mixed.task) == ('RoPE-Mixed', 'resize-change')
    assert mixed.reason == ('no seed of seeds.confirmation run by both arms;'
                            ' both ran [0], not confirmation seeds')
    found['seeds']['confirmation'] = [0]
    mixed = design.judge(found, study, CALIBRATION)[0]
    assert mixed.verdict == 'no test' and mixed.n_a == 1
    assert mixed.reason == '1 seed, fewer than 2 pairs'
    runs = {}
    for scheme in ('APE', 'RoPE-Mixed'):
        with open(osp.join(CALIBRATION, 'runs', scheme, 'seed0.json')) as f:
            runs[scheme] = json.load(f)['resize']
    assert mixed.difference == pytest.approx(
        (runs['RoPE-Mixed']['512'] - runs['RoPE-Mixed']['128']) -
        (runs['APE']['512'] - runs['APE']['128']))


def test_the_tool_judges_a_study_directory(study_dir, tmp_path, capsys):
    judge_design = load_tool('judge_design', 'misc')
    judge_design.main([osp.join(ROOT, 'designs/resolution_study.yaml'),
                       CALIBRATION])
    text = capsys.readouterr().out
    assert 'Missing runs (design seeds without a run file): none: no runs; ' \
        'APE: seeds [100,' in text
    # the calibration's seed-0 runs, in the design's arm order
    stored = set(os.listdir(osp.join(CALIBRATION, 'runs')))
    arms = [a for a in design.load(osp.join(
        ROOT, 'designs/resolution_study.yaml'))['arms'] if a in stored]
    assert arms[:2] == ['APE', 'RoPE-Mixed']
    assert 'Left out (seeds outside seeds.confirmation): ' + '; '.join(
        f'{a}: seeds [0]' for a in arms) + '.' in text
    assert text.count('### ') == 5
    assert '| RoPE-Mixed − APE, resize-change (paired) | - | missing | - |'\
        ' no test (no seed of seeds.confirmation' in text
    assert '- RoPE-Mixed − APE, resize-change: Δ 1.2 at α 0.0167: no ' \
        'paired test' in text
    empty = tmp_path / 'empty'
    empty.mkdir()
    with pytest.raises(SystemExit) as err:
        judge_design.main([osp.join(ROOT, 'designs/resolution_study.yaml'),
                           str(empty)])
    assert str(err.value.code) == (
        f'judge_design.py: error: {empty}: not a position study (no '
        'runs/<scheme>/seed<k>.json) nor a summary')
