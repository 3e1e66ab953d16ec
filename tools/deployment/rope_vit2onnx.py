"""Export a ``RoPEVisionTransformer`` backbone to ONNX for one input size.

    python tools/deployment/rope_vit2onnx.py CHECKPOINT OUT.onnx --size H W
        [--config CONFIG] [--out-type raw|featmap|cls_token|avg_featmap]
        [--batch-size B] [--dynamic-batch] [--opset N] [--fp16]
        [--dynamic] [--check] [--force]

CHECKPOINT is a training checkpoint, an ``mmpos2backbone.py`` output or a
converter's output; the backbone is what ``mmpos.apis.load_backbone``
returns for it: built from ``--config`` (``model.backbone`` of any
mmpretrain / mmdet / mmseg / pretraining config), else from the config the
checkpoint records (``meta.cfg``, ``meta.backbone_cfg`` or the converters'
``meta['model']``), as it runs outside its pretraining model (DropPos'
and MAE's masking ``MAERoPEViT`` is the plain, unmasked RoPE ViT; an ICPF
positional field is the APE), every tensor loaded from the checkpoint's
``backbone.*`` keys (or bare keys). Any RoPE scheme (axial,
mixed, DINOv3 periods / frames / rotate-half), register tokens, APE and
ViTDet window attention (``window_size``, ``global_attn_indexes``) work;
another backbone type is refused naming it.

Positions are frozen for ``H x W`` before tracing
(:func:`freeze_positions`): the backbone's position module computes every
block's table once (:meth:`RoPEVisionTransformer.freeze_positions`, the
real cos/sin path) and the traced graph holds them as constants, and
the APE table is resized once to the patch grid, so the graph has no
coordinate grids, caches, trigonometry or resizing: only matmuls,
elementwise ops, slices and concatenations (the RoPE pair swap uses
strided slices, not ``flip``), plus, for window attention, the padding to a
multiple of the window and static reshapes / transposes (window blocks
hold one image's per-window tables). The file therefore serves exactly
one input size; export once per size, or, for a linear-angle RoPE
without APE or windows, pass ``--dynamic`` (one file for every size: the
tables are computed in the graph from the input's grid, without control
flow; :func:`check_dynamic`). The batch is ``--batch-size`` (default 1),
or any batch with ``--dynamic-batch``. ``--fp16`` writes fp16 weights,
input and output with fp32 position tables and rotation. ``--check`` runs
the file with onnxruntime on a random input and prints the largest
difference to torch. An existing OUT is kept unless ``--force``. Errors
exit with status 1 and one line.
"""
import argparse
import os.path as osp

import torch

from mmpos.checkpoint import atomic_path
from mmpos.errors import BadInputError, ConversionError
from mmpos.guardrails.cli import cli_main


