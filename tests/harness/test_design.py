"""Study designs (mmpos_harness.design): every committed design file loads,
its numbers are recomputed from the stored runs (the per-run SD as
statsmodels' one-way ANOVA residual, the runs its power calculation asks
for as statsmodels' sample size at the family's alpha, the CPU hours from
the runs' own timings), its confirmation seeds are disjoint from the seeds
that selected anything, its command is one its runner parses; a bad file
is refused in one line naming the key."""
import glob
import json
import math
import os
import os.path as osp
import shutil
import statistics

import pandas as pd
import pytest
import yaml
from statsmodels.formula.api import ols
from statsmodels.stats.power import TTestIndPower, TTestPower

from mmpos.errors import BadInputError
from mmpos_harness import design, method_ranking

ROOT = design.ROOT
RANKING = osp.join(ROOT, design.DESIGNS, 'method_ranking_confirm.yaml')


def test_every_design_loads_and_holds_against_the_stored_runs():
    paths = design.designs()
    assert [osp.basename(p) for p in paths] == [
        'demo_confirm.yaml', 'distill_mini.yaml',
        'method_ranking_confirm.yaml', 'probes.yaml', 'resolution_study.yaml']
    total = 0.0
    for path in paths:
        found = design.load(path)
        got = design.check(found, path)
        assert got['runs_planned'] >= max(got['runs_needed'].values())
        # the resolution study (#56) and the distillation study (#57) have
        # budgets of their own
        if found['study'] not in ('resolution_study', 'distill_mini'):
            total += found['budget']['cpu_hours']
        assert got['cpu_hours'] <= found['budget']['cpu_hours']
    # the shares add up to the re-runs' 15 CPU hours
    assert total == pytest.approx(15.0)


def test_the_ranking_design_reads_its_selection_seeds_from_the_results():
    found = design.load(RANKING)
    with open(osp.join(ROOT, 'results/method_ranking_tuning/tuning.json')) \
            as f:
        assert found['seeds']['selection']['tuning'] == json.load(f)['seeds']
    with open(osp.join(ROOT, 'results/method_ranking/summary.json')) as f:
        summary = json.load(f)
    assert found['seeds']['selection']['ranking'] == \
        summary['pretrain_seeds']
    assert not set(found['seeds']['transfer']) & set(summary['seeds'])
    # its command is one the ranking's own parser takes, with its seeds
    argv = design.command(found).split()[2:]
    args = method_ranking.parse_args(argv)
    assert args.pretrain_seeds == found['seeds']['confirmation']
    assert args.seeds == found['seeds']['transfer']
    assert args.methods == found['arms'] and args.tasks == found['tasks']
    assert args.images == 32000


def test_run_sd_is_the_anova_residual_of_the_stored_per_run_means():
    summary_path = 'results/method_ranking/summary.json'
    with open(osp.join(ROOT, summary_path)) as f:
        task = json.load(f)['tasks']['linear-probe']
    rows = [(init, statistics.mean(g))
            for init, per_metric in task['inits'].items()
            for g in per_metric['mIoU']['groups']]
    fit = ols('y ~ C(g)', pd.DataFrame(rows, columns=['g', 'y'])).fit()
    sd, df = design.run_sd(summary_path, 'linear-probe')
    assert df == fit.df_resid == 12
    assert sd == pytest.approx(math.sqrt(fit.mse_resid), rel=1e-12)


def test_runs_needed_is_statsmodels_sample_size_at_the_family_level():
    found = design.load(RANKING)
    sd, _ = design.run_sd(found['power']['sd_from'], 'linear-probe')
    alpha = 0.05 / len(found['families']['headline']['tests'])
    n = TTestIndPower().solve_power(effect_size=3.0 / sd, alpha=alpha,
                                    power=0.8, ratio=1.0)
    assert design.runs_needed(found) == {'linear-probe': math.ceil(n)}
    # the planned runs detect the delta at that level, one fewer would not
    assert design.mdd_planned(found, 'linear-probe') <= 3.0


def _write_run(path, cpu_minutes):
    os.makedirs(osp.dirname(path), exist_ok=True)
    with open(path, 'w') as f:
        json.dump({'files': {'compute.json': json.dumps(
            {'minutes': cpu_minutes, 'cpu_minutes': cpu_minutes})}}, f)


