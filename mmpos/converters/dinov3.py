"""facebookresearch/dinov3 ``DinoVisionTransformer`` checkpoints -> mmpos."""
import math
from collections import OrderedDict
from typing import Tuple

import torch
from torch import Tensor

from mmpos.errors import ConversionError
from mmpos_positions import frequency_magnitudes
from .vit import StateDict, classifier_key, rename_key


def dinov3_periods(periods: Tensor) -> dict:
    """The RoPE ``periods`` of a DINOv3 checkpoint's ``rope_embed.periods``
    ``(D/4,)``: ``dict(base=b)`` when ``periods[t] = b ** (t / (D/4))``,
    else ``dict(min_period=periods[0], max_period=periods[-1])``; either
    checked against every stored period (relative 1e-2: released weights
    store them in bf16). Raises if the periods are not geometric."""
    periods = periods.double()
    quarter = periods.numel()
    if quarter < 2 or not torch.isfinite(periods).all() or \
            (periods <= 0).any():
        raise ConversionError('rope_embed.periods must hold >= 2 positive '
                              f'periods, got {periods.tolist()}')
    candidates = []
    if abs(periods[0].item() - 1) < 1e-2:
        base = periods[-1].item()**(quarter / (quarter - 1))
        candidates.append(dict(base=float(f'{base:.4g}')))
    candidates.append(dict(min_period=periods[0].item(),
                           max_period=periods[-1].item()))
    for cand in candidates:
        expected = 2 * math.pi / frequency_magnitudes(4 * quarter,
                                                      periods=cand)
        if torch.allclose(expected, periods, rtol=1e-2, atol=0):
            return cand
    raise ConversionError('rope_embed.periods is not a geometric sequence: '
                          f'{periods.tolist()}')


def convert_dinov3_official(state_dict: StateDict) -> Tuple[StateDict, dict]:
    """facebookresearch/dinov3 ``DinoVisionTransformer`` state dict ->
    ``(mmpretrain classifier layout, RoPE periods)``.

    ``storage_tokens`` become ``register_tokens``; a masked key bias
    (``attn.qkv.bias_mask``, ``mask_k_bias=True``) is applied to
    ``attn.qkv.bias`` and dropped; ``mask_token`` (pretraining only) is
    dropped; ``rope_embed.periods`` is read by :func:`dinov3_periods`.
    A SwiGLU feed-forward layer (the 7B's, ``silu(w1 x) * (w2 x)`` then
    ``w3``) becomes mmpretrain's ``SwiGLUFFN``: ``w12`` is ``w1`` stacked
    on ``w2`` (its first half takes the SiLU), ``w3`` stays. Other keys
    (``cls_norm``, ``local_cls_norm`` of untied-norm models) keep their
    names and are reported unexpected.
    """
    if 'rope_embed.periods' not in state_dict:
        raise ConversionError('no rope_embed.periods: not a DINOv3 '
                              'DinoVisionTransformer checkpoint')
    periods = dinov3_periods(state_dict['rope_embed.periods'])
    out = OrderedDict()
    for key, value in state_dict.items():
        if key in ('mask_token', 'rope_embed.periods') or \
                key.endswith('.bias_mask'):
            continue
        if key == 'storage_tokens':
            out['backbone.register_tokens'] = value
            continue
        if '.mlp.w2.' in key:
            continue  # stacked with its w1 below
        if '.mlp.w1.' in key:
            gate = key.replace('.mlp.w1.', '.mlp.w2.')
            if gate not in state_dict:
                raise ConversionError(f'{key} has no {gate}: a SwiGLU layer '
                                      'needs both of its input projections')
            block, param = key.split('.mlp.w1.')  # 'blocks.<i>', 'weight'
            out[f'backbone.layers.{block[len("blocks."):]}.ffn.w12.{param}'
                ] = torch.cat((value, state_dict[gate]))
            continue
        if key.endswith('.attn.qkv.bias'):
            mask = state_dict.get(key + '_mask')
            if mask is not None:
                if not torch.isfinite(mask).all():
                    raise ConversionError(f'{key}_mask is not finite (an '
                                          'uninitialised buffer)')
                value = value * mask.to(value.dtype)
        out[classifier_key(rename_key(key))] = value
    return out, periods
