# Two 224px views with BYOL augmentations (asymmetric blur / solarisation),
# each recording its crop box (crop_boxes, (2, 4)). Hue jitter is off:
# mmcv 2.1.0's adjust_hue overflows with numpy 2.


def byol_view(size, blur_prob, solarize_prob):
    return [
        dict(type='RandomResizedCropWithBox', scale=size,
             interpolation='bicubic', backend='pillow'),
        dict(type='RandomFlipWithBox', prob=0.5),
        dict(type='RandomApply',
             transforms=[dict(type='ColorJitter', brightness=0.4,
                              contrast=0.4, saturation=0.2, hue=0.)],
             prob=0.8),
        dict(type='RandomGrayscale', prob=0.2, keep_channels=True,
             channel_weights=(0.114, 0.587, 0.2989)),
        dict(type='GaussianBlur', magnitude_range=(0.1, 2.0),
             magnitude_std='inf', prob=blur_prob),
        dict(type='Solarize', thr=128, prob=solarize_prob),
    ]


train_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='MultiViewWithBoxes', num_views=[1, 1],
         transforms=[byol_view(224, 1., 0.), byol_view(224, 0.1, 0.2)]),
    dict(type='PackInputs', algorithm_keys=['crop_boxes']),
]
