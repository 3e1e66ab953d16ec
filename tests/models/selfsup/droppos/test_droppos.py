"""DropPos: smoothing matrix, attentive weights, loss against hand
computation, the sigma schedule hook, the encoder input of Eq. 3 (sin-cos
ViT and RoPE ViT), checkpoint conversion, and a mini pretraining run through
mmengine's Runner whose position accuracy rises well above chance."""
import json
import math

import pytest
import torch
import torch.nn.functional as F

import mmpos  # noqa: F401  (registers the backbones)
from mmpos.models.layers.positions import grid_coords
from mmpos.models.selfsup.droppos import (DropPos, DropPosHead,
                                          DropPosSigmaHook, attentive_weights,
                                          droppos_loss,
                                          smoothed_position_targets)

from conftest import read_scalars, run_tool

MINI = 'configs/droppos/droppos_vit-tiny_mini.py'  # N = 16, 600 iters
ARCH = dict(embed_dims=48, num_layers=2, num_heads=3, feedforward_channels=96)
# the paper's ViT: fixed sin-cos APE, no RoPE, MAE's init
SINCOS = dict(type='MAERoPEViT', arch=ARCH, img_size=32, patch_size=8,
              rope=None, use_ape=True, ape_type='sincos')
ROPE = dict(type='RoPEVisionTransformer', arch=ARCH, img_size=32,
            patch_size=8, rope=dict(type='axial'), out_type='raw')
HEAD = dict(type='DropPosHead', num_patches=16, in_channels=48,
            embed_dims=32, num_heads=4)


def build(backbone=SINCOS, head=HEAD, **kwargs):
    torch.manual_seed(0)
    model = DropPos(backbone=backbone, head=head, **kwargs)
    model.init_weights()
    return model.train()


# -- position smoothing (Eq. 5) ---------------------------------------------
def test_smoothing_matrix_by_hand_2x2():
    # 2x2 grid: patch 0 at (0,0); 1 at (1,0); 2 at (0,1); 3 at (1,1)
    w = smoothed_position_targets(torch.arange(4), (2, 2), sigma=1.)
    e1, er2 = math.exp(-1), math.exp(-math.sqrt(2))
    row0 = torch.tensor([1., e1, e1, er2]) / (1 + 2 * e1 + er2)
    assert torch.allclose(w[0], row0, atol=1e-6)
    assert torch.allclose(w[3], row0.flip(0), atol=1e-6)
    assert torch.allclose(w, w.T, atol=1e-6)  # symmetric grid distances
    assert torch.allclose(w.sum(1), torch.ones(4))
    # sigma = 2: exp(-dist / 4)
    w2 = smoothed_position_targets(torch.tensor([1]), (2, 2), sigma=2.)
    raw = torch.tensor([math.exp(-.25), 1., math.exp(-math.sqrt(2) / 4),
                        math.exp(-.25)])
    assert torch.allclose(w2[0], raw / raw.sum(), atol=1e-6)
    # squared distance (authors' code): exp(-dist^2 / sigma^2)
    sq = smoothed_position_targets(torch.tensor([0]), (2, 2), 1.,
                                   squared=True)
    raw = torch.tensor([1., e1, e1, math.exp(-2)])
    assert torch.allclose(sq[0], raw / raw.sum(), atol=1e-6)


def test_smoothing_rectangular_grid_and_sigma_zero():
    # 2 rows x 3 columns: patch 5 is at (x=2, y=1)
    w = smoothed_position_targets(torch.tensor([5]), (2, 3), sigma=1.)
    d = torch.tensor([math.sqrt(5), math.sqrt(2), 1., 2., 1., 0.])
    assert torch.allclose(w[0], torch.exp(-d) / torch.exp(-d).sum(),
                          atol=1e-6)
    one_hot = smoothed_position_targets(torch.tensor([[2, 0]]), (2, 3), 0.)
    assert one_hot.tolist() == [[[0., 0., 1., 0., 0., 0.],
                                 [1., 0., 0., 0., 0., 0.]]]
    tiny = smoothed_position_targets(torch.tensor([4]), (2, 3), 1e-3)
    assert torch.allclose(tiny, F.one_hot(torch.tensor([4]), 6).float())


