"""Pure ``state dict -> state dict`` converters, one module per source.

* :mod:`.rope_vit` -- the RoPE-ViT authors' checkpoints (naver-ai/rope-vit,
  DeiT-III layout; RoPE-Mixed ``freqs`` split per block);
* :mod:`.timm` -- timm ``VisionTransformer`` / ``Eva`` (the naver RoPE ViTs,
  DINOv2 with registers, timm's DINOv3 ports);
* :mod:`.dinov3` -- facebookresearch/dinov3 ``DinoVisionTransformer``;
* :mod:`.mmpos` -- mmpos / mmpretrain training checkpoints -> backbone,
  ICPF's positional field -> the backbone's APE, and a masked pretraining
  backbone's config -> the plain backbone that runs its weights;
* :mod:`.vit` -- the key layout these ViT converters share and the model
  config of a converted state dict (:func:`infer_vit_config`);
* :mod:`.to_timm` -- the other way: an mmpos backbone as timm's model of its
  family, written as a hub folder (safetensors, ``config.json``, card);
* :mod:`.command` -- the command line of ``tools/model_converters/``.
"""
from .dinov3 import convert_dinov3_official, dinov3_periods
from .mmpos import (MASKED_BACKBONES, backbone_state, extract_backbone,
                    find_positional_field, plain_backbone_config,
                    positional_field_to_ape)
from .rope_vit import convert_official_rope_vit
from .timm import convert_timm_vit
from .to_timm import export_to_timm, save_timm_folder
from .vit import (DINOV3_BACKBONE, infer_vit_config, pos_embed_has_cls_slot,
                  require_vit, resolve_rope_type)

__all__ = [
    'DINOV3_BACKBONE', 'MASKED_BACKBONES', 'backbone_state',
    'convert_dinov3_official', 'convert_official_rope_vit',
    'convert_timm_vit', 'dinov3_periods', 'export_to_timm', 'extract_backbone',
    'find_positional_field', 'infer_vit_config', 'pos_embed_has_cls_slot',
    'plain_backbone_config', 'positional_field_to_ape', 'require_vit',
    'resolve_rope_type', 'save_timm_folder'
]
