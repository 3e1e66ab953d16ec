"""Frozen features of any mmpos / mmpretrain backbone.

    >>> from mmpos.apis import init_backbone, extract_features
    >>> backbone = init_backbone('configs/droppos/droppos_vit-tiny_mini.py',
    ...                          'work_dirs/droppos/iter_300.pth',
    ...                          out_indices=(1, 3))
    >>> feats = extract_features(backbone, images)   # (B, 3, H, W)
    >>> feats['cls_token'].shape, feats['patch_tokens'].shape
    (torch.Size([B, 96]), torch.Size([B, 96, H // 8, W // 8]))
    >>> [f['patch_tokens'].shape for f in feats['layers']]  # blocks 1 and 3

The backbone of ``model.backbone`` (or a top-level ``backbone``) of an
mmpretrain, mmdet or mmseg config is built with every output it has
(``out_type='raw'`` where the backbone offers it: class token and patch
tokens of each ``out_indices`` block) and loaded with
:func:`mmpos.checkpoint.load_pretrained` (training checkpoints,
``mmpos2backbone.py`` outputs with or without the ``backbone.`` prefix; no
silent random init). :func:`split_output` turns one backbone output into
``cls_token`` ``(B, C)`` (``None`` for backbones without one) and
``patch_tokens`` ``(B, C, h, w)``:

* ``(B, N, C)`` tokens (ViT ``'raw'``): the first ``num_extra_tokens`` are
  the class (and register) tokens, the rest a row-major ``h x w`` grid with
  ``h = H / patch``, ``w = W / patch``;
* ``(B, C, h, w)`` maps (``'featmap'``, CNNs, windowed / hierarchical
  backbones) are the patch tokens as they are;
* ``(B, C)`` vectors (``'cls_token'`` / ``'avg_featmap'``) are the image
  feature (``cls_token``), without patch tokens.
"""
import inspect
import logging
from typing import Dict, List, Optional, Sequence, Tuple, Union

import numpy as np
import torch
import torch.nn as nn
from mmengine.logging import MMLogger
from torch import Tensor

from mmpos.errors import BadInputError, UnsupportedModelError

# RGB, 0-255: the normalisation of the configs' data preprocessors.
IMAGENET_MEAN = (123.675, 116.28, 103.53)
IMAGENET_STD = (58.395, 57.12, 57.375)


def load_config(config):
    """``config`` (a path or :class:`mmengine.Config`) with the modules its
    ``custom_imports`` name imported (and mmpos' models and transforms
    registered)."""
    from mmengine.config import Config
    from mmengine.utils import import_modules_from_strings

    import mmpos.datasets  # noqa: F401  (registers transforms)
    import mmpos.models  # noqa: F401  (registers models)
    cfg = config if isinstance(config, Config) else Config.fromfile(config)
    if cfg.get('custom_imports'):
        import_modules_from_strings(**cfg.custom_imports)
    return cfg


def backbone_config(config) -> dict:
    """``model.backbone`` (or a top-level ``backbone``) of ``config`` (path
    or :class:`mmengine.Config`), scope prefix removed."""
    cfg = load_config(config)
    if 'model' in cfg and 'backbone' in cfg.model:
        backbone_cfg = cfg.model.backbone
    elif 'backbone' in cfg:
        backbone_cfg = cfg.backbone
    else:
        raise BadInputError(f'{getattr(cfg, "filename", config)}: has '
                            'neither model.backbone nor backbone')
    backbone_cfg = dict(backbone_cfg)
    backbone_cfg['type'] = backbone_cfg['type'].split('.')[-1]
    return backbone_cfg


def data_mean_std(config) -> Tuple[tuple, tuple]:
    """``mean``/``std`` (RGB, 0-255) of the config's data preprocessor; the
    ImageNet values when it has none."""
    cfg = load_config(config)
    pre = cfg.get('model', {}).get('data_preprocessor') or cfg.get(
        'data_preprocessor') or {}
    return (tuple(pre.get('mean', IMAGENET_MEAN)),
            tuple(pre.get('std', IMAGENET_STD)))


