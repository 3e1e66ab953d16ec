"""QB-Heat (Eq. 5, Fig. 3-5, App. A): quarter layouts, the linear heat
predictions, the decoder loss, the algorithm, and a mini pretraining run."""
import math

import pytest
import torch

import mmpos.models.backbones.mobile_former  # noqa: F401 (registers)
from conftest import read_scalars, run_tool
from mmpos.models.selfsup.qbheat import QBHeat, QBHeatHead, QBHeatPredictor
from mmpos.models.selfsup.qbheat.qbheat_predictor import (DIRECTIONS,
                                                          _layout_tables,
                                                          crop_quarter_blocks)

R, L, D, U, DR, DL, UR, UL = range(8)  # indices into DIRECTIONS
MINI = 'configs/qbheat/qbheat_mobileformer-285m_mini.py'


def test_directions_order():
    assert [DIRECTIONS[i] for i in (R, L, D, U, DR, DL, UR, UL)] == [
        (0, 1), (0, -1), (1, 0), (-1, 0), (1, 1), (1, -1), (-1, 1), (-1, -1)]


def test_layout_tables():
    jobs, keep = _layout_tables()
    assert jobs.shape == (5, 12, 3) and keep.shape == (5, 4)
    for j, k in zip(jobs, keep):  # every cell: kept or predicted, once
        assert sorted(j[:, 1].tolist() + k.tolist()) == list(range(16))
    rows = {tuple(r) for r in jobs[0].tolist()}  # top-left corner quarter
    assert {(0, 2, R), (3, 7, R), (0, 8, D), (0, 10, DR), (3, 15, DR)} <= rows
    rows = {tuple(r) for r in jobs[3].tolist()}  # bottom-right quarter
    assert {(0, 0, UL), (0, 8, L), (1, 9, L), (2, 6, U)} <= rows
    rows = {tuple(r) for r in jobs[4].tolist()}  # centre: adjacent cells
    assert rows == {(0, 0, UL), (0, 1, U), (1, 2, U), (1, 3, UR),
                    (0, 4, L), (1, 7, R), (2, 8, L), (3, 11, R),
                    (2, 12, DL), (2, 13, D), (3, 14, D), (3, 15, DR)}
    assert keep[4].tolist() == [5, 6, 9, 10]


def test_crop_quarter_blocks():
    img = torch.arange(2 * 8 * 12, dtype=torch.float).view(1, 2, 8, 12)
    img = img.expand(5, -1, -1, -1)
    out = crop_quarter_blocks(img, torch.arange(5))
    starts = [(0, 0), (0, 6), (4, 0), (4, 6), (2, 3)]
    for i, (r, c) in enumerate(starts):
        torch.testing.assert_close(out[i], img[i, :, r:r + 4, c:c + 6])


def _predictor(num_explicit, dims=4, seed=0):
    torch.manual_seed(seed)
    p = QBHeatPredictor(dims, dims, num_explicit)
    with torch.no_grad():
        p.weight.normal_()
        p.proj.weight.copy_(torch.eye(dims)[..., None, None])
        p.proj.bias.zero_()
    return p


def test_two_models_eq5_eq9_eq12():
    p = _predictor(2)
    eye = torch.eye(4)
    for pos, d in (('corner', 0.5), ('center', 0.25)):
        a, b = p.explicit_models(pos)
        t = p.transition_matrices(pos)
        torch.testing.assert_close(t[R], eye + d * a)  # Eq. 5
        torch.testing.assert_close(t[D], eye + d * b)
        torch.testing.assert_close(t[L], eye - d * a)  # Eq. 9: A2 = -A1
        torch.testing.assert_close(t[U], eye - d * b)
        # Eq. 12, times sqrt(dx^2 + dy^2)
        torch.testing.assert_close(
            t[DR], eye + d * a + d * b + d * d * (a @ b + b @ a) / 2)
        torch.testing.assert_close(
            t[UL], eye - d * a - d * b + d * d * (a @ b + b @ a) / 2)
        torch.testing.assert_close(
            t[DL], eye - d * a + d * b - d * d * (a @ b + b @ a) / 2)
    # scales have their own models
    assert not torch.allclose(p.explicit_models('corner')[0],
                              p.explicit_models('center')[0])


def test_commuting_models_give_eq5_product():
    """With commuting A, B the Eq. 12 diagonal is (I + dx A)(I + dy B)."""
    p = _predictor(2)
    with torch.no_grad():
        p.weight.copy_(torch.diag_embed(torch.randn(2, 2, 4)))
    a, b = p.explicit_models('corner')
    eye = torch.eye(4)
    torch.testing.assert_close(p.transition_matrices('corner')[DR],
                               (eye + a / 2) @ (eye + b / 2))


