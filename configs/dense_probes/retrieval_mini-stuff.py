# In-context dense retrieval (Open Hummingbird's settings, see
# retrieval_voc.py; memory: 2 augmented passes) on mini-stuff, the linear
# segmentation probe's data (the demo's material segmentation; CPU), at 64 px:
# `python tools/misc/make_mini_data.py data/mini --which stuff --img-size 64`.
# The probe's own data is mini-scenes (retrieval_mini-scenes.py): this config
# scores retrieval on the linear probe's images, not independent evidence
# beside it.
_base_ = ['../_base_/datasets/mini_stuff.py']

custom_imports = dict(imports=['mmpos', 'mmpos_harness.mini_data.datasets'])
retrieval_probe = dict(size=64, k=30, temperature=0.02, augment_epochs=2)
