"""timm ``VisionTransformer`` / ``Eva`` checkpoints -> mmpos."""
from collections import OrderedDict

from .vit import (StateDict, classifier_key, merge_qv_bias,
                  pos_embed_has_cls_slot, rename_key, split_mixed_freqs,
                  with_cls_slot)


def convert_timm_vit(state_dict: StateDict) -> StateDict:
    """timm ``VisionTransformer`` / ``Eva`` state dict -> mmpretrain
    classifier layout.

    The class-token slot of ``pos_embed`` is detected from its token count
    (square grid or square grid + 1, see :func:`pos_embed_has_cls_slot`).
    RoPE-Mixed ``rope.freqs`` ``(2, depth, heads, D/2)`` is split per layer.
    """
    out = OrderedDict()
    for key, value in merge_qv_bias(state_dict).items():
        if key == 'rope.freqs':
            for name, freq in split_mixed_freqs(value, None).items():
                out['backbone.' + name] = freq
            continue
        if key == 'pos_embed':
            value = with_cls_slot(value, pos_embed_has_cls_slot(value))
        out[classifier_key(rename_key(key))] = value
    return out


