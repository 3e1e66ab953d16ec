"""tools/paper_tables/run.py --dry-run --plan / --page: every run of a
table priced from the planner's plan of its config (mmpos.analysis.plan),
the run's total batch kept on the GPUs named, the table's total."""
import dataclasses
import math

import pytest
import yaml

from conftest import REPO, load_tool
from mmpos.analysis import plan as planner
from mmpos.guardrails.launch import load_config
from mmpos_harness.paper_tables.manifest import load_manifest

MINI = 'configs/rope_vit/vit-mini_rope-mixed_mini-cls.py'
MINI_FSDP = 'configs/droppos/droppos_vit-tiny_mini_fsdp.py'
VIT_S = 'configs/rope_vit/vit-small-p16_rope-mixed_8xb256-400e_in1k.py'


@pytest.fixture(scope='module')
def mini_plan():
    return planner.plan(load_config(str(REPO / MINI)), batch=4)


@pytest.fixture
def manifest(tmp_path):
    data = {
        'pending': [],
        'metrics': {'top1': {'key': 'accuracy/top1'}},
        'runs': {
            'pre': {'config': str(REPO / VIT_S), 'epochs': 400,
                    'views': [[1, 224]], 'gpus': 16},
            'pre_200e': {'config': str(REPO / VIT_S), 'epochs': 200,
                         'views': [[1, 224]],
                         'cfg_options': {'train_cfg.max_epochs': 200}},
            'ft': {'config': str(REPO / MINI), 'init_from': 'pre'},
            'ft_tta': {'config': str(REPO / MINI), 'test_of': 'ft',
                       'tta': True},
            'sharded': {'config': str(REPO / MINI_FSDP)},
        },
        'tables': [{
            'id': 't1', 'paper': 'Fake', 'title': 'fabricated',
            'source': 'none', 'info': ['method'],
            'columns': [{'metric': 'top1', 'run': 'a'},
                        {'metric': 'top1', 'run': 'b'}],
            'rows': [{'method': 'x', 'runs': {'a': 'ft_tta',
                                              'b': 'pre_200e'},
                      'paper': [1.0, 2.0]}],
        }],
    }
    path = tmp_path / 'manifest.yaml'
    path.write_text(yaml.safe_dump(data))
    return load_manifest(str(path))


def test_runs_are_priced_at_their_total_batch(manifest, mini_plan):
    """The cache maps a config to its plan: ViT-S's schedule (400 / 200
    epochs of ImageNet at batch 256 per GPU) priced with the mini model's
    plan, so that the arithmetic is checked without planning a ViT-S."""
    tool = load_tool('run', 'paper_tables')
    cache = {str(REPO / VIT_S): mini_plan,
             str(REPO / MINI): 'NotImplementedError: cannot plan'}
    table = manifest.table('t1')
    runs = tool.table_runs(manifest, table)
    assert [r.id for r in runs] == ['pre', 'ft', 'ft_tta', 'pre_200e']
    priced = tool.price(manifest, runs, 'a100-80gb', 8, cache=cache)
    pre = priced['pre']
    # 16 GPUs x 256 of the recipe on 8 GPUs: 512 per GPU; the parameters,
    # gradients and optimizer state stay, the activations scale
    assert pre.plan.batch == 512
    for kind in planner.FIXED_KINDS:
        assert pre.plan.peak.get(kind) == mini_plan.peak.get(kind)
    assert pre.plan.peak['ACT'] == pytest.approx(
        mini_plan.peak['ACT'] * 512 / 4)
    iters = math.ceil(1281167 / (16 * 256)) * 400
    assert pre.hours == pytest.approx(
        mini_plan.flops_train * 16 * 256 * iters / (19.5e12 * 0.4) / 3600)
    # cfg_options change the schedule: half the epochs, half the hours at
    # the same total batch (8 x 256)
    assert priced['pre_200e'].hours == pytest.approx(
        mini_plan.flops_train * 8 * 256 * math.ceil(1281167 / 2048) * 200 /
        (19.5e12 * 0.4) / 3600)
    assert priced['ft'].error.startswith('NotImplementedError')
    assert priced['ft_tta'].hours is None  # a test costs no training
    lines = tool.price_lines(manifest, [table], 'a100-80gb', 8, cache=cache)
    total = pre.hours + priced['pre_200e'].hours
    assert lines[-1] == f'  total: {total:,.0f} GPU-h + 1 run(s) not priced'
    assert 'MFU 0.4 (assumed; 0.3-0.5' in lines[0]
    page = tool.page(manifest, [table], cache)
    assert '| t1 | ' in page and 'not planned: NotImplementedError' in page


