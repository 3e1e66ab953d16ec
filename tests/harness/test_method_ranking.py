"""The method ranking (mmpos_harness.method_ranking, the CLI
tools/paper_tables/method_ranking.py), the runner it shares with the demo
(mmpos_harness.comparison.runs) and its table
(mmpos_harness.comparison.seeds): the two-level (pretraining + transfer
seed) design tested on its per-run means, the family of a table, the
health columns and the collapse flag,
and the two stages' commands (recorded, not run: a real run is the tool
itself), equal budget, tuning selection and resumption."""
import json
import os
import shutil
import statistics

import pytest
from scipy.stats import ttest_ind
from statsmodels.stats.multitest import multipletests

import mmpos_stats as stats
from conftest import load_tool
from mmpos.guardrails.config_check import lookup_path
from mmpos.guardrails.launch import work_dir_lock
from mmpos_harness import method_ranking, provenance
from mmpos_harness.comparison import runs, seeds
from mmpos_harness.mini_data import MARKER, requested
from mmpos_harness.results import DONE_MARKER

# a: 3 pretraining runs that land far apart, each with tight transfer seeds
SPREAD_PRETRAIN = [[50.0, 50.1, 49.9], [44.0, 44.1, 43.9], [47.0, 47.1, 46.9]]
# b: the same transfer spread around one value
TIGHT = [[45.0, 45.1, 44.9]] * 3
# c / d: noisy transfer seeds, pretraining runs that agree
NOISY_A = [[44.0, 50.0, 47.0], [44.2, 50.2, 47.2], [43.8, 49.8, 46.8]]
NOISY_B = [[42.0, 48.0, 45.0], [42.1, 48.1, 45.1], [41.9, 47.9, 44.9]]


def _nested_summary(values):
    """A stored two-level summary (``values[init]``: groups of the linear
    probe's mIoU), as :func:`seeds.analyse` reads it back."""
    return dict(title='toy', seeds=[0, 1, 2], pretrain_seeds=[0, 1, 2],
                reference=runs.RANDOM_INIT,
                compute={init: {} for init in values},
                tasks={'linear-probe': dict(
                    label='probe', metrics={'mIoU': 'mIoU'},
                    inits={i: {'mIoU': dict(groups=g)}
                           for i, g in values.items()})})


@pytest.mark.filterwarnings('ignore:Precision loss:RuntimeWarning')
def test_the_table_tests_per_pretraining_run_means():
    """Three pretraining runs that land far apart, each with tight transfer
    seeds: the table's test is scipy's Welch test on the three run means,
    not on the nine runs, so the difference is no verdict; the same nine
    values as nine independent runs would have been one."""
    summary = seeds.analyse(_nested_summary(
        {'A': SPREAD_PRETRAIN, runs.RANDOM_INIT: TIGHT}))
    cell = summary['tasks']['linear-probe']['inits']['A']['mIoU']
    ref = ttest_ind([statistics.mean(g) for g in SPREAD_PRETRAIN],
                    [statistics.mean(g) for g in TIGHT], equal_var=False)
    assert cell['test']['pvalue'] == pytest.approx(ref.pvalue)
    assert cell['test']['df'] == pytest.approx(2.0)  # all from side a
    assert cell['test']['verdict'] == 'no verdict'
    flat = ttest_ind(*[[v for g in side for v in g]
                       for side in (SPREAD_PRETRAIN, TIGHT)],
                     equal_var=False)
    assert flat.pvalue < 0.05
    # its interval is the test's t interval (the one whose coverage
    # tests/evaluation/test_stats.py simulates), nothing beside it
    assert (cell['test']['low'], cell['test']['high']) == pytest.approx(
        ref.confidence_interval(0.95))
    assert 'bootstrap' not in cell


def test_pretraining_runs_that_agree_make_a_noisy_transfer_decisive():
    summary = seeds.analyse(_nested_summary(
        {'A': NOISY_A, runs.RANDOM_INIT: NOISY_B}))
    test = summary['tasks']['linear-probe']['inits']['A']['mIoU']['test']
    assert test['difference'] == pytest.approx(2.0)
    assert test['verdict'] == 'higher'  # a family of one: p = p_adj
    # incomplete pretraining runs are left out of the test, one pretraining
    # run a side is no test
    summary = seeds.analyse(_nested_summary(
        {'A': [NOISY_A[0], [44.0, None, 47.0]],
         runs.RANDOM_INIT: NOISY_B}))
    test = summary['tasks']['linear-probe']['inits']['A']['mIoU']['test']
    assert (test['n_a'], test['verdict']) == (1, 'no test')
    # ... and no rank and no aggregate: its one task is not ranked
    assert summary['ranked_on'] == [] and summary['ranks'] is None
    assert summary['aggregates'] is None


def test_ranks_and_aggregates_of_the_per_run_means():
    """The ranks are stats.t_rank_intervals of the per-pretraining-run
    means; the aggregates are stats' IQM, probability of improvement and
    fraction above the reference of the run means divided by the
    reference's mean, with stratified bootstrap intervals."""
    summary = seeds.analyse(_nested_summary(
        {'A': NOISY_A, runs.RANDOM_INIT: NOISY_B}))
    means = {i: [statistics.mean(g) for g in groups]
             for i, groups in (('A', NOISY_A), (runs.RANDOM_INIT, NOISY_B))}
    expect = stats.t_rank_intervals({i: [m] for i, m in means.items()})
    assert summary['ranks'] == {i: dict(rank=r.rank, low=r.low, high=r.high)
                                for i, r in expect.items()}
    ref = statistics.mean(means[runs.RANDOM_INIT])
    normed = [[v / ref] for v in means['A']]
    got = summary['aggregates']['A']
    assert got['iqm'][0] == pytest.approx(stats.iqm(normed))
    assert got['improvement'][0] == 1.0  # every A run above every B run
    assert got['above'] == [1.0, 1.0, 1.0]
    interval = stats.stratified_interval('iqm', normed)
    assert got['iqm'][1:] == pytest.approx([interval.low, interval.high])
    assert any(line.startswith('| A | 1.04 [')
               for line in seeds._aggregate_lines(summary))


