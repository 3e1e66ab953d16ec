"""The mini distillation study (issue 57, item 2; its design is
``designs/distill_mini.yaml``, committed before its runs): a teacher
pretrained by the method ranking's mini DINOv2 (4 blocks of width 96,
RoPE-Mixed and the APE), a student of width 48 distilled from it
(DINOv3's recipe, :class:`~mmpos.models.selfsup.distill.Distill`) and the
same student pretrained alone by the DINOv2 recipe for equal compute, each
scored by the method ranking's frozen probes.

    python tools/paper_tables/distill_study.py [--methods teacher distilled
        alone] [--tasks linear-probe retrieval] [--pretrain-seeds ...]
        [--seeds ...] [--images 32000] [--batch-size 32] [--jobs 2]
        [--work-dir work_dirs/distill_mini] [--dry-run]

Arms (the runner's names are the inits of the comparison's tables):

* ``teacher``: ``configs/method_ranking/dinov2_vit-tiny-rope-mixed_mini.py``
  with the method ranking's tuned options (:func:`recipe`:
  ``results/method_ranking_tuning/tuning.json``'s DINOv2 choice), for
  ``--images`` images at ``--batch-size``, one teacher per pretraining
  seed (seed ``p``'s distilled student learns from seed ``p``'s teacher,
  its EMA teacher, ``teacher.module.``);
* ``distilled``: ``configs/distill/distill_vit-tiny-to-vit-mini-rope-mixed_
  mini.py`` with the same options, for ``--images`` images;
* ``alone``: ``configs/distill/dinov2_vit-mini-rope-mixed_mini.py`` with the
  same options, for as many iterations as give it the distilled student's
  training FLOPs, the frozen teacher's forward included
  (:func:`equal_compute_iters`: the planner's FlopCounterMode count of one
  training step of each config, :func:`flops_per_image`). The teacher's own
  pretraining is not charged to the distilled student: the question is
  what a student's training compute buys once a teacher exists.

Runs and layout are those of the method ranking
(:func:`~.comparison.runs.compare`: ``<work-dir>/pretraining/<arm>/
pseed<p>``, ``<work-dir>/<task>/<arm>/pseed<p>/seed<k>``, ``plan.json``
for :mod:`~.comparison.seeds`, whose reference is ``alone``). The
teachers run first (their probes with the ranking's width-96 probe
backbone, :data:`~.comparison.runs.APE_PROBE_CONFIG`); then, per
pretraining seed, the two students, whose checkpoints are extracted and
probed with the width-48 probe backbone :data:`STUDENT_PROBE_CONFIG`
(``probe_config`` of :func:`~.comparison.runs.compare`). Then
``summary.json`` (:func:`~.comparison.seeds.summarise`) and
``verdicts.md``: every family of the design, each test Welch's t on the
per-pretraining-run means, adjusted within its family
(:func:`verdicts_markdown`).

The study resumes as the ranking does: the work dir is fixed, finished runs
are skipped and an interrupted one is restarted (run the same command
again); every result file is written atomically; a second study on the
same ``--work-dir`` is refused while one runs
(:func:`mmpos.guardrails.launch.work_dir_lock`). ``--archive DIR`` keeps
the finished runs without their checkpoints
(:func:`~.comparison.archive.store`, with the provenance of the command;
``tools/paper_tables/archive_runs.py restore`` writes them back into a
fresh work dir). ``--dry-run`` prints the runs the command would make
(:func:`planned`) and runs nothing.
"""
import argparse
import json
import os.path as osp
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Dict, List

from mmpos.checkpoint import write_atomically
from mmpos.guardrails.cli import cli_main
from mmpos.guardrails.launch import work_dir_lock

from . import design as designs
from . import method_ranking, provenance
from .comparison import archive, runs, seeds
from .comparison.seeds import write_json

TEACHER, DISTILLED, ALONE = 'teacher', 'distilled', 'alone'
ARMS = (TEACHER, DISTILLED, ALONE)
CONFIGS = {
    TEACHER: method_ranking.METHODS['dinov2'][1],
    DISTILLED: 'configs/distill/distill_vit-tiny-to-vit-mini-rope-mixed_'
               'mini.py',
    ALONE: 'configs/distill/dinov2_vit-mini-rope-mixed_mini.py',
}
# the students' frozen-probe backbone (and the one their checkpoints are
# extracted against): the ranking's APE probe backbone at width 48
STUDENT_PROBE_CONFIG = ('configs/distill/'
                        'linear-probe_vit-mini-rope-mixed-ape_mini-stuff.py')