# -- attentive weights (Eq. 9) ----------------------------------------------
def test_attentive_weights_by_hand_and_normalised():
    cls = torch.tensor([[2., 0.]], requires_grad=True)
    patches = torch.tensor([[[3., 0.], [0., 1.], [-1., 0.]]],
                           requires_grad=True)
    a = attentive_weights(cls, patches, tau=0.1)  # cos = 1, 0, -1
    z = math.exp(10) + 1 + math.exp(-10)
    assert torch.allclose(a, torch.tensor([[math.exp(10) / z, 1 / z,
                                            math.exp(-10) / z]]))
    assert not a.requires_grad  # a constant of the loss
    torch.manual_seed(0)
    rand = attentive_weights(torch.randn(5, 8), torch.randn(5, 7, 8), 0.5)
    assert torch.allclose(rand.sum(1), torch.ones(5))
    assert (rand > 0).all()
    uniform = attentive_weights(torch.randn(2, 8), torch.randn(2, 4, 8),
                                float('inf'))
    assert torch.equal(uniform, torch.full((2, 4), .25))


# -- loss (Eq. 4-8) -----------------------------------------------------------
def test_loss_equals_hand_computation():
    # 1 image, 2 visible patches on a 1x2 grid (N = 2), both dropped
    logits = torch.tensor([[[2., 0.], [0., 1.]]])
    targets = torch.tensor([[[0.75, 0.25], [0., 1.]]])
    dropped = torch.tensor([[True, True]])
    ls0 = [2 - math.log(math.exp(2) + 1), -math.log(math.exp(2) + 1)]
    ls1 = [-math.log(1 + math.e), 1 - math.log(1 + math.e)]
    ce0 = -(0.75 * ls0[0] + 0.25 * ls0[1])
    ce1 = -ls1[1]
    plain = droppos_loss(logits, targets, dropped)
    assert plain.item() == pytest.approx((ce0 + ce1) / 2, rel=1e-6)
    weights = torch.tensor([[0.2, 0.8]])
    attn = droppos_loss(logits, targets, dropped, weights)
    assert attn.item() == pytest.approx(0.2 * ce0 + 0.8 * ce1, rel=1e-6)
    # an anchor (position kept) does not count (the 1 - M_pos term)
    anchor = droppos_loss(logits, targets, torch.tensor([[True, False]]),
                          weights)
    assert anchor.item() == pytest.approx(ce0, rel=1e-6)
    with pytest.raises(ValueError, match='no dropped position'):
        droppos_loss(logits, targets, torch.zeros(1, 2, dtype=torch.bool))


@pytest.mark.parametrize('separate_affinity', [False, True])
def test_head_loss_tiny_case_by_hand(separate_affinity):
    """The head's loss from its own logits equals Eq. 8 computed by hand
    with the smoothing row and the normalised attentive weights of the
    given affinity features (default: the encoder features)."""
    torch.manual_seed(0)
    head = DropPosHead(num_patches=4, in_channels=6, embed_dims=8,
                       num_layers=1, num_heads=2, sigma=1., tau=0.1)
    head.init_weights()
    feats = torch.randn(2, 1 + 3, 6)
    affinity = torch.randn(2, 1 + 3, 6) if separate_affinity else None
    positions = torch.tensor([[3, 0, 1], [2, 1, 0]])
    dropped = torch.tensor([[True, False, True], [True, True, False]])
    f = affinity if separate_affinity else feats
    weights = attentive_weights(f[:, 0], f[:, 1:], 0.1)
    out = head.loss(feats, positions, dropped, (2, 2), affinity)
    logits = head(feats).detach()
    e1, er2 = math.exp(-1), math.exp(-math.sqrt(2))
    rows = {0: [1, e1, e1, er2], 1: [e1, 1, er2, e1], 2: [e1, er2, 1, e1],
            3: [er2, e1, e1, 1]}
    num = den = 0.
    for b in range(2):
        for i in range(3):
            if not dropped[b, i]:
                continue
            t = torch.tensor(rows[int(positions[b, i])])
            t = t / t.sum()
            ce = -(t * logits[b, i].log_softmax(-1)).sum().item()
            num += weights[b, i].item() * ce
            den += weights[b, i].item()
    assert out['loss'].item() == pytest.approx(num / den, rel=1e-5)
    correct = [(logits[b, i].argmax() == positions[b, i]).item()
               for b in range(2) for i in range(3) if dropped[b, i]]
    assert out['acc_pos'].item() == pytest.approx(sum(correct) / 4)
    assert out['sigma'].item() == 1.


