# CR2PQ with a frozen pretrained teacher (§4.2, Table 4 "DINO (Res-50)", the
# row behind Table 1's 47.4 AP^bb / 41.8 AP^mk): mmpretrain's ResNet-50,
# last stage only, i.e. a 7 x 7 x 2048 target grid at 224 (K_B = 7, the
# paper's 224 / 7 = 32 scaling), D_tea = 2048; the projectors predict 2048-d
# tokens. The teacher always runs in eval mode (frozen BN) and gets no
# gradient. Its weights come from ONE variable, model.teacher_checkpoint:
# a ResNet-50 state dict in torchvision / mmpretrain layout (e.g. DINO's
# dino_resnet50_pretrain.pth; a `backbone.` prefix is stripped, `fc.*` is
# ignored); every ResNet key must be matched. Set it with
#   --cfg-options model.teacher_checkpoint=PATH
# (a missing file stops the run at build time with one line naming it).
# Leaf configs list this file next to their EMA config and write
# `model = _base_.dino_r50_teacher`.
dino_r50_teacher = dict(
    target=dict(_delete_=True, type='ResNet', depth=50, out_indices=(3, )),
    teacher_checkpoint='checkpoints/dino_resnet50_pretrain.pth',
    neck=dict(out_channels=2048),
    # our choice (the paper gives none): parameter-free LayerNorm on the
    # frozen teacher's tokens (data2vec / MaskDistill style)
    loss=dict(norm='layernorm'))