# the recipe's options: the method ranking's tuned DINOv2 configuration
RECIPE_FROM = 'results/method_ranking_tuning/tuning.json'
DESIGN = 'designs/distill_mini.yaml'
# the planner's batch for the FLOP count (FLOPs per image do not depend on
# it: every op of a step scales with the batch)
FLOPS_BATCH = 2
FLOPS_FILE = 'flops.json'
CODE = ('mmpos/models', 'mmpos/datasets', 'mmpos/engine', 'mmpos/evaluation',
        'mmpos/checkpoint', 'mmpos/analysis/plan.py',
        'mmpos_harness/distill_study.py', 'mmpos_harness/method_ranking.py',
        'mmpos_harness/comparison/runs.py',
        'mmpos_harness/comparison/seeds.py', 'mmpos_harness/mini_data',
        'mmpos_stats', 'tools/train.py',
        'tools/model_converters/mmpos2backbone.py', RECIPE_FROM,
        method_ranking.GRID)


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--work-dir', default='work_dirs/distill_mini')
    parser.add_argument('--data-root', default='data/mini')
    parser.add_argument('--methods', nargs='+', choices=ARMS,
                        default=list(ARMS), help='the arms (a distilled '
                        'student pretrains its teacher too)')
    parser.add_argument('--tasks', nargs='+', choices=list(runs.PROBES),
                        default=['linear-probe', 'retrieval'])
    parser.add_argument('--pretrain-seeds', type=int, nargs='+',
                        default=[0])
    parser.add_argument('--seeds', type=int, nargs='+', default=[0],
                        help='transfer (probe) seeds')
    parser.add_argument('--batch-size', type=int, default=32)
    parser.add_argument('--images', type=int, default=32000,
                        help='pretraining images of the teacher and the '
                        'distilled student (iterations = images / batch '
                        'size); the student alone gets its equal-compute '
                        'iterations')
    parser.add_argument('--probe-iters', type=int, default=None,
                        help='shorten the linear probe (smoke runs)')
    parser.add_argument('--jobs', type=int, default=2,
                        help='runs at a time, each single-threaded')
    parser.add_argument('--archive', default=None,
                        help='also keep the finished runs, without their '
                        'checkpoints, in this archive '
                        '(mmpos_harness.comparison.archive)')
    parser.add_argument('--dry-run', action='store_true',
                        help='print the runs and change nothing')
    return parser.parse_args(argv)


def recipe(path: str = RECIPE_FROM) -> List[str]:
    """The ``--cfg-options`` of the method ranking's tuned DINOv2
    configuration (the stored tuning's choice, its grid entry's options),
    which every arm pretrains with."""
    with open(osp.join(runs.ROOT, path)) as f:
        chosen = json.load(f)['methods']['dinov2']['chosen']
    grid = method_ranking.load_grid(osp.join(runs.ROOT, method_ranking.GRID),
                                    ['dinov2'])
    return next(e['options'] for e in grid['dinov2'] if e['name'] == chosen)


def flops_per_image(config: str, batch: int = FLOPS_BATCH) -> float:
    """Training FLOPs per image of one step of ``config`` (forward and
    backward, a frozen or EMA teacher's forward included), counted by
    torch's ``FlopCounterMode`` on the planner's fake-tensor step
    (:func:`mmpos.analysis.plan.plan`) on 64 x 64 images."""
    from mmengine.logging import MMLogger

    from mmpos.analysis import plan
    from mmpos.guardrails.launch import load_config
    cfg = load_config(osp.join(runs.ROOT, config))
    # the optimizer's per-parameter lines are not the study's output
    logger = MMLogger.get_current_instance()
    level = logger.level
    logger.setLevel('ERROR')
    try:
        return plan.plan(cfg, batch=batch, image_size=(64, 64)).flops_train
    finally:
        logger.setLevel(level)


def equal_compute_iters(iters: int, flops: Dict[str, float]) -> int:
    """The student alone's iterations for the distilled student's training
    FLOPs over ``iters`` iterations at the same batch: ``iters *
    F_distilled / F_alone`` rounded (``flops``: per-image training FLOPs
    of each arm, :func:`flops_per_image`)."""
    return round(iters * flops[DISTILLED] / flops[ALONE])


def measured_flops(work_dir: str, keep: bool = True) -> Dict[str, float]:
    """Per-image training FLOPs of the two students
    (:func:`flops_per_image`), read from ``<work-dir>/flops.json`` where a
    study measured them, else measured (and with ``keep`` written there,
    atomically, for the study to resume with)."""
    path = osp.join(work_dir, FLOPS_FILE)
    if osp.isfile(path):
        with open(path) as f:
            return json.load(f)
    flops = {arm: flops_per_image(CONFIGS[arm]) for arm in (DISTILLED, ALONE)}
    if keep:
        write_json(path, flops)
    return flops


