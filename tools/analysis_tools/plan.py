"""Whether a config fits a GPU, and what its schedule costs, before it is
launched: one training step of the config's real model under fake tensors
(mmpos.analysis.plan: parameters, FLOPs per image, peak memory per GPU by
kind), the largest batch per GPU that fits, and the step time and
GPU-hours at a stated model FLOP utilisation.

    python tools/analysis_tools/plan.py CONFIG [--gpus 8] [--gpu a100-80gb]
        [--batch-per-gpu B] [--mfu 0.4] [--image-size H W] [--max-batch]
"""
import argparse
import os.path as osp

from mmpos.analysis.plan import GPUS, MFU, MFU_RANGE, largest_batch, plan
from mmpos.errors import BadInputError
from mmpos.guardrails.cli import cli_main
from mmpos.guardrails.launch import load_config


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('config')
    parser.add_argument('--gpus', type=int, default=8,
                        help='GPUs of the run (an FSDP config is sharded '
                        'on them)')
    parser.add_argument('--gpu', choices=sorted(GPUS), default='a100-80gb')
    parser.add_argument('--batch-per-gpu', type=int,
                        help="default: the config's train batch size")
    parser.add_argument('--mfu', type=float,
                        help=f'model FLOP utilisation (default: {MFU}, an '
                        'assumption)')
    parser.add_argument('--image-size', type=int, nargs=2, default=(224, 224),
                        metavar=('H', 'W'),
                        help='the synthetic image fed to the pipeline '
                        '(COCO and ADE20K configs: their dataset on the '
                        "rehearsal's synthetic sample, 3 instances per "
                        'image; the notes state the input size)')
    parser.add_argument('--max-batch', action='store_true',
                        help='also the largest batch per GPU that fits')
    args = parser.parse_args(argv)
    for name in ('gpus', 'batch_per_gpu'):
        value = getattr(args, name)
        if value is not None and value < 1:
            raise BadInputError(f'--{name.replace("_", "-")} must be >= 1, '
                                f'got {value}')
    if args.mfu is not None and not 0 < args.mfu <= 1:
        raise BadInputError(f'--mfu must be in (0, 1], got {args.mfu}')
    return args


def report(p, gpu: str, gpus: int, mfu, fits_batch=None) -> str:
    gib = {k: v / 2**30 for k, v in p.peak.items()}
    precision = 'fp32' if p.amp is None else str(p.amp).replace('torch.', '')
    memory = f'{GPUS[gpu][0]:g} GiB'
    speed = f'{p.peak_tflops(gpu):g} TFLOP/s {precision} peak'
    used = mfu or MFU
    source = (f'{used:g} (given)' if mfu else
              f'{used:g} (assumed; {MFU_RANGE[0]:g}-{MFU_RANGE[1]:g} is the '
              'usual range, no GPU measurement of this config yet)')
    lines = [
        f'{osp.relpath(p.config)}: batch {p.batch} per GPU, {gpus} x {gpu} '
        f'({memory}, {speed})',
        f'parameters: {p.params / 1e6:.1f} M',
        f'FLOPs per image: forward {p.flops_fwd / 1e9:.1f} G, forward + '
        f'backward {p.flops_train / 1e9:.1f} G',
        'peak memory per GPU: ' + ', '.join(
            f'{k.lower()} {gib[k]:.2f}' for k in gib if k != 'Total'
            and gib[k] >= 0.005) + f' -> {gib["Total"]:.2f} GiB',
        f'fits {gpu}: {"yes" if p.fits(gpu) else "NO"} '
        f'({GPUS[gpu][0] - gib["Total"]:.1f} GiB left of {memory})']
    if fits_batch is not None:
        lines.append(f'largest batch per GPU that fits: {fits_batch}')
    step = p.step_seconds(gpu, used)
    hours = p.gpu_hours(gpu, gpus, used)
    lines.append(f'step: {step:.3f} s at MFU {source}')
    lines.append(f'schedule: {p.iterations(gpus)} iterations, {hours:.0f} '
                 'GPU-hours '
                 f'({hours / gpus:.1f} h on {gpus} GPUs)' if hours is not None
                 else 'schedule: iterations unknown (no max_iters, or an '
                 'epoch of an unknown dataset)')
    lines += [f'note: {n}' for n in p.notes]
    return '\n'.join(lines)


@cli_main('plan.py', errors=(NotImplementedError, ))
def main(argv=None):
    args = parse_args(argv)
    cfg = load_config(args.config)
    p = plan(cfg, args.batch_per_gpu, tuple(args.image_size), args.gpus)
    fits = largest_batch(cfg, args.gpu, p.batch, tuple(args.image_size),
                         args.gpus) if args.max_batch else None
    print(report(p, args.gpu, args.gpus, args.mfu, fits))


if __name__ == '__main__':
    main()