def build_backbone(config,
                   out_indices: Optional[Sequence[int]] = None,
                   raw_tokens: bool = False,
                   plain: bool = False) -> nn.Module:
    """The backbone of ``config`` (path or :class:`mmengine.Config`:
    ``model.backbone`` or a top-level ``backbone`` of an mmpretrain, mmdet
    or mmseg config), randomly initialised (``init_weights`` without its
    ``init_cfg``), nothing loaded.

    Args:
        out_indices: blocks / stages to output (default: the config's).
        raw_tokens: use ``out_type='raw'`` where the backbone has it, so that
            class and patch tokens both come out.
        plain: build the backbone that runs the config's weights outside its
            pretraining model (:func:`mmpos.converters.
            plain_backbone_config`: the unmasked RoPE ViT of MAE's and
            DropPos' masking ``MAERoPEViT``).
    """
    from mmpos.registry import MODELS

    backbone_cfg = backbone_config(config)
    if plain:
        from mmpos.converters import plain_backbone_config
        backbone_cfg = plain_backbone_config(backbone_cfg)
    backbone_cfg.pop('init_cfg', None)
    if out_indices is not None:
        backbone_cfg['out_indices'] = tuple(out_indices)
    cls = MODELS.get(backbone_cfg['type'])
    if cls is None:
        raise BadInputError(f'{config}: backbone type '
                            f'{backbone_cfg["type"]!r} is not registered')
    if raw_tokens and 'raw' in getattr(cls, 'OUT_TYPES', ()):
        backbone_cfg['out_type'] = 'raw'
    backbone = MODELS.build(backbone_cfg)
    init_quietly(backbone)
    return backbone


def init_quietly(module: nn.Module) -> None:
    """``module.init_weights()`` without mmengine's INFO record per
    parameter (a runner's log file keeps them; a tool's console does not
    need them)."""
    logger = MMLogger.get_current_instance()
    level = logger.level
    logger.setLevel(logging.WARNING)
    try:
        module.init_weights()
    finally:
        logger.setLevel(level)


def init_backbone(config,
                  checkpoint: Optional[str] = None,
                  device: Union[str, torch.device] = 'cpu',
                  out_indices: Optional[Sequence[int]] = None,
                  prefix: str = 'backbone.',
                  raw_tokens: bool = True) -> nn.Module:
    """:func:`build_backbone` and load ``checkpoint`` into it with
    :func:`mmpos.checkpoint.load_pretrained`.

    Args:
        config: config path or :class:`mmengine.Config` (mmpretrain, mmdet
            or mmseg; pretraining configs included).
        checkpoint: a training checkpoint (its ``prefix`` part is used), a
            bare backbone state dict or an ``mmpos2backbone.py`` output.
            ``None`` keeps the random init (logged as a warning).
        device: where the backbone goes.
        out_indices: blocks / stages to output (default: the config's).
        prefix: key prefix of the backbone in the checkpoint, e.g.
            ``'teacher.module.backbone.'`` for a DINOv2 EMA teacher.
        raw_tokens: see :func:`build_backbone`.

    Returns:
        The backbone, in eval mode, without gradients.
    """
    from mmpos.checkpoint import load_pretrained

    backbone = build_backbone(config, out_indices, raw_tokens)
    load_pretrained(backbone, checkpoint, prefix=prefix)
    backbone.to(device).requires_grad_(False)
    backbone.eval()  # some backbones' train() returns None
    return backbone


#: checkpoint meta keys that hold a config text: mmengine's training
#: checkpoints (``cfg``), ``mmpos2backbone.py`` outputs (``backbone_cfg``)
CONFIG_META_KEYS = ('cfg', 'backbone_cfg')


def checkpoint_config(checkpoint: str):
    """The config a local checkpoint records: an mmengine training
    checkpoint's ``meta['cfg']``, an ``mmpos2backbone.py`` output's
    ``meta['backbone_cfg']`` (texts) or the model config of the other
    converters' outputs (``meta['model']``), as :class:`mmengine.Config`.

    Raises:
        BadInputError: the file records no config (pass one).
    """
    from mmengine.config import Config

    from mmpos.checkpoint import read_checkpoint
    ckpt = read_checkpoint(checkpoint)
    meta = ckpt.get('meta') if isinstance(ckpt, dict) else None
    meta = meta if isinstance(meta, dict) else {}
    text = next((meta[k] for k in CONFIG_META_KEYS
                 if isinstance(meta.get(k), str)), None)
    if text is not None:
        return Config.fromstring(text, '.py')
    model = meta.get('model')
    if isinstance(model, dict) and 'type' in model:  # a converter's output
        return Config(dict(model=model) if 'backbone' in model else dict(
            backbone=model))
    raise BadInputError(
        f'{checkpoint} records no config (meta.cfg of a training '
        'checkpoint, meta.backbone_cfg of mmpos2backbone.py, meta.model of '
        'the other converters); pass the config it was trained with')