def test_four_and_eight_explicit_models():
    eye = torch.eye(4)
    p = _predictor(4)
    w, d = p.weight[0], 0.5
    t = p.transition_matrices('corner')
    torch.testing.assert_close(t[L], eye + d * w[1])  # explicit A2
    torch.testing.assert_close(t[U], eye + d * w[3])  # explicit B2
    torch.testing.assert_close(  # Eq. 12 from A2 and B1
        t[DL], eye + d * (w[1] + w[2]) + d * d * (w[1] @ w[2] + w[2] @ w[1])
        / 2)
    p = _predictor(8)
    w, d = p.weight[1], 0.25
    t = p.transition_matrices('center')
    torch.testing.assert_close(t[U], eye + d * w[U])
    torch.testing.assert_close(t[DL], eye + math.sqrt(2) * d * w[DL])


def _cells(x, k):
    """(C, 4k, 4k) canvas -> {(row, col): (C, k, k)} of its 4 x 4 cells."""
    return {(r, c): x[:, r * k:(r + 1) * k, c * k:(c + 1) * k]
            for r in range(4) for c in range(4)}


def _apply(t, z):  # 1x1 conv with matrix t on (C, h, w)
    return torch.einsum('ij,jhw->ihw', t, z)


def test_corner_prediction_is_fig3():
    p = _predictor(2)
    z = torch.randn(2, 4, 4, 4)  # 4x4 quarter map -> 8x8 canvas
    canvas, mask = p(z, torch.tensor([0, 3]))
    t = p.transition_matrices('corner')
    tl = canvas[0]  # top-left quarter unmasked
    torch.testing.assert_close(tl[:, :4, :4], z[0])
    torch.testing.assert_close(tl[:, :4, 4:], _apply(t[R], z[0]))
    torch.testing.assert_close(tl[:, 4:, :4], _apply(t[D], z[0]))
    torch.testing.assert_close(tl[:, 4:, 4:], _apply(t[DR], z[0]))
    br = canvas[1]  # bottom-right quarter unmasked
    torch.testing.assert_close(br[:, 4:, 4:], z[1])
    torch.testing.assert_close(br[:, :4, :4], _apply(t[UL], z[1]))
    torch.testing.assert_close(br[:, 4:, :4], _apply(t[L], z[1]))
    assert mask.shape == (2, 8, 8) and mask.float().mean() == 0.75
    assert not mask[0, :4, :4].any() and mask[0, 4:].all()
    assert not mask[1, 4:, 4:].any() and mask[1, :4].all()


def test_center_prediction_uses_sub_blocks_and_fine_scale():
    p = _predictor(2)
    z = torch.randn(1, 4, 4, 4)
    canvas, mask = p(z, torch.tensor([4]))
    t = p.transition_matrices('center')  # dx = dy = 1/4
    cells, sub = _cells(canvas[0], 2), _cells(z[0], 2)
    torch.testing.assert_close(canvas[0, :, 2:6, 2:6], z[0])
    torch.testing.assert_close(cells[0, 0], _apply(t[UL], sub[0, 0]))
    torch.testing.assert_close(cells[0, 1], _apply(t[U], sub[0, 0]))
    torch.testing.assert_close(cells[0, 2], _apply(t[U], sub[0, 1]))
    torch.testing.assert_close(cells[1, 3], _apply(t[R], sub[0, 1]))
    torch.testing.assert_close(cells[3, 0], _apply(t[DL], sub[1, 0]))
    torch.testing.assert_close(cells[3, 2], _apply(t[D], sub[1, 1]))
    assert not mask[0, 2:6, 2:6].any() and mask[0].float().mean() == 0.75


def test_predictor_rejects_bad_input():
    with pytest.raises(ValueError, match='num_explicit'):
        QBHeatPredictor(4, 4, num_explicit=3)
    with pytest.raises(ValueError, match='positions'):
        QBHeatPredictor(4, 4, positions=('edge', ))
    with pytest.raises(ValueError, match='even'):
        QBHeatPredictor(4, 4)(torch.zeros(1, 4, 3, 3), torch.tensor([0]))
    with pytest.raises(ValueError, match='center'):
        QBHeatPredictor(4, 4, positions=('corner', ))(
            torch.zeros(1, 4, 2, 2), torch.tensor([4]))


def _head(**kwargs):
    return QBHeatHead(
        loss=dict(type='PixelReconstructionLoss', criterion='L2'),
        in_channels=8, num_layers=1, num_heads=2, patch_size=4, **kwargs)


def test_head_loss_covers_masked_quarters_only():
    torch.manual_seed(0)
    head = _head()
    x, img = torch.randn(1, 8, 4, 4), torch.randn(1, 3, 16, 16)
    mask = torch.zeros(1, 4, 4, dtype=torch.bool)
    mask[0, :, 2:] = True
    pred = head(x)
    assert pred.shape == (1, 16, 48)
    target = head.patchify(img)
    expected = ((pred - target)**2).mean(-1)[mask.flatten(1)].mean()
    torch.testing.assert_close(head.loss(x, img, mask), expected)
    img2 = img.clone()
    img2[..., :8] += 5  # unmasked (left) half: no effect
    torch.testing.assert_close(head.loss(x, img2, mask), expected)
    all_loss = _head(loss_on_all=True)
    all_loss.load_state_dict(head.state_dict())
    torch.testing.assert_close(all_loss.loss(x, img, mask),
                               ((pred - target)**2).mean())
    with pytest.raises(ValueError, match='patch_size'):
        head.loss(x, torch.randn(1, 3, 32, 32), mask)


