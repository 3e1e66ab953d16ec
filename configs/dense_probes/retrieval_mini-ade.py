# In-context dense retrieval (Open Hummingbird's settings, see
# retrieval_voc.py; memory: 2 augmented passes) on mini-ADE (CPU),
# at 64 px: `python tools/misc/make_mini_data.py data/mini --which ade
# --img-size 64`.
_base_ = ['../_base_/datasets/mini_ade.py']

custom_imports = dict(imports=['mmpos', 'mmpos_harness.mini_data.datasets'])
retrieval_probe = dict(size=64, k=30, temperature=0.02, augment_epochs=2)
