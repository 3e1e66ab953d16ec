"""Linear segmentation probe (issue 16): the mini-ADE config trains only the
BN + 1x1 conv head on the frozen backbone's patch tokens, and the head is
exactly BatchNorm then a 1x1 convolution, upsampled bilinearly."""
import pytest
import torch
import torch.nn.functional as F
from mmengine.config import Config

MINI = 'configs/demo/linear-probe_vit-tiny-rope-mixed_mini-ade.py'
CONFIGS = [
    MINI,
    'configs/transfer/mmseg/'
    'linear-probe_vit-base-p16-rope-mixed_4xb4-40k_ade20k-512x512.py',
    'configs/transfer/mmseg/'
    'linear-probe_vit-small-p16-ape_4xb4-40k_ade20k-512x512.py',
]


def build(config, max_tokens=None):
    """The probe model of ``config``; with ``max_tokens``, its NaFlex
    segmentor (``NaFlexEncoderDecoder``)."""
    import mmseg.models  # noqa: F401
    from mmengine.registry import init_default_scope
    from mmengine.utils import import_modules_from_strings
    from mmseg.registry import MODELS
    cfg = Config.fromfile(config)
    import_modules_from_strings(**cfg.custom_imports)
    init_default_scope('mmseg')
    cfg.model.decode_head.norm_cfg = dict(type='BN')  # one process
    if max_tokens is not None:
        cfg.model.type = 'mmpretrain.NaFlexEncoderDecoder'
        cfg.model.max_tokens = max_tokens
    model = MODELS.build(cfg.model)
    model.init_weights()
    return cfg, model


@pytest.mark.parametrize('config', CONFIGS)
def test_probe_configs_freeze_the_whole_backbone(config):
    cfg = Config.fromfile(config)
    backbone, head = cfg.model.backbone, cfg.model.decode_head
    depth = {'base': 12, 'small': 12}.get(backbone.arch) if isinstance(
        backbone.arch, str) else backbone.arch['num_layers']
    assert backbone.frozen_stages == depth and backbone.final_norm
    assert head.type == 'mmpretrain.BNLinearHead'
    assert head.in_channels == head.channels == (
        {'base': 768, 'small': 384}.get(backbone.arch)
        if isinstance(backbone.arch, str) else backbone.arch['embed_dims'])
    # `import mmpos` registers the probe head (mmpos.evaluation)
    assert 'mmpos' in cfg.custom_imports.imports


def test_mini_probe_model_is_frozen():
    _, model = build(MINI)
    assert type(model.decode_head).__name__ == 'BNLinearHead'
    assert not any(p.requires_grad for p in model.backbone.parameters())
    assert all(p.requires_grad for p in model.decode_head.parameters())
    model.train()
    # every block in eval mode: no dropout / drop path
    assert not any(m.training for layer in model.backbone.layers
                   for m in layer.modules())


def test_one_step_changes_only_the_head():
    from mmseg.structures import SegDataSample
    from mmengine.structures import PixelData
    torch.manual_seed(0)
    cfg, model = build(MINI)
    backbone_before = {k: v.clone()
                       for k, v in model.backbone.state_dict().items()}
    head_before = model.decode_head.conv_seg.weight.clone()
    images = torch.randn(2, 3, 64, 64)
    samples = []
    for _ in range(2):
        sample = SegDataSample(metainfo=dict(img_shape=(64, 64),
                                             pad_shape=(64, 64)))
        sample.gt_sem_seg = PixelData(
            data=torch.randint(0, 150, (1, 64, 64)))
        samples.append(sample)
    optim = torch.optim.SGD(
        [p for p in model.parameters() if p.requires_grad], lr=0.1)
    model.train()
    losses = model.loss(images, samples)
    sum(v for k, v in losses.items() if 'loss' in k).backward()
    optim.step()
    for key, value in model.backbone.state_dict().items():
        assert torch.equal(value, backbone_before[key]), key
    assert not torch.equal(model.decode_head.conv_seg.weight, head_before)

    # the head is BN (eval: running statistics) then the 1x1 conv
    model.eval()
    feats = model.extract_feat(images)
    head = model.decode_head
    logits = head(feats)
    x = feats[-1]
    expected = head.conv_seg(F.batch_norm(
        x, head.bn.running_mean, head.bn.running_var, head.bn.weight,
        head.bn.bias, False, 0., head.bn.eps))
    torch.testing.assert_close(logits, expected)
    assert logits.shape == (2, 150, 8, 8)  # one logit vector per patch