def test_plan_goes_with_dry_run():
    tool = load_tool('run', 'paper_tables')
    with pytest.raises(SystemExit):
        tool.parse_args(['--plan'])
    with pytest.raises(SystemExit):
        tool.parse_args(['--dry-run', '--plan', '--gpu', 'tpu'])


def test_a_run_that_does_not_fit_names_the_batch_that_would(manifest,
                                                            mini_plan):
    """The largest batch per GPU that fits, by the linear model the runs
    are priced with: it fits, one image more does not."""
    tool = load_tool('run', 'paper_tables')
    for gpu in ('a100-40gb', 'h100-80gb'):
        batch = tool.fitting_batch(mini_plan, gpu)
        assert batch > mini_plan.batch
        assert planner.at_batch(mini_plan, batch).fits(gpu)
        assert not planner.at_batch(mini_plan, batch + 1).fits(gpu)
    item = tool.Priced(manifest.runs['ft'], planner.at_batch(
        mini_plan, batch + 1), hours=1.0)
    assert tool._cells(item, 'h100-80gb')[4] == \
        f'DOES NOT FIT ({batch}/GPU would)'


def test_beside_and_fsdp(manifest, mini_plan):
    """An epoch costs the same FLOPs whatever the schedule's length and the
    total batch (``pre``: 400 epochs at 16 x 256, ``pre_200e``: 200 at
    8 x 256); an FSDP config's run takes its plan sharded on the GPUs it is
    priced on."""
    tool = load_tool('run', 'paper_tables')
    cache = {str(REPO / VIT_S): mini_plan, (str(REPO / MINI_FSDP), 8):
             dataclasses.replace(mini_plan, world_size=8)}
    runs = [manifest.runs[r] for r in ('pre', 'pre_200e', 'sharded')]
    priced = tool.price(manifest, runs, 'a100-80gb', 8, cache=cache)
    budget = tool.Budget('short', 'text', (
        ('hours', 'pre', 'pre_200e', 1.3), ('hours', 'pre', 'missing', 2)))
    assert tool.beside(budget, priced) == (
        'Ours, planned: an epoch of `pre` takes 1.00x the FLOPs of one of '
        '`pre_200e` (the paper: 1.3x the time).')
    assert not priced['pre'].fsdp and priced['sharded'].fsdp
    assert tool._cells(priced['sharded'], 'a100-80gb')[4].endswith(
        '(FSDP, sharded on 8)')


def test_a_peak_without_activations_is_planned_at_the_run_batch(
        manifest, mini_plan):
    """A plan whose peak is the optimizer step's (parameters, gradients and
    optimizer state, no activations) says nothing of the activations at a
    larger batch: ``pre`` (512 per GPU) takes the plan at its own batch."""
    tool = load_tool('run', 'paper_tables')
    peak = {k: mini_plan.peak.get(k, 0.) for k in planner.FIXED_KINDS}
    at_update = dataclasses.replace(mini_plan, peak={
        **peak, 'ACT': 0., 'TEMP': 0., 'Total': sum(peak.values())})
    own = planner.at_batch(mini_plan, 512)
    cache = {str(REPO / VIT_S): at_update, (str(REPO / VIT_S), 512): own}
    priced = tool.price(manifest, [manifest.runs['pre']], 'a100-80gb', 8,
                        cache=cache)
    assert priced['pre'].plan.peak == own.peak
