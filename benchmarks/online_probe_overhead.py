"""Overhead of the online kNN probe (``OnlineProbeHook``) per pretraining
iteration.

The demo's DropPos pretraining step (4-block RoPE-Mixed mini ViT, 32px,
batch 32, the mini config's optimizer step) and one probe of the hook as
the mini configs run it (48 + 16 labelled mini-classification images at
32px: frozen features, weighted kNN, RNG save / restore, logging to a
message hub) are timed interleaved (``_timing.measure``). The overhead
per iteration at probe interval ``N`` is, per round,

    ratio = (N * step + probe) / (N * step),

``_timing.ratio``'s geometric mean over the rounds with its interval,
reported for the mini configs' default ``N = 50`` (target <= 1.05) and for
``N = 10``. Nothing is asserted; :func:`run` returns the numbers.

    python benchmarks/online_probe_overhead.py [--quick] [--iters N]
        [--warmup N] [--threads N] [--device auto|cpu|cuda] [--interval N]
"""
import os.path as osp
import tempfile
from types import SimpleNamespace

import _timing
import torch

ROOT = osp.dirname(osp.dirname(osp.abspath(__file__)))
CONFIG = osp.join(ROOT, 'configs/demo/droppos_vit-tiny-rope-mixed_mini.py')
INTERVAL = 50


def build_probe(model, cls_root):
    """An ``OnlineProbeHook`` as configured in the mini configs, with a
    stand-in runner around ``model`` (its logger and message hub record)."""
    from mmengine.config import Config
    from mmengine.logging import MessageHub

    from mmpos.engine.hooks import OnlineProbeHook
    probe = Config.fromfile(CONFIG).default_hooks.online_probe
    probe = {k: v for k, v in probe.items() if k != 'type'}
    hook = OnlineProbeHook(**probe)
    runner = SimpleNamespace(
        model=model, iter=0,
        cfg=Config(dict(train_dataloader=dict(dataset=dict(
            data_root=osp.join(cls_root, 'unlabeled'))))),
        logger=SimpleNamespace(info=lambda msg: None),
        message_hub=MessageHub.get_instance('online_probe_benchmark'))
    hook.before_train(runner)
    return hook, runner


def run(quick: bool = False, iters: int = None, warmup: int = None,
        threads: int = None, device: str = 'auto', amp: str = 'auto',
        interval: int = INTERVAL) -> dict:
    """``{'settings', 'train_step': {step_ms}, 'probe': {step_ms},
    'amortised': {N: {step_ms, times_ms, time_ratio[_low, _high]}} for N
    in (interval, 10), 'time_ratio'}`` (``step + probe / N`` per round)."""
    from mmengine.config import Config
    from mmengine.logging import MMLogger
    from mmengine.registry import init_default_scope

    from mmpos_harness.mini_data import make_mini_cls
    from mmpos.registry import MODELS
    MMLogger.get_current_instance().setLevel('WARNING')
    device, amp = _timing.setup(device, amp, threads)
    iters = iters or (3 if quick else 20)
    warmup = warmup if warmup is not None else (1 if quick else 3)
    init_default_scope('mmpretrain')
    cfg = Config.fromfile(CONFIG)
    torch.manual_seed(0)
    model = MODELS.build(cfg.model)
    model.init_weights()
    model.to(device).train()
    batch = cfg.train_dataloader.batch_size
    size = cfg.img_size
    images = torch.randn(batch, 3, size, size, device=device)
    step = _timing.train_step(model, lambda: model.loss(images, []), device,
                              amp)
    with tempfile.TemporaryDirectory() as tmp:
        make_mini_cls(osp.join(tmp, 'cls'), num_train=48, num_val=16,
                      img_size=128)
        hook, runner = build_probe(model, tmp)
    stats = _timing.measure(dict(train_step=step,
                                 probe=lambda: hook.probe(runner)),
                            device, warmup, iters, memory=False)
    step, probe = stats['train_step'], stats['probe']
    # per round: the step plus 1 / N of the probe
    amortised = {n: dict(step_ms=step['step_ms'] + probe['step_ms'] / n,
                         times_ms=[s + p / n for s, p in zip(
                             step['times_ms'], probe['times_ms'])])
                 for n in (interval, 10)}
    for entry in amortised.values():
        entry.update(_timing.ratio(entry, step))
    return dict(train_step=step, probe=probe, interval=interval,
                amortised=amortised,
                time_ratio=amortised[interval]['time_ratio'],
                settings=_timing.settings(
                    device, amp, quick=quick, iters=iters, warmup=warmup,
                    batch_size=batch, image_size=size,
                    probe_images='48 + 16 at 32px'))


def summarize(result: dict) -> list:
    return [
        _timing.comparison('online_probe',
                           f'DropPos step + kNN probe every {n}', amortised,
                           'DropPos step', result['train_step'],
                           target='<= 1.05' if n == result['interval']
                           else None, probe_ms=result['probe']['step_ms'])
        for n, amortised in result['amortised'].items()
    ]


def main():
    result = _timing.run_cli(__doc__, run,
                             ('--interval', dict(type=int, default=INTERVAL)))
    print(f"train step {result['train_step']['step_ms']:.1f} ms, probe "
          f"{result['probe']['step_ms']:.1f} ms; overhead per iteration: " +
          ', '.join(f'every {n}: {_timing.format_ratio(a)}' for n, a in
                    result['amortised'].items()))


if __name__ == '__main__':
    main()
