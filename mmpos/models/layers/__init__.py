from .attention import RoPEAttention
from .masking import (Masking, drop_positions, gather_tokens, num_kept,
                      random_masking)
from .block_masking import (MASKINGS, boxwise_masks, crosswise_masks,
                            sample_num_masked)

__all__ = [
    'Masking', 'drop_positions', 'gather_tokens', 'num_kept',
    'random_masking', 'MASKINGS', 'RoPEAttention', 'boxwise_masks',
    'crosswise_masks', 'sample_num_masked'
]
