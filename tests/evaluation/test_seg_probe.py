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


def build(config):
    import mmseg.models  # noqa: F401
    from mmengine.registry import init_default_scope
    from mmengine.utils import import_modules_from_strings
    from mmseg.registry import MODELS
    cfg = Config.fromfile(config)
    import_modules_from_strings(**cfg.custom_imports)
    init_default_scope('mmseg')
    cfg.model.decode_head.norm_cfg = dict(type='BN')  # one process
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
