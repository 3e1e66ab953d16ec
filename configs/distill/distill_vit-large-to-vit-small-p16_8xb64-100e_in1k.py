# Distillation at paper scale (DINOv3's recipe, mmpos/models/selfsup/distill;
# docs/user_guides/distill.md): a frozen DINOv2 ViT-L/16 teacher (the
# DINOv2 recipe of ../dinov2/dinov2_vit-small-p16_4xb128-100e_in1k.py at
# ViT-L width: 1024 wide, 24 blocks, 16 heads, heads reading 1024 channels)
# teaches that recipe's ViT-S/16 student on ImageNet-1K: the same crops,
# heads' prototype counts, losses, optimizer and 100 epochs, 8 GPUs x 64
# (total batch 512, as the base). The teacher sees the two global crops
# once per step; its parameters take no gradients and no optimizer state.
# Its weights are an mmpos DINOv2 ViT-L checkpoint's EMA teacher (heads
# included; no such checkpoint is released):
#   bash tools/dist_train.sh CONFIG 8 --cfg-options \
#       model.teacher.checkpoint=PATH/TO/dinov2_vit-large.pth
_base_ = ['../dinov2/dinov2_vit-small-p16_4xb128-100e_in1k.py']

teacher_dims = 1024
model = dict(
    type='Distill',
    teacher=dict(
        backbone=dict(_base_.model.backbone, arch='large'),
        head=dict(_base_.head, in_channels=teacher_dims),
        patch_head=dict(_base_.head, in_channels=teacher_dims),
        checkpoint=None,
        prefix='teacher.module.'))
train_dataloader = dict(batch_size=64)
