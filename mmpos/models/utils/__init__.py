from .pretrained import load_pretrained, split_pretrained_cfg

__all__ = ['load_pretrained', 'split_pretrained_cfg']