def test_head_checks_inputs():
    with pytest.raises(ValueError, match='tau'):
        DropPosHead(num_patches=4, in_channels=6, tau=-1.)
    with pytest.raises(ValueError, match='distance'):
        DropPosHead(num_patches=4, in_channels=6, distance='cosine')
    with pytest.raises(ValueError, match='sigma'):
        DropPosHead(num_patches=4, in_channels=6, sigma=-1.)
    head = DropPosHead(num_patches=4, in_channels=6, embed_dims=8,
                       num_heads=2, tau=None)
    assert not head.attentive
    args = (torch.randn(1, 3, 6), torch.zeros(1, 2).long(),
            torch.ones(1, 2, dtype=torch.bool), (3, 3))
    for method in (head.loss, head.predict):
        with pytest.raises(ValueError, match='num_patches=4'):
            method(*args)


def test_head_predict_is_the_argmax_of_the_logits():
    torch.manual_seed(0)
    head = DropPosHead(num_patches=4, in_channels=6, embed_dims=8,
                       num_layers=1, num_heads=2)
    head.init_weights()
    feats = torch.randn(2, 1 + 3, 6)
    positions = torch.tensor([[3, 0, 1], [2, 1, 0]])
    dropped = torch.tensor([[True, False, True], [True, True, False]])
    out = head.predict(feats, positions, dropped, (2, 2))
    pred = head(feats).argmax(-1)
    assert torch.equal(out['pred'], pred)
    hits = ((pred == positions) & dropped).sum().item()
    assert out['acc'].item() == pytest.approx(hits / 4)


# -- sigma schedule (Eq. 7) -------------------------------------------------
class _Runner:

    def __init__(self, model, cur_iter, max_iters):
        self.model, self.iter, self.max_iters = model, cur_iter, max_iters


def test_sigma_hook_linear_decay_and_resume():
    hook = DropPosSigmaHook(start=1., end=0.)
    assert [hook.value(t, 4) for t in range(5)] == [1., .75, .5, .25, 0.]
    assert DropPosSigmaHook(2., 0.).value(30, 40) == pytest.approx(.5)
    model = build()
    for t in (0, 7, 13):
        hook.before_train_iter(_Runner(model, t, 20), t)
        assert model.head.sigma.item() == pytest.approx(1 - t / 20)
    # resumed at iteration 13: a fresh model and hook continue exactly, and
    # the buffer travels in the state dict
    resumed = build()
    resumed.load_state_dict(model.state_dict())
    assert resumed.head.sigma.item() == pytest.approx(1 - 13 / 20)
    DropPosSigmaHook().before_train(_Runner(resumed, 13, 20))
    assert resumed.head.sigma.item() == pytest.approx(1 - 13 / 20)
    with pytest.raises(AttributeError, match='no attribute'):
        DropPosSigmaHook(attr='head.nope').before_train(
            _Runner(model, 0, 1))
    with pytest.raises(ValueError, match='sigma'):
        DropPosSigmaHook(start=-1.)


# -- algorithm: Eq. 3 input, loss, RoPE -------------------------------------
def _capture_encoder_input(model, inputs):
    """encode_masked, with the tokens and coordinates that reach the
    backbone's blocks."""
    seen = {}
    forward_tokens = model.backbone.forward_tokens

    def spy(tokens, coords=None, hw=None):
        seen.update(tokens=tokens, coords=coords)
        return forward_tokens(tokens, coords=coords, hw=hw)

    model.backbone.forward_tokens = spy
    out = model.encode_masked(inputs, 0.75, 0.75)
    return out, seen


def _assert_dropped_patches_unplaced(out, seen, hw):
    """Visible patches sit at their own grid coordinates, dropped ones at
    NaN (no rotation in any coordinate frame, see positions/base.py)."""
    ids, dropped = out['ids_keep'], out['dropped']
    expected = torch.where(dropped[..., None], torch.full((2, ), math.nan),
                           grid_coords(*hw)[ids])
    assert torch.equal(seen['coords'].isnan(), expected.isnan())
    assert torch.equal(seen['coords'].nan_to_num(), expected.nan_to_num())