def arms_to_train(methods) -> List[str]:
    """The arms pretrained for ``methods``, in their order of training: a
    distilled student's teacher comes first even when it is not probed."""
    return [a for a in ARMS if a in methods or
            (a == TEACHER and DISTILLED in methods)]


def planned(args, flops: Dict[str, float]) -> dict:
    """What the study runs: ``pretraining``, per arm and pretraining seed
    its config, iterations and ``--cfg-options`` (the teacher checkpoint
    of a distilled student among them), and ``probes``, ``[task, arm,
    pretraining seed, transfer seed]`` of every probe run; with
    ``iters`` per arm and ``flops`` (per image)."""
    iters = method_ranking.pretrain_iters(args)
    per_arm = {TEACHER: iters, DISTILLED: iters,
               ALONE: equal_compute_iters(iters, flops)}
    options = method_ranking.budget_options(args) + recipe()
    pretraining = []
    for arm in arms_to_train(args.methods):
        for p in args.pretrain_seeds:
            extra = [f'model.teacher.checkpoint={teacher_checkpoint(args, p)}'
                     ] if arm == DISTILLED else []
            pretraining.append(dict(
                arm=arm, seed=p, config=CONFIGS[arm], iters=per_arm[arm],
                options=options + extra,
                probe_config=STUDENT_PROBE_CONFIG if arm != TEACHER else
                runs.APE_PROBE_CONFIG))
    probes = [[task, arm, p, seed] for task in args.tasks
              for arm in args.methods for p in args.pretrain_seeds
              for seed in task_seeds(task, args.seeds)]
    return dict(iters=per_arm, flops=flops, pretraining=pretraining,
                probes=probes)


def task_seeds(task: str, transfer: List[int]) -> List[int]:
    """A probe's seeds: every transfer seed, one for a probe that draws
    nothing (kNN, correspondence)."""
    return transfer if runs.PROBES[task]['seeded'] else transfer[:1]


def teacher_checkpoint(args, pretrain_seed: int) -> str:
    """The checkpoint of seed ``pretrain_seed``'s teacher: the last one of
    its pretraining run, ``iter_<iterations>.pth`` (the checkpoint interval
    is stretched to the run, :func:`~.comparison.runs.schedule_options`),
    named before it exists."""
    work_dir = seeds.pretrain_dir(args.work_dir, TEACHER, pretrain_seed)
    return osp.join(work_dir,
                    f'iter_{method_ranking.pretrain_iters(args)}.pth')


def write_plan(args, plan: dict) -> None:
    """``<work-dir>/plan.json`` (:func:`~.comparison.runs.write_plan`) with
    the student alone as the reference and the budget: batch, images, each
    arm's iterations, the FLOPs behind them and the recipe."""
    tasks = {t: dict(runs.PROBES[t], seeds=task_seeds(t, args.seeds))
             for t in args.tasks}
    runs.write_plan(
        args.work_dir, 'Mini distillation: a width-96 DINOv2 teacher, a '
        'width-48 student distilled from it and the student alone for '
        'equal compute -> ' + ', '.join(t['label'] for t in tasks.values()),
        args.methods, args.seeds, tasks=tasks,
        pretrain_seeds=args.pretrain_seeds,
        budget=dict(batch=args.batch_size, images=args.images,
                    iters=plan['iters'], flops_per_image=plan['flops'],
                    equal_compute='training FLOPs of the distilled student '
                    '(its frozen teacher\'s forward included)',
                    recipe=f'{RECIPE_FROM} (DINOv2: '
                    f'{" ".join(recipe())})'))
    found = seeds.load_plan(args.work_dir)
    found['reference'] = ALONE if ALONE in args.methods else args.methods[0]
    write_json(osp.join(args.work_dir, seeds.PLAN), found)


def _pretrain_only(args, runs_of: List[dict]) -> None:
    """Pretrain ``runs_of`` (:func:`planned` entries) without probes."""
    threads = 1 if args.jobs > 1 else None
    with ThreadPoolExecutor(args.jobs) as pool:
        list(pool.map(lambda r: runs.pretrain(
            r['config'], args.work_dir, r['arm'], args.data_root, r['iters'],
            r['options'], threads, r['seed'], True), runs_of))


