from .crop_boxes import (MultiViewWithBoxes, RandomFlipWithBox,
                         RandomResizedCropWithBox, box_to_tlhw, tlhw_to_box)

__all__ = [
    'MultiViewWithBoxes', 'RandomFlipWithBox', 'RandomResizedCropWithBox',
    'box_to_tlhw', 'tlhw_to_box'
]
