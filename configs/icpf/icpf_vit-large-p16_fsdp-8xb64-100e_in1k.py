# ICPF ViT-L/16 with FSDP: the ViT-B recipe (Table 6, 8 GPUs x
# 64) with a ViT-L student and teacher (1024 wide, 24 blocks, 16 heads) and
# heads reading 1024 channels, trained by mmengine's FlexibleRunner with
# FSDP (../_base_/fsdp.py: one FSDP unit per transformer block and DINO
# head, for the teacher as for the student; full state-dict checkpoints).
# The EMA teacher is updated after each optimizer step, shard by shard
# (mmpos/models/utils/ema.py). Gradient clipping under FSDP acts on each
# process's shard of a tensor (PerTensorClipOptimWrapper clips what a rank
# holds), not on the whole tensor as in a DDP run. Activation checkpointing
# (with_cp): without it a GPU holds 85.4 GiB of activations at 64 images
# and the run does not fit an 80 GB GPU even sharded; with it 49.9 GiB in
# all on 8 GPUs (tools/analysis_tools/plan.py CONFIG --gpus 8). The paper
# reports ViT-S and ViT-B only; this is the same recipe at ViT-L width,
# not a paper row.
_base_ = ['./icpf_vit-small-p16_4xb128-100e_in1k.py', '../_base_/fsdp.py']

embed_dims = 1024
model = dict(
    backbone=dict(arch='large', with_cp=True),
    head=dict(in_channels=embed_dims),
    patch_head=dict(in_channels=embed_dims))
train_dataloader = dict(batch_size=64)
