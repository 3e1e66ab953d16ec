"""timm ``VisionTransformer`` / ``Eva`` checkpoints -> mmpos."""
from collections import OrderedDict

from .vit import (StateDict, _merge_qv_bias, _prefixed, _rename,
                  _split_mixed_freqs,
                  _with_cls_slot, pos_embed_has_cls_slot)


def convert_timm_vit(state_dict: StateDict) -> StateDict:
    """timm ``VisionTransformer`` / ``Eva`` state dict -> mmpretrain
    classifier layout.

    The class-token slot of ``pos_embed`` is detected from its token count
    (square grid or square grid + 1, see :func:`pos_embed_has_cls_slot`).
    RoPE-Mixed ``rope.freqs`` ``(2, depth, heads, D/2)`` is split per layer.
    """
    out = OrderedDict()
    for key, value in _merge_qv_bias(state_dict).items():
        if key == 'rope.freqs':
            for name, freq in _split_mixed_freqs(value, None).items():
                out['backbone.' + name] = freq
            continue
        if key == 'pos_embed':
            value = _with_cls_slot(value, pos_embed_has_cls_slot(value))
        out[_prefixed(_rename(key))] = value
    return out


