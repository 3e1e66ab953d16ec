# Demo / test config: windowed ViTDet Mask R-CNN on mini-COCO (CPU): the demo
# Mask R-CNN with 6x6 window attention in blocks 1 and 3 (the 16x16 patch
# grid of a 128px image padded to 18x18 and cropped back; RoPE at absolute
# coordinates), global blocks 2 and 4, no class token, and ViTDet's
# LayerNorm RoI heads (4 convs + 1 fc box head, 4-conv mask head), as ViTDet.
_base_ = ['./mask-rcnn_vit-tiny-rope-mixed_mini-coco.py']

head_norm_cfg = dict(type='mmpretrain.LN2d', eps=1e-6, requires_grad=True)
model = dict(
    backbone=dict(
        window_size=6, global_attn_indexes=(1, 3), with_cls_token=False),
    roi_head=dict(
        bbox_head=dict(
            type='Shared4Conv1FCBBoxHead', conv_out_channels=64,
            norm_cfg=head_norm_cfg),
        mask_head=dict(norm_cfg=dict(_delete_=True, **head_norm_cfg))))