def load_backbone(checkpoint: str,
                  config=None,
                  device: Union[str, torch.device] = 'cpu',
                  out_indices: Optional[Sequence[int]] = None,
                  prefix: str = 'backbone.',
                  raw_tokens: bool = True) -> nn.Module:
    """A pretrained backbone in one line, from a local checkpoint::

        >>> from mmpos.apis import load_backbone
        >>> backbone = load_backbone('work_dirs/droppos_mini/iter_300.pth')

    The backbone of ``config`` (default: the one the checkpoint records,
    :func:`checkpoint_config`) as it runs outside its pretraining model
    (``build_backbone(..., plain=True)``: DropPos' and MAE's masking
    ``MAERoPEViT`` is the plain, unmasked RoPE ViT), with every tensor from
    the checkpoint's ``prefix`` part (strict;
    :func:`mmpos.converters.backbone_state`: a bare backbone state dict as
    it is, an ICPF positional field as the APE of the backbone's grid); in
    eval mode, without gradients. ``mmpos2timm.py`` and
    ``rope_vit2onnx.py`` export what this returns; ``hubconf.py`` offers
    it to ``torch.hub.load(<checkout>, 'backbone', checkpoint,
    source='local')``.

    Args:
        prefix: key prefix of the backbone in the checkpoint, e.g.
            ``'teacher.module.backbone.'`` for a DINOv2 EMA teacher.
        raw_tokens: see :func:`build_backbone` (else the config's
            ``out_type``).

    Raises:
        BadInputError: the checkpoint records no config and none is given.
        CheckpointMismatchError: a backbone tensor is missing, unexpected or
            of another shape (an APE table is resized to the backbone's
            grid).
    """
    from mmpos.checkpoint import load_state, read_state_dict
    from mmpos.converters import backbone_state

    if config is None:
        config = checkpoint_config(checkpoint)
    backbone = build_backbone(config, out_indices, raw_tokens, plain=True)
    state = backbone_state(read_state_dict(checkpoint), prefix,
                           getattr(backbone, 'patch_resolution', None))
    load_state(backbone, state, 'strict', f'checkpoint {checkpoint}',
               resizable=('pos_embed', ))
    backbone.to(device).requires_grad_(False)
    backbone.eval()  # some backbones' train() returns None
    return backbone


def patch_stride(backbone: nn.Module) -> Tuple[int, int]:
    """Pixels per patch ``(sh, sw)`` of a token backbone."""
    size = getattr(backbone, 'patch_size', None)
    if size is None:
        proj = getattr(getattr(backbone, 'patch_embed', None), 'projection',
                       None)
        size = getattr(proj, 'stride', None)
    if size is None:
        raise UnsupportedModelError(
            f'{type(backbone).__name__}: outputs tokens but has no '
            'patch_size or patch_embed.projection.stride')
    return (size, size) if isinstance(size, int) else tuple(size[:2])


def split_output(backbone: nn.Module, out: Tensor,
                 image_hw: Sequence[int]) -> Dict[str, Optional[Tensor]]:
    """One backbone output -> ``dict(cls_token=(B, C) or None,
    patch_tokens=(B, C, h, w) or None)`` (see the module docstring)."""
    if out.dim() == 4:
        return dict(cls_token=None, patch_tokens=out)
    if out.dim() == 2:
        return dict(cls_token=out, patch_tokens=None)
    if out.dim() != 3:
        raise UnsupportedModelError(
            f'{type(backbone).__name__}: output of shape '
            f'{tuple(out.shape)} is neither tokens nor a map')
    sh, sw = patch_stride(backbone)
    h, w = image_hw[0] // sh, image_hw[1] // sw
    extra = out.shape[1] - h * w  # class token, then register tokens
    num_cls = getattr(backbone, 'num_extra_tokens', extra)
    if extra < 0 or extra != num_cls + getattr(backbone,
                                               'num_register_tokens', 0):
        raise BadInputError(f'{type(backbone).__name__}: {out.shape[1]} '
                            f'tokens for a {h}x{w} patch grid')
    patches = out[:, extra:].reshape(out.shape[0], h, w, -1)
    return dict(cls_token=out[:, 0] if num_cls else None,
                patch_tokens=patches.permute(0, 3, 1, 2))


