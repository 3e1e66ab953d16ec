"""Training-step time of QB-Heat against MAE-style full-image encoding of the
same Mobile-Former.

QB-Heat encodes only the unmasked quarter-block (1/4 of the pixels) and
predicts the other quarters with 1x1 linear models. A CNN cannot drop
MAE's random patches, so the MAE-style baseline ("full") encodes the whole
image with the 75% masked 16x16 patches zeroed, projects its map to the
decoder width and decodes it with the *same* decoder and loss (masked
patches only). Both use the same encoder, decoder, batch and optimizer, so
the ratio isolates encoder cost (quarter vs. full image) plus the predictor.

One step: ``zero_grad`` -> loss -> backward -> AdamW step. After ``warmup``
steps each, the two are interleaved ``iters`` times; medians are reported
with ``time_ratio = QB-Heat / full``. The encoder alone (forward +
backward of the Mobile-Former on the quarter vs. the whole image) is timed
the same way: ``encoder_ratio``. With the paper's 6 x 512 decoder on all
positions the decoder dominates both steps, so ``time_ratio`` stays near 1
while ``encoder_ratio`` shows the quarter-only encoding (ideally ~1/4).
Each entry also has the peak memory of one more step (see ``_timing.py``;
AMP on CUDA).

Full: MF-285M, 256^2 images, batch 32, decoder 6 x 512 (the paper's
setting). ``--quick``: MF-285M at 128^2, batch 4, decoder 1 x 128 (a smoke
run). Nothing is asserted; :func:`run` returns the numbers.

    python benchmarks/qbheat_step.py [--quick] [--iters N] [--warmup N]
        [--threads N] [--device auto|cpu|cuda] [--amp auto|off|bf16|fp16]
        [--batch-size N] [--arch 285m|1.0g|3.7g]
"""
import argparse
import json

import _timing
import torch
import torch.nn as nn


class FullImageMAE(nn.Module):
    """MAE-style baseline for a CNN: random 75% patch masking by zeroing,
    full-image encoding, 1x1 projection, QB-Heat's decoder and loss."""

    def __init__(self, backbone, head, in_channels, embed_dims,
                 mask_ratio=0.75):
        super().__init__()
        self.backbone, self.head = backbone, head
        self.proj = nn.Conv2d(in_channels, embed_dims, 1)
        self.mask_ratio = mask_ratio

    def loss(self, images, data_samples=None):
        B, _, H, W = images.shape
        p = self.head.patch_size
        h, w = H // p, W // p
        noise = torch.rand(B, h * w, device=images.device)
        rank = noise.argsort(1).argsort(1)
        mask = (rank < int(self.mask_ratio * h * w)).view(B, h, w)
        keep = (~mask).repeat_interleave(p, 1).repeat_interleave(p, 2)
        feats = self.backbone(images * keep[:, None])[-1]
        return dict(loss=self.head.loss(self.proj(feats), images, mask))


def build(name: str, arch: str, quick: bool):
    from mmpos.models.backbones.mobile_former import MobileFormer
    from mmpos.models.selfsup.qbheat import QBHeat, QBHeatHead
    dims, layers, heads = (128, 1, 4) if quick else (512, 6, 16)
    torch.manual_seed(0)
    backbone = MobileFormer(arch)
    head = QBHeatHead(
        loss=dict(type='PixelReconstructionLoss', criterion='L2'),
        in_channels=dims, num_layers=layers, num_heads=heads, norm_pix=True)
    backbone.init_weights()
    head.init_weights()
    channels = backbone.stage_channels[-1]
    if name == 'QB-Heat':
        model = QBHeat(backbone=backbone, head=head, neck=dict(
            type='QBHeatPredictor', in_channels=channels, embed_dims=dims))
    else:
        model = FullImageMAE(backbone, head, channels, dims)
    return model.train()


def run(quick: bool = False, iters: int = None, warmup: int = None,
        threads: int = None, device: str = 'auto', batch_size: int = None,
        arch: str = '285m', amp: str = 'auto') -> dict:
    """Returns ``{'settings': ..., 'QB-Heat', 'full', 'encoder_quarter',
    'encoder_full': {step_ms, times_ms, peak_mib, images_per_s},
    'time_ratio': QB-Heat / full, 'encoder_ratio': quarter / full}`` (each
    ratio with ``_low`` / ``_high``, ``_timing.ratio``)."""
    from mmpos.models.backbones.mobile_former import MobileFormer
    device, amp = _timing.setup(device, amp, threads)
    iters = iters or (3 if quick else 10)
    warmup = warmup if warmup is not None else (1 if quick else 2)
    batch_size = batch_size or (4 if quick else 32)
    size = 128 if quick else 256
    images = torch.randn(batch_size, 3, size, size, device=device)
    steps = {}
    for name in ('QB-Heat', 'full'):
        model = build(name, arch, quick).to(device)
        steps[name] = _timing.train_step(
            model, lambda m=model: m.loss(images, None), device, amp)
    half = images[..., :size // 2, :size // 2].contiguous()
    for name, x in (('encoder_quarter', half), ('encoder_full', images)):
        model = MobileFormer(arch).to(device).train()
        steps[name] = _timing.train_step(
            model, lambda m=model, x=x: m(x)[-1].float().mean(), device, amp)
    result = _timing.measure(steps, device, warmup, iters, batch_size)
    result['settings'] = _timing.settings(
        device, amp, quick=quick, arch=arch, image_size=size, iters=iters,
        warmup=warmup, batch_size=batch_size)
    result.update(_timing.ratio(result['QB-Heat'], result['full']))
    result.update(_timing.ratio(result['encoder_quarter'],
                                result['encoder_full'], 'encoder_ratio'))
    return result


def summarize(result: dict) -> list:
    """Summary rows (``_timing.comparison``) of :func:`run`'s result."""
    return [
        _timing.comparison('qbheat_step', 'QB-Heat', result['QB-Heat'],
                           'MAE-style full-image encoding', result['full']),
        _timing.comparison('qbheat_step', 'encoder on the quarter',
                           result['encoder_quarter'],
                           'encoder on the full image',
                           result['encoder_full'], target='~0.25'),
    ]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--quick', action='store_true')
    parser.add_argument('--batch-size', type=int)
    parser.add_argument('--arch', default='285m',
                        choices=['285m', '1.0g', '3.7g'])
    _timing.add_common_args(parser)
    args = _timing.parse_args(parser)
    result = run(args.quick, args.iters, args.warmup, args.threads,
                 args.device, args.batch_size, args.arch, args.amp)
    print(json.dumps(result, indent=2))
    print('QB-Heat / full-image step time: '
          f"{_timing.format_ratio(result)}; encoder quarter / full: "
          f"{_timing.format_ratio(result, 'encoder_ratio')}")


if __name__ == '__main__':
    main()