def test_cost_is_measured_on_the_stored_runs(tmp_path):
    runs = tmp_path / 'runs'
    for p, minutes in ((0, 4.0), (1, 6.0)):
        _write_run(str(runs / 'pretraining' / 'DropPos' / f'pseed{p}.json'),
                   minutes)
        for k, t in enumerate((1.0, 3.0)):
            _write_run(str(runs / 'linear-probe' / 'DropPos' / f'pseed{p}' /
                           f'seed{k}.json'), t)
            _write_run(str(runs / 'linear-probe' / 'random_init' /
                           f'pseed{p}' / f'seed{k}.json'), t / 2)
    found = design.load(RANKING)
    found = dict(found, arms=['droppos', 'random'], tasks=['linear-probe'],
                 budget=dict(found['budget'], cost_from=str(runs)))
    # pretraining 5 min mean + 3 transfer seeds x 2 min mean; random init:
    # no pretraining file, 3 x 1 min
    assert design.cost_per_run(found) == {'droppos': 11.0, 'random': 3.0}
    assert design.planned_cpu_hours(found) == pytest.approx(14.0 * 6 / 60)
    shutil.rmtree(runs / 'linear-probe' / 'random_init')
    with pytest.raises(BadInputError, match='no stored runs of linear-probe '
                       '/ random_init'):
        design.cost_per_run(found)


def _bad(tmp_path, change, name='method_ranking_confirm'):
    with open(RANKING) as f:
        found = yaml.safe_load(f)
    change(found)
    path = tmp_path / f'{name}.yaml'
    path.write_text(yaml.safe_dump(found))
    return str(path)


@pytest.mark.parametrize('change, match', [
    (lambda d: d.update(seed=[1]), r"unknown key 'seed'; allowed"),
    (lambda d: d.pop('alpha'), r"missing key 'alpha'"),
    (lambda d: d['seeds'].update(fresh=[3]), r"unknown key seeds.'fresh'"),
    (lambda d: d['seeds'].update(confirmation=['a']),
     r'seeds.confirmation must be a non-empty list of integer seeds'),
    (lambda d: d.update(reference='moco'), r"reference 'moco' is not one"),
    (lambda d: d.update(runner='tools/train.py'),
     r"runner 'tools/train.py' is not a study runner"),
    (lambda d: d['families']['headline'].update(correction='bonferroni'),
     r'families.headline.correction must be one of'),
    (lambda d: d['families']['headline']['tests'].append(['moco', 'knn']),
     r"families.headline.tests: \['moco', 'knn'\] is not"),
    (lambda d: d.update(margins={}),
     r"\['droppos', 'segmentation'\] is an equivalence test without "
     r'margins.segmentation'),
    (lambda d: d['power'].update(deltas={'imagenet': 1.0}),
     r'power.deltas.imagenet: not one of the tasks'),
    (lambda d: d['budget'].update(estimate='guess'),
     r"budget.estimate must be one of \('flops', 'calibration'\)"),
])
def test_a_bad_design_is_one_line_naming_the_key(tmp_path, change, match):
    path = _bad(tmp_path, change)
    with pytest.raises(BadInputError, match=match) as err:
        design.load(path)
    assert str(err.value).startswith(path) and '\n' not in str(err.value)


def test_check_refuses_reused_seeds_too_few_runs_and_over_budget(tmp_path):
    def reuse(d):
        d['seeds']['confirmation'] = [2, 100, 101, 102, 103, 104]
    with pytest.raises(BadInputError, match=r'seeds.confirmation \[2\] were '
                       'used to select'):
        design.check(design.load(_bad(tmp_path, reuse)))
    few = _bad(tmp_path, lambda d: d['seeds'].update(confirmation=[7, 8]))
    with pytest.raises(BadInputError, match='power.deltas.linear-probe needs '
                       '6 runs per arm, seeds.confirmation has 2'):
        design.check(design.load(few))
    poor = _bad(tmp_path, lambda d: d['budget'].update(cpu_hours=1.0))
    with pytest.raises(BadInputError, match=r'the plan needs 7.0 CPU hours, '
                       'budget.cpu_hours is 1.0'):
        design.check(design.load(poor))
    named = _bad(tmp_path, lambda d: None, name='other')
    with pytest.raises(BadInputError, match="study is "
                       "'method_ranking_confirm', the file is named 'other'"):
        design.load(named)


RESOLUTION = osp.join(ROOT, design.DESIGNS, 'resolution_study.yaml')


