# CPU method ranking (tools/paper_tables/method_ranking.py): the demo's
# DropPos pretraining (configs/demo/droppos_vit-tiny-rope-mixed_mini.py, the
# RoPE-Mixed mini ViT without APE) at the input size of the other ranked
# methods: whole images at 64 px, an 8 x 8 grid of 8 px patches (64
# positions to classify), and the paper's patch mask ratio gamma = 0.75,
# which at 64 patches keeps 16 visible (the 32 px mini recipe keeps 12 of
# 16 with gamma = 0.25, because 0.75 would leave 4).
_base_ = ['../demo/droppos_vit-tiny-rope-mixed_mini.py']

img_size = 64
model = dict(
    backbone=dict(img_size=img_size),
    head=dict(num_patches=(img_size // 8)**2),
    mask_ratio=0.75)
train_dataloader = dict(dataset=dict(pipeline=[
    step if step['type'] != 'Resize' else dict(step, scale=(img_size,
                                                           img_size))
    for step in _base_.train_pipeline
]))
