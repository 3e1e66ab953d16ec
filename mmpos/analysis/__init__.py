"""Analysis helpers of tools/analysis_tools/: attention maps of RoPE ViTs and
their statistics, RoPE frequency Fourier reconstructions, the scalar logs of
mmengine work dirs (:mod:`mmpos.analysis.logs`)."""
from .attention import (AttentionRecorder, attention_backbone, attention_probs,
                        load_images, record_attention)
from .fourier import frequency_mask, reconstruct, reconstruction_error
from .metrics import attention_distance, attention_entropy, attention_nmi

__all__ = [
    'AttentionRecorder', 'attention_backbone', 'attention_probs',
    'load_images', 'record_attention', 'frequency_mask', 'reconstruct',
    'reconstruction_error', 'attention_distance', 'attention_entropy',
    'attention_nmi'
]