def forward_backbone(backbone: nn.Module, images: Tensor):
    """``backbone(images)`` as a tuple of outputs; backbones whose forward
    masks by default (mmpretrain's ``MAEViT``) are called unmasked."""
    params = inspect.signature(backbone.forward).parameters
    outs = backbone(images, mask=None) if 'mask' in params else backbone(
        images)
    return outs if isinstance(outs, (tuple, list)) else (outs, )


def extract_features(backbone: nn.Module, images: Tensor) -> dict:
    """Features of normalised ``images`` ``(B, 3, H, W)`` (no gradients).

    Returns:
        dict: ``cls_token`` ``(B, C)`` or ``None`` and ``patch_tokens``
        ``(B, C, h, w)`` or ``None`` of the last output, and ``layers``,
        one such dict per output (``out_indices`` order), each with its
        block / stage ``index``.
    """
    was_training = backbone.training
    backbone.eval()
    try:
        with torch.no_grad():
            outs = forward_backbone(backbone, images)
    finally:
        backbone.train(was_training)
    indices = getattr(backbone, 'out_indices', None)
    indices = list(indices) if isinstance(
        indices, (list, tuple)) and len(indices) == len(outs) else list(
            range(len(outs)))
    layers = [dict(split_output(backbone, out, images.shape[-2:]), index=i)
              for i, out in zip(indices, outs)]
    return dict(cls_token=layers[-1]['cls_token'],
                patch_tokens=layers[-1]['patch_tokens'], layers=layers)


def image_features(feats: dict) -> Dict[str, Tensor]:
    """Image-level vectors of :func:`extract_features`' last output:
    ``cls`` (the class token) and ``avg`` (mean of the patch tokens), each
    ``(B, C)``, where the backbone has them."""
    out = {}
    if feats['cls_token'] is not None:
        out['cls'] = feats['cls_token']
    if feats['patch_tokens'] is not None:
        out['avg'] = feats['patch_tokens'].mean(dim=(2, 3))
    return out


def preprocess(images: Sequence[np.ndarray],
               size: Union[int, Sequence[int]],
               mean: Sequence[float] = IMAGENET_MEAN,
               std: Sequence[float] = IMAGENET_STD,
               center_crop: Optional[float] = None) -> Tensor:
    """uint8 RGB arrays ``(H, W, 3)`` -> normalised ``(B, 3, h, w)``.

    ``size``: ``h = w = size`` or ``(h, w)``. Images are resized to it
    (bicubic); with ``center_crop`` (e.g. ``224 / 256`` as DINO's kNN), each
    is first resized to ``size / center_crop`` and centre-cropped.
    """
    from PIL import Image
    h, w = (size, size) if isinstance(size, int) else tuple(size)
    arrays = []
    for img in images:
        pil = Image.fromarray(np.ascontiguousarray(img[..., :3]))
        if center_crop:
            rh, rw = round(h / center_crop), round(w / center_crop)
            pil = pil.resize((rw, rh), Image.BICUBIC)
            top, left = (rh - h) // 2, (rw - w) // 2
            pil = pil.crop((left, top, left + w, top + h))
        else:
            pil = pil.resize((w, h), Image.BICUBIC)
        arrays.append(np.asarray(pil, dtype=np.float32))
    x = torch.from_numpy(np.stack(arrays)).permute(0, 3, 1, 2)
    return (x - torch.tensor(mean).view(1, 3, 1, 1)) / torch.tensor(
        std).view(1, 3, 1, 1)


def read_images(paths: Sequence[str]) -> List[np.ndarray]:
    """uint8 RGB arrays ``(H, W, 3)`` of image files (a missing file:
    FileNotFoundError naming it); with :func:`preprocess`, the one place
    mmpos' analysis reads images."""
    from PIL import Image
    return [np.asarray(Image.open(p).convert('RGB')) for p in paths]
