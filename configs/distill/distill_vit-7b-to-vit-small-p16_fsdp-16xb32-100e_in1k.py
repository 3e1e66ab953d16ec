# Distillation from a 7B teacher with FSDP (DINOv3's recipe,
# mmpos/models/selfsup/distill; docs/user_guides/distill.md): a frozen ViT-7B/16
# of DINOv3's architecture (facebookresearch/dinov3, vit_7b and
# configs/train/dinov3_vit7b16_pretrain.yaml: 4096 wide, 40 blocks, 32
# heads, SwiGLU feed-forward of hidden width 8192 (ffn_ratio 3, 2/3 of it,
# aligned to 64), no qkv bias, DINOv3's RoPE, 4 register tokens, LayerScale;
# plus the learnable APE that mmpos' DINOv2 token pipeline needs, 0.8 M
# parameters DINOv3's model does not have)
# with DINOv3's heads (DINO: 262144 prototypes, hidden 8192, bottleneck
# 512; iBOT, separate: 98304 prototypes, hidden 4096, bottleneck 384; last
# layers not normalised) teaches the DINOv2 recipe's ViT-S/16 student
# (../dinov2/dinov2_vit-small-p16_4xb128-100e_in1k.py: its crops, losses,
# optimizer, 100 epochs) with heads of the teacher's sizes, as DINOv3's
# students have. FSDP (../_base_/fsdp.py): every block and DINO head of
# teacher and student is its own unit; the teacher's shards take no
# gradients and no optimizer state. 16 GPUs x 32 (total batch 512, as the
# base); tools/analysis_tools/plan.py CONFIG --gpus 16 plans it per GPU.
# The teacher's weights must include its heads (Distill refuses a
# backbone-only checkpoint): DINOv3's released 7B holds none, so the
# teacher is an mmpos DINOv2 run of this architecture:
#   bash tools/dist_train.sh CONFIG 16 --cfg-options \
#       model.teacher.checkpoint=PATH/TO/teacher.pth
_base_ = [
    '../dinov2/dinov2_vit-small-p16_4xb128-100e_in1k.py', '../_base_/fsdp.py',
    '../_base_/models/rope-vit_dinov3-positions.py'
]

dino_head = dict(out_channels=262144, hidden_channels=8192,
                 bottleneck_channels=512, norm_last_layer=False)
ibot_head = dict(out_channels=98304, hidden_channels=4096,
                 bottleneck_channels=384, norm_last_layer=False)
teacher_dims = 4096
model = dict(
    type='Distill',
    teacher=dict(
        backbone=dict(
            type='RoPEVisionTransformer',
            arch='7b',
            img_size=224,
            patch_size=16,
            qkv_bias=False,
            use_ape=True,
            out_type='raw',
            layer_cfgs=dict(ffn_cfg=dict(type='SwiGLUFFN')),
            **_base_.dinov3_positions),
        head=dict(_base_.head, **dino_head, in_channels=teacher_dims),
        patch_head=dict(_base_.head, **ibot_head, in_channels=teacher_dims),
        checkpoint=None,
        prefix='teacher.module.'),
    head=dino_head,
    patch_head=ibot_head)
train_dataloader = dict(batch_size=32)