def test_paired_power_is_statsmodels_one_sample_power():
    for sd, delta, n, alpha in ((0.98, 1.2, 10, 0.05 / 3),
                                (2.12, 1.0, 10, 0.05 / 3), (1.0, 0.5, 30,
                                                            0.05)):
        want = TTestPower().power(effect_size=delta / sd, nobs=n,
                                  alpha=alpha, alternative='two-sided')
        assert design.paired_power(sd, delta, n, alpha) == pytest.approx(
            want, rel=1e-6)
    n = design.paired_runs(0.98, 1.2, 0.05 / 3, 0.8)
    assert design.paired_power(0.98, 1.2, n, 0.05 / 3) >= 0.8 > \
        design.paired_power(0.98, 1.2, n - 1, 0.05 / 3)


def test_the_resolution_design_rests_on_the_stored_paired_sds():
    found = design.load(RESOLUTION)
    with open(osp.join(ROOT, found['power']['sd_from'])) as f:
        rows = json.load(f)['tables']['resize']['rows']
    diffs = [a - b for a, b in zip(rows['RoPE-Mixed']['change']['values'],
                                   rows['APE']['change']['values'])]
    got = {tuple(e['test']): e for e in design.effects(found)}
    mixed = got[('RoPE-Mixed', 'resize-change')]
    assert mixed['sd'] == pytest.approx(statistics.stdev(diffs), rel=1e-12)
    # the headline family's 3 tests set the level; 10 seeds reach 80 %
    assert mixed['level'] == pytest.approx(0.05 / 3)
    assert mixed['needed'] == 10 == len(found['seeds']['confirmation'])
    # RoPE-Axial's claim is not powered with these seeds, and says so
    axial = got[('RoPE-Axial', 'resize-change')]
    assert not axial['powered'] and axial['power'] < 0.2
    # every scheme of the zoo is an arm, confirmatory or exploratory
    from mmpos_harness import position_study
    from mmpos_positions import SCHEMES
    table = position_study.all_schemes(16)
    trained = [a for a in found['arms'] + found['exploratory']['arms']
               if ' +' not in a]
    assert sorted(trained) == sorted(table)
    assert {(table[a].get('rope') or {}).get('type') for a in trained} >= \
        set(SCHEMES)


def test_the_flops_estimate_prices_the_stored_runs_at_their_cost():
    from mmpos_harness import position_study as study
    rate = study.cpu_seconds_per_flop(osp.join(ROOT, 'results',
                                               'position_study'))
    path = osp.join(ROOT, 'results/position_study/runs/APE/seed0.json')
    with open(path) as f:
        run = json.load(f)
    estimate = rate * study.run_flops(64, [80, 96, 128], 6000, 32, 1200)
    # one rate for every stored run: each within 15 % of its estimate
    assert estimate == pytest.approx(run['cpu_seconds'], rel=0.15)
    # attention's N^2: a 4x side costs more than 16x the tokens' share
    assert study.forward_flops(4097) > 16 * study.forward_flops(257)


def test_the_flops_rate_of_a_calibration_reads_its_width_and_tables():
    """The resolution calibration (width 64, resize and pad, test-time
    scalings on RoPE-Mixed) is priced at its own width: each of its runs
    within 15 % of the rate it gives times its FLOPs, but PaPE's (its
    attention bias is not in the FLOPs), which the rate leaves out and
    which costs more than its FLOPs share."""
    from mmpos_harness import position_study as study
    source = osp.join(ROOT, 'results', 'resolution_study_calibration')
    rate = study.cpu_seconds_per_flop(source, skip={'PaPE'})
    for path in glob.glob(osp.join(source, 'runs', '*', 'seed*.json')):
        with open(path) as f:
            run = json.load(f)
        assert run['embed_dims'] != study.ARCH['embed_dims']
        variants = 1 + sum(k.startswith('resize_') for k in run)
        flops = study.run_flops(
            run['train_size'], run['sizes'], run['iters'], run['batch_size'],
            run['num_val'], len(run['factors']), variants,
            embed_dims=run['embed_dims'],
            feedforward_channels=4 * run['embed_dims'])
        if osp.basename(osp.dirname(path)) == 'PaPE':
            assert run['cpu_seconds'] > 2 * rate * flops
        else:
            assert rate * flops == pytest.approx(run['cpu_seconds'],
                                                 rel=0.15)


