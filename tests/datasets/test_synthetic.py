"""Synthetic datasets of the real layouts (mmpos.datasets.synthetic): what
a paper config's own dataset classes read, at their real sizes."""
import pytest

from conftest import REPO
from mmpos.datasets import synthetic
from mmpos.guardrails.launch import load_config

VITDET = ('configs/transfer/mmdet/'
          'mask-rcnn_vit-small-p16-ape_simple-fpn_lsj-1024_8xb8-12e_coco.py')
PRETRAIN = 'configs/cr2pq/cr2pq_vit-small-p16_32xb64-100e_in1k.py'


def test_coco_instances_survive_the_filter(tmp_path):
    """The detection set keeps every image (mmdet drops images without
    instances of at least 32 px) with its :data:`INSTANCES` masks, at
    COCO's 1024x768, as many as ``procs * batch * iters``."""
    from mmengine.registry import DATASETS, init_default_scope
    cfg = load_config(str(REPO / VITDET))
    written = synthetic.synthesize(cfg, str(tmp_path), procs=2, batch=1,
                                   iters=3)
    assert written[0] == ('train_dataloader: 6 synthetic CocoDataset '
                          'samples in coco/')
    init_default_scope(cfg.get('default_scope', 'mmpos'))
    train = DATASETS.build(cfg.train_dataloader.dataset)
    train.full_init()
    assert len(train) == 6
    info = train.get_data_info(0)
    assert len(info['instances']) == synthetic.INSTANCES
    assert (info['width'], info['height']) == (1024, 768)
    assert str(tmp_path) in cfg.val_evaluator.ann_file


def test_unknown_dataset_refused_in_one_line(tmp_path):
    cfg = load_config(str(REPO / PRETRAIN))
    cfg.train_dataloader.dataset.type = 'Places365'
    with pytest.raises(ValueError, match=r"^train_dataloader\.dataset\.type="
                       r"'Places365' has no synthetic layout \(known: "
                       r"ADE20KDataset, CocoDataset, ImageNet\)$"):
        synthetic.synthesize(cfg, str(tmp_path), procs=2)
