"""Dataset classes of the mini datasets, each with its own class metainfo.

Registered in mmdet's and mmseg's ``DATASETS`` registries (the registries
their configs build datasets from, so that the scope of the pipeline's
transforms stays mmdet's / mmseg's). Only the mini configs use them: they
name this module in ``custom_imports=dict(imports=['mmpos',
'mmpos_harness.mini_data.datasets'])``.
"""
from mmdet.datasets import CocoDataset
from mmdet.registry import DATASETS as MMDET_DATASETS
from mmseg.datasets import ADE20KDataset, BaseSegDataset
from mmseg.registry import DATASETS as MMSEG_DATASETS

from . import MINI_ADE_CLASSES
from .materials import MINI_MATERIALS
from .stuff import IGNORE_INDEX

# One fixed colour per material (visualisation only).
_MATERIAL_PALETTE = [(178, 34, 34), (34, 139, 34), (128, 128, 128),
                     (210, 210, 160), (160, 82, 45), (219, 112, 147),
                     (218, 165, 32), (25, 25, 112)]


@MMDET_DATASETS.register_module()
class MiniObjectsDataset(CocoDataset):
    """mini-objects
    (:func:`mmpos_harness.mini_data.objects.make_mini_objects`): COCO
    format, one category per material."""
    METAINFO = dict(classes=tuple(MINI_MATERIALS), palette=_MATERIAL_PALETTE)


@MMSEG_DATASETS.register_module()
class MiniStuffDataset(BaseSegDataset):
    """mini-stuff (:func:`mmpos_harness.mini_data.stuff.make_mini_stuff`):
    ``images/<split>/*.jpg`` with ``annotations/<split>/*.png`` holding the
    material index, 255 ignored."""
    METAINFO = dict(classes=tuple(MINI_MATERIALS), palette=_MATERIAL_PALETTE)

    def __init__(self, **kwargs):
        super().__init__(
            img_suffix='.jpg', seg_map_suffix='.png', reduce_zero_label=False,
            ignore_index=IGNORE_INDEX, **kwargs)


@MMSEG_DATASETS.register_module()
class MiniADEDataset(ADE20KDataset):
    """mini-ADE (:func:`mmpos_harness.mini_data.ade.make_mini_ade`): ADE20K's
    layout and label convention with only the 6 classes it draws (ADE20K's
    first six, in the same order), so logs and metrics list those."""
    METAINFO = dict(
        classes=tuple(MINI_ADE_CLASSES.values()),
        palette=ADE20KDataset.METAINFO['palette'][:len(MINI_ADE_CLASSES)])
