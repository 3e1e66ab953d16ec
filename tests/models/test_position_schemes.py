"""Position scheme x method: DINOv3's positions in DropPos and ICPF, and
ICPF's and CR2PQ's view-consistent RoPE (views rotated at their crop-box
source coordinates; CR2PQ's coordinates:
tests/models/selfsup/cr2pq/test_cr2pq.py)."""
import math

import pytest
import torch
from mmengine.config import Config
from mmengine.registry import DefaultScope

import mmpos  # noqa: F401
from conftest import data_root_options, finetune, read_scalars, run_tool
from mmpos_positions import box_coords, frame_coords, grid_coords

from mmpos.models.layers.positions import build_position_scheme
from mmpos.registry import MODELS

DROPPOS = 'configs/droppos/droppos_vit-tiny-dinov3pos_mini.py'
ICPF = 'configs/icpf/icpf_vit-tiny-dinov3pos_mini.py'
CR2PQ = 'configs/cr2pq/cr2pq_vit-tiny-view-consistent-rope_mini.py'


def test_box_coords_place_views_at_their_source_positions():
    # a whole-image view keeps its grid
    assert torch.allclose(box_coords(torch.tensor([[0., 0., 1., 1.]]),
                                     (3, 4))[0], grid_coords(3, 4))
    # the right half at the same resolution: its patch (0, 0) sits where
    # the whole view's patch column 2 is, in the normalised frame
    whole = frame_coords(grid_coords(4, 4), (4, 4), 'separate')
    half = frame_coords(box_coords(torch.tensor([[.5, 0., 1., 1.]]),
                                   (4, 2))[0], (4, 2), 'separate')
    # patch centre u = 0.5 + 0.25 / 2 ... in the source: x' = 2u - 1
    assert torch.allclose(half[:, 0], 2 * (0.5 + (grid_coords(4, 2)[:, 0] +
                                                  0.5) / 4) - 1)
    assert torch.allclose(half[:, 1], whole.view(4, 4, 2)[:, :2, 1].flatten())
    # flipped box (x1 > x2): the first column comes from the right edge
    flipped = box_coords(torch.tensor([[1., 0., 0., 1.]]), (2, 2))[0]
    assert torch.allclose(flipped[:, 0], torch.tensor([1., 0., 1., 0.]))


def test_nan_coordinates_are_not_rotated_in_any_frame():
    rope = build_position_scheme(
        dict(type='axial', periods=dict(base=100.), axes='yx',
             layout='half'), 16, 2, 1)
    coords = frame_coords(torch.tensor([[float('nan')] * 2, [1., 2.]]),
                          (4, 4), 'separate')
    table = rope.block_table(0, coords[None])
    x = torch.randn(1, 2, 3, 16)  # 1 prefix token + 2
    for rotation in (table, table.export()):  # runtime and export paths
        out = rotation.rotate(x)
        assert torch.equal(out[..., :2, :], x[..., :2, :])
        assert not torch.allclose(out[..., 2, :], x[..., 2, :])


def build(config):
    cfg = Config.fromfile(config)
    with DefaultScope.overwrite_default_scope('mmpretrain'):
        return MODELS.build(cfg.model)


def test_icpf_view_consistent_coordinates_and_hidden_positions():
    model = build(ICPF)
    assert model.backbone.num_register_tokens == 4
    boxes = torch.tensor([[[0., 0., 1., 1.], [1., 0., .5, .5],
                           [.2, .2, .6, .6], [.5, .5, 1., 1.]]])
    coords = model._rope_coords(model, (8, 8), slice(0, 2), boxes)
    assert coords.shape == (2, 64, 2)
    assert torch.allclose(coords[0], grid_coords(8, 8))
    assert torch.allclose(coords[1], box_coords(boxes[0, 1:2], (8, 8))[0])
    pos_mask = torch.zeros(2, 64, dtype=torch.bool)
    pos_mask[1, :5] = True
    hidden = model._rope_coords(model, (8, 8), slice(0, 2), boxes,
                                dict(pos=pos_mask))
    assert hidden[1, :5].isnan().all() and not hidden[0].isnan().any()
    model.view_consistent_rope = False
    assert model._rope_coords(model, (8, 8), slice(0, 2), boxes) is None
    assert torch.equal(
        model._rope_coords(model, (8, 8), slice(0, 2), boxes,
                           dict(pos=pos_mask))[0], grid_coords(8, 8))


