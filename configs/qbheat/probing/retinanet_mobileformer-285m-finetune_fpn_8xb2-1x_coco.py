# Fine-tuning variant of the RetinaNet probing: the whole model, backbone
# included (every stage, token and BatchNorm; BNs synchronised across GPUs
# since each holds 2 images), trains from the frozen-backbone probe's last
# checkpoint (`load_from`). The paper gives no RetinaNet fine-tuning recipe;
# this follows its DETR one (App. B.2: continue from decoder probing with a
# 10x smaller lr for encoder and decoder alike) on mmdet's 1x schedule.
# Probe checkpoint:  --cfg-options load_from=PATH
_base_ = ['./retinanet_mobileformer-285m-frozen_fpn_8xb2-1x_coco.py']

model = dict(
    backbone=dict(frozen_stages=-1, norm_eval=False, init_cfg=None))
load_from = ('work_dirs/retinanet_mobileformer-285m-frozen_fpn_8xb2-1x_coco/'
             'epoch_12.pth')
sync_bn = 'torch'
optim_wrapper = dict(optimizer=dict(lr=1e-5))
