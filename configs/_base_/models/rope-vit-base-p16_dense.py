# The ViT-B/16 that every dense-prediction config starts from: RoPE-Mixed, no
# APE. Model files splice it in with `dict(_delete_=True,
# **_base_.vit_backbone)`; leaf configs switch to APE with `rope=None,
# use_ape=True`.
#
# The pretrained checkpoint of every transfer config is this init_cfg's
# `checkpoint`: `--cfg-options model.backbone.init_cfg.checkpoint=PATH` (a
# pretraining run's checkpoint; its `backbone.` keys are loaded and counted
# in the log, and nothing matching is an error). None = random init, logged.
custom_imports = dict(imports=['mmpos'], allow_failed_imports=False)
vit_backbone = dict(
    type='mmpretrain.RoPEVisionTransformer',
    arch='base',
    patch_size=16,
    rope=dict(type='mixed'),
    use_ape=False,
    drop_path_rate=0.1,
    out_type='featmap',
    init_cfg=dict(type='Pretrained', checkpoint=None, prefix='backbone.'))
# Blocks 4/6/8/12, not normalised, for the multi-level necks (BEiT/MAE).
mln_backbone = dict(**vit_backbone, out_indices=(3, 5, 7, 11), final_norm=False)
# DeconvMultiLevelNeck (strides 4..32) + FPN, shared by the two R-CNN
# detectors.
mln_fpn_neck = [
    dict(type='mmpretrain.DeconvMultiLevelNeck', in_channels=768),
    dict(type='FPN', in_channels=[768] * 4, out_channels=256, num_outs=5)
]
# ViTDet window attention (Li et al. 2022): 14x14 windows in every block but
# the 4 global ones closing each third of the 12 blocks, no class token (an
# APE table with a class slot still loads) and ViTDet's decomposed relative
# position bias in every block (its configs' use_rel_pos=True; detrex's
# DINO-ViTDet too). Merged into the backbone by the windowed ViTDet
# protocols (ICPF B.2 keeps global attention and drops the bias).
vitdet_window = dict(
    # the fine-tuning input sizes the APE and the relative tables (64 x 64
    # patches); a 224-px checkpoint's APE is resized once, at load
    img_size=1024,
    pretrain_img_size=224,
    window_size=14,
    global_attn_indexes=(2, 5, 8, 11),
    with_cls_token=False,
    use_rel_pos=True)