def test_encoder_input_follows_eq3_sincos():
    model = build()
    inputs = torch.randn(3, 3, 32, 32)
    torch.manual_seed(5)
    out, seen = _capture_encoder_input(model, inputs)
    ids, dropped = out['ids_keep'], out['dropped']
    assert ids.shape == (3, 4) and (dropped.sum(1) == 3).all()
    patches = model.backbone.patch_embed(inputs)[0]
    pos = model.backbone.pos_embed[0, 1:]
    for b in range(3):
        for i in range(4):
            p = model.pos_mask_token[0, 0] if dropped[b, i] else \
                pos[ids[b, i]]
            assert torch.allclose(seen['tokens'][b, i],
                                  patches[b, ids[b, i]] + p, atol=1e-6)
    _assert_dropped_patches_unplaced(out, seen, (4, 4))
    assert out['feats'].shape == (3, 1 + 4, 48)
    # the fixed sin-cos APE stays frozen
    assert not model.backbone.pos_embed.requires_grad


def test_encoder_input_rope_dropped_patches_not_rotated():
    model = build(ROPE)
    assert model.backbone.rope is not None
    assert model.backbone.pos_embed is None
    inputs = torch.randn(2, 3, 32, 32)
    out, seen = _capture_encoder_input(model, inputs)
    ids, dropped = out['ids_keep'], out['dropped']
    _assert_dropped_patches_unplaced(out, seen, (4, 4))
    patches = model.backbone.patch_embed(inputs)[0]
    mark = dropped[..., None] * model.pos_mask_token
    assert torch.allclose(seen['tokens'],
                          patches.gather(1, ids[..., None].expand(-1, -1, 48))
                          + mark, atol=1e-6)


@pytest.mark.parametrize('backbone', [SINCOS, ROPE])
def test_loss_step_trains_encoder_decoder_and_mask_token(backbone):
    model = build(backbone)
    losses = model.loss(torch.randn(4, 3, 32, 32), [])
    assert set(losses) == {'loss', 'acc_pos', 'sigma'}
    assert math.isfinite(losses['loss'].item())
    assert 0 <= losses['acc_pos'].item() <= 1
    losses['loss'].backward()
    assert model.pos_mask_token.grad.abs().sum() > 0
    assert model.backbone.layers[0].attn.qkv.weight.grad.abs().sum() > 0
    assert model.head.fc.weight.grad.abs().sum() > 0


def test_loss_switched_off_smoothing_and_attention_is_cross_entropy():
    """sigma = 0 and tau = inf: Eq. 4, the mean cross-entropy on the
    dropped patches of the same masks (same seed)."""
    model = build(head=dict(HEAD, sigma=0., tau=None)).eval()
    inputs = torch.randn(4, 3, 32, 32)
    torch.manual_seed(11)
    loss = model.loss(inputs, [])['loss']
    torch.manual_seed(11)
    out = model.encode_masked(inputs, 0.75, 0.75)
    logits = model.head(out['feats'])
    ce = F.cross_entropy(logits[out['dropped']],
                         out['ids_keep'][out['dropped']])
    assert loss.item() == pytest.approx(ce.item(), rel=1e-6)


@pytest.mark.parametrize('source', ['full', 'visible'])
def test_affinity_sources(source):
    """Eq. 9's features: the whole image's (gradient-free) or the masked
    pass's; the loss is Eq. 8 with the weights from them."""
    model = build(affinity_source=source).eval()
    inputs = torch.randn(2, 3, 32, 32)
    torch.manual_seed(2)
    out = model.encode_masked(inputs, 0.75, 0.75)
    ids = out['ids_keep']
    affinity = model.affinity_feats(inputs, ids)
    if source == 'full':
        full = model.extract_feat(inputs)
        ref = torch.cat((full[:, :1], full[:, 1:].gather(
            1, ids[..., None].expand(-1, -1, 48))), dim=1)
        assert torch.equal(affinity, ref) and not affinity.requires_grad
    else:
        assert affinity is None
        ref = out['feats']
    cos = F.cosine_similarity(ref[:, :1], ref[:, 1:], dim=-1)
    weights = (cos / 0.1).softmax(-1)
    targets = smoothed_position_targets(ids, (4, 4), 1.)
    expected = droppos_loss(model.head(out['feats']), targets,
                            out['dropped'], weights)
    torch.manual_seed(2)
    loss = model.loss(inputs, [])['loss']
    assert loss.item() == pytest.approx(expected.item(), rel=1e-5)