def test_baselines_decide_which_probes_are_ranked():
    """Two probes with an image-free baseline: on one the best init (A) is
    above it (informative, ranked), on the other the prior is above every
    init (not informative: shown, not ranked). The tests are scipy's
    one-sample t of A's per-pretraining-run means against the prior,
    Holm-adjusted over the probes as statsmodels does; baseline rows are
    in the table, not ranked and not tested against random init."""
    from scipy.stats import ttest_1samp
    summary = _nested_summary({'A': NOISY_A, runs.RANDOM_INIT: NOISY_B})
    summary['tasks']['other'] = dict(
        label='other probe', metrics={'mIoU': 'mIoU'},
        inits={'A': {'mIoU': dict(groups=SPREAD_PRETRAIN)},
               runs.RANDOM_INIT: {'mIoU': dict(groups=TIGHT)}})
    summary['tasks']['linear-probe']['baselines'] = {
        seeds.IMAGE_FREE: {'mIoU': dict(groups=[[30.0]])},
        'raw pixels': {'mIoU': dict(groups=[[35.0, 36.0, 35.5]])}}
    summary['tasks']['other']['baselines'] = {
        seeds.IMAGE_FREE: {'mIoU': dict(groups=[[60.0]])}}
    summary['compute'] = {i: dict(pretrain_minutes=1.0, transfer_minutes=1.0)
                          for i in summary['compute']}
    summary = seeds.analyse(summary)
    found = {name: task['informative']
             for name, task in summary['tasks'].items()}
    assert found['linear-probe']['best'] == found['other']['best'] == 'A'
    expected = [ttest_1samp([statistics.mean(g) for g in groups], prior)
                for groups, prior in ((NOISY_A, 30.0),
                                      (SPREAD_PRETRAIN, 60.0))]
    p_adj = multipletests([e.pvalue for e in expected], method='holm')[1]
    for (name, got), want, adj in zip(found.items(), expected, p_adj):
        assert got['test']['pvalue'] == pytest.approx(want.pvalue), name
        assert got['test']['p_adj'] == pytest.approx(adj), name
    assert found['linear-probe']['informative']
    assert not found['other']['informative']
    assert summary['ranked_on'] == ['probe']
    pixels = summary['tasks']['linear-probe']['baselines']['raw pixels']
    assert pixels['mIoU']['mean'] == pytest.approx(35.5)
    assert 'test' not in pixels['mIoU']
    text = seeds.markdown(summary)
    assert '| - | raw pixels (baseline, not ranked) | 35.5 ± 0.5 | - | - |' \
        in text
    assert '- other probe: NOT INFORMATIVE' in text
    assert '- probe: informative: A is above the image-free baseline' in text
    # a stored summary without baselines (the demo's) renders as before
    plain = _nested_summary({'A': NOISY_A, runs.RANDOM_INIT: NOISY_B})
    plain['compute'] = summary['compute']
    plain = seeds.analyse(plain)
    assert 'baseline' not in seeds.markdown(plain)
    assert 'informative' not in plain['tasks']['linear-probe']


def _health(collapsed, eff_rank=30.0):
    """A health.json whose stored verdict says healthy: the table must
    judge the numbers itself (a collapsed run's tokens sit at one point:
    spread 0.02 of its start)."""
    final = dict(spread=0.02 if collapsed else 0.9, cos_within=0.3,
                 cos_across=-0.01, eff_rank=eff_rank)
    return dict(centred=True,
                initial=dict(spread=0.98, cos_within=0.3, cos_across=-0.01,
                             eff_rank=50.0),
                history=[], final=final, num_prototypes=None,
                collapsed=False, reasons=[])


def _write_comparison(root, values, health):
    """A finished nested comparison: ``values[init]`` are the groups of
    the linear probe's mIoU, ``health[init]`` per pretraining seed."""
    inits = list(values)
    runs.write_plan(str(root), 'toy', inits, [0, 1, 2],
                    tasks={'linear-probe': runs.PROBES['linear-probe']},
                    pretrain_seeds=[0, 1, 2],
                    budget=dict(batch=32, images=96000))
    for init, groups in values.items():
        for p, group in enumerate(groups):
            pre = seeds.pretrain_dir(str(root), init, p)
            os.makedirs(pre)
            seeds.write_json(os.path.join(pre, seeds.COMPUTE),
                             dict(minutes=1.0, cpu_minutes=2.0))
            if health.get(init):
                seeds.write_json(os.path.join(pre, 'health.json'),
                                 health[init][p])
                seeds.write_json(os.path.join(pre, 'encoder_tokens.json'),
                                 dict(tokens_per_image=16. + p))
            for t, value in enumerate(group):
                work_dir = seeds.transfer_dir(str(root), 'linear-probe',
                                              init, t, p)
                os.makedirs(work_dir)
                seeds.write_json(os.path.join(work_dir, 'metrics.json'),
                                 dict(mIoU=value))


