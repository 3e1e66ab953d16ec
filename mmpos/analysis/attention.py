"""Attention probabilities of a :class:`RoPEVisionTransformer`, non-invasively.

The backbone's attention uses ``F.scaled_dot_product_attention`` and never
materialises the softmax. :class:`AttentionRecorder` registers forward hooks
on every ``layers[i].attn`` (:class:`RoPEAttention`); each hook takes the
layer input ``x`` and the ``rope`` / ``hw`` / ``key_mask`` keyword
arguments of that call and recomputes, with the module's own queries, keys
and bias (:func:`attention_probs`),

    A = softmax(q k^T / sqrt(D) + bias)     (RoPE-ViT Eq. 4, RoPE'd q, k)

of shape ``(B, heads, N, N)`` (``N`` includes the class token). The forward
pass itself is untouched, so the recorded maps are exactly those the model
uses (attention dropout aside, which is off in eval mode).
"""
import csv
import io
import json
import os
import os.path as osp
from typing import List, Optional, Sequence

import torch
import torch.nn.functional as F
from torch import Tensor

from mmpos.apis.features import init_backbone, preprocess, read_images
from mmpos.checkpoint import write_atomically
from mmpos.errors import BadInputError

IMAGE_EXTS = ('.jpg', '.jpeg', '.png', '.bmp')


def attention_probs(attn_module, x: Tensor, rope=None, hw=None,
                    key_mask: Optional[Tensor] = None) -> Tensor:
    """Softmax attention ``(B, heads, N, N)`` of a ``RoPEAttention`` on its
    input ``x`` (B, N, C), in fp32: ``softmax(q k^T / sqrt(D) + bias)``
    with the queries, keys and bias of the module's own forward
    (:meth:`~mmpos.models.layers.RoPEAttention.attention_inputs`: the
    block's position table ``rope``, its bias, e.g. LookHere's or PaPE's,
    the relative position bias of the grid ``hw`` and the padding
    ``key_mask``)."""
    q, k, _, bias = attn_module.attention_inputs(x, rope, hw, key_mask)
    q, k = q.float(), k.float()
    logits = q @ k.transpose(-2, -1) * q.shape[-1]**-0.5
    if bias is not None:
        logits = (logits.masked_fill(~bias, float('-inf'))
                  if bias.dtype == torch.bool else logits + bias.float())
    return torch.softmax(logits, dim=-1)


class AttentionRecorder:
    """Context manager recording the attention maps of every block.

    >>> with AttentionRecorder(backbone) as rec:
    ...     backbone(images)
    >>> rec.maps  # list (one per block) of (B, heads, N, N) CPU tensors
    """

    def __init__(self, backbone):
        self.modules = [layer.attn for layer in backbone.layers]
        self.maps: List[Tensor] = []
        self._handles = []

    def _hook(self, module, args, kwargs, output):
        x = args[0] if args else kwargs['x']
        with torch.no_grad():
            self.maps.append(attention_probs(
                module, x, kwargs.get('rope'), kwargs.get('hw'),
                kwargs.get('key_mask')).cpu())

    def __enter__(self):
        self.maps = []
        self._handles = [
            m.register_forward_hook(self._hook, with_kwargs=True)
            for m in self.modules
        ]
        return self

    def __exit__(self, *exc):
        for handle in self._handles:
            handle.remove()
        self._handles = []


@torch.no_grad()
def record_attention(backbone, images: Tensor) -> List[Tensor]:
    """Run ``backbone`` (eval mode) on ``images`` (B, 3, H, W) and return the
    per-block attention maps ``(B, heads, N, N)``."""
    was_training = backbone.training
    backbone.eval()
    with AttentionRecorder(backbone) as rec:
        backbone(images)
    backbone.train(was_training)
    return rec.maps


def list_images(folder: str, limit: Optional[int] = None) -> List[str]:
    files = sorted(
        osp.join(root, f) for root, _, names in os.walk(folder)
        for f in names if f.lower().endswith(IMAGE_EXTS))
    if not files:
        raise FileNotFoundError(f'no images ({", ".join(IMAGE_EXTS)}) '
                                f'under {folder}')
    return files[:limit] if limit else files


def load_images(paths: Sequence[str], size: int) -> Tensor:
    """Images resized to ``size x size`` (bicubic) and normalised with the
    ImageNet mean/std of the configs, ``(B, 3, size, size)``
    (:func:`mmpos.apis.preprocess` of :func:`mmpos.apis.read_images`)."""
    return preprocess(read_images(paths), size)


def records_attention(backbone) -> bool:
    """Whether :class:`AttentionRecorder` can record ``backbone``'s
    attention: blocks ``layers[i].attn.qkv`` and per-block position tables
    (:class:`~mmpos.models.backbones.RoPEVisionTransformer`)."""
    return hasattr(backbone, 'position_tables') and all(
        hasattr(getattr(layer, 'attn', None), 'qkv')
        for layer in getattr(backbone, 'layers', [None]))


def attention_backbone(config: str, checkpoint: Optional[str] = None,
                       device: str = 'cpu'):
    """:func:`mmpos.apis.init_backbone` (the config's ``out_type``) of a
    backbone whose blocks have ``layers[i].attn.qkv``, i.e. whose attention
    :class:`AttentionRecorder` can record; in eval mode."""
    backbone = init_backbone(config, checkpoint, device, raw_tokens=False)
    if not records_attention(backbone):
        raise BadInputError(
            f'{config}: backbone {type(backbone).__name__} has no '
            '`layers[i].attn.qkv`; a RoPEVisionTransformer is expected')
    return backbone


def resize_for(backbone, size: int) -> int:
    """Largest multiple of the patch size not above ``size``."""
    p = backbone.patch_size[0]
    if size < p:
        raise ValueError(f'resolution {size} is smaller than the patch size '
                         f'{p}')
    return size - size % p


def upsample_map(attn_map: Tensor, size: int) -> Tensor:
    """``(h, w)`` patch map -> ``(size, size)`` (nearest), for overlays."""
    return F.interpolate(attn_map[None, None], size=(size, size),
                         mode='nearest')[0, 0]


def write_rows(stem: str, rows: List[dict], **meta) -> None:
    """``rows`` (dicts with the same keys) as ``<stem>.csv`` and, after
    ``meta``, under ``rows`` in ``<stem>.json`` (each written atomically)."""
    text = io.StringIO()
    writer = csv.DictWriter(text, fieldnames=list(rows[0]))
    writer.writeheader()
    writer.writerows(rows)
    write_atomically(text.getvalue().encode(), stem + '.csv')
    write_atomically(json.dumps(dict(meta, rows=rows), indent=1).encode(),
                     stem + '.json')
