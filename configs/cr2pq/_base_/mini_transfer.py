# What the mini_transfer/ configs change in the demo dense configs so that
# they take the backbone of cr2pq_vit-tiny_mini.py: the same 4-block ViT with
# 8 px patches, with the CR2PQ student's RoPE-Axial of base 100 (Eq. 5)
# instead of RoPE-Mixed. Checkpoint: --cfg-options
# model.backbone.init_cfg.checkpoint=PATH (a pretraining checkpoint or the
# output of tools/model_converters/mmpos2backbone.py).
cr2pq_student_rope = dict(rope=dict(type='axial', theta=100.))