@pytest.mark.filterwarnings('ignore:Precision loss:RuntimeWarning')
def test_table_has_health_columns_and_flags_a_collapsed_run(tmp_path):
    healthy = [_health(False)] * 3
    _write_comparison(
        tmp_path, {'A': NOISY_A, 'B': [[60.0] * 3] * 3,
                   runs.RANDOM_INIT: NOISY_B},
        {'A': healthy, 'B': [_health(False), _health(True, 10.0),
                             _health(False)]})
    summary = seeds.summarise(str(tmp_path))
    assert summary['health']['B']['collapsed'] == 1
    assert 'tokens collapse to one point' in \
        summary['health']['B']['reasons'][0]
    assert summary['health']['A']['eff_rank'] == pytest.approx(30.0)
    assert summary['health'][runs.RANDOM_INIT] is None
    # B scores best and one of its runs collapsed: ranked, flagged
    assert seeds.ranking(summary) == ['B', 'A', runs.RANDOM_INIT]
    text = seeds.markdown(summary)
    header = next(line for line in text.splitlines()
                  if line.startswith('| rank'))
    for column in ('tokens / image', 'spread (init)', 'eff. rank (init)',
                   'teacher entropy', 'collapsed runs'):
        assert column in header
    assert summary['compute']['A']['tokens_per_image'] == pytest.approx(17.)
    assert summary['compute'][runs.RANDOM_INIT]['tokens_per_image'] is None
    rows = [line for line in text.splitlines() if line.startswith('| ')][2:]
    rank = summary['ranks']['A']
    assert rank['rank'] == 2.0
    assert rows[1].startswith(f'| 2 [{rank["low"]:g}, {rank["high"]:g}] | A |')
    assert '| 17 | ' in rows[1]
    assert '0.90 (0.98) | 30.0 (50.0) | - | 0/3 |' in rows[1]
    assert rows[0].startswith('| 1 [1, 1] | B (collapse flagged) |')
    assert '1/3 COLLAPSED' in rows[0]
    assert 'batch 32, images 96000' in text
    # the table is one family: A's and B's tests against random init,
    # Welch on the run means, Holm
    inits = summary['tasks']['linear-probe']['inits']
    p = [ttest_ind([statistics.mean(g) for g in groups], [
        statistics.mean(g) for g in NOISY_B], equal_var=False).pvalue
        for groups in (NOISY_A, [[60.0] * 3] * 3)]
    assert [inits[i]['mIoU']['test']['pvalue'] for i in 'AB'] == \
        pytest.approx(p)
    assert [inits[i]['mIoU']['test']['p_adj'] for i in 'AB'] == \
        pytest.approx(list(multipletests(p, method='holm')[1]))
    assert "adjusted by Holm over the table's 2 tests" in text
    notes = seeds.verdicts(summary)
    assert 'COLLAPSE FLAGGED on 1 of 3 pretraining runs (' in notes['B']
    assert 'COLLAPSE' not in notes['A']
    assert notes['A'].startswith(
        'A: above random init on mini-stuff linear probe (mIoU +2.0 [')
    # a claimed ordering: the same test between two inits, either way
    # round, counted once in its table's family
    table = seeds.orderings(summary, [('A', runs.RANDOM_INIT, 'paper 1'),
                                      (runs.RANDOM_INIT, 'A', 'paper 2')])
    assert '| A > random init | paper 1 | +2.0 [' in table
    assert '| random init > A | paper 2 | -2.0 [' in table
    assert table.count(', holds |') == table.count(', reversed |') == 1
    assert "over the table's 1 test " in table
    tight = seeds.orderings(summary, [('B', 'A', 'paper 3')])
    assert '| B > A | paper 3 | +13.0 [' in tight
    # a teacher entropy without its K cannot be judged: one clear error
    broken = _health(False)
    broken['final']['teacher_entropy'] = 5.0
    seeds.write_json(os.path.join(seeds.pretrain_dir(str(tmp_path), 'A', 0),
                                  'health.json'), broken)
    with pytest.raises(ValueError, match='health.json: teacher_entropy'):
        seeds.summarise(str(tmp_path))
    # a file of the un-centred monitor is refused, naming it; a summary
    # written from such files is shown, not judged
    del broken['centred'], broken['final']['teacher_entropy']
    seeds.write_json(os.path.join(seeds.pretrain_dir(str(tmp_path), 'A', 0),
                                  'health.json'), broken)
    with pytest.raises(ValueError, match='health.json: written before the '
                       'collapse statistics were centred'):
        seeds.summarise(str(tmp_path))
    old = dict(summary, health=dict(summary['health'], B=dict(
        runs=3, collapsed=3, reasons=['tokens of different images align'],
        cos_within=0.9, cos_across=0.85, eff_rank=10.0, eff_rank0=50.0)))
    assert not seeds.collapsed(old, 'B')
    assert seeds._fmt_health(old['health']['B'])[-1].startswith(
        'not judged')


_MAKE_MINI_DATA = load_tool('make_mini_data', 'misc')


