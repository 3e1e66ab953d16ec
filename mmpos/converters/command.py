"""The command line shared by the converter scripts in
``tools/model_converters/``: read SRC safely, convert, check against the
model, write DST atomically. Every failure exits with status 1 and one line
``<prog>: error: <message>`` naming the file, key or value."""
import argparse
import copy
import os.path as osp
from typing import Callable, Optional, Sequence, Tuple

import torch.nn as nn

from mmpos.errors import ConversionError
from mmpos.checkpoint import (KeyReport, compare, read_checkpoint,
                              save_state_dict, state_dict_of)
from mmpos.checkpoint.read import StateDict

USER_ERRORS = (ValueError, OSError, KeyError)  # BadInputError is a ValueError


def build_model(cfg: dict) -> nn.Module:
    """A model config built in mmpretrain's registry (mmpos registered)."""
    import mmpos.models  # noqa: F401  (registers RoPEVisionTransformer)
    from mmengine.registry import DefaultScope
    from mmpretrain.registry import MODELS
    with DefaultScope.overwrite_default_scope('mmpretrain'):
        return MODELS.build(copy.deepcopy(cfg))


def check_and_save(state_dict: StateDict,
                   model,
                   out: str,
                   meta: Optional[dict] = None,
                   force: bool = False,
                   drop_unexpected: bool = False,
                   log=print) -> KeyReport:
    """Check ``state_dict`` against ``model`` (a module, or a config built
    with :func:`build_model`), print the key report and save to ``out``.

    The lenient policy applies (nothing matching or a shape that differs
    raises :class:`~mmpos.errors.CheckpointMismatchError`); missing
    keys are reported (e.g. RoPE-Mixed frequencies when an APE model is
    converted to RoPE); unexpected keys raise :class:`ConversionError`
    unless ``drop_unexpected``, which leaves them out of the file.
    """
    if osp.exists(out) and not force:
        raise FileExistsError(f'{out} exists; pass --force to overwrite it')
    if isinstance(model, dict):
        model = build_model(model)
    report = compare(state_dict, model)
    report.enforce('lenient', 'the converted state dict',
                   type(model).__name__)
    log(str(report))
    if report.unexpected:
        if not drop_unexpected:
            raise ConversionError(
                f'{len(report.unexpected)} key(s) have no place in the '
                f'model: {report.unexpected}; pass --drop-unexpected to '
                'leave them out')
        state_dict = {k: v for k, v in state_dict.items()
                      if k not in report.unexpected}
    save_state_dict(state_dict, out, meta, force)
    log(f'saved {len(state_dict)} tensors to {out}')
    return report


def vit_converter_main(
        argv: Optional[Sequence[str]], doc: str, converter: str,
        src_help: str, rope_type: dict, keys: Sequence[str],
        convert: Callable[[StateDict, argparse.Namespace],
                          Tuple[StateDict, dict]]) -> None:
    """``SRC DST [--rope-type] [--num-heads N] [--no-head]
    [--drop-unexpected] [--force]`` of a ViT converter script.

    Reads SRC with :func:`~mmpos.checkpoint.read.read_checkpoint`, takes its
    state dict (the first of ``keys``), leaves out ``head.*`` with
    ``--no-head``, maps it with ``convert(source, args) -> (state_dict,
    model config)`` and writes DST with :func:`check_and_save` (``meta``:
    source path, ``converter`` and the model config). ``rope_type`` holds
    the ``add_argument`` keywords of ``--rope-type``; ``doc``'s first
    paragraph describes the script.
    """
    parser = argparse.ArgumentParser(description=doc.split('\n\n')[0])
    parser.add_argument('src', help=src_help)
    parser.add_argument('dst', help='output checkpoint')
    parser.add_argument('--rope-type', **rope_type)
    parser.add_argument('--num-heads', type=int,
                        help='heads per block (default embed_dims // 64)')
    parser.add_argument('--no-head', action='store_true',
                        help='leave the classification head out')
    parser.add_argument('--drop-unexpected', action='store_true',
                        help='leave out keys the model has no place for')
    parser.add_argument('--force', action='store_true',
                        help='overwrite DST')
    args = parser.parse_args(argv)
    try:
        source = state_dict_of(read_checkpoint(args.src), keys,
                               f'checkpoint {args.src}')
        if args.no_head:
            source = {k: v for k, v in source.items()
                      if not k.startswith('head.')}
        state_dict, model = convert(source, args)
        check_and_save(
            state_dict, model, args.dst,
            meta=dict(source=osp.abspath(args.src), converter=converter,
                      model=model),
            force=args.force, drop_unexpected=args.drop_unexpected)
    except USER_ERRORS as err:
        parser.exit(1, f'{parser.prog}: error: {err}\n')
