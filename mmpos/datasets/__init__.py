from . import robust_loading, transforms  # noqa: F401
from .mini import (make_all, make_mini_ade, make_mini_cls,  # noqa: F401
                   make_mini_coco, make_unlabeled_images)
