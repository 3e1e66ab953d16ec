"""CR2PQ: Eq. 4 coordinates (Fig. 2 cases, Listing 1), the positional
cross-attention (Eq. 8), the losses (Eq. 9-10), the teacher (EMA / frozen /
pixels) and the Table 6 position switches. The mini pretraining run and its
transfer: tests/models/selfsup/cr2pq/test_cr2pq_transfer.py."""

import pytest
import torch
from mmengine.logging import MessageHub
from mmpretrain.structures import DataSample

from mmpos.datasets.transforms.crop_boxes import tlhw_to_box
from mmpos.models.layers.attention import RoPEAttention
from mmpos.models.layers.positions import (build_position_scheme,
                                           grid_coords, sincos_pos_embed_2d)
from mmpos.models.selfsup.cr2pq import relative_coords
from mmpos.models.selfsup.cr2pq import (CR2PQ, CR2PQLoss, CR2PQNeck,
                                       RoPECrossAttention,
                                       featmap_to_tokens, patchify)

from conftest import (assert_cosine_ema_steps, ema_teacher_step,
                      start_ema_teachers)

IMG = (224, 224)
ARCH = dict(embed_dims=64, num_layers=2, num_heads=2, feedforward_channels=128)


def boxes(*tlhw, hflip=False):
    """Paper-notation (top, left, height, width) pixel boxes -> (N, 4)."""
    return torch.as_tensor(tlhw_to_box(tlhw, IMG, hflip=hflip))


def listing1(p_a, p_b, k_a, k_b):
    """Listing 1 with its slips fixed: ``h_start, h_end = bias, bias + K_B *
    scale`` (it assigned one value to two names), ``K_B`` points exactly
    (no float ``arange`` end), and ``meshgrid(rows, cols, 'ij')`` (it passed
    the width grid first, i.e. a transposed matrix). Returns (rows, cols)."""
    w_per_grid_a, h_per_grid_a = p_a[3] / k_a, p_a[2] / k_a
    w_bias = (p_b[1] - p_a[1]) / w_per_grid_a
    h_bias = (p_b[0] - p_a[0]) / h_per_grid_a
    w_scale = p_b[3] / k_b / w_per_grid_a
    h_scale = p_b[2] / k_b / h_per_grid_a
    grid_h = h_bias + h_scale * torch.arange(k_b, dtype=torch.float64)
    grid_w = w_bias + w_scale * torch.arange(k_b, dtype=torch.float64)
    return torch.meshgrid(grid_h, grid_w, indexing='ij')


A = (0, 0, 112, 112)  # 4 x 4 grid: 28 px per A-patch
FIG2 = {
    # B inside A, half the patch size: rows/cols 1 + 0.5 m
    'containing': ((28, 28, 56, 56), [1, 1.5, 2, 2.5], [1, 1.5, 2, 2.5],
                   [.75, 1.25, 1.75, 2.25], [.75, 1.25, 1.75, 2.25]),
    # rows: offset 2, scale 1; columns: offset 3, scale 0.5
    'overlapping': ((56, 84, 112, 56), [2, 3, 4, 5], [3, 3.5, 4, 4.5],
                    [2, 3, 4, 5], [2.75, 3.25, 3.75, 4.25]),
    # below-right of A, no shared pixel: beyond A's grid
    'disjoint': ((112, 168, 56, 56), [4, 4.5, 5, 5.5], [6, 6.5, 7, 7.5],
                 [3.75, 4.25, 4.75, 5.25], [5.75, 6.25, 6.75, 7.25]),
}


def column(values):
    """``(4,)`` values as a ``(4, 4)`` matrix constant along rows."""
    return torch.tensor(values, dtype=torch.float).view(4, 1).expand(4, 4)


@pytest.mark.parametrize('case', sorted(FIG2))
def test_relative_coords_fig2_cases(case):
    """Hand-computed Eq. 4 (corner) and patch-centre coordinates."""
    b, rows, cols, c_rows, c_cols = FIG2[case]
    for align, r, c in (('corner', rows, cols), ('center', c_rows, c_cols)):
        xy = relative_coords(boxes(A), boxes(b), (4, 4), (4, 4),
                             align).reshape(4, 4, 2)
        assert torch.allclose(xy[..., 1], column(r), atol=1e-5), align
        assert torch.allclose(xy[..., 0], column(c).T, atol=1e-5), align
    rows_1, cols_1 = listing1(A, b, 4, 4)
    assert torch.allclose(rows_1.float(), column(rows))
    assert torch.allclose(cols_1.float(), column(cols).T)


