# DINOv2's linear depth probe (Oquab et al. 2023, "lin. 1") on NYU-Depth v2
# in mmseg's layout (data/nyu/{images,annotations}/{train,test}, depth PNGs
# in mm), for tools/analysis_tools/depth_probe.py --probe THIS:
# frozen patch tokens of the last block (blocks=4: 4 evenly spaced blocks,
# "lin. 4") with the class token concatenated, bilinear x4 upsampling,
# 1x1 conv to 256 uniform depth bins in [1e-3, 10] m with AdaBins' linear
# normalisation, DINOv2's SigLoss; the authors' metrics (DinoDepthMetric:
# RMSE, abs-rel, delta < 1.25 ... of depths in (1e-3, 10) m inside the Eigen
# crop, scaled to the map's size as DINOv3 does). Head, bins and loss follow
# dinov2/hub/depthers.py + hub/depth/decode_heads.py, the metrics
# dinov3/eval/depth (see mmpos/evaluation/depth_probe.py); the training
# schedule (AdamW, iterations, batch) is ours: the authors' training
# configs for the linear depth probe are not public.
_base_ = ['mmseg::_base_/datasets/nyu.py']

depth_probe = dict(
    blocks=1,  # 1: "lin. 1", 4: "lin. 4" (ViT-S/B blocks 3, 6, 9, 12)
    cls_token=True,
    size=(480, 640),  # NYU's full frame (the Eigen crop is defined on it)
    max_train_images=None,  # a subset of the training frames (None: all)
    classify=True,
    n_bins=256,
    bins_strategy='UD',
    norm_strategy='linear',
    min_depth=1e-3,
    max_depth=10.,
    upsample=4,
    iters=2000,
    batch_size=16,
    lr=1e-3,
    weight_decay=1e-4)
val_evaluator = dict(
    type='mmpretrain.DinoDepthMetric',
    min_depth_eval=1e-3,
    max_depth_eval=10.,
    crop_type='nyu_crop')
test_evaluator = val_evaluator
