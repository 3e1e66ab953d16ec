from .crop_boxes import (MultiViewWithBoxes, RandomFlipWithBox,
                         RandomResizedCropWithBox, box_to_tlhw, tlhw_to_box)
from .naflex import (NaFlexPatchify, NaFlexRandomResizedCrop, NaFlexResize,
                     PackNaFlexInputs, naflex_size, patchify)

__all__ = [
    'MultiViewWithBoxes', 'NaFlexPatchify', 'NaFlexRandomResizedCrop',
    'NaFlexResize',
    'PackNaFlexInputs', 'RandomFlipWithBox', 'RandomResizedCropWithBox',
    'box_to_tlhw', 'naflex_size', 'patchify', 'tlhw_to_box'
]