def test_position_predictions_ratios():
    model = build().eval()
    res = model.position_predictions(torch.randn(2, 3, 32, 32), 0., 0.95)
    assert res['target'].shape == (2, 16)
    assert (res['dropped'].sum(1) == 16 - 0).all()  # floor(0.05 * 16) = 0
    res = model.position_predictions(torch.randn(2, 3, 32, 32), 0.5, 0.5)
    assert (res['dropped'].sum(1) == 4).all()
    acc = (res['pred'] == res['target'])[res['dropped']].float().mean()
    assert res['acc'].item() == pytest.approx(acc.item())


def _load_tool():
    import importlib.util
    from conftest import REPO
    path = REPO / 'tools/analysis_tools/droppos_position_acc.py'
    spec = importlib.util.spec_from_file_location('droppos_position_acc',
                                                  path)
    tool = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tool)
    return tool


def test_position_accuracy_table_16_cases_and_layout():
    tool = _load_tool()
    model = build()
    batches = [torch.randn(4, 3, 32, 32) for _ in range(2)]
    acc = tool.position_accuracy_table(model, batches, seed=3)
    assert sorted(acc) == sorted(
        (g, p) for g in (0., .25, .5, .75) for p in (.25, .5, .75, .95))
    assert all(0 <= v <= 100 for v in acc.values())
    # repeatable: masks come from the seed
    assert acc == tool.position_accuracy_table(model, batches, seed=3)
    table = tool.format_table(acc)
    lines = table.splitlines()
    assert lines[0] == ('| gamma \\ gamma_pos | 0.25 | 0.50 | 0.75 | 0.95 '
                        '| avg. |')
    assert len([ln for ln in lines if ln.startswith('| 0.')]) == 4
    mean = sum(acc.values()) / 16
    assert f'Avg. acc: {mean:.2f}' in table
    row = [f'{acc[.5, p]:.2f}' for p in (.25, .5, .75, .95)]
    assert f"| 0.50 | {' | '.join(row)} |" in table
    csv = tool.format_table(acc, 'csv').splitlines()
    assert csv[0] == 'gamma \\ gamma_pos,0.25,0.50,0.75,0.95,avg.'
    assert csv[-1].split(',')[-1] == f'{mean:.2f}' and len(csv) == 6
    with pytest.raises(ValueError, match='format'):
        tool.format_table(acc, 'latex')


def test_bad_configs_are_named():
    with pytest.raises(ValueError, match='mask_ratio'):
        build(mask_ratio=1.)
    with pytest.raises(ValueError, match='pos_mask_ratio'):
        build(pos_mask_ratio=0.)
    with pytest.raises(ValueError, match='affinity_source'):
        build(affinity_source='teacher')
    with pytest.raises(ValueError, match='out_type'):
        build(dict(ROPE, out_type='featmap'))
    with pytest.raises(ValueError, match='class token'):
        build(dict(ROPE, with_cls_token=False, out_type='raw'))
    with pytest.raises(ValueError, match='num_patches'):
        build().loss(torch.randn(1, 3, 40, 40), [])


def _downstream_backbone():
    from mmpretrain.registry import MODELS
    return MODELS.build(dict(
        type='RoPEVisionTransformer', arch=ARCH, img_size=64, patch_size=8,
        rope=None, use_ape=True, out_type='featmap'))


def test_backbone_weights_convert_to_downstream_vit():
    model = build()
    state = {k[len('backbone.'):]: v for k, v in model.state_dict().items()
             if k.startswith('backbone.')}
    backbone = _downstream_backbone()
    # strict: every key matches (pos_embed is resized 4x4 -> 8x8 on load)
    backbone.load_state_dict(state, strict=True)
    assert backbone(torch.randn(1, 3, 64, 64))[0].shape == (1, 48, 8, 8)
    from mmpretrain.models import VisionTransformer
    vit = VisionTransformer(arch=ARCH, img_size=32, patch_size=8,
                            out_type='raw')
    vit.load_state_dict(state, strict=True)


