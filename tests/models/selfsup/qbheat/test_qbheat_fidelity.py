"""QB-Heat as the paper ran it: the scale of each quarter layout (Fig. 4 /
Fig. 7: corner quarters use A^{1/2}, B^{1/2}, the centre quarter A^{1/4},
B^{1/4}) for every order of ``positions``, the 8 explicit models behind
Tab. 2's default row and Tab. 4 / 6, the image-size rule, and the size of
the RetinaNet probe head against Tab. 14."""
import pytest
import torch
from mmengine.config import Config

import mmpos  # noqa: F401
from mmpos.models.selfsup.qbheat import QBHeat, QBHeatPredictor
from mmpos.models.selfsup.qbheat.qbheat_predictor import CENTER

ORDERS = [('corner', 'center'), ('center', 'corner'), ('corner', ),
          ('center', )]


@pytest.mark.parametrize('positions', ORDERS)
def test_scale_index_maps_each_layout_to_its_scale(positions):
    pred = QBHeatPredictor(4, 4, positions=positions)
    layouts = torch.arange(5)
    allowed = layouts[[('center' if lay == CENTER else 'corner') in positions
                       for lay in layouts.tolist()]]
    idx = pred.scale_index(allowed)
    expected = [positions.index('center' if lay == CENTER else 'corner')
                for lay in allowed.tolist()]
    assert idx.tolist() == expected


def test_prediction_does_not_depend_on_the_order_of_positions():
    torch.manual_seed(0)
    a = QBHeatPredictor(4, 4, positions=('corner', 'center'))
    b = QBHeatPredictor(4, 4, positions=('center', 'corner'))
    with torch.no_grad():
        a.weight.normal_()
        b.load_state_dict(dict(a.state_dict(), weight=a.weight.flip(0)))
    feats, layouts = torch.randn(5, 4, 4, 4), torch.arange(5)
    out_a, mask_a = a(feats, layouts)
    out_b, mask_b = b(feats, layouts)
    torch.testing.assert_close(out_a, out_b)
    assert torch.equal(mask_a, mask_b)
    # and the corner layouts really use the corner (dx = 1/2) models
    only_corner = QBHeatPredictor(4, 4, positions=('corner', ))
    only_corner.load_state_dict(dict(a.state_dict(), weight=a.weight[:1]))
    torch.testing.assert_close(only_corner(feats[:4], layouts[:4])[0],
                               out_a[:4])


def test_default_is_the_8_models_of_the_compared_numbers():
    # Tab. 2: row (a) "corner + center" (the default) = row (b) "8" = Tab. 4
    assert QBHeatPredictor(4, 4).num_explicit == 8
    for arch in ('285m', '1.0g', '3.7g'):
        cfg = Config.fromfile(f'configs/qbheat/qbheat_mobileformer-{arch}_'
                              '8xb128-coslr-800e_in1k.py')
        assert cfg.model.neck.num_explicit == 8
        assert tuple(cfg.model.neck.positions) == ('corner', 'center')
        assert cfg.model.position == 'mixed'


def _tiny(patch_size=16):
    arch = dict(stem=8, lite=8, token_dims=16, last=32,
                blocks=[(16, 8)] * 2 + [(16, 8)] * 3 + [(32, 16)] * 6)
    return QBHeat(
        backbone=dict(type='MobileFormer', arch=arch),
        neck=dict(type='QBHeatPredictor', in_channels=32, embed_dims=16),
        head=dict(type='QBHeatHead', in_channels=16, num_layers=1,
                  num_heads=2, patch_size=patch_size,
                  loss=dict(type='PixelReconstructionLoss', criterion='L2')))


@pytest.mark.parametrize('size', [96, 66, 80])
def test_image_size_check_and_message_agree(size):
    # the stride-16 encoder needs sides divisible by 4 x 16 = 64: the check
    # rejects exactly the sizes its message describes
    with pytest.raises(ValueError, match='divisible by 4 x encoder stride '
                       '= 64'):
        _tiny().loss(torch.randn(2, 3, size, 64), None)


def test_image_size_multiple_of_64_trains():
    torch.manual_seed(0)
    loss = _tiny().loss(torch.randn(2, 3, 128, 128), None)['loss']
    assert torch.isfinite(loss)


def test_retinanet_probe_trainable_sizes():
    """Tab. 14 gives head params 9.5M / 17.2M / 61.4M (MF-285M / 1.0G /
    3.7G) without the head's layout. Ours is mmdet's RetinaNet (256-d FPN on
    the stride-8 and stride-16 maps, extra levels from the input, 4 x 256
    convs per branch): 10.7M / 12.5M / 16.2M trainable, the shared head
    6.46M and the FPN growing with the encoder width only (see the README,
    "Differences from the authors' run")."""
    from mmdet.registry import MODELS
    from mmengine.registry import init_default_scope
    init_default_scope('mmdet')
    sizes = {}
    for arch in ('285m', '1.0g', '3.7g'):
        cfg = Config.fromfile('configs/qbheat/probing/retinanet_mobileformer-'
                              f'{arch}-frozen_fpn_8xb2-1x_coco.py')
        model = MODELS.build(cfg.model)
        sizes[arch] = sum(p.numel() for p in model.parameters()
                          if p.requires_grad) / 1e6
        assert not any(p.requires_grad for p in model.backbone.parameters())
    assert [round(sizes[a], 1) for a in ('285m', '1.0g', '3.7g')] == \
        [10.7, 12.5, 16.2]