def test_raw_pixel_probe_is_the_patches_pixels_through_the_same_head(
        tmp_path):
    """``linear_seg_probe.py CONFIG pixels``: the config it trains
    (``pixel_config``) feeds the head the patches' pixels (``F.unfold``,
    ``3 p^2`` channels per cell), with the probe's head type, schedule and
    data; each head parameter gets the lr and weight decay that the ViT
    probe's layer-wise constructor gives it (rate 1: the same)."""
    import importlib.util

    from mmengine.optim import build_optim_wrapper

    from conftest import REPO
    spec = importlib.util.spec_from_file_location(
        'linear_seg_probe', REPO / 'tools/analysis_tools/linear_seg_probe.py')
    probe = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(probe)
    cfg, model = build(probe.pixel_config(MINI, str(tmp_path)))
    base_cfg, base = build(MINI)
    images = torch.randn(2, 3, 64, 64)
    feats = model.extract_feat(images)
    assert torch.equal(feats[-1],
                       F.unfold(images, 8, stride=8).reshape(2, 192, 8, 8))
    assert cfg.model.decode_head.in_channels == 192
    assert cfg.model.decode_head.type == base_cfg.model.decode_head.type
    for key in ('train_cfg', 'param_scheduler', 'train_dataloader'):
        assert cfg[key] == base_cfg[key], key

    def head_rates(cfg, model):
        wrapper = build_optim_wrapper(model, cfg.optim_wrapper)
        names = {id(p): n for n, p in model.decode_head.named_parameters()}
        return {names[id(p)]: (g['lr'], g['weight_decay'])
                for g in wrapper.optimizer.param_groups for p in g['params']
                if id(p) in names}

    base_rates = head_rates(base_cfg, base)
    rates = head_rates(cfg, model)
    assert rates.keys() == base_rates.keys() and rates == base_rates


# NaFlex: the probe config with model.type=NaFlexEncoderDecoder
STUFF = 'configs/method_ranking/linear-probe_vit-tiny-rope-mixed_mini-stuff.py'


def seg_samples(shapes, ori_scale=1, num_classes=8, seed=0):
    """uint8 BGR images ``(3, H, W)`` and data samples with labels of their
    size (``ori_shape`` scaled by ``ori_scale``)."""
    from mmengine.structures import PixelData
    from mmseg.structures import SegDataSample
    g = torch.Generator().manual_seed(seed)
    images, samples = [], []
    for h, w in shapes:
        images.append(torch.randint(0, 256, (3, h, w), generator=g,
                                    dtype=torch.uint8))
        sample = SegDataSample(metainfo=dict(
            img_shape=(h, w), ori_shape=(h * ori_scale, w * ori_scale),
            pad_shape=(h, w)))
        sample.gt_sem_seg = PixelData(data=torch.randint(
            0, num_classes, (1, h, w), generator=g))
        samples.append(sample)
    return images, samples


def test_naflex_probe_predicts_each_image_of_a_mixed_batch_as_alone():
    """Each image of a batch of four aspect ratios gets the logits it gets
    alone (eval: BN's running statistics), on its own grid within the
    budget, upsampled to its original size; with the BN fixed, the batch's
    loss is the pixel-weighted mean of the images' losses."""
    shapes = [(40, 120), (96, 32), (64, 64), (50, 70)]
    model = build(STUFF, 24)[1].eval()
    images, samples = seg_samples(shapes, ori_scale=2)
    logits = model.naflex_logits(images)
    grids = [tuple(logit.shape[1:]) for logit in logits]
    assert len(set(grids)) == 4 and all(h * w <= 24 for h, w in grids)
    preds = model.predict(images, samples)
    for image, sample, pred, logit in zip(images, samples, preds, logits):
        torch.testing.assert_close(model.naflex_logits([image])[0], logit,
                                   rtol=1e-5, atol=1e-5)
        alone = model.predict([image], [sample])[0]
        assert pred.seg_logits.shape[-2:] == sample.ori_shape
        torch.testing.assert_close(pred.seg_logits.data,
                                   alone.seg_logits.data, rtol=1e-5,
                                   atol=1e-5)
    batch = model.loss(images, samples)['decode.loss_ce']
    pixels = [h * w for h, w in shapes]
    alone = [model.loss([i], [s])['decode.loss_ce']
             for i, s in zip(images, samples)]
    torch.testing.assert_close(
        batch, sum(p * a for p, a in zip(pixels, alone)) / sum(pixels))


