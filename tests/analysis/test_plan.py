"""mmpos.analysis.plan (tools/analysis_tools/plan.py): a training step of
a config's real model under fake tensors. Its FLOPs against the analytic
count of a ViT and its peak memory against a real step's on this CPU
(allocator events of torch's profiler, as benchmarks/_timing.py measures
them); the tool's report and bad input."""
import copy

import pytest
import torch

from conftest import REPO, load_tool
from mmpos.analysis import plan as planner

VIT_S = 'configs/rope_vit/vit-small-p16_rope-mixed_8xb256-400e_in1k.py'


@pytest.fixture(scope='module')
def vit_s():
    from mmengine.config import Config
    torch.manual_seed(0)
    return planner.plan(Config.fromfile(REPO / VIT_S), batch=2)


def test_vit_flops_are_the_analytic_count(vit_s):
    """Forward FLOPs of ViT-S/16 at 224: 2 x weights x tokens for the
    blocks' and the patch embedding's matrices, the attention's two
    products 2 x 2 x N^2 x C per block, the head on the class token."""
    c, depth, n, patches = 384, 12, 197, 196
    blocks = 2 * n * 12 * c * c * depth
    attention = 4 * n * n * c * depth
    embed = 2 * patches * 3 * 16 * 16 * c
    head = 2 * c * 1000
    analytic = blocks + attention + embed + head
    assert vit_s.flops_fwd == pytest.approx(analytic, rel=0.02)
    # the backward costs about two forwards (the input needs no gradient;
    # flash attention's backward recomputes its products: 2.5 forwards)
    assert 2.8 < vit_s.flops_train / vit_s.flops_fwd < 3.1
    assert vit_s.params == pytest.approx(22.0e6, rel=0.02)


def _measured_peak(config, batch):
    """Bytes a real training step of ``config`` holds at its peak: what
    exists before the second step (parameters, buffers, optimizer state)
    and the profiler's peak of the step's own allocations. The step is the
    planner's: the config's optimizer without loss scaling, autocast in its
    AMP dtype, EMA teachers set from their students."""
    from mmengine.optim import build_optim_wrapper
    from mmengine.registry import MODELS, init_default_scope
    from torch.profiler import ProfilerActivity, profile

    from mmpos.guardrails.launch import load_config
    from mmpos.models.utils import update_ema
    cfg = load_config(str(REPO / config))
    init_default_scope(cfg.default_scope)
    model_cfg = copy.deepcopy(cfg.model)
    if cfg.get('data_preprocessor'):
        model_cfg.setdefault('data_preprocessor', cfg.data_preprocessor)
    model = MODELS.build(model_cfg)
    wrapper_cfg, dtype = planner.plain_optim_wrapper(cfg)
    wrapper = build_optim_wrapper(model, wrapper_cfg)
    for ema, source in getattr(model, 'ema_teachers', list)():
        update_ema(ema, source, model)
    item = planner._pipeline_item(cfg, (224, 224))
    data = model.data_preprocessor(planner._collate(cfg, item, batch), True)

    def step():
        with torch.autocast('cpu', dtype=dtype, enabled=dtype is not None):
            losses = model(**data, mode='loss')
            loss = model.parse_losses(losses)[0]
        loss.backward()
        wrapper.step()
        wrapper.zero_grad()

    step()  # the optimizer's state exists from the second step on
    before = sum(t.numel() * t.element_size() for t in [
        *model.parameters(), *model.buffers(),
        *(v for s in wrapper.optimizer.state.values() for v in s.values()
          if isinstance(v, torch.Tensor))])
    with profile(activities=[ProfilerActivity.CPU],
                 profile_memory=True) as prof:
        step()
    total = peak = 0
    for _, nbytes in sorted((e.start_ns(), e.nbytes())
                            for e in prof.profiler.kineto_results.events()
                            if e.name() == '[memory]'):
        total += nbytes
        peak = max(peak, total)
    return before + peak


def test_predicted_peak_is_the_measured_one_within_10_percent(vit_s):
    measured = _measured_peak(VIT_S, 2)
    assert vit_s.peak['Total'] == pytest.approx(measured, rel=0.10)
    assert vit_s.peak['PARAM'] == pytest.approx(4 * vit_s.params, rel=0.01)
    assert vit_s.peak['OPT'] == pytest.approx(8 * vit_s.params, rel=0.01)


def test_report_fits_and_prices_the_schedule(vit_s):
    tool = load_tool('plan')
    text = tool.report(vit_s, 'a100-80gb', 8, None)
    assert 'fits a100-80gb: yes' in text
    assert 'MFU 0.4 (assumed; 0.3-0.5' in text
    # 400 epochs of ImageNet at 2 images on each of 8 GPUs
    assert vit_s.iterations(8) == 80073 * 400
    assert vit_s.gpu_hours('a100-80gb', 8) == pytest.approx(
        vit_s.flops_train * 2 / (19.5e12 * 0.4) * 80073 * 400 * 8 / 3600)
    assert vit_s.amp is None  # the config trains in fp32: the fp32 peak
    for argv, match in ((['x.py', '--gpus', '0'], '--gpus must be >= 1'),
                        (['x.py', '--mfu', '2'], r'--mfu must be in \(0, 1\]')):
        with pytest.raises(SystemExit, match=f'plan.py: error: {match}'):
            tool.main(argv)


@pytest.mark.parametrize('config', [
    'configs/droppos/droppos_vit-tiny_mini.py',  # sigma.item(), loss guard
    'configs/dinov2/dinov2_vit-tiny_mini.py',  # masking loop, mask indexing
])
def test_a_step_that_reads_values_is_planned_with_stand_ins(config):
    """Self-supervised steps read tensor values (module docstring): with
    the stand-ins' answers (largest data-dependent sizes) the predicted
    peak is the real step's within 10 %, never below it by more than 1 %."""
    from mmpos.guardrails.launch import load_config
    torch.manual_seed(0)
    plan = planner.plan(load_config(str(REPO / config)), batch=2)
    assert any('answered by stand-ins' in n for n in plan.notes)
    measured = _measured_peak(config, 2)
    assert measured * 0.99 <= plan.peak['Total'] <= measured * 1.10
