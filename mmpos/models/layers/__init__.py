from mmpretrain.models.utils import SwiGLUFFN

from mmpos.registry import MODELS
from .attention import RoPEAttention
from .masking import (Masking, drop_positions, gather_tokens, num_kept,
                      random_masking)
from .block_masking import (MASKINGS, boxwise_masks, crosswise_masks,
                            sample_num_masked)

# mmpretrain's SwiGLU feed-forward layer (DINOv2 giant's, DINOv3 7B's), for
# a RoPE ViT block's ``ffn_cfg=dict(type='SwiGLUFFN')``
MODELS.register_module(module=SwiGLUFFN)

__all__ = [
    'Masking', 'drop_positions', 'gather_tokens', 'num_kept',
    'random_masking', 'MASKINGS', 'RoPEAttention', 'boxwise_masks',
    'crosswise_masks', 'sample_num_masked'
]
