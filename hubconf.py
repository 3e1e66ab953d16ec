"""torch.hub entry points of a local mmpos checkout (nothing is
downloaded)::

    import torch
    backbone = torch.hub.load('/path/to/mmpos', 'backbone',
                              'work_dirs/droppos_mini/iter_300.pth',
                              source='local')

``backbone(checkpoint, config=None, device='cpu', out_indices=None,
prefix='backbone.')`` is :func:`mmpos.apis.load_backbone`: the config the
checkpoint records (a training checkpoint, or an ``mmpos2backbone.py``
output) unless ``config`` is given.
"""
from mmpos.apis import load_backbone as backbone  # noqa: F401

dependencies = ['torch', 'mmengine', 'mmcv', 'mmpretrain']