def run_study(args) -> dict:
    """Pretrain and probe every arm (module docstring); returns the
    summary."""
    flops = measured_flops(args.work_dir)
    plan = planned(args, flops)
    write_plan(args, plan)
    tasks = {t: dict(runs.PROBES[t], seeds=task_seeds(t, args.seeds))
             for t in args.tasks}
    by_arm = {arm: [r for r in plan['pretraining'] if r['arm'] == arm]
              for arm in ARMS}

    def compare(entries, pretrain_seeds):
        runs.compare(args.work_dir, [
            (e['arm'], e['config'], e['iters'], e['options'])
            for e in entries], args.seeds, args.data_root, args.jobs, None,
            pretrain_seeds, tasks, args.probe_iters,
            ape={e['arm'] for e in entries},
            probe_config=entries[0]['probe_config'])

    if TEACHER in args.methods:
        compare(by_arm[TEACHER][:1], args.pretrain_seeds)
    elif by_arm[TEACHER]:
        _pretrain_only(args, by_arm[TEACHER])
    for p in args.pretrain_seeds:
        students = [r for arm in (ALONE, DISTILLED) for r in by_arm[arm]
                    if r['seed'] == p]
        if students:
            compare(students, [p])
    summary = seeds.summarise(args.work_dir)
    write_json(osp.join(args.work_dir, 'summary.json'), summary)
    return summary


def verdicts_markdown(summary: dict, design: dict) -> str:
    """``verdicts.md``: the design's families judged on the study's
    ``summary`` (:func:`~.design.judge`: Welch's t on the
    per-pretraining-run means, adjusted within each family, with each
    difference's minimum detectable difference at the family's level, so
    that no verdict is not read as no difference), under the summary's
    title and seeds."""
    judged = designs.judge(design, summary, 'summary.json')
    return (f'**{summary["title"]}** (pretraining seeds '
            f'{summary["pretrain_seeds"]}, transfer seeds '
            f'{summary["seeds"]})\n\n'
            + designs.judgement_markdown(design, judged))


def depends() -> List[str]:
    """The paths the study's numbers depend on: :data:`CODE`, every arm's
    and probe's config with its ``_base_`` chain, the probe tools."""
    configs = [*CONFIGS.values(), STUDENT_PROBE_CONFIG,
               runs.APE_PROBE_CONFIG, *(s['config'] for s in
                                        runs.PROBES.values())]
    tools = [s['tool'] for s in runs.PROBES.values()]
    return sorted({p for c in configs for p in provenance.config_sources(c)}
                  | set(tools) | set(CODE))


def dry_run(args) -> str:
    """The runs the command would make, one line each (nothing runs; the
    FLOPs are measured, or read from the work dir)."""
    flops = measured_flops(args.work_dir, keep=False)
    plan = planned(args, flops)
    lines = [f'equal compute: {plan["iters"][ALONE]} iterations alone = '
             f'{plan["iters"][DISTILLED]} distilled x '
             f'{flops[DISTILLED]:.4g} / {flops[ALONE]:.4g} training FLOPs '
             'per image']
    lines += [f'pretrain {r["arm"]} pseed{r["seed"]}: {r["config"]} '
              f'{r["iters"]} iterations, probed with {r["probe_config"]}; '
              + ' '.join(r['options']) for r in plan['pretraining']]
    lines += [f'probe {t} {a} pseed{p} seed{s}' for t, a, p, s in
              plan['probes']]
    return '\n'.join(lines)


@cli_main('distill_study.py')
def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    args = parse_args(argv)
    args.command = ' '.join(['python', 'tools/paper_tables/distill_study.py',
                             *argv])
    if args.jobs < 1:
        raise SystemExit(f'distill_study.py: --jobs must be at least 1, got '
                         f'{args.jobs}')
    method_ranking.pretrain_iters(args)  # --images a multiple of the batch
    if args.dry_run:
        print(dry_run(args))
        return
    start = time.time()
    with work_dir_lock(args.work_dir, keep_output=lambda: True):
        runs.ensure_data(args.data_root)
        runs.ensure_probe_data(args.data_root, args.tasks)
        summary = run_study(args)
        design = designs.load(osp.join(runs.ROOT, DESIGN))
        if set(args.methods) == set(ARMS):
            write_atomically(verdicts_markdown(summary, design).encode(),
                             osp.join(args.work_dir, 'verdicts.md'))
        record = provenance.record(args.command, depends())
        if args.archive:
            archive.store(args.work_dir, args.archive, record)
        write_json(osp.join(args.work_dir, 'study_run.json'), dict(
            **record, jobs=args.jobs,
            wall_minutes=round((time.time() - start) / 60, 1)))
    print(seeds.render(summary))
    print(f'this invocation: {(time.time() - start) / 60:.1f} minutes')