def _fake_runs(commands, scores):
    """Record commands; leave what each tool leaves (a checkpoint, a
    probe's metrics.json with ``scores(cmd)``)."""
    def record(cmd, **kwargs):
        commands.append(cmd)
        work_dir = cmd[cmd.index('--work-dir') + 1] if '--work-dir' in cmd \
            else None
        if 'tools/train.py' in cmd:
            os.makedirs(work_dir, exist_ok=True)
            ckpt = os.path.join(work_dir, 'iter_1.pth')
            open(ckpt, 'w').close()
            with open(os.path.join(work_dir, 'last_checkpoint'), 'w') as f:
                f.write(ckpt)
        elif 'tools/misc/make_mini_data.py' in cmd:  # its markers
            args = _MAKE_MINI_DATA.parse_args(cmd[2:])[1]
            for name in args.which:
                os.makedirs(os.path.join(args.out_dir, name), exist_ok=True)
                seeds.write_json(
                    os.path.join(args.out_dir, name, MARKER),
                    requested(name, args.num_train, args.num_val,
                              args.num_unlabeled, args.img_size, args.seed))
        elif 'tools/paper_tables/gen_tables.py' in cmd:  # what it writes
            root = cmd[cmd.index('--seeds') + 1]
            os.makedirs(os.path.join(root, 'tables'), exist_ok=True)
            seeds.write(seeds.summarise(root), os.path.join(root, 'tables'))
        elif any(p['tool'] in cmd for p in runs.PROBES.values()):
            os.makedirs(work_dir, exist_ok=True)
            seeds.write_json(os.path.join(work_dir, 'metrics.json'),
                             {'mIoU': scores(cmd), 'knn/avg_top1': 50.0})
        return 0.0
    return record


def _fake_image_free(task, data_root):
    """An image-free score under the probe's first metric key."""
    return {next(iter(runs.PROBES[task]['metrics'])): 10.0}


def test_tune_then_rank_equal_budget_and_chosen_recipe(tmp_path,
                                                       monkeypatch):
    data = tmp_path / 'data'
    for name in ('objects', 'stuff', 'unlabeled', 'cls', 'tune/stuff',
                 'tune/cls'):
        (data / name).mkdir(parents=True)
    root = tmp_path / 'bench'
    commands = []
    # the tuning probe prefers DropPos' second entry (lr 2.5e-4)
    prefers = 'tuning/pretraining/droppos-lr2.5e-4/'

    def score(cmd):  # the second pretraining seed scores 1 point more
        return 40.0 + 5.0 * any(prefers in a for a in cmd) + any(
            '/pseed1/' in a for a in cmd)

    monkeypatch.setattr(runs, 'run', _fake_runs(commands, score))
    monkeypatch.setattr(method_ranking, 'image_free_metrics',
                        _fake_image_free)
    common = ['--work-dir', str(root), '--data-root', str(data),
              '--methods', 'droppos', 'cr2pq', '--pretrain-seeds', '0', '1',
              '--seeds', '0', '1', '--tasks', 'linear-probe', 'knn',
              'segmentation', '--images', '640', '--batch-size', '32',
              '--max-configs', '2', '--jobs', '1']
    with pytest.raises(SystemExit, match='--tune first'):
        method_ranking.main(common)
    method_ranking.main(['--tune', *common])
    log = json.load(open(root / 'tuning.json'))
    assert log['methods']['droppos']['chosen'] == 'lr2.5e-4'
    # every configuration pretrained with both tuning seeds, scored by the
    # mean over them; the margin over the runner-up paired by seed
    droppos = log['methods']['droppos']
    assert [r['seed'] for r in droppos['configs'][1]['runs']] == [0, 1]
    assert droppos['configs'][1]['scores']['linear-probe']['mIoU'] == 45.5
    assert droppos['runner_up'] == 'lr1e-3'
    assert droppos['margin']['difference'] == 5.0
    assert droppos['margin']['verdict'] == 'no verdict'  # equal differences
    # the power analysis: SD 0.71 within every configuration
    assert log['power']['runs'] == stats.runs_for_difference(
        0.5**0.5, 2.0) == 4
    assert [c['name'] for c in log['methods']['cr2pq']['configs']] == [
        'ema_lr5e-4', 'ema_lr1e-3']
    # tuning probes read the tuning data, never the reported split
    probes = [c for c in commands if runs.PROBES['linear-probe']['tool'] in c]
    assert probes and all(f'{data}/tune/stuff/' in ' '.join(c)
                          for c in probes)
    assert '**yes**' in open(root / 'tuning.md').read()
    run = json.load(open(root / 'tuning_run.json'))
    assert run['command'].endswith(' '.join(['--tune', *common]))
    assert run['machine'] and run['date'] and run['jobs'] == 1
    # each finished tuning run is kept with its provenance; a tuning given
    # only those files (another machine) runs nothing and writes the same
    kept = root / 'tuning' / method_ranking.TUNING_RUNS
    stored = json.load(open(kept / 'droppos-lr2.5e-4_pseed1.json'))
    assert stored['scores']['linear-probe']['mIoU'] == 46.0
    assert stored['setting']['images'] == 640 and stored['commit']
    assert {'mmpos/models/backbones/rope_vit.py',
            'mmpos_positions/linear.py'} <= {
                f for p in stored['depends']
                for f in provenance.files_under(p)}
    moved = tmp_path / 'moved'
    shutil.copytree(kept, moved / 'tuning' / method_ranking.TUNING_RUNS)
    moved_args = [a if a != str(root) else str(moved) for a in common]
    commands.clear()
    method_ranking.main(['--tune', *moved_args])
    assert not [c for c in commands if 'tools/train.py' in c or any(
        p['tool'] in c for p in runs.PROBES.values())]
    assert json.load(open(moved / 'tuning.json'))['methods'] == \
        log['methods']
    # ... and refuses them at another budget, naming the file
    budget = [a if a != '640' else '1280' for a in moved_args]
    with pytest.raises(SystemExit, match=r'_pseed0.json: this tuning run '
                       r'was made with other images \(\[640\], now '
                       r'\[1280\]\)'):
        method_ranking.main(['--tune', *budget])

    commands.clear()
    method_ranking.main(common)
    trains = [c for c in commands if 'tools/train.py' in c]
    pretrainings = [c for c in trains
                    if '/pretraining/' in c[c.index('--work-dir') + 1]]
    # 2 methods x 2 pretraining seeds, all at batch 32 for 20 iterations
    assert len(pretrainings) == 4
    for cmd in pretrainings:
        assert 'train_dataloader.batch_size=32' in cmd
        assert 'train_cfg.max_iters=20' in cmd
    droppos = [c for c in pretrainings if '/DropPos/' in c[3 + 1]]
    assert all('optim_wrapper.optimizer.lr=2.5e-4' in c for c in droppos)
    assert {a for c in droppos for a in c if a.startswith('randomness')} \
        == {'randomness.seed=0', 'randomness.seed=1'}
    # random init: one backbone drawn per pretraining seed
    for p in (0, 1):
        assert os.path.isfile(os.path.join(seeds.pretrain_dir(
            str(root), runs.RANDOM_INIT, p), 'backbone.pth'))
    # per init and pretraining seed: 2 linear probes, 1 kNN, 2 fine-tunings;
    # the raw-pixel baseline: 2 linear probes, 1 kNN, through the same tools
    probe_runs = [c for c in commands if any(
        p['tool'] in c for p in runs.PROBES.values())]
    pixels = [c for c in probe_runs if c[3] == 'pixels']
    assert len(probe_runs) == 3 * 2 * (2 + 1) + len(pixels)
    assert sorted(c[1] for c in pixels) == sorted(
        [runs.PROBES['linear-probe']['tool']] * 2 +
        [runs.PROBES['knn']['tool']])
    assert len(trains) == 4 + 3 * 2 * 2
    plan = seeds.load_plan(str(root))
    assert plan['pretrain_seeds'] == [0, 1]
    assert plan['tasks']['knn']['seeds'] == [0]
    assert plan['baselines'] == {
        seeds.IMAGE_FREE: {'linear-probe': [0], 'knn': [0]},
        method_ranking.RAW_PIXELS: {'linear-probe': [0, 1], 'knn': [0]}}
    table = open(root / 'tables' / 'seeds.md').read()
    assert '| image-free (baseline, not ranked) |' in table
    assert '| raw pixels (baseline, not ranked) |' in table
    assert plan['budget'] == dict(
        batch=32, images=640, tuning='tuning.json (640 images)',
        power='pretraining-run SD 0.71 (mini-stuff linear probe mIoU, pooled '
        'over the tuning configurations, df 4): 4 pretraining runs per '
        'method detect 2 points at 80 % power; this ranking has 2 (detects '
        '4.0)')
    assert os.path.isfile(root / 'ranking_run.json')
    assert commands[-1][1:4] == ['tools/paper_tables/gen_tables.py',
                                 '--seeds', str(root)]
    # the papers' orderings between the ranked inits, and only those
    text = open(root / 'tables' / 'orderings.md').read()
    assert '| CR2PQ > random init | CR2PQ Tab. 1' in text
    assert 'DINOv2' not in text
    # run again: everything is finished, only the tables are regenerated,
    # byte for byte the same
    tables = {name: (root / 'tables' / name).read_bytes() for name in (
        'seeds.md', 'seeds.csv', 'summary.json', 'orderings.md')}
    commands.clear()
    method_ranking.main(common)
    assert [c[1] for c in commands] == ['tools/paper_tables/gen_tables.py']
    assert {name: (root / 'tables' / name).read_bytes()
            for name in tables} == tables
    # a second ranking on the work dir while one runs is refused
    with work_dir_lock(str(root)), pytest.raises(SystemExit) as refused:
        method_ranking.main(common)
    assert str(refused.value).startswith(
        f'method_ranking.py: error: work dir {root} is in use by another '
        f'run (pid {os.getpid()} ')
    # an interrupted run is restarted from scratch
    broken = seeds.transfer_dir(str(root), 'segmentation', 'CR2PQ', 1, 0)
    os.remove(os.path.join(broken, DONE_MARKER))
    commands.clear()
    method_ranking.main(common)
    assert [c[c.index('--work-dir') + 1] for c in commands
            if 'tools/train.py' in c] == [broken]


