# Zero-shot keypoint correspondence on SPair-71k (its own layout:
# data/SPair-71k/{JPEGImages,PairAnnotation/{trn,val,test}}), for
# tools/analysis_tools/keypoint_correspondence.py --probe THIS: frozen
# patch features of the last block of both images (resized to `size`), each
# source keypoint's feature (bilinear at the keypoint) matched to the target
# patch of largest cosine similarity, PCK@0.05 / 0.1 of max(h, w) of the
# target bounding box (SPair-71k / Probe3D), over all test pairs.
data_root = 'data/SPair-71k'
correspondence_probe = dict(
    split='test',
    size=448,  # ours: a multiple of 14 and 16 (patch sizes)
    by='bbox',  # 'image': thresholds from max(H, W) of the target image
    alphas=(0.05, 0.1))