# -- mini pretraining run ---------------------------------------------------
DEMOS = ('configs/demo/mask-rcnn_vit-tiny-rope-mixed_mini-coco.py',
         'configs/demo/upernet_vit-tiny-rope-mixed_mini-ade.py')


def _demo_backbones(**overrides):
    from mmengine.config import Config
    from mmpretrain.registry import MODELS
    for path in DEMOS:
        cfg = Config.fromfile(path).model.backbone
        cfg.update(type=cfg.type.split('.')[-1], init_cfg=None, **overrides)
        yield MODELS.build(cfg)


@pytest.mark.slow
def test_mini_run_position_accuracy_rises_and_converts(tmp_path, mini_data):
    data = f'train_dataloader.dataset.data_root={mini_data}/unlabeled/'
    result = run_tool('tools/train.py', MINI, '--work-dir', tmp_path,
                      '--cfg-options', data, timeout=900)
    assert result.returncode == 0, (result.stdout + result.stderr)[-4000:]
    records = [r for r in read_scalars(tmp_path) if 'loss' in r]
    accs = [r['acc_pos'] for r in records]
    losses = [r['loss'] for r in records]
    assert all(math.isfinite(v) for v in losses)
    chance = 1 / 16
    assert sum(accs[:3]) / 3 < 1.5 * chance, accs
    # measured on this fixture (64 images, gamma = 0.25, squared kernel):
    # 69.2% over the last 10 records, loss 3.70 -> 0.87 (log 16 = 2.77);
    # plain-distance kernel: 61.7%, 3.70 -> 1.09
    assert sum(accs[-10:]) / 10 > 2.5 * chance, accs
    assert sum(losses[-5:]) / 5 < math.log(16) - 0.1, losses
    # sigma decays linearly 1 -> 0 (Eq. 7); the checkpoint holds the value
    # of the last iteration, which a resumed run would continue from
    sigmas = [r['sigma'] for r in records]
    assert sigmas == sorted(sigmas, reverse=True) and sigmas[-1] < 0.05
    # the encoder sees the class token and the 12 kept of 16 patches
    tokens = json.loads((tmp_path / 'encoder_tokens.json').read_text())
    assert tokens['tokens_per_image'] == 16 * (1 - 0.25) + 1
    ckpt = torch.load(tmp_path / 'iter_300.pth', map_location='cpu',
                      weights_only=False)
    state = ckpt['state_dict']
    assert state['head.sigma'].item() == pytest.approx(1 - 299 / 300)
    weights = {k[len('backbone.'):]: v for k, v in state.items()
               if k.startswith('backbone.')}
    # the demo Mask R-CNN / UperNet backbones in APE mode: strict (UperNet's
    # multi-level backbone has no final norm)
    for backbone in _demo_backbones(rope=None, use_ape=True):
        backbone.load_state_dict(
            {k: v for k, v in weights.items()
             if backbone.final_norm or not k.startswith('ln1.')},
            strict=True)
        assert backbone(torch.randn(1, 3, 64, 64))[-1].shape[-2:] == (8, 8)
    # as configured (RoPE-Mixed, no APE): only the new RoPE frequencies are
    # missing and only the APE table is left over
    for backbone in _demo_backbones():
        missing, unexpected = backbone.load_state_dict(weights, strict=False)
        assert missing and all(k.startswith('rope.freqs.')
                               for k in missing)
        assert set(unexpected) == {'pos_embed'} | (
            set() if backbone.final_norm else {'ln1.weight', 'ln1.bias'})


def test_input_not_a_multiple_of_the_patch_is_refused_by_the_head():
    """The backbone pads 36 px to 40 (as mmpretrain's ViT); the position
    head then names the 5 x 5 grid it was not built for."""
    with pytest.raises(ValueError, match='num_patches=16 does not match the '
                       '5x5 patch grid'):
        build(ROPE).loss(torch.randn(2, 3, 36, 36), [])
