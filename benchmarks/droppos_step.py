"""Training-step time of DropPos against mmpretrain's MAE, same backbone.

Both algorithms use the same ``MAERoPEViT`` encoder without RoPE (the
paper's ViT: fixed sin-cos APE, MAE's init) at the
same patch mask ratio 0.75 and the same batch; MAE adds its 8-block,
512-wide pixel decoder over all ``N`` tokens, DropPos its 2-block,
512-wide position decoder over the visible tokens, the position dropping
(gamma_pos 0.75) and, with attentive reconstruction, an extra
gradient-free encoder pass over the whole image (``affinity_source=
'full'``, the paper / authors' code). The variants ``visible`` (affinity
from the masked pass, no extra pass) and ``no_attn`` (tau = inf) are timed
too. One step is ``zero_grad`` -> ``loss`` -> backward -> AdamW step;
after ``warmup`` steps each, the steps are interleaved (``iters`` rounds)
and medians reported with ``time_ratio = DropPos / MAE``, plus the peak
memory of one more step and ``mem_ratio`` (``_timing.py`` says how; on CUDA
under AMP, bf16 by default).

Full: ViT-B/16 at 224px, batch 8. ``--quick``: ViT-S width with 2 blocks at
64px (16 patches), batch 4 (a smoke run). Nothing is asserted; :func:`run`
returns the numbers.

    python benchmarks/droppos_step.py [--quick] [--iters N] [--warmup N]
        [--threads N] [--device auto|cpu|cuda] [--amp auto|off|bf16|fp16]
        [--batch-size B]
"""
import _timing
import torch

VARIANTS = {
    'DropPos': dict(affinity_source='full', tau=0.1),
    'DropPos_visible': dict(affinity_source='visible', tau=0.1),
    'DropPos_no_attn': dict(affinity_source='full', tau=None),
}


def build(name: str, quick: bool):
    import mmpos  # noqa: F401
    from mmpretrain.models import MAE
    from mmpos.models.selfsup.droppos import DropPos
    img_size = 64 if quick else 224
    width = 384 if quick else 768
    arch = dict(embed_dims=384, num_layers=2, num_heads=6,
                feedforward_channels=1536) if quick else 'b'
    backbone = dict(type='MAERoPEViT', arch=arch, img_size=img_size,
                    patch_size=16, mask_ratio=0.75, rope=None, use_ape=True,
                    ape_type='sincos')
    num_patches = (img_size // 16)**2
    init_cfg = [dict(type='Xavier', layer='Linear', distribution='uniform'),
                dict(type='Constant', layer='LayerNorm', val=1., bias=0.)]
    torch.manual_seed(0)
    if name == 'MAE':
        model = MAE(
            backbone=backbone,
            neck=dict(type='MAEPretrainDecoder', num_patches=num_patches,
                      patch_size=16, embed_dim=width, decoder_embed_dim=512,
                      decoder_depth=8, decoder_num_heads=16),
            head=dict(type='MAEPretrainHead', norm_pix=True, patch_size=16,
                      loss=dict(type='PixelReconstructionLoss',
                                criterion='L2')),
            init_cfg=init_cfg)
    else:
        variant = VARIANTS[name]
        model = DropPos(
            backbone=backbone,
            head=dict(type='DropPosHead', num_patches=num_patches,
                      in_channels=width, embed_dims=512, num_layers=2,
                      num_heads=16, tau=variant['tau']),
            mask_ratio=0.75,
            pos_mask_ratio=0.75,
            affinity_source=variant['affinity_source'],
            init_cfg=init_cfg)
    model.init_weights()
    return model.train()


def run(quick: bool = False, iters: int = None, warmup: int = None,
        threads: int = None, device: str = 'auto', batch_size: int = None,
        amp: str = 'auto') -> dict:
    """Returns ``{'settings': ..., 'MAE': {step_ms, peak_mib, images_per_s},
    '<DropPos variant>': {..., time_ratio, mem_ratio}, 'time_ratio':
    DropPos (paper default) / MAE}``."""
    from mmengine.logging import MMLogger
    MMLogger.get_current_instance().setLevel('WARNING')  # init-weight logs
    device, amp = _timing.setup(device, amp, threads)
    batch_size = batch_size or (4 if quick else 8)
    size = 64 if quick else 224
    torch.manual_seed(1)
    images = torch.randn(batch_size, 3, size, size, device=device)
    models = {name: build(name, quick) for name in ('MAE', *VARIANTS)}
    result = _timing.compare_train_steps(
        models, (images, []), 'MAE', device, amp, quick, iters, warmup,
        batch_size, image_size=size, mask_ratio=0.75)
    result['time_ratio'] = result['DropPos']['time_ratio']
    return result


def summarize(result: dict) -> list:
    """Summary rows (``_timing.comparison``) of :func:`run`'s result."""
    # the paper's default DropPos no slower than MAE (issue 5)
    return [
        _timing.comparison('droppos_step', name, result[name],
                           'mmpretrain MAE', result['MAE'],
                           target='<= 1.0' if name == 'DropPos' else None)
        for name in VARIANTS
    ]


def main():
    result = _timing.run_cli(__doc__, run, _timing.BATCH_SIZE)
    print(_timing.step_line('MAE', result['MAE'], 17))
    for name in VARIANTS:
        print(_timing.step_line(name, result[name], 17) +
              f"  {name} / MAE: time {_timing.format_ratio(result[name])}x, "
              f"memory {result[name]['mem_ratio']:.3f}x")


if __name__ == '__main__':
    main()
