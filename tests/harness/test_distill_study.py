"""The mini distillation study (mmpos_harness.distill_study, the CLI
tools/paper_tables/distill_study.py) and its design
(designs/distill_mini.yaml): the design holds against its calibration and
its command is the runner's; the plan gives the student alone the
distilled student's training FLOPs and each distilled student its own
seed's teacher; the runs (recorded, not run) probe each width with its own
backbone, resume and refuse a second study on the work dir; the verdicts
are the design's families judged by mmpos_harness.design.judge."""
import json
import os
import os.path as osp

import pytest
from test_method_ranking import _fake_runs

import mmpos_stats as stats
from mmpos.guardrails.launch import work_dir_lock
from mmpos_harness import design, distill_study
from mmpos_harness.comparison import runs, seeds
from mmpos_harness.results import DONE_MARKER

DESIGN = osp.join(design.ROOT, distill_study.DESIGN)
ARM_SCORE = {'teacher': 40.0, 'distilled': 35.0, 'alone': 30.0}


def test_the_design_holds_and_its_command_is_the_runners():
    found = design.load(DESIGN)
    got = design.check(found, DESIGN)
    assert got['runs_planned'] >= max(got['runs_needed'].values())
    assert got['cpu_hours'] <= found['budget']['cpu_hours']
    assert found['arms'] == list(distill_study.ARMS)
    assert found['reference'] == distill_study.ALONE
    # the calibration's seeds chose the design: none is confirmed on
    with open(osp.join(design.ROOT, found['budget']['cost_from'],
                       seeds.PLAN)) as f:
        calibration = json.load(f)['plan']  # the archive's plan.json
    used = {s for v in found['seeds']['selection'].values() for s in v}
    assert set(calibration['pretrain_seeds']) <= used
    assert not set(calibration['seeds']) & set(found['seeds']['transfer'])
    assert not used & set(found['seeds']['confirmation'])
    args = distill_study.parse_args(design.command(found).split()[2:])
    assert args.methods == found['arms'] and args.tasks == found['tasks']
    assert args.pretrain_seeds == found['seeds']['confirmation']
    assert args.seeds == found['seeds']['transfer']
    assert args.images == found['options']['images']


@pytest.fixture(scope='module')
def flops():
    """The students' training FLOPs per image, counted by the planner."""
    return {arm: distill_study.flops_per_image(distill_study.CONFIGS[arm])
            for arm in (distill_study.DISTILLED, distill_study.ALONE)}


def test_the_plan_of_the_design_gives_equal_compute(flops):
    found = design.load(DESIGN)
    args = distill_study.parse_args(design.command(found).split()[2:])
    plan = distill_study.planned(args, flops)
    iters = args.images // args.batch_size
    # the frozen width-96 teacher's forward costs more than the student
    # alone's EMA teacher of width 48: the student alone trains longer
    assert flops['distilled'] > flops['alone']
    assert plan['iters'] == dict(
        teacher=iters, distilled=iters,
        alone=round(iters * flops['distilled'] / flops['alone']))
    assert plan['iters']['alone'] * flops['alone'] == pytest.approx(
        iters * flops['distilled'], rel=1 / iters)
    pretraining = {(r['arm'], r['seed']): r for r in plan['pretraining']}
    assert sorted(pretraining) == sorted(
        (a, p) for a in found['arms'] for p in found['seeds']['confirmation'])
    for p in found['seeds']['confirmation']:
        teacher = seeds.pretrain_dir(args.work_dir, 'teacher', p)
        options = pretraining['distilled', p]['options']
        assert options[-1] == (f'model.teacher.checkpoint={teacher}/'
                               f'iter_{iters}.pth')
        # every arm pretrains with the ranking's tuned DINOv2 recipe
        for arm in found['arms']:
            assert set(distill_study.recipe()) <= set(
                pretraining[arm, p]['options'])
        assert pretraining['teacher', p]['probe_config'] == \
            runs.APE_PROBE_CONFIG
        assert pretraining['alone', p]['probe_config'] == \
            distill_study.STUDENT_PROBE_CONFIG
    assert len(plan['probes']) == len(found['tasks']) * len(
        found['arms']) * len(found['seeds']['confirmation']) * len(
            found['seeds']['transfer'])


def test_the_dry_run_prints_the_runs_and_writes_nothing(flops, tmp_path,
                                                       monkeypatch):
    monkeypatch.setattr(distill_study, 'flops_per_image', lambda config: {
        distill_study.CONFIGS[arm]: f for arm, f in flops.items()}[config])
    found = design.load(DESIGN)
    root = tmp_path / 'study'
    argv = design.command(found).split()[2:] + ['--work-dir', str(root)]
    args = distill_study.parse_args(argv + ['--dry-run'])
    lines = distill_study.dry_run(args).splitlines()
    alone = round(1000 * flops['distilled'] / flops['alone'])
    assert lines[0].startswith(f'equal compute: {alone} iterations alone = '
                               '1000 distilled x ')
    distilled = distill_study.CONFIGS['distilled']
    assert (f'pretrain distilled pseed200: {distilled} 1000 iterations, '
            'probed with '
            f'{distill_study.STUDENT_PROBE_CONFIG}; ') in lines[
                1 + len(found['seeds']['confirmation'])]
    assert lines[1 + len(found['seeds']['confirmation'])].endswith(
        f'model.teacher.checkpoint={root}/pretraining/teacher/pseed200/'
        'iter_1000.pth')
    assert sum(line.startswith('probe ') for line in lines) == 2 * 3 * 7 * 3
    assert 'probe retrieval alone pseed206 seed202' in lines
    assert not root.exists()


