"""The RoPE-ViT authors' checkpoints (naver-ai/rope-vit, DeiT-III
``models_v2`` layout) -> mmpos."""
from collections import OrderedDict

from .vit import (StateDict, classifier_key, rename_key,
                  split_mixed_freqs, with_cls_slot)


def convert_official_rope_vit(state_dict: StateDict,
                              num_heads: int) -> StateDict:
    """Authors' RoPE-ViT / DeiT-III state dict -> mmpretrain classifier
    layout (``backbone.*``, ``head.layers.head.*``).

    Args:
        state_dict: the ``model`` entry of their checkpoint.
        num_heads: heads per block (not stored in the weights); needed to
            split RoPE-Mixed ``freqs``.
    """
    out = OrderedDict()
    for key, value in state_dict.items():
        if key in ('freqs_t_x', 'freqs_t_y'):
            continue  # the integer grid, rebuilt from the input size
        if key == 'freqs':
            for name, freq in split_mixed_freqs(value, num_heads).items():
                out['backbone.' + name] = freq
            continue
        if key == 'pos_embed':
            value = with_cls_slot(value, has_slot=False)
        out[classifier_key(rename_key(key))] = value
    return out


