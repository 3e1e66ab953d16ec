from .ema import check_teachers_set, update_ema
from .pretrained import load_pretrained, split_pretrained_cfg

__all__ = [
    'check_teachers_set', 'load_pretrained', 'split_pretrained_cfg',
    'update_ema'
]
