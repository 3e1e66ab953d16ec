# CPU method ranking (tools/paper_tables/method_ranking.py): DINOv2's mini
# recipe (configs/dinov2/dinov2_vit-tiny_mini.py) with RoPE-Mixed added to its
# 4-block ViT (patch 8). DINOv2 needs the APE it interpolates per view, so
# the backbone keeps it here; the extraction for the demo detectors (RoPE-
# Mixed without APE, the same for every method) drops it (mmpos2backbone
# --drop-unexpected).
_base_ = ['../dinov2/dinov2_vit-tiny_mini.py']
# _delete_: the base backbone has no RoPE (rope=None)
model = dict(backbone=dict(rope=dict(_delete_=True, type='mixed')))