def test_a_ranking_resumes_on_another_machine_from_its_archive(
        tmp_path, monkeypatch):
    """Stage 2 archived as it goes (``archive_runs.py store``) and written
    back into a fresh work dir (``restore``) resumes without re-running a
    finished run; a pretraining whose transfer was not archived runs
    again, with only that transfer; the tables come out the same."""
    data = tmp_path / 'data'
    for name in ('objects', 'stuff', 'unlabeled', 'cls'):
        (data / name).mkdir(parents=True)
    commands = []
    fake = _fake_runs(commands, lambda cmd: 40.0 + any(
        '/pseed1/' in a for a in cmd))

    def run(cmd, **kwargs):  # fine-tuning leaves mmengine's scalars
        fake(cmd, **kwargs)
        work_dir = cmd[cmd.index('--work-dir') + 1] if '--work-dir' in \
            cmd else ''
        if 'tools/train.py' in cmd and '/pretraining/' not in work_dir:
            scalars = os.path.join(work_dir, '20260101_000000', 'vis_data')
            os.makedirs(scalars)
            record = json.dumps({'mIoU': 30.0 + len(commands) % 3,
                                 'step': 1}) + '\n'
            for name in ('scalars.json', '20260101_000000.json'):
                with open(os.path.join(scalars, name), 'w') as f:
                    f.write(record)
        return 0.0

    monkeypatch.setattr(runs, 'run', run)
    monkeypatch.setattr(method_ranking, 'image_free_metrics',
                        _fake_image_free)

    def rank(root):
        method_ranking.main([
            '--untuned', '--work-dir', str(root), '--data-root', str(data),
            '--methods', 'droppos', '--pretrain-seeds', '0', '1',
            '--seeds', '0', '1', '--tasks', 'linear-probe', 'knn',
            'segmentation', '--images', '640', '--jobs', '1'])

    root, archive = tmp_path / 'first', tmp_path / 'archive'
    rank(root)
    tables = (root / 'tables' / 'seeds.md').read_text()
    assert '| DropPos |' in tables
    store = ['store', str(root), str(archive), '--command', 'the ranking']
    archive_runs = load_tool('archive_runs', 'paper_tables')
    archive_runs.main(store)
    stored = json.load(open(archive / 'segmentation' / 'DropPos' / 'pseed1'
                            / 'seed0.json'))
    assert stored['command'] == 'the ranking' and stored['commit']
    assert 'mmpos_harness/comparison/runs.py' in stored['depends']
    assert set(stored['files']) == {  # not mmengine's copy of the scalars
        DONE_MARKER, 'compute.json',
        '20260101_000000/vis_data/scalars.json'}
    kept = {p: p.read_bytes() for p in archive.rglob('*.json')}
    archive_runs.main(store)  # nothing new, nothing rewritten
    assert {p: p.read_bytes() for p in archive.rglob('*.json')} == kept

    # another machine: nothing of the work dir but the archive
    moved = tmp_path / 'moved'
    archive_runs.main(['restore', str(archive), str(moved)])
    commands.clear()
    rank(moved)
    assert [c[1] for c in commands] == ['tools/paper_tables/gen_tables.py']
    assert (moved / 'tables' / 'seeds.md').read_text() == tables

    # one transfer never archived: its pretraining runs again, then it
    lost = archive / 'segmentation' / 'DropPos' / 'pseed1' / 'seed0.json'
    lost.unlink()
    again = tmp_path / 'again'
    archive_runs.main(['restore', str(archive), str(again)])
    assert not (again / 'pretraining' / 'DropPos' / 'pseed1').exists()
    assert (again / 'pretraining' / 'DropPos' / 'pseed0' /
            DONE_MARKER).exists()
    commands.clear()
    rank(again)
    assert [c[c.index('--work-dir') + 1] for c in commands
            if 'tools/train.py' in c] == [
        seeds.pretrain_dir(str(again), 'DropPos', 1),
        seeds.transfer_dir(str(again), 'segmentation', 'DropPos', 0, 1)]

    # an archive of another plan is refused, naming its plan file
    other = json.load(open(root / 'plan.json'))
    other['seeds'] = [0]
    seeds.write_json(str(again / 'plan.json'), other)
    with pytest.raises(SystemExit, match=r'plan.json: made for another '
                       r'plan \(its seeds differ\)'):
        archive_runs.main(['store', str(again), str(archive),
                           '--command', 'x'])

