"""Training-step time of CR2PQ against mmpretrain's MoCo v3.

Both use the same RoPE-Axial ViT student and the same two views of a batch;
MoCo v3 (mmpretrain's ``MoCoV3``, its ViT-S config's 3-layer projector and
2-layer predictor) is the two-view EMA-teacher baseline: symmetric, so two
student and two teacher passes per step. CR2PQ (default, one direction) runs
one student pass on A, one EMA-teacher pass on B, the cross-attention and
the 2-block local projector; ``CR2PQ_sym`` adds the B -> A direction (as
many backbone passes as MoCo v3). One step is ``zero_grad`` -> ``loss``
(EMA update, teacher + student) -> backward -> AdamW step. After
``warmup`` steps each, the steps are interleaved (``iters`` rounds) so load
drifts hit all alike; medians are reported with ``time_ratio`` = CR2PQ /
MoCoV3 and ``time_ratio_sym`` = CR2PQ_sym / MoCoV3, and the peak memory of
one more step with ``mem_ratio`` (see ``_timing.py``; AMP on CUDA).

Full: ViT-S/16, 2 x 224px, batch 16. ``--quick``: ViT-S width with 2
blocks, 2 x 64px, batch 4 (a smoke run). ``--image-size`` and
``--batch-size`` override either. Nothing is asserted; :func:`run` returns
the numbers.

    python benchmarks/cr2pq_step.py [--quick] [--iters N] [--warmup N]
        [--threads N] [--device auto|cpu|cuda] [--amp auto|off|bf16|fp16]
        [--batch-size N] [--image-size N]
"""
import _timing
import torch
from mmengine.logging import MessageHub

NAMES = ('MoCoV3', 'CR2PQ', 'CR2PQ_sym')


def build(name: str, quick: bool, size: int):
    import mmpos  # noqa: F401
    from mmpretrain.models import MoCoV3
    from mmpos.models.selfsup.cr2pq import CR2PQ
    arch = dict(embed_dims=384, num_layers=2 if quick else 12, num_heads=6,
                feedforward_channels=1536)
    backbone = dict(type='RoPEVisionTransformer', arch=arch, img_size=size,
                    patch_size=16, rope=dict(type='axial', theta=100.))
    torch.manual_seed(0)
    if name == 'MoCoV3':
        mlp = dict(type='NonLinearNeck', hid_channels=4096, out_channels=256,
                   with_bias=False, with_last_bn=True,
                   with_last_bn_affine=False, with_last_bias=False,
                   with_avg_pool=False)
        model = MoCoV3(
            backbone=dict(backbone, out_type='cls_token'),
            neck=dict(mlp, in_channels=384, num_layers=3),
            head=dict(type='MoCoV3Head',
                      predictor=dict(mlp, in_channels=256, num_layers=2),
                      loss=dict(type='CrossEntropyLoss', loss_weight=0.4),
                      temperature=0.2),
            base_momentum=0.01)
    else:
        model = CR2PQ(
            backbone=dict(backbone, out_type='featmap'),
            neck=dict(type='CR2PQNeck', embed_dims=384, num_heads=6,
                      out_channels=384),
            symmetric=name == 'CR2PQ_sym')
    model.init_weights()
    return model.train()


def make_batch(size: int, batch_size: int, device):
    from mmpretrain.structures import DataSample
    torch.manual_seed(1)
    views = [torch.randn(batch_size, 3, size, size, device=device)
             for _ in range(2)]
    lo = torch.rand(batch_size, 2, 2) * 0.5
    boxes = torch.cat([lo, lo + 0.1 + torch.rand_like(lo) * 0.4], -1)
    return views, [DataSample(crop_boxes=b) for b in boxes]


def run(quick: bool = False, iters: int = None, warmup: int = None,
        threads: int = None, device: str = 'auto', batch_size: int = None,
        image_size: int = None, amp: str = 'auto') -> dict:
    """Returns ``{'settings': ..., name: {step_ms, peak_mib, images_per_s}
    for MoCoV3, CR2PQ, CR2PQ_sym (the latter two with time/mem ratios to
    MoCoV3), 'time_ratio': CR2PQ / MoCoV3, 'time_ratio_sym': CR2PQ_sym /
    MoCoV3}``."""
    device, amp = _timing.setup(device, amp, threads)
    batch_size = batch_size or (4 if quick else 16)
    size = image_size or (64 if quick else 224)
    MessageHub.get_current_instance().update_info('max_iters', 10**6)
    views, samples = make_batch(size, batch_size, device)
    models = {name: build(name, quick, size) for name in NAMES}
    result = _timing.compare_train_steps(
        models, (views, samples), 'MoCoV3', device, amp, quick, iters,
        warmup, batch_size, image_size=size)
    result['time_ratio'] = result['CR2PQ']['time_ratio']
    result['time_ratio_sym'] = result['CR2PQ_sym']['time_ratio']
    return result


def summarize(result: dict) -> list:
    """Summary rows (``_timing.comparison``) of :func:`run`'s result."""
    return [
        _timing.comparison('cr2pq_step', name, result[name],
                           'mmpretrain MoCoV3 (2-view EMA)', result['MoCoV3'])
        for name in NAMES[1:]
    ]


def main():
    result = _timing.run_cli(__doc__, run, _timing.BATCH_SIZE,
                             ('--image-size', dict(type=int)))
    for name in NAMES:
        print(_timing.step_line(name, result[name], 10))
    print(f"CR2PQ / MoCoV3: {_timing.format_ratio(result['CR2PQ'])}x, "
          'CR2PQ_sym / MoCoV3: '
          f"{_timing.format_ratio(result['CR2PQ_sym'])}x; memory "
          f"{result['CR2PQ']['mem_ratio']:.3f}x, "
          f"{result['CR2PQ_sym']['mem_ratio']:.3f}x")


if __name__ == '__main__':
    main()
