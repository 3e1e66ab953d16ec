# The demo's DropPos pretraining (configs/demo/droppos_vit-tiny-rope-
# mixed_mini.py) with the online depth and retrieval probes of
# _base_/online_dense_probes_mini.py every 500 iterations (beside its
# online kNN probe). The probes do not change training: same losses with
# and without them.
_base_ = [
    '../demo/droppos_vit-tiny-rope-mixed_mini.py',
    './_base_/online_dense_probes_mini.py',
]
custom_hooks = _base_.custom_hooks + _base_.dense_probe_hooks
# MiniStuffDataset of the retrieval probe lives in the harness
custom_imports = dict(
    imports=['mmpos', 'mmpos_harness.mini_data.datasets'],
    allow_failed_imports=False)
