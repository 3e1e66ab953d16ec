"""The mini-data generators' public names, kept at their historical import
path; the generators themselves live in :mod:`mmpos.datasets.mini` (one
module per dataset)."""
from .mini import (MARKER, MINI_ADE_CLASSES, MINI_COCO_CLASSES,  # noqa: F401
                   SKIMAGE_PHOTOS, available_skimage_photos, make_all,
                   make_mini_ade, make_mini_cls, make_mini_coco,
                   make_unlabeled_images)