def _score(cmd):
    """A probe's score: by arm, one point more for pretraining seed 6,
    a tenth per transfer seed."""
    work_dir = cmd[cmd.index('--work-dir') + 1]
    arm = work_dir.split(os.sep)[-3]
    return (ARM_SCORE[arm] + ('/pseed6/' in work_dir) +
            0.1 * int(work_dir.rsplit('seed', 1)[1]))


def _fake(commands):
    """The method ranking's recorded runs, with retrieval's metric key."""
    record = _fake_runs(commands, _score)

    def run(cmd, **kwargs):
        record(cmd, **kwargs)
        if runs.PROBES['retrieval']['tool'] in cmd:
            work_dir = cmd[cmd.index('--work-dir') + 1]
            seeds.write_json(osp.join(work_dir, 'metrics.json'),
                             {'retrieval/mIoU': _score(cmd)})
        return 0.0
    return run


def _probed(commands, tool, arm):
    """The backbone config of every ``tool`` command on ``arm``'s runs
    (the extraction's ``--config``, a probe's first argument)."""
    return {c[c.index('--config') + 1] if '--config' in c else c[2]
            for c in commands if tool in c[1] and
            any(f'/{arm}/' in a for a in c)}


def test_the_study_runs_resumes_and_is_refused_while_one_runs(
        tmp_path, monkeypatch):
    commands = []
    monkeypatch.setattr(runs, 'run', _fake(commands))
    monkeypatch.setattr(distill_study, 'flops_per_image',
                        lambda config: {distill_study.CONFIGS['distilled']:
                                        4.0}.get(config, 3.0))
    root = tmp_path / 'study'
    argv = ['--work-dir', str(root), '--data-root', str(tmp_path / 'data'),
            '--pretrain-seeds', '5', '6', '--seeds', '0', '1', '--images',
            '640', '--batch-size', '32']
    distill_study.main(argv)
    trains = {tuple(c[c.index('--work-dir') + 1].split(os.sep)[-2:]): (k, c)
              for k, c in enumerate(c for c in commands
                                    if c[1] == 'tools/train.py')}
    # the teachers first (2 at a time), then each seed's two students
    assert [set(k for k, (i, _) in trains.items() if i in pair)
            for pair in ((0, 1), (2, 3), (4, 5))] == [
        {('teacher', 'pseed5'), ('teacher', 'pseed6')},
        {('alone', 'pseed5'), ('distilled', 'pseed5')},
        {('alone', 'pseed6'), ('distilled', 'pseed6')}]
    alone, distilled = (trains[arm, 'pseed5'][1]
                        for arm in ('alone', 'distilled'))
    assert 'train_cfg.max_iters=27' in alone  # 20 x 4 / 3 rounded
    assert 'train_cfg.max_iters=20' in distilled
    assert (f'model.teacher.checkpoint={root}/pretraining/teacher/pseed5/'
            'iter_20.pth') in distilled
    # each width is extracted and probed with its own backbone
    for tool in ('mmpos2backbone', *(p['tool'] for p in
                                     runs.PROBES.values())):
        for arm in distill_study.ARMS:
            found = _probed(commands, tool, arm)
            want = runs.APE_PROBE_CONFIG if arm == 'teacher' else \
                distill_study.STUDENT_PROBE_CONFIG
            assert found in (set(), {want})
    assert _probed(commands, 'linear_seg_probe', 'alone') == {
        distill_study.STUDENT_PROBE_CONFIG}
    assert runs.APE_PROBE_CONFIG == ('configs/method_ranking/'
                                     'linear-probe_vit-tiny-rope-mixed-ape_'
                                     'mini-stuff.py')
    plan = seeds.load_plan(str(root))
    assert plan['reference'] == 'alone'
    assert plan['budget']['iters'] == dict(teacher=20, distilled=20,
                                           alone=27)
    # the design's families, Welch on the per-run means, Holm within each
    summary = seeds.summarise(str(root))
    rows = design.judge(design.load(DESIGN), summary)
    headline = {(r.arm, r.task, r.other): r for r in rows
                if r.family == 'headline'}
    want = stats.family([stats.welch([[35.0, 35.1], [36.0, 36.1]],
                                     [[30.0, 30.1], [31.0, 31.1]])] * 2,
                        stats.HOLM)[0]
    got = headline['distilled', 'linear-probe', 'alone']
    assert (got.difference, got.low, got.high, got.p_adj, got.verdict,
            got.mdd) == pytest.approx((want.difference, want.low, want.high,
                                       want.p_adj, want.verdict,
                                       stats.family_mdd(want)))
    written = open(root / 'verdicts.md').read()
    assert written.startswith(f'**{summary["title"]}**')
    assert (f'| distilled − alone, linear-probe (welch) | - | '
            f'+5.00 [{want.low:.2f}, {want.high:.2f}] (95 %) | '
            f'{stats.format_p(want.p_adj)} | {want.verdict} | '
            f'{stats.family_mdd(want):.2f} |') in written
    # run again: everything is finished, nothing runs
    commands.clear()
    distill_study.main(argv)
    assert not [c for c in commands if c[1] != 'tools/misc/make_mini_data.py']
    # a second study on the work dir while one runs is refused
    with work_dir_lock(str(root)), pytest.raises(SystemExit) as refused:
        distill_study.main(argv)
    assert 'is in use by another run' in str(refused.value)
    # an interrupted run is restarted
    broken = seeds.transfer_dir(str(root), 'retrieval', 'distilled', 1, 6)
    os.remove(osp.join(broken, DONE_MARKER))
    commands.clear()
    distill_study.main(argv)
    assert [c[c.index('--work-dir') + 1] for c in commands
            if '--work-dir' in c] == [broken]