def test_relative_coords_match_listing1_batched_and_negative():
    """A batch of random pairs (B left of / above A gives negative
    coordinates) equals the fixed Listing 1, K_A != K_B."""
    torch.manual_seed(0)
    tl = torch.rand(32, 2, 2) * 150
    hw = 20 + torch.rand(32, 2, 2) * 70
    p = torch.cat([tl, hw], -1)  # (32, views, (top, left, h, w))
    coords = relative_coords(boxes(*p[:, 0]), boxes(*p[:, 1]), (14, 14),
                             (7, 7), 'corner')
    assert coords.shape == (32, 49, 2)
    ref = torch.stack([
        torch.stack(listing1(p[i, 0].double(), p[i, 1].double(), 14, 7)[::-1],
                    -1).reshape(49, 2) for i in range(32)
    ]).float()
    assert torch.allclose(coords, ref, atol=1e-3)
    assert (coords < 0).any()


@pytest.mark.parametrize('align', ['center', 'corner'])
def test_b_equal_a_gives_a_grid_also_flipped(align):
    a = boxes((10, 30, 100, 150))
    grid = grid_coords(6, 8)
    assert torch.allclose(relative_coords(a, a, (6, 8), (6, 8), align)[0],
                          grid, atol=1e-5)
    flipped = boxes((10, 30, 100, 150), hflip=True)
    assert torch.allclose(
        relative_coords(flipped, flipped, (6, 8), (6, 8), align)[0], grid,
        atol=1e-5)


def test_flipped_b_lands_on_mirrored_patches():
    """Same region, B flipped: B's column n is A's column K - 1 - n."""
    a = boxes((0, 0, 112, 112))
    b = boxes((0, 0, 112, 112), hflip=True)
    xy = relative_coords(a, b, (4, 4), (4, 4)).reshape(4, 4, 2)
    assert torch.allclose(xy[..., 0], torch.tensor([3., 2, 1, 0]).expand(4, 4))
    assert torch.allclose(xy[..., 1], torch.arange(4.).view(4, 1).expand(4, 4))


def test_relative_coords_ignore_a_common_shift_and_zoom():
    a, b = boxes((10, 20, 80, 60)), boxes((50, 40, 30, 90))
    ref = relative_coords(a, b, (5, 5), (3, 4))
    moved = relative_coords(a * 0.5 + 0.2, b * 0.5 + 0.2, (5, 5), (3, 4))
    assert torch.allclose(ref, moved, atol=1e-5)
    with pytest.raises(ValueError, match='align'):
        relative_coords(a, b, (5, 5), (3, 4), align='middle')