# pretraining runs: config, iterations (logged every 2)
RUNS = {'droppos': (DROPPOS, 24), 'icpf': (ICPF, 12), 'cr2pq': (CR2PQ, 12)}
# the demo Semantic FPN on mini-ADE with each run's backbone (DINOv3
# positions without the coordinate rescale), and what the converter says
TRANSFER = {
    'droppos': ('configs/droppos/mini_transfer/'
                'fpn_droppos-vit-tiny-dinov3pos_mini-ade.py', ''),
    'icpf': ('configs/icpf/mini_transfer/'
             'fpn_icpf-vit-tiny-dinov3pos_mini-ade.py',
             'sampled on a 16x16 patch grid'),
}


@pytest.fixture(autouse=True)
def one_thread_per_run(monkeypatch):
    """Tiny models on a shared 2-core machine: one intra-op thread."""
    monkeypatch.setenv('OMP_NUM_THREADS', '1')


@pytest.fixture(scope='module')
def pretrained(tmp_path_factory, mini_data):
    """``run(method)``: the work dir of its mini pretraining run (run once
    per module, shared by the training and the transfer tests)."""
    work_dirs = {}

    def run(method):
        if method not in work_dirs:
            config, iters = RUNS[method]
            work_dir = tmp_path_factory.mktemp(method)
            result = run_tool(
                'tools/train.py', config, '--work-dir', work_dir,
                '--cfg-options',
                f'train_dataloader.dataset.data_root={mini_data}/unlabeled/',
                f'train_cfg.max_iters={iters}',
                'default_hooks.logger.interval=2', timeout=900,
                env=dict(OMP_NUM_THREADS='1'))
            assert result.returncode == 0, \
                (result.stdout + result.stderr)[-4000:]
            work_dirs[method] = work_dir
        return work_dirs[method]

    return run


@pytest.mark.slow
@pytest.mark.parametrize('method', sorted(RUNS))
def test_mini_runs_train(pretrained, method):
    """Loss falls without NaN (first vs last three logged losses)."""
    losses = [r['loss'] for r in read_scalars(pretrained(method))
              if 'loss' in r]
    assert all(math.isfinite(v) for v in losses)
    assert sum(losses[-3:]) < sum(losses[:3]), losses


@pytest.mark.slow
@pytest.mark.parametrize('method', sorted(TRANSFER))
def test_mini_runs_transfer(pretrained, method, tmp_path, mini_data):
    """The run's backbone, extracted by mmpos2backbone against the transfer
    config (ICPF: its field exported as the APE), loads into the DINOv3-
    position backbone of the demo FPN without a missing key (registers and
    LayerScale included; only the final norm, unused by the FPN's
    multi-level backbone, is left over), fine-tunes with a falling loss and
    mmseg's IoUMetric scores it."""
    work_dir = pretrained(method)
    config, converter_note = TRANSFER[method]
    iters = RUNS[method][1]
    converted = tmp_path / 'backbone.pth'
    result = run_tool('tools/model_converters/mmpos2backbone.py',
                      work_dir / f'iter_{iters}.pth', converted,
                      '--keep-prefix', '--config', config,
                      '--drop-unexpected')
    assert result.returncode == 0, result.stderr[-2000:]
    assert converter_note in result.stdout
    assert '0 missing key(s)' in result.stdout
    assert '2 unexpected key(s): backbone.ln1.bias, backbone.ln1.weight' \
        in result.stdout
    keys = torch.load(converted, weights_only=True)['state_dict'].keys()
    assert {'backbone.register_tokens',
            'backbone.layers.3.ffn.gamma2.weight'} <= set(keys)

    log, losses, metrics = finetune(
        config, tmp_path / 'finetune', converted,
        data_root_options(mini_data, 'ade'), iters=20)
    assert f'loaded {len(keys)} of its {len(keys)} tensors' in log
    assert losses[-1] < losses[0], losses  # 5-iteration windows
    for key in ('mIoU', 'mAcc', 'aAcc'):
        assert math.isfinite(metrics[key]), (key, metrics)