def test_a_measured_arm_costs_what_it_took_and_bias_schemes_set_no_rate(
        tmp_path):
    """The resolution design priced from its calibration: an arm stored
    at the design's options costs its measured CPU minutes; a PaPE run
    (its bias costs more than its FLOPs share) changes no other arm's
    estimate; a run at other options is not a measurement."""
    found = design.load(osp.join(ROOT, design.DESIGNS,
                                 'resolution_study.yaml'))
    source = tmp_path / 'calibration'
    shutil.copytree(osp.join(ROOT, 'results', 'resolution_study_calibration',
                             'runs'), source / 'runs',
                    ignore=shutil.ignore_patterns('PaPE'))
    shutil.copy(osp.join(ROOT, 'results', 'resolution_study_calibration',
                         'position_study.json'), source)
    found['budget']['cost_from'] = str(source)
    before = design.cost_per_run(found)
    with open(source / 'runs' / 'APE' / 'seed0.json') as f:
        ape = json.load(f)
    assert ape['iters'] == found['options']['iters']
    assert before['APE'] == pytest.approx(ape['cpu_seconds'] / 60)
    (source / 'runs' / 'PaPE').mkdir()
    with open(source / 'runs' / 'PaPE' / 'seed0.json', 'w') as f:
        json.dump(dict(ape, cpu_seconds=5 * ape['cpu_seconds']), f)
    (source / 'runs' / 'LookHere').mkdir()
    with open(source / 'runs' / 'LookHere' / 'seed0.json', 'w') as f:
        json.dump(dict(ape, cpu_seconds=9 * ape['cpu_seconds'],
                       iters=2 * ape['iters']), f)
    after = design.cost_per_run(found)
    assert after['PaPE'] == pytest.approx(5 * before['APE'])
    assert after['LookHere'] == pytest.approx(before['LookHere'])
    assert {k: v for k, v in after.items() if k != 'PaPE'} == \
        pytest.approx({k: v for k, v in before.items() if k != 'PaPE'})


def test_a_calibration_at_fewer_images_prices_the_pretraining_scaled():
    found = design.load(osp.join(ROOT, design.DESIGNS, 'distill_mini.yaml'))
    source = osp.join(ROOT, found['budget']['cost_from'])
    with open(osp.join(source, 'plan.json')) as f:
        images = json.load(f)['plan']['budget']['images']
    scale = found['options']['images'] / images
    assert design.calibration_scale(found, source) == scale > 1

    def cpu(path):
        with open(path) as f:
            return json.loads(json.load(f)['files']['compute.json'])[
                'cpu_minutes']
    transfer = len(found['seeds']['transfer'])
    got = design.cost_per_run(found)
    for arm in found['arms']:
        want = scale * cpu(osp.join(source, 'pretraining', arm,
                                    'pseed0.json'))
        for task in found['tasks']:
            probes = sorted(os.listdir(osp.join(source, task, arm, 'pseed0')))
            want += transfer * statistics.mean(
                cpu(osp.join(source, task, arm, 'pseed0', p))
                for p in probes)
        assert got[arm] == pytest.approx(want, rel=1e-12)
    assert design.planned_cpu_hours(found) == pytest.approx(
        sum(got.values()) * len(found['seeds']['confirmation']) / 60)
    # without the estimate the same runs are priced as they ran
    del found['budget']['estimate']
    assert design.cost_per_run(found)['teacher'] < got['teacher']


def test_exploratory_seeds_must_pair_with_the_reference(tmp_path):
    with open(RESOLUTION) as f:
        found = yaml.safe_load(f)
    found['exploratory']['seeds'] = [100, 200]
    path = tmp_path / 'resolution_study.yaml'
    path.write_text(yaml.safe_dump(found))
    with pytest.raises(BadInputError, match=r'exploratory.seeds \[200\] are '
                       'not confirmation seeds'):
        design.load(str(path))


def test_the_resolution_commands_are_ones_the_study_parses():
    from mmpos_harness import position_study
    found = design.load(RESOLUTION)
    opt = found['options']
    for exploratory in (False, True):
        argv = design.command(found, exploratory).split()[2:]
        args = position_study.parse_args(argv)
        trained = [a for a in found['arms'] if ' +' not in a]
        if exploratory:
            assert args.schemes == ['APE', *found['exploratory']['arms']]
            assert args.seeds == found['exploratory']['seeds']
            assert args.summary == 'exploratory'
        else:
            assert args.schemes == trained
            assert args.seeds == found['seeds']['confirmation']
        assert args.out_dir == 'work_dirs/resolution_study'
        assert args.rrc_scale == opt['rrc-scale'] and args.sizes == \
            opt['sizes'] and args.factors == opt['factors']
        assert args.scalings == opt['scalings'] and args.iters == \
            opt['iters'] and (args.embed_dims, args.num_heads) == (64, 2)
    # the scaled arms are the study's rows of its scalings
    rows = {f'{a} +{m.upper()}' for a in trained
            if position_study.scalable(position_study.all_schemes(16)[a])
            for m in opt['scalings']}
    assert rows == {a for a in found['arms'] if ' +' in a}