def test_grid_gives_every_method_the_same_budget():
    grid = method_ranking.load_grid(method_ranking.GRID,
                                    list(method_ranking.METHODS))
    sizes = {len(grid[m]) for m, (_, config) in
             method_ranking.METHODS.items() if config}
    assert sizes == {8}
    assert any('model.target=pixel' in e['options'] for e in grid['cr2pq'])
    for method in (m for m, (_, c) in method_ranking.METHODS.items() if c):
        augs = [e for e in grid[method] if 'aug-' in e['name']]
        assert len(augs) == 2 and all(
            any('pipeline' in o for o in e['options']) for e in augs), method


@pytest.mark.parametrize('method', [m for m, (_, c) in
                                    method_ranking.METHODS.items() if c])
def test_every_grid_entry_changes_an_existing_step_that_still_runs(method):
    """Each tuning entry's --cfg-options land on steps its config has
    (a typo would add a key silently), change their values, and the
    merged augmentation step builds, runs on an image and gives the image
    sizes of the shipped step (the model's patch grid expects them)."""
    import numpy as np
    from mmengine.config import Config, DictAction
    from mmengine.registry import DefaultScope
    from mmpretrain.registry import TRANSFORMS

    import mmpos  # noqa: F401  (registers the view transforms)
    grid = method_ranking.load_grid(method_ranking.GRID,
                                    list(method_ranking.METHODS))
    config = method_ranking.METHODS[method][1]
    base = Config.fromfile(config)
    img = np.random.default_rng(0).integers(0, 255, (64, 64, 3),
                                            dtype=np.uint8)

    def sizes(pipeline):
        with DefaultScope.overwrite_default_scope('mmpretrain'):
            step = TRANSFORMS.build(pipeline[1])
        out = step(dict(img=img, img_shape=(64, 64), ori_shape=(64, 64)))
        views = out['img'] if isinstance(out['img'], list) else [out['img']]
        return [v.shape for v in views]

    shipped = sizes(base.train_dataloader.dataset.pipeline)
    for entry in grid[method]:
        parsed = {}
        for option in entry['options']:
            key, value = option.split('=', 1)
            parsed[key] = DictAction._parse_iterable(value)
            leaf = key.rsplit('.', 1)[1]
            owner, _ = lookup_path(base, key.split('.'))
            assert owner is not None, f'no such step: {option}'
            assert leaf in ('type', 'scale', 'crop_ratio_range',
                            'aspect_ratio_range') or leaf in owner, option
            assert owner.get(leaf) != parsed[key], option
        cfg = Config.fromfile(config)
        cfg.merge_from_dict(parsed)
        assert sizes(cfg.train_dataloader.dataset.pipeline) == shipped, (
            entry['name'])


