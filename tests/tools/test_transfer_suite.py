"""The transfer suite's other protocols on the mini data: Cascade Mask R-CNN
with a tiny RoPE ViT (DeconvMultiLevelNeck + FPN) and Semantic FPN, built
from their configs and trained for a few steps in this process on one mini
batch (the loss falls), the predictions scored by the real CocoMetric (box
and mask AP) and IoUMetric. The transfer's end-to-end runs through
tools/train.py are tests/tools/test_transfer_mini.py's Mask R-CNN and
UperNet."""
from conftest import data_root_options
from test_transfer_mini import (COCO_KEYS, SEG_KEYS, SEGM_KEYS,
                                assert_steps_learn, train_steps)

CASCADE_CONFIG = 'configs/demo/cascade-mask-rcnn_vit-tiny-rope-mixed_mini-coco.py'  # noqa: E501
FPN_CONFIG = 'configs/demo/fpn_vit-tiny-rope-mixed_mini-ade.py'


def test_cascade_mask_rcnn_rope_vit_on_mini_coco(mini_data):
    losses, metrics = train_steps(CASCADE_CONFIG,
                                  data_root_options(mini_data, 'coco'))
    assert_steps_learn(losses, metrics, COCO_KEYS[:3] + SEGM_KEYS)


def test_semantic_fpn_rope_vit_on_mini_ade(mini_data):
    losses, metrics = train_steps(FPN_CONFIG,
                                  data_root_options(mini_data, 'ade'))
    assert_steps_learn(losses, metrics, SEG_KEYS)
