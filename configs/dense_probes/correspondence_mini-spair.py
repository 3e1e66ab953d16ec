# Keypoint correspondence on mini-SPair (CPU, seconds): pairs related by
# known homographies from `python tools/misc/make_mini_data.py data/mini
# --which spair --img-size 64 --num-val 32`, matched at 64 px.
_base_ = ['./correspondence_spair.py']

data_root = 'data/mini/spair'
correspondence_probe = dict(size=64)
