# In-context dense retrieval on mini-stuff (the demo's material
# segmentation, CPU, seconds), at 64 px: `python tools/misc/make_mini_data.py
# data/mini --which stuff --img-size 64`.
_base_ = ['../_base_/datasets/mini_stuff.py']

custom_imports = dict(imports=['mmpos', 'mmpos_harness.mini_data.datasets'])
retrieval_probe = dict(size=64, k=30, temperature=0.02)