def freeze_positions(backbone, size):
    """Fix ``backbone``'s positions for ``size = (H, W)`` pixels in place.

    Eval mode (no coordinate augmentation); the position tables the live
    model uses at that size are computed once and frozen
    (:meth:`~mmpos.models.backbones.RoPEVisionTransformer.freeze_positions`:
    class and register tokens unrotated; for a window-attention block, the
    tables of one image's windows of the padded grid, padding tokens as the
    live block rotates them); a ``pos_embed`` is
    resized to the patch grid (the backbone's own ``interpolate_mode``) and
    ``patch_resolution`` set to it, so no resize is traced. Outputs are
    unchanged at that size. Returns ``backbone``.
    """
    backbone.eval()
    ph, pw = backbone.patch_size
    if size[0] % ph or size[1] % pw:
        raise BadInputError(f'input size {size[0]}x{size[1]} is not '
                            f'divisible by the patch size {ph}x{pw}')
    hw = (size[0] // ph, size[1] // pw)
    backbone.freeze_positions(
        hw, device=backbone.patch_embed.projection.weight.device)
    with torch.no_grad():
        if backbone.pos_embed is not None:
            from mmpretrain.models.utils import resize_pos_embed
            backbone.pos_embed = torch.nn.Parameter(resize_pos_embed(
                backbone.pos_embed, backbone.patch_resolution, hw,
                backbone.interpolate_mode, backbone.num_extra_tokens),
                requires_grad=False)
            backbone.patch_resolution = hw
    return backbone


def load_backbone(checkpoint, config=None, out_type=None):
    """:func:`mmpos.apis.load_backbone` of ``checkpoint`` and ``config``
    (default: the config the checkpoint records), the config's
    ``out_type`` unless ``out_type``: the plain backbone that runs the
    weights outside their pretraining model (DropPos' and MAE's masking
    ``MAERoPEViT`` unmasked), every tensor from the checkpoint.

    Raises:
        ConversionError: the backbone is not a ``RoPEVisionTransformer``
            (named with the config it comes from).
    """
    from mmengine.config import Config

    from mmpos.apis import checkpoint_config
    from mmpos.apis import load_backbone as load
    from mmpos.apis.features import backbone_config
    from mmpos.converters import plain_backbone_config
    source = config or f'the config {checkpoint} records'
    cfg = plain_backbone_config(
        backbone_config(config or checkpoint_config(checkpoint)))
    if cfg['type'] != 'RoPEVisionTransformer':
        raise ConversionError(
            f'{source} has a {cfg["type"]} backbone; only '
            'RoPEVisionTransformer backbones export to ONNX here')
    if out_type:
        cfg['out_type'] = out_type
    return load(checkpoint, Config(dict(backbone=cfg)), raw_tokens=False)


def check_dynamic(backbone):
    """Raise unless ``backbone`` exports with a free input size: a
    linear-angle RoPE (axial, mixed, DINOv3, spiral) whose tables are
    computed in the graph from the input's grid, without frequency
    scaling (its factor depends on the grid), APE (resized per size) or
    window attention (padding per size)."""
    from mmpos_positions.linear import LinearAngleRoPE, STRINGRoPE
    rope = backbone.rope
    reason = (
        'it has no RoPE' if rope is None else
        f'{type(rope).__name__} is not a linear-angle RoPE (axial, mixed, '
        'DINOv3, spiral)' if not isinstance(rope, LinearAngleRoPE)
        or isinstance(rope, STRINGRoPE) else
        'freq_scaling depends on the grid' if rope.freq_scaling else
        'use_ape=True (the APE table is resized per size)'
        if backbone.pos_embed is not None else
        'window_size > 0 (the grid is padded per size)'
        if backbone.window_size else None)
    if reason:
        raise BadInputError(f'--dynamic: {reason}; export it for one size '
                            'instead (without --dynamic)')


def export(backbone, size, out, batch_size=1, opset=18, fp16=False,
           dynamic=False, dynamic_batch=False):
    """Write ``out`` (atomic rename) for ``size = (H, W)`` inputs: positions
    frozen for that size (:func:`freeze_positions`), or, with ``dynamic``,
    any ``H x W`` multiple of the patch (:func:`check_dynamic`: every
    table computed in the graph from the input's grid: ``Range``, ``Mul``,
    ``Sin`` / ``Cos``; no control flow). The batch is ``batch_size``, or,
    with ``dynamic_batch``, any batch (a symbolic axis 0: the graph reads
    it with ``Shape``; the example input then has at least 2 images, as
    ``torch.export`` fixes an axis of size 1). ``fp16``: fp16 weights,
    input and output; the position tables and the rotation stay fp32
    (``Cast`` around them, as under autocast). Input ``images`` ``(B, C,
    H, W)``; outputs ``out0..`` (one per ``out_indices``). Returns the
    example input."""
    shapes = {}
    if dynamic:
        check_dynamic(backbone.eval())
        ph, pw = backbone.patch_size
        shapes = {2: torch.export.Dim('rows', min=1, max=1024) * ph,
                  3: torch.export.Dim('cols', min=1, max=1024) * pw}
    else:
        freeze_positions(backbone, size)
    if dynamic_batch:
        shapes[0] = torch.export.Dim('batch', min=1, max=4096)
        batch_size = max(batch_size, 2)
    if fp16:
        backbone.half()
    img = torch.randn(batch_size, backbone.patch_embed.projection.in_channels,
                      *size, dtype=torch.float16 if fp16 else torch.float32)
    names = [f'out{i}' for i in range(len(backbone.out_indices))]
    with atomic_path(out) as tmp:  # the user's umask, never a partial file
        torch.onnx.export(backbone, (img, ), tmp, input_names=['images'],
                          output_names=names, opset_version=opset,
                          dynamo=True, external_data=False,
                          dynamic_shapes={'x': shapes} if shapes else None)
    return img


def onnx_max_error(backbone, path, img):
    """Largest absolute difference between onnxruntime and torch on
    ``img`` over all outputs."""
    import onnxruntime as ort
    session = ort.InferenceSession(path, providers=['CPUExecutionProvider'])
    ours = session.run(None, {'images': img.numpy()})
    with torch.no_grad():
        ref = backbone(img)
    return max((torch.from_numpy(o) - r).abs().max().item()
               for o, r in zip(ours, ref))


@cli_main('rope_vit2onnx.py')
def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('checkpoint')
    parser.add_argument('out', help='ONNX file to write')
    parser.add_argument('--size', type=int, nargs=2, required=True,
                        metavar=('H', 'W'), help='input size in pixels')
    parser.add_argument('--config', help='config with the backbone')
    parser.add_argument('--out-type',
                        choices=['raw', 'featmap', 'cls_token',
                                 'avg_featmap'],
                        help='override the backbone out_type')
    parser.add_argument('--batch-size', type=int, default=1,
                        help='images per call (default 1; the example '
                        'batch with --dynamic-batch)')
    parser.add_argument('--dynamic-batch', action='store_true',
                        help='any batch size (a symbolic batch axis)')
    parser.add_argument('--opset', type=int, default=18)
    parser.add_argument('--fp16', action='store_true',
                        help='fp16 weights, input and output (positions '
                        'in fp32)')
    parser.add_argument('--dynamic', action='store_true',
                        help='any input size (multiples of the patch; '
                        'linear-angle RoPE without APE or windows)')
    parser.add_argument('--check', action='store_true',
                        help='compare onnxruntime with torch')
    parser.add_argument('--force', action='store_true',
                        help='overwrite OUT')
    args = parser.parse_args(argv)
    if osp.exists(args.out) and not args.force:
        raise FileExistsError(f'{args.out} exists; pass --force to '
                              'overwrite it')
    backbone = load_backbone(args.checkpoint, args.config, args.out_type)
    img = export(backbone, tuple(args.size), args.out, args.batch_size,
                 args.opset, args.fp16, args.dynamic, args.dynamic_batch)
    sizes = ('any multiple of the patch' if args.dynamic else
             f'{args.size[0]}x{args.size[1]}')
    batch = 'any batch' if args.dynamic_batch else f'batch {len(img)}'
    print(f'wrote {args.out} for {sizes} inputs, {batch}')
    if args.check:
        err = onnx_max_error(backbone, args.out, img)
        print(f'onnxruntime vs torch: max abs difference {err:.3g}')


if __name__ == '__main__':
    main()
