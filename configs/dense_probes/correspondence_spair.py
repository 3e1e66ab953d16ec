# Zero-shot keypoint correspondence on SPair-71k (its own layout:
# data/SPair-71k/{JPEGImages,PairAnnotation/{trn,val,test}}), for
# tools/analysis_tools/keypoint_correspondence.py --probe THIS: frozen
# patch features of the last block of both images (resized to `size`), each
# source keypoint's feature (bilinear at the keypoint) matched by cosine
# similarity to the target map upsampled `upsample` times per patch side,
# PCK@0.05 / 0.1 of max(h, w) of the target bounding box (strictly below,
# as Probe3D), per category and viewpoint-variation bin, averaged over
# categories (Probe3D's reported number); mmpos/evaluation/correspondence.py
# lists the differences from Probe3D's code.
data_root = 'data/SPair-71k'
correspondence_probe = dict(
    split='test',
    size=448,  # ours: a multiple of 14 and 16 (patch sizes); Probe3D: 800
    by='bbox',  # 'image': thresholds from max(H, W) of the target image
    alphas=(0.05, 0.1),
    # ours: cells per patch side searched (a quarter patch, 4 px at 448 px
    # and patch 16); Probe3D: 1, the arg-max patch
    upsample=4)