def test_dense_probes_are_ranking_tasks(tmp_path, monkeypatch):
    from mmpos.evaluation.dense_suite import MINI_PROBES
    data = tmp_path / 'data'
    for name in ('objects', 'stuff', 'unlabeled', 'cls', 'layers', 'spair'):
        (data / name).mkdir(parents=True)
    commands = []
    monkeypatch.setattr(runs, 'run', _fake_runs(commands, lambda c: 1.0))
    monkeypatch.setattr(method_ranking, 'image_free_metrics',
                        _fake_image_free)
    assert {'depth', 'correspondence', 'retrieval'} <= set(
        method_ranking.parse_args([]).tasks)
    method_ranking.main([
        '--work-dir', str(tmp_path / 'bench'), '--data-root', str(data),
        '--methods', 'droppos', '--untuned', '--pretrain-seeds', '0', '1',
        '--seeds', '0', '1', '--tasks', 'depth', 'correspondence',
        '--images', '640', '--jobs', '1'])
    for task, data_dir, count in (('depth', 'layers', 2 * 2 * 2),
                                  ('correspondence', 'spair', 2 * 2)):
        cmds = [c for c in commands if runs.PROBES[task]['tool'] in c
                and c[3] != 'pixels']
        assert len(cmds) == count  # seeded: x transfer seeds; else once
        for cmd in cmds:
            assert cmd[cmd.index('--probe') + 1] == MINI_PROBES[task]
            assert cmd[cmd.index('--data-root') + 1] == str(data / data_dir)
            assert ('--seed' in cmd) == (task == 'depth')
    plan = seeds.load_plan(str(tmp_path / 'bench'))
    assert plan['tasks']['correspondence']['seeds'] == [0]
    assert plan['budget']['tuning'] == 'untuned'


def test_a_switched_off_monitor_is_not_counted_as_healthy(tmp_path):
    """A pretraining run whose HealthMonitorHook had no probe set writes
    health.json with ``disabled``: the table says it was not monitored
    instead of counting it among the healthy runs."""
    off = dict(centred=True, initial=None, history=[], final=None,
               num_prototypes=None,
               collapsed=None, reasons=[],
               disabled='HealthMonitorHook: probe set not found: x/cls')
    dirs = []
    for name, health in (('on', _health(False)), ('off', off)):
        dirs.append(str(tmp_path / name))
        seeds.write_json(os.path.join(dirs[-1], 'health.json'), health)
    both = seeds.pretrain_health(dirs)
    assert (both['runs'], both['unmonitored'], both['collapsed']) == (1, 1, 0)
    assert seeds._fmt_health(both)[-1] == '0/1 (1 not monitored)'
    only_off = seeds.pretrain_health(dirs[1:])
    assert seeds._fmt_health(only_off) == ['-', '-', '-',
                                           'not monitored (1 runs)']
    assert seeds.pretrain_health([str(tmp_path / 'none')]) is None


def test_image_free_rows_read_each_probes_own_data(mini_data, tmp_path):
    """The image-free row of a probe reads that probe's data: kNN's is
    the share of the queries in the memory bank's majority class (counted
    here from the folders of its own set, ``knn/cls``), the linear
    probe's a per-pixel class prior's mIoU, the dense probes' under their
    flat keys (depth: mini-NYU layers, with δ1 up to scale)."""
    from mmpos_harness.mini_data import make_mini_cls, make_mini_layers
    cls = tmp_path / runs.PROBES['knn']['data']
    make_mini_cls(str(cls), num_train=10, num_val=12, img_size=32)
    make_mini_layers(str(tmp_path / runs.PROBES['depth']['data']),
                     num_train=6, num_val=3, img_size=32)
    knn = method_ranking.image_free_metrics('knn', str(tmp_path))
    counts = {split: {c.name: len(list(c.iterdir())) for c in sorted(
        (cls / split).iterdir())} for split in ('train', 'val')}
    majority = max(counts['train'], key=counts['train'].get)
    assert knn == {'knn/avg_top1': pytest.approx(
        100 * counts['val'][majority] / sum(counts['val'].values()))}
    seg = method_ranking.image_free_metrics('linear-probe', str(mini_data))
    assert 0 <= seg['mIoU'] <= 100
    depth = method_ranking.image_free_metrics('depth', str(tmp_path))
    assert depth['depth/rmse'] > 0 and 0 <= depth['depth/d1'] <= 1
    assert 0 <= depth['depth/si_d1'] <= 1
    # stored as the probes' metrics.json (mmseg's metrics are numpy floats)
    assert all(type(v) is float for m in (knn, seg, depth)
               for v in m.values())


