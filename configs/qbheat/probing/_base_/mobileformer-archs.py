# The three QB-Heat Mobile-Former encoders (Tab. 8) as the probing and
# fine-tuning configs see them: the widths of the stride-8 and stride-16
# outputs and the `backbone.` weights of the QB-Heat pretraining run. The
# configs are written for MF-285M; an MF-1.0G / MF-3.7G variant sets
# `backbone=dict(arch=ARCH, init_cfg=_base_.mf_pretrained[ARCH])` and its
# neck / head widths from `_base_.mf_channels[ARCH]`. The fine-tuning
# configs unfreeze the probe's encoder with `unfrozen_mobileformer` (every
# stage, token and BN trains; the whole model loads from a probe
# checkpoint, `load_from`, so the backbone has no init_cfg).
mf_channels = {'285m': [48, 720], '1.0g': [96, 1440], '3.7g': [192, 2880]}
mf_pretrained = {
    arch: dict(
        type='Pretrained',
        checkpoint=f'work_dirs/qbheat_mobileformer-{arch}_8xb128-coslr-'
        '800e_in1k/epoch_800.pth',
        prefix='backbone.')
    for arch in mf_channels
}
unfrozen_mobileformer = dict(frozen_stages=-1, norm_eval=False, init_cfg=None)
# The frozen MF-285M backbone of the COCO decoder probes and its two output
# widths (strides 8 and 16).
frozen_mobileformer = dict(
    type='mmpretrain.MobileFormer',
    arch='285m',
    out_indices=(2, 4),
    frozen_stages=4,
    norm_eval=True,
    init_cfg=mf_pretrained['285m'])
frozen_mobileformer_channels = mf_channels['285m']