def test_naflex_probe_on_squares_at_the_square_size_is_the_square_probe():
    """64 px squares, whose NaFlex size within 64 patches of 8 is 64 px:
    the same training loss (BN's batch statistics), gradients of the head
    and predictions as the square probe of the same weights."""
    _, square = build(STUFF)
    _, naflex = build(STUFF, 64)
    naflex.load_state_dict(square.state_dict())
    images, samples = seg_samples([(64, 64)] * 3)
    data = square.data_preprocessor(dict(inputs=images,
                                         data_samples=samples), True)
    square.train(), naflex.train()
    losses = [square.loss(**data), naflex.loss(images, samples)]
    for key in ('decode.loss_ce', 'decode.acc_seg'):
        torch.testing.assert_close(losses[0][key], losses[1][key],
                                   rtol=1e-5, atol=1e-5)
    for model, loss in zip((square, naflex), losses):
        loss['decode.loss_ce'].backward()
    torch.testing.assert_close(naflex.decode_head.conv_seg.weight.grad,
                               square.decode_head.conv_seg.weight.grad,
                               rtol=1e-4, atol=1e-6)
    square.eval(), naflex.eval()
    data = square.data_preprocessor(dict(inputs=images,
                                         data_samples=samples), False)
    for a, b in zip(square.predict(**data), naflex.predict(images, samples)):
        torch.testing.assert_close(a.seg_logits.data, b.seg_logits.data,
                                   rtol=1e-5, atol=1e-5)


def test_naflex_probe_refuses_what_it_cannot_run():
    from mmpos.errors import BadInputError
    with pytest.raises(BadInputError, match="model.test_cfg.mode=whole"):
        build(CONFIGS[1], 64)


def test_linear_seg_probe_tool_on_naflex_end_to_end(dense_mini, tmp_path):
    """``linear_seg_probe.py CONFIG CKPT --cfg-options
    model.type=mmpretrain.NaFlexEncoderDecoder model.max_tokens=T``
    trains and tests the probe on NaFlex batches of mini-stuff."""
    import json
    import math
    import os.path as osp

    from conftest import load_tool, read_scalars
    _, model = build(STUFF)
    checkpoint = tmp_path / 'backbone.pth'
    torch.save({'state_dict': {f'backbone.{k}': v for k, v in
                               model.backbone.state_dict().items()}},
               checkpoint)
    root = f'{dense_mini}/stuff/'
    work_dir = tmp_path / 'probe'
    load_tool('linear_seg_probe').main([
        STUFF, str(checkpoint), '--work-dir', str(work_dir),
        '--cfg-options', 'model.type=mmpretrain.NaFlexEncoderDecoder',
        'model.max_tokens=12', 'train_cfg.max_iters=2',
        'train_cfg.val_interval=2', 'default_hooks.logger.interval=1',
        'default_hooks.checkpoint.interval=2',
        *[f'{split}_dataloader.dataset.data_root={root}'
          for split in ('train', 'val', 'test')]])
    metrics = json.load(open(work_dir / 'metrics.json'))
    assert 0 <= metrics['mIoU'] <= 100
    losses = [r['loss'] for r in read_scalars(work_dir) if 'loss' in r]
    assert len(losses) == 2 and all(math.isfinite(v) for v in losses)
    dumped = (work_dir / osp.basename(STUFF)).read_text()
    assert "'mmpretrain.NaFlexEncoderDecoder'" in dumped