@pytest.mark.parametrize('method', ['dinov2', 'icpf'])
def test_ape_methods_are_evaluated_with_the_ape_they_pretrained(method,
                                                                 tmp_path):
    """DINOv2 and ICPF pretrain with an APE (ICPF: its positional field);
    the ranking's extraction keeps it (ICPF's field exported on the 8x8
    grid), and the probes' backbone (APE_PROBE_CONFIG) and a fine-tuning
    backbone with ape_options() give the patch tokens of the pretrained
    encoder at the pretraining size (DINOv2 also at 96 px, where both
    resize the same table; ICPF's encoder samples its continuous field on
    the larger grid, the extracted APE is the 8x8 table resized)."""
    import torch
    from mmengine.config import Config, DictAction

    from mmpos.apis.features import build_backbone, init_backbone
    from mmpos.checkpoint import load_pretrained
    from mmpos.registry import MODELS
    assert method_ranking.keeps_ape(method)
    assert not any(method_ranking.keeps_ape(m) for m in (
        'droppos', 'cr2pq', 'mae', 'random'))
    config = method_ranking.METHODS[method][1]
    cfg = Config.fromfile(config)
    torch.manual_seed(0)
    model = MODELS.build(cfg.model)
    model.init_weights()
    with torch.no_grad():  # an APE (field) far from its init
        for name, p in model.named_parameters():
            if 'pos_embed' in name or 'pos_field' in name:
                p.normal_(0, 0.5)
    model.eval()
    ckpt = tmp_path / 'iter_1.pth'
    torch.save(dict(state_dict=model.state_dict(),
                    meta=dict(cfg=cfg.pretty_text)), ckpt)
    mmpos2backbone = load_tool('mmpos2backbone', 'model_converters')
    backbone = str(tmp_path / 'backbone.pth')
    mmpos2backbone.main([str(ckpt), backbone, '--config',
                         runs.APE_PROBE_CONFIG, '--drop-unexpected'])
    probe = init_backbone(runs.APE_PROBE_CONFIG, backbone, prefix='')
    # a fine-tuning backbone: the detection config's with ape_options()
    det = Config.fromfile(runs.TASKS['detection']['config'])
    det.merge_from_dict({k: DictAction._parse_iterable(v) for k, v in (
        o.split('=') for o in runs.ape_options())})
    finetune = build_backbone(det, raw_tokens=True).eval()
    report = load_pretrained(finetune, backbone, prefix='')
    assert report['missing'] == [] and report['unexpected'] == []
    def patch_tokens(net, img):
        out = net(img)[-1]
        return out[:, 1:] if out.dim() == 3 else out.flatten(2).transpose(1,
                                                                          2)

    for size in (64, 96) if method == 'dinov2' else (64, ):
        img = torch.randn(2, 3, size, size)
        with torch.no_grad():
            if method == 'icpf':
                want = model.extract_feat(img)[:, 1:]
            else:
                want = model.backbone(img)[0][:, 1:]
            for net in (probe, finetune):
                torch.testing.assert_close(patch_tokens(net, img), want,
                                           rtol=1e-4, atol=1e-4)
    # the same weights without the APE (what the extraction used to
    # give) are another encoder
    plain = init_backbone(runs.PROBES['knn']['config'], backbone, prefix='')
    with torch.no_grad():
        assert (patch_tokens(plain, img) - want).abs().max() > 0.1


def test_ranking_refuses_a_tuning_at_another_length(tmp_path):
    log = dict(images=9600, methods={})
    seeds.write_json(str(tmp_path / method_ranking.TUNING), log)
    args = method_ranking.parse_args(['--work-dir', str(tmp_path),
                                      '--images', '32000'])
    grid = method_ranking.load_grid(method_ranking.GRID, args.methods)
    with pytest.raises(SystemExit, match='tuned at 9600 images, the ranking '
                       'asks for --images 32000: tune at the ranked length'):
        method_ranking.chosen_options(args, grid)


def test_grid_edges_name_the_axis_the_choice_sits_on():
    grid = method_ranking.load_grid(method_ranking.GRID,
                                    list(method_ranking.METHODS))
    config = method_ranking.METHODS['mae'][1]
    lr = 'optim_wrapper.optimizer.lr'
    assert method_ranking.grid_edges(config, grid['mae'], 'lr8e-3') == [
        f'{lr} = 0.008, the largest of 0.0005 .. 0.008']
    assert method_ranking.grid_edges(config, grid['mae'], 'lr5e-4') == [
        f'{lr} = 0.0005, the smallest of 0.0005 .. 0.008']
    # the shipped lr is inside the axis; weight decay has two values
    assert method_ranking.grid_edges(config, grid['mae'], 'lr1e-3') == []
    assert method_ranking.grid_edges(config, grid['mae'],
                                     'lr1e-3_wd0.1') == []


def test_the_ranking_evaluates_ape_methods_with_their_ape(tmp_path,
                                                          monkeypatch):
    """Every command of DINOv2's runs keeps its APE (extraction, probes,
    fine-tuning); DropPos' and random init's do not."""
    data = tmp_path / 'data'
    for name in ('objects', 'stuff', 'unlabeled', 'cls'):
        (data / name).mkdir(parents=True)
    commands = []
    monkeypatch.setattr(runs, 'run', _fake_runs(commands, lambda cmd: 40.0))
    monkeypatch.setattr(method_ranking, 'image_free_metrics',
                        _fake_image_free)
    method_ranking.main([
        '--work-dir', str(tmp_path / 'rank'), '--data-root', str(data),
        '--methods', 'droppos', 'dinov2', '--pretrain-seeds', '0', '1',
        '--seeds', '0', '--tasks', 'linear-probe', 'knn', 'segmentation',
        '--images', '640', '--untuned', '--jobs', '1'])

    def of(init):
        return [c for c in commands if f'/{init}/' in ' '.join(c)]

    ape, plain = of('DINOv2'), of('DropPos') + of(runs.RANDOM_INIT)
    extract = [c for c in ape if 'mmpos2backbone.py' in c[1]]
    probes = [c for c in ape if any(p['tool'] == c[1]
                                    for p in runs.PROBES.values())]
    finetune = [c for c in ape if c[1] == 'tools/train.py' and
                runs.TASKS['segmentation']['config'] in c]
    assert len(extract) == 2 and len(probes) == 2 * 2 and len(finetune) == 2
    assert all(runs.APE_PROBE_CONFIG in c for c in extract + probes)
    assert all(set(runs.ape_options()) <= set(c) for c in finetune)
    assert plain and not any(
        runs.APE_PROBE_CONFIG in c or set(runs.ape_options()) & set(c)
        for c in plain)