@pytest.mark.parametrize('rope_type', ['axial', 'mixed'])
def test_cross_attention_with_b_equal_a_is_a_self_attention(rope_type):
    """Identity projections, queries = A's tokens at Eq. 4's coordinates of
    B == A: exactly A's RoPE self-attention (same pattern, same output)."""
    torch.manual_seed(0)
    C, heads, hw = 32, 2, (3, 5)
    tokens = torch.randn(2, 15, C)
    eye = torch.eye(C)
    cross, self_attn = RoPECrossAttention(C, heads), RoPEAttention(C, heads)
    rope = build_position_scheme(dict(type=rope_type), C // heads, heads, 1)
    with torch.no_grad():
        cross.q.weight.copy_(eye)
        cross.kv.weight.copy_(torch.cat([eye, eye]))
        self_attn.qkv.weight.copy_(torch.cat([eye, eye, eye]))
        for layer in (cross.q, cross.kv, cross.proj, self_attn.qkv,
                      self_attn.proj):
            layer.bias.zero_()
        cross.proj.weight.copy_(eye)
        self_attn.proj.weight.copy_(eye)
    box = boxes((3, 7, 90, 150)).expand(2, 4)
    coords = relative_coords(box, box, hw, hw)
    grid = rope.block_table(0, grid_coords(*hw)[None])
    out = cross(tokens, tokens, query_rope=rope.block_table(0, coords),
                context_rope=grid)
    assert torch.allclose(out, self_attn(tokens, rope=grid), atol=1e-5)
    # not trivially equal: other coordinates change the pattern
    shifted = cross(tokens, tokens,
                    query_rope=rope.block_table(0, coords + .5),
                    context_rope=grid)
    assert not torch.allclose(shifted, out, atol=1e-3)


@pytest.mark.parametrize('rope_type', ['lookhere', 'pape', 'pape_ri'])
def test_neck_refuses_bias_schemes(rope_type):
    """A bias between one token set's positions has no meaning between two
    views' positions: refused in one line instead of dropped (LookHere's
    table would rotate nothing) or failing at the first forward (PaPE)."""
    with pytest.raises(ValueError, match=f"rope type '{rope_type}' adds an "
                       'attention bias'):
        CR2PQNeck(embed_dims=32, num_heads=2, out_channels=8,
                  rope=dict(type=rope_type))


def test_loss_hand_computed():
    pred = torch.tensor([[[1., 2.], [0., 0.]]])
    target = torch.tensor([[[0., 0.], [1., -1.]]])
    glob = torch.tensor([[1., 1.]])
    # target mean (0.5, -0.5)
    l2 = CR2PQLoss(p=2, global_weight=.5, norm='none')(pred, glob, target)
    assert l2['loss_patch'].item() == pytest.approx((5 + 2) / 2)
    assert l2['loss_global'].item() == pytest.approx(.5 * (.25 + 2.25))
    l1 = CR2PQLoss(p=1, global_weight=1., norm='none')(pred, glob, target)
    assert l1['loss_patch'].item() == pytest.approx((3 + 2) / 2)
    assert l1['loss_global'].item() == pytest.approx(.5 + 1.5)
    cos = CR2PQLoss(norm='l2')(target * 3, glob, target)
    assert cos['loss_patch'].item() == pytest.approx(0, abs=1e-6)
    assert cos['loss_global'].item() == pytest.approx(.5 * 2)  # orthogonal
    with pytest.raises(ValueError, match='pred_patch'):
        CR2PQLoss()(pred[:, :1], glob, target)
    with pytest.raises(ValueError, match='norm'):
        CR2PQLoss(norm='batch')


def test_patchify_mae_order():
    img = torch.arange(2 * 4 * 6.).view(1, 2, 4, 6)
    patches = patchify(img, 2)
    assert patches.shape == (1, 6, 8)
    # patch (row 0, col 1): pixels (0,2),(0,3),(1,2),(1,3), channels last
    assert patches[0, 1].tolist() == [2, 26, 3, 27, 8, 32, 9, 33]
    # the peer: mmpretrain's MAEPretrainHead.patchify, on the square inputs
    # it accepts (ours also takes non-square ones, as above)
    from mmpretrain.models.heads import MAEPretrainHead
    square = torch.randn(2, 3, 16, 16)
    mae = MAEPretrainHead(loss=dict(type='PixelReconstructionLoss',
                                    criterion='L2'), patch_size=4)
    assert torch.equal(patchify(square, 4), mae.patchify(square))


def build(**kwargs):
    cfg = dict(
        backbone=dict(type='RoPEVisionTransformer', arch=ARCH, img_size=32,
                      patch_size=8, rope=dict(type='axial'),
                      out_type='featmap'),
        neck=dict(type='CR2PQNeck', embed_dims=64, num_heads=2,
                  out_channels=64, hidden_channels=64),
        base_momentum=0.01)
    neck = kwargs.pop('neck', {})
    cfg['neck'].update(neck)
    cfg.update(kwargs)
    torch.manual_seed(0)
    model = CR2PQ(**cfg)
    model.init_weights()
    return start_ema_teachers(model.train())


def batch(n=2, size=32):
    torch.manual_seed(1)
    inputs = [torch.randn(n, 3, size, size) for _ in range(2)]
    box = torch.tensor([[0., 0., .6, .8], [.7, .1, .2, .9]])  # B flipped
    return inputs, [DataSample(crop_boxes=box) for _ in range(n)]


@pytest.fixture(autouse=True)
def max_iters():
    MessageHub.get_current_instance().update_info('max_iters', 8)


def test_gradient_reaches_only_the_student():
    model = build()
    losses = model.loss(*batch())
    assert set(losses) == {'loss_patch', 'loss_global', 'target_std'}
    sum(losses.values()).backward()
    teacher = list(model.target_generator.parameters())
    assert teacher and all(not p.requires_grad and p.grad is None
                           for p in teacher)
    student = [(n, p) for n, p in model.named_parameters()
               if not n.startswith('target_generator')]
    missing = [n for n, p in student if p.grad is None or not p.grad.any()]
    assert not missing, missing
    assert not model.target_generator.training  # no drop-path / BN updates


def test_ema_teacher_update():
    """CosineEMA: step 0 copies the student, then teacher = (1 - m) teacher
    + m student with m = 0.01 (cos(pi k / 8) + 1) / 2."""
    model = build()  # the hook's step 0 copied the student
    assert_cosine_ema_steps(
        lambda: ema_teacher_step(model),
        model.backbone.patch_embed.projection.weight,
        model.target_generator.module.patch_embed.projection.weight, 0.01)


def test_frozen_resnet_teacher_sets_grid_b():
    """A frozen ResNet-18 teacher: K_B is its 2 x 2 output grid at 64 px
    (the 224 / 7 = 32 scaling), targets of its 512 channels, never
    updated; the student is unchanged by it."""
    model = build(
        target=dict(type='ResNet', depth=18, out_indices=(3, )),
        neck=dict(out_channels=512),
        loss=dict(type='CR2PQLoss', norm='layernorm'))
    seen = {}
    model.neck.register_forward_hook(
        lambda m, args, out: seen.update(coords=args[2], z=out[0]))
    before = {k: v.clone() for k, v in
              model.target_generator.state_dict().items()}
    inputs, samples = batch(size=64)
    sum(model.loss(inputs, samples).values()).backward()
    assert seen['coords'].shape == (2, 4, 2) and seen['z'].shape == (2, 4, 512)
    assert all(torch.equal(v, model.target_generator.state_dict()[k])
               for k, v in before.items())  # BN statistics included
    assert all(p.grad is None for p in model.target_generator.parameters())


def test_frozen_pretrained_vit_teacher_sets_grid_b(tmp_path):
    """A frozen ViT teacher with 16 px patches, loaded from a checkpoint
    through its init_cfg: K_B is its 4 x 4 grid at 64 px while the student
    has 8 x 8 patches, so B's queries sit at Eq. 4's coordinates of a
    4 x 4 grid in A's 8 x 8 one; the teacher stays as loaded."""
    from mmpretrain.registry import MODELS
    teacher = dict(type='RoPEVisionTransformer', arch=ARCH, img_size=64,
                   patch_size=16, rope=dict(type='axial'), out_type='featmap')
    torch.manual_seed(5)
    pretrained = MODELS.build(teacher).state_dict()
    torch.save(pretrained, tmp_path / 'teacher.pth')
    model = build(
        target=dict(teacher, init_cfg=dict(
            type='Pretrained', checkpoint=str(tmp_path / 'teacher.pth'))),
        loss=dict(type='CR2PQLoss', norm='layernorm'))
    loaded = model.target_generator.state_dict()
    assert loaded.keys() == pretrained.keys()
    assert all(torch.equal(v, loaded[k]) for k, v in pretrained.items())
    seen = record(model)
    inputs, samples = batch(size=64)
    sum(model.loss(inputs, samples).values()).backward()
    assert torch.allclose(seen['coords_b'], eq4_coords(samples, (8, 8),
                                                       (4, 4)))
    assert seen['target'].shape == (2, 16, 64)
    assert torch.equal(seen['target'], featmap_to_tokens(
        model.target_generator(inputs[1])[-1]))
    assert all(torch.equal(v, model.target_generator.state_dict()[k])
               for k, v in pretrained.items())
    assert all(p.grad is None for p in model.target_generator.parameters())


def record(model):
    """Hooks saving what the neck, its query/context norms and the loss
    receive during the next ``model.loss``."""
    seen = {}
    neck = model.neck
    neck.register_forward_hook(
        lambda m, args, kwargs, out: seen.update(
            tokens_a=args[0], coords_b=args[2],
            coords_a=kwargs.get('coords_a')), with_kwargs=True)
    neck.norm_query.register_forward_hook(
        lambda m, args, out: seen.update(query=args[0]))
    neck.norm_context.register_forward_hook(
        lambda m, args, out: seen.update(context=args[0]))
    model.loss_module.register_forward_hook(
        lambda m, args, out: seen.update(target=args[2]))
    return seen


def eq4_coords(samples, grid_a, grid_b):
    box = samples[0].crop_boxes
    return relative_coords(box[0], box[1], grid_a, grid_b).expand(2, -1, -1)


def test_continuous_rope_queries_at_eq4_coordinates():
    """Default row: one shared query content (no additive embedding),
    rotated at Eq. 4's fractional coordinates; keys rotated at A's grid."""
    model = build()
    seen = record(model)
    inputs, samples = batch()
    model.loss(inputs, samples)
    coords = eq4_coords(samples, (4, 4), (4, 4))
    assert torch.allclose(seen['coords_b'], coords)
    assert not torch.equal(coords, coords.round())  # continuous
    assert seen['coords_a'] is None  # keys: A's whole grid
    assert model.neck.rope is not None
    query = model.neck.mask_token.expand_as(seen['query'])
    assert torch.equal(seen['query'], query)
    assert torch.equal(seen['context'], seen['tokens_a'])


@pytest.mark.parametrize('pos_type', ['sincos', 'mlp'])
def test_additive_rows_embed_the_continuous_coordinates(pos_type):
    """Continuous sin-cos / learnable rows: no rotation; queries = h_mask +
    PE(Eq. 4 coordinates), A's tokens + PE(A's grid), PE = the fixed 2-D
    sin-cos table or the 2-layer MLP of (x, y)."""
    model = build(neck=dict(pos_type=pos_type),
                  backbone=dict(type='RoPEVisionTransformer', arch=ARCH,
                                img_size=32, patch_size=8, rope=None,
                                use_ape=True, ape_type='sincos',
                                out_type='featmap'))
    seen = record(model)
    inputs, samples = batch()
    losses = model.loss(inputs, samples)
    neck = model.neck
    assert neck.rope is None
    assert (neck.pos_mlp is not None) == (pos_type == 'mlp')
    pe = (lambda c: sincos_pos_embed_2d(c, 64)) if pos_type == 'sincos' \
        else neck.pos_mlp
    coords = eq4_coords(samples, (4, 4), (4, 4))
    assert torch.allclose(seen['query'], neck.mask_token + pe(coords),
                          atol=1e-6)
    assert torch.allclose(seen['context'],
                          seen['tokens_a'] + pe(grid_coords(4, 4)),
                          atol=1e-6)
    sum(losses.values()).backward()
    assert neck.mask_token.grad.abs().sum() > 0
    if pos_type == 'mlp':
        assert all(p.grad.abs().sum() > 0 for p in neck.pos_mlp.parameters())


@pytest.mark.parametrize('pos_type', ['rope', 'sincos'])
def test_discrete_rows_mask_one_view_at_integer_positions(pos_type):
    """Discrete RoPE / discrete sin-cos (mask_ratio): the 16 visible
    patches of A's 8 x 8 grid sit at their integer positions, the queries
    at the 48 masked ones (disjoint, together the whole grid), and the
    targets are the teacher's tokens (here: A's pixels) there."""
    backbone = dict(type='RoPEVisionTransformer', arch=ARCH, img_size=64,
                    patch_size=8, rope=dict(type='axial'), out_type='raw')
    if pos_type == 'sincos':
        backbone.update(rope=None, use_ape=True, ape_type='sincos')
    model = build(backbone=backbone, target='pixel', mask_ratio=.75,
                  neck=dict(out_channels=192, pos_type=pos_type),
                  loss=dict(type='CR2PQLoss', norm='layernorm'))
    seen = record(model)
    inputs, samples = batch(size=64)
    losses = model.loss(inputs, samples)
    vis, masked = seen['coords_a'], seen['coords_b']
    assert vis.shape == (2, 16, 2) and masked.shape == (2, 48, 2)
    assert seen['tokens_a'].shape == (2, 16, 64)  # class token dropped
    for v, m in zip(vis, masked):
        both = torch.cat([v, m]).tolist()
        assert sorted(map(tuple, both)) == sorted(
            map(tuple, grid_coords(8, 8).tolist()))
    index = (masked[..., 1] * 8 + masked[..., 0]).long()
    pixels = patchify(inputs[0], 8)
    assert torch.equal(seen['target'],
                       pixels.gather(1, index[..., None].expand(-1, -1,
                                                                192)))
    if pos_type == 'sincos':
        assert torch.allclose(
            seen['query'],
            model.neck.mask_token + sincos_pos_embed_2d(masked, 64),
            atol=1e-6)
    sum(losses.values()).backward()
    assert model.backbone.patch_embed.projection.weight.grad.abs().sum() > 0


def test_discrete_rows_with_ema_teacher_and_bad_settings():
    model = build(backbone=dict(type='RoPEVisionTransformer', arch=ARCH,
                                img_size=32, patch_size=8,
                                rope=dict(type='axial'), out_type='raw'),
                  mask_ratio=.5)
    seen = record(model)
    inputs, samples = batch()
    model.loss(inputs, samples)
    # the EMA copy of the student (step 0: equal) on the whole view A
    full = model.target_generator(inputs[0])[-1][:, 1:]
    index = (seen['coords_b'][..., 1] * 4 + seen['coords_b'][..., 0]).long()
    assert torch.equal(seen['target'],
                       full.gather(1, index[..., None].expand(-1, -1, 64)))
    with pytest.raises(ValueError, match="out_type='raw'"):
        build(mask_ratio=.75)
    with pytest.raises(ValueError, match='mask_ratio'):
        build(mask_ratio=1.)


def test_pixel_targets_are_view_b_patches():
    model = build(target='pixel', neck=dict(out_channels=192),
                  loss=dict(type='CR2PQLoss', norm='layernorm'))
    assert model.target_generator is None
    seen = record(model)
    inputs, samples = batch()
    model.loss(inputs, samples)
    assert torch.equal(seen['target'], patchify(inputs[1], 8))


ABLATION = 'configs/cr2pq/pos_ablation/cr2pq_vit-small-p16_32xb64-300e_in1k_'


@pytest.mark.parametrize('row,discrete,rotary', [
    ('discrete-rope', True, True), ('continuous-sincos', False, False),
    ('learnable', False, False), ('discrete-sincos', True, False)])
def test_table6_configs_switch_the_query_positions(row, discrete, rotary):
    """Each Table 6 config (model shrunk to 1 block of 64 channels): the
    discrete rows query integer positions from a masked view A, the
    continuous ones Eq. 4's fractional coordinates from the whole A."""
    from mmengine.config import Config
    cfg = Config.fromfile(ABLATION + row + '.py').model
    cfg.backbone.update(arch=ARCH, img_size=32, patch_size=8)
    cfg.neck.update(embed_dims=64, num_heads=2, out_channels=64,
                    hidden_channels=64)
    cfg.pop('type')
    cfg.pop('data_preprocessor')
    model = build(**cfg)
    seen = record(model)
    model.loss(*batch())
    coords = seen['coords_b']
    assert torch.equal(coords, coords.round()) == discrete
    assert (seen['coords_a'] is not None) == discrete
    assert (model.neck.rope is not None) == rotary
    assert (model.backbone.rope is not None) == rotary


def test_symmetric_and_bad_inputs():
    model = build(symmetric=True)
    assert set(model.loss(*batch())) == {
        'loss_patch', 'loss_global', 'target_std'}
    inputs, _ = batch()
    with pytest.raises(KeyError, match='crop_boxes'):
        model.loss(inputs, [DataSample(), DataSample()])
    with pytest.raises(ValueError, match='views'):
        model.loss(inputs[:1], batch()[1])
    with pytest.raises(ValueError, match='target'):
        build(target='frozen')


# View-consistent RoPE: view A is the source's top-left quarter, view B its
# centre quarter (the second image shows B mirrored); A's patch rows and
# columns 2-3 see the source pixels of B's rows and columns 0-1 (mirrored B:
# columns 3-2). Views of 32 px: 4 x 4 patches each.
VIEW_A = (0., 0., .5, .5)
VIEWS_B = ((.25, .25, .75, .75), (.75, .25, .25, .75))


def source_fractions(box, k=4):
    """``(k * k, 2)`` source-image fractions ``(u, v)`` of the patch
    centres of a ``k x k`` view cropped with ``box`` (row-major)."""
    t = (torch.arange(k) + .5) / k
    u = box[0] + t * (box[2] - box[0])
    v = box[1] + t * (box[3] - box[1])
    rows, cols = torch.meshgrid(v, u, indexing='ij')
    return torch.stack((cols, rows), -1).reshape(-1, 2)


def view_consistent_step(frame, view_consistent_rope=True):
    """One loss step; returns the RoPE coordinates the student backbone
    (view A), the EMA teacher (view B) and the neck (B's queries, A's keys)
    received."""
    backbone = dict(type='RoPEVisionTransformer', arch=ARCH, img_size=32,
                    patch_size=8, out_type='featmap',
                    rope=dict(type='axial', coords=dict(frame=frame)))
    model = build(backbone=backbone,
                  view_consistent_rope=view_consistent_rope)
    seen = {}

    def record(name):
        def hook(module, args, output):  # one tensor for every block
            seen[name] = output
        return hook

    model.backbone.rope.coords.register_forward_hook(record('student'))
    model.target_generator.module.rope.coords.register_forward_hook(
        record('teacher'))
    model.neck.register_forward_pre_hook(
        lambda module, args, kwargs: seen.update(
            neck_b=args[2], neck_a=kwargs['coords_a']), with_kwargs=True)
    inputs = [torch.randn(2, 3, 32, 32) for _ in range(2)]
    samples = [DataSample(crop_boxes=torch.tensor([VIEW_A, b]))
               for b in VIEWS_B]
    losses = model.loss(inputs, samples)
    assert all(torch.isfinite(v) for v in losses.values())
    return seen


def overlap(coords):
    """``(2, 16, 2)`` coordinates of view A -> its rows/columns 2-3, and of
    view B -> its rows/columns 0-1 (the second image mirrored: columns
    3-2), i.e. the same source pixels, as ``(2, 2, 2, 2)``."""
    grid = coords.reshape(-1, 4, 4, 2)
    return grid[:, 2:, 2:], grid[:, :2, :2], grid[:, :2, [3, 2]]


@pytest.mark.parametrize('frame', ['patch', 'separate'])
def test_view_consistent_rope_rotates_views_at_their_source_coordinates(
        frame):
    seen = view_consistent_step(frame)
    # every token at its crop-box source position, in the backbone's frame:
    # 2u - 1 when normalised, u K - 1/2 (the source over the 4 x 4 grid)
    # in patch units
    to_frame = ((lambda f: 2 * f - 1) if frame == 'separate' else
                (lambda f: 4 * f - .5))
    expected_a = to_frame(source_fractions(VIEW_A)).expand(2, -1, -1)
    expected_b = torch.stack([to_frame(source_fractions(b))
                              for b in VIEWS_B])
    torch.testing.assert_close(seen['student'], expected_a)
    torch.testing.assert_close(seen['teacher'], expected_b)
    # the neck: A's keys and B's queries in A's patch units, any frame
    torch.testing.assert_close(seen['neck_a'],
                               4 * source_fractions(VIEW_A).expand(2, -1, -1)
                               - .5)
    torch.testing.assert_close(seen['neck_b'], 4 * torch.stack(
        [source_fractions(b) for b in VIEWS_B]) - .5)
    # one source pixel seen in A and in B gets one coordinate everywhere
    for a, b in (('student', 'teacher'), ('neck_a', 'neck_b')):
        in_a, _, _ = overlap(seen[a])
        _, in_b, _ = overlap(seen[b][:1])
        _, _, in_b_mirrored = overlap(seen[b][1:])
        torch.testing.assert_close(in_a[0], in_b[0])
        torch.testing.assert_close(in_a[1], in_b_mirrored[0])


def test_own_grids_are_not_view_consistent():
    """Without the option each view keeps its own grid (the student's and
    the teacher's coordinates are equal for equal view sizes, whatever the
    boxes) and the neck gets Eq. 4's coordinates in A's own patches."""
    seen = view_consistent_step('separate', view_consistent_rope=False)
    torch.testing.assert_close(seen['student'], seen['teacher'])
    assert seen['neck_a'] is None
    in_a, in_b, _ = overlap(seen['student'].expand(2, -1, -1))
    assert not torch.allclose(in_a[0], in_b[0])
    a = torch.tensor([VIEW_A] * 2)
    torch.testing.assert_close(seen['neck_b'], relative_coords(
        a, torch.tensor(VIEWS_B), (4, 4), (4, 4), 'center'))


def test_view_consistent_rope_needs_rope_and_two_views():
    sincos = dict(type='RoPEVisionTransformer', arch=ARCH, img_size=32,
                  patch_size=8, rope=None, use_ape=True,
                  out_type='featmap')
    with pytest.raises(ValueError, match='view_consistent_rope needs'):
        build(backbone=sincos, neck=dict(pos_type='sincos'),
              view_consistent_rope=True)
    raw = dict(type='RoPEVisionTransformer', arch=ARCH, img_size=32,
               patch_size=8, rope=dict(type='axial'), out_type='raw')
    with pytest.raises(ValueError, match='no mask_ratio'):
        build(backbone=raw, mask_ratio=.75, view_consistent_rope=True)
