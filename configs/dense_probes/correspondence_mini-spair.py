# Keypoint correspondence on mini-SPair (CPU): cross-instance
# pairs of 6 object categories and pairs related by known homographies,
# 320 test pairs (about 2,500 keypoints) from `python
# tools/misc/make_mini_data.py data/mini --which spair --img-size 64
# --num-val 320`, matched at 64 px, one cell per pixel (8 per 8 px patch).
_base_ = ['./correspondence_spair.py']

data_root = 'data/mini/spair'
correspondence_probe = dict(size=64, upsample=8)