def _tiny_qbheat(position='mixed', positions=('corner', 'center')):
    arch = dict(stem=8, lite=8, token_dims=16, last=32,
                blocks=[(16, 8)] * 2 + [(16, 8)] * 3 + [(32, 16)] * 6)
    return QBHeat(
        backbone=dict(type='MobileFormer', arch=arch),
        neck=dict(type='QBHeatPredictor', in_channels=32, embed_dims=16,
                  positions=positions),
        head=dict(type='QBHeatHead', in_channels=16, num_layers=1,
                  num_heads=2, norm_pix=True,
                  loss=dict(type='PixelReconstructionLoss', criterion='L2')),
        position=position)


def test_layout_sampling_mixes_half_half():
    model = _tiny_qbheat()
    lay = model.sample_layouts(9)
    assert (lay[:4] < 4).all() and (lay[4:] == 4).all()
    assert (_tiny_qbheat('corner').sample_layouts(64) < 4).all()
    corners = _tiny_qbheat('corner').sample_layouts(400)
    assert set(corners.tolist()) == {0, 1, 2, 3}
    assert (_tiny_qbheat('center').sample_layouts(3) == 4).all()
    with pytest.raises(ValueError, match='position'):
        _tiny_qbheat('edge')
    with pytest.raises(ValueError, match='center'):
        _tiny_qbheat('mixed', positions=('corner', ))


def test_qbheat_loss_trains_every_part():
    torch.manual_seed(0)
    model = _tiny_qbheat()
    model.init_weights()
    loss = model.loss(torch.randn(4, 3, 64, 64), None)['loss']
    assert torch.isfinite(loss)
    loss.backward()
    for part in (model.backbone.blocks[0], model.neck, model.head.blocks):
        assert all(p.grad is not None and p.grad.abs().sum() > 0
                   for p in part.parameters() if p.requires_grad), part
    assert model.neck.weight.grad[0].abs().sum() > 0  # corner A, B
    assert model.neck.weight.grad[1].abs().sum() > 0  # centre A, B
    with pytest.raises(ValueError, match='divisible'):
        model.loss(torch.randn(1, 3, 66, 66), None)


@pytest.mark.slow
def test_mini_pretraining_loss_falls(mini_data, tmp_path):
    """tools/train.py on the mini config: the reconstruction loss (normalised
    pixels, masked quarters) falls clearly within 30 iterations (~1 s each on a
    busy 2-core CPU)."""
    res = run_tool(
        'tools/train.py', MINI, '--work-dir', tmp_path, '--cfg-options',
        f'train_dataloader.dataset.data_root={mini_data}/unlabeled/',
        'train_cfg.max_iters=30', 'default_hooks.logger.interval=5',
        'param_scheduler.1.end=30',
        'default_hooks.checkpoint.interval=30')
    assert res.returncode == 0, res.stderr[-3000:]
    losses = [r['loss'] for r in read_scalars(tmp_path) if 'loss' in r]
    print('mini losses', losses)
    assert len(losses) >= 6
    assert min(losses[-2:]) < 0.8 * losses[0], losses
    assert list(tmp_path.glob('iter_30.pth'))


def test_spectrum_tool_energies_table_and_plot(tmp_path):
    """Eq. 7 / Tab. 3 on hand-made models: diagonal A, B have known
    eigenvalues, so E(A) = sum |diag| and the ratio follows."""
    from tools.analysis_tools import qbheat_spectrum as tool
    w = torch.zeros(2, 2, 3, 3)
    w[0, 0] = torch.diag(torch.tensor([1., -2., 3.]))  # corner A: E = 6
    w[0, 1] = torch.diag(torch.tensor([4., 4., -4.]))  # corner B: E = 12
    w[1, 0] = torch.tensor([[0., -1, 0], [1, 0, 0], [0, 0, 2]])  # +-i, 2
    w[1, 1] = torch.eye(3)
    ckpt = tmp_path / 'qbheat.pth'
    torch.save(dict(state_dict={'neck.weight': w}), ckpt)
    png = tmp_path / 'spec.png'
    spec = tool.main([str(ckpt), '--out', str(png)])
    assert spec['corner']['energy_a'] == pytest.approx(6)
    assert spec['corner']['ratio'] == pytest.approx(0.5)
    assert spec['corner']['eig_abs_b'] == pytest.approx([4, 4, 4])
    assert spec['center']['eig_abs_a'] == pytest.approx([2, 1, 1])
    assert spec['center']['ratio'] == pytest.approx(4 / 3)
    assert png.read_bytes()[:4] == b'\x89PNG'
    assert 'E(A)/E(B)' in tool.format_table(spec)
    with pytest.raises(KeyError, match='neck.weight'):
        tool.load_models({})
    with pytest.raises(ValueError, match='positions'):
        tool.load_models({'neck.weight': w}, positions=('corner', ))
