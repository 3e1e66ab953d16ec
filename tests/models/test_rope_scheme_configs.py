"""The position-scheme zoo on the backbone and in the mini pretraining
configs of configs/position_schemes/: every scheme through the ViT (global
and ViTDet windows, any input size, frozen export tables), two pretraining
iterations through tools/train.py, and the pretrained backbone loading into
transfer backbones with no missing key."""
from pathlib import Path

import pytest
import torch
from mmengine.config import Config

import mmpos_positions

import mmpos  # noqa: F401
from conftest import read_scalars, run_tool
from mmpos.models.backbones import RoPEVisionTransformer
from mmpos.models.utils.pretrained import load_pretrained

# every registered scheme but the paper's own (their configs are the
# methods' defaults) has a DropPos and a DINOv2 config
SCHEMES = tuple(n for n in mmpos_positions.SCHEMES
                if n not in ('axial', 'mixed', 'dinov3'))
# schemes whose bias reads the tokens (PaPE): torch's ONNX exporter fails
# to decompose attention with a token-dependent mask (torch 2.14:
# ConversionError, "Cannot view a tensor ...")
READS_TOKENS = {n for n in SCHEMES if mmpos_positions.reads_tokens(
    mmpos_positions.SCHEMES[n](8, 1, 1))}
ONNX_SCHEMES = [pytest.param(n, marks=pytest.mark.xfail(
    raises=torch.onnx.OnnxExporterError, strict=True,
    reason='ONNX export of a token-dependent attention bias')) if n in
    READS_TOKENS else n for n in SCHEMES]
METHODS = ('droppos', 'dinov2')
CONFIGS = Path('configs/position_schemes')
ARCH = dict(embed_dims=96, num_layers=4, num_heads=3,
            feedforward_channels=384)


def config(method, scheme):
    return CONFIGS / f'{method}_vit-tiny-{scheme}_mini.py'


def test_every_scheme_has_a_config_per_method_and_nothing_else():
    names = {p.name for p in CONFIGS.glob('*.py')}
    assert names == {config(m, s).name for m in METHODS for s in SCHEMES}
    for method in METHODS:
        for scheme in SCHEMES:
            rope = Config.fromfile(config(method, scheme)).model.backbone.rope
            assert rope['type'] == scheme


@pytest.mark.parametrize('scheme', SCHEMES)
def test_schemes_run_in_the_vit_globally_and_in_windows(scheme):
    """Any input size; ViTDet windows (windowed blocks get the windows'
    tables at absolute coordinates); frozen tables (export) give the same
    output as computed ones."""
    torch.manual_seed(0)
    rope = Config.fromfile(config('dinov2', scheme)).model.backbone.rope
    model = RoPEVisionTransformer(arch=ARCH, img_size=64, patch_size=8,
                                  rope=rope).eval()
    for hw in ((64, 64), (40, 88)):
        out = model(torch.randn(2, 3, *hw))[0]
        assert out.shape == (2, 96) and torch.isfinite(out).all()
    # per-block parameters rope.<name>.<i> share block i's lr-decay depth
    for name, _ in model.named_parameters():
        if name.startswith('rope.'):
            assert model.get_layer_depth(name) == (
                int(name.split('.')[-1]) + 1, ARCH['num_layers'] + 2), name
    windowed = RoPEVisionTransformer(
        arch=ARCH, img_size=64, patch_size=8, rope=rope,
        with_cls_token=False, out_type='featmap', window_size=4,
        global_attn_indexes=(1, 3)).eval()
    images = torch.randn(2, 3, 40, 56)
    out = windowed(images)[0]
    assert out.shape == (2, 96, 5, 7) and torch.isfinite(out).all()
    windowed.freeze_positions((5, 7))
    assert torch.allclose(windowed(images)[0], out, atol=1e-5)


@pytest.fixture(scope='module')
def pretrained(tmp_path_factory, mini_data):
    """``run(method, scheme)``: work dir of a 2-iteration mini run."""
    work_dirs = {}

    def run(method, scheme):
        key = (method, scheme)
        if key not in work_dirs:
            work_dir = tmp_path_factory.mktemp(f'{method}-{scheme}')
            result = run_tool(
                'tools/train.py', config(method, scheme), '--work-dir',
                work_dir, '--cfg-options',
                f'train_dataloader.dataset.data_root={mini_data}/unlabeled/',
                'train_cfg.max_iters=2', 'default_hooks.logger.interval=1',
                timeout=900, env=dict(OMP_NUM_THREADS='1'))
            assert result.returncode == 0, \
                (result.stdout + result.stderr)[-4000:]
            work_dirs[key] = work_dir
        return work_dirs[key]

    return run


@pytest.mark.slow
@pytest.mark.parametrize('scheme', SCHEMES)
@pytest.mark.parametrize('method', METHODS)
def test_mini_pretraining_runs_and_transfers(pretrained, method, scheme):
    """Two iterations with finite losses; the checkpoint's backbone (the
    scheme's parameters included) loads into the transfer backbones of the
    same scheme, global and windowed, with no missing key."""
    work_dir = pretrained(method, scheme)
    losses = [r['loss'] for r in read_scalars(work_dir) if 'loss' in r]
    assert len(losses) == 2 and all(torch.isfinite(torch.tensor(losses)))
    checkpoint = str(next(Path(work_dir).glob('iter_2.pth')))
    backbone = Config.fromfile(config(method, scheme)).model.backbone
    common = dict(arch=ARCH, img_size=backbone.img_size, patch_size=8,
                  rope=backbone.rope, use_ape=backbone.use_ape)
    for extra in (dict(out_type='cls_token'),
                  dict(with_cls_token=False, out_type='featmap',
                       window_size=2, global_attn_indexes=(3, ))):
        transfer = RoPEVisionTransformer(**common, **extra)
        report = load_pretrained(transfer, checkpoint, resizable=(
            'pos_embed', ))
        assert report['missing'] == [], report['missing']
        state = torch.load(checkpoint, map_location='cpu',
                           weights_only=False)['state_dict']  # our run
        for name, value in transfer.state_dict().items():
            if name.startswith('rope.'):  # the scheme's trained parameters
                assert torch.equal(value, state[f'backbone.{name}']), name


@pytest.mark.parametrize('scheme', ONNX_SCHEMES)
def test_onnx_export_matches_torch(scheme, tmp_path):
    """tools/deployment/rope_vit2onnx.py with frozen tables: ComRoPE /
    LieRE's matrix exponentials, STRING's basis and LookHere's masks are
    constants of the graph (no trigonometry, no matrix exponential), and
    onnxruntime gives torch's output."""
    onnx = pytest.importorskip('onnx')
    ort = pytest.importorskip('onnxruntime')
    import copy
    import sys
    sys.path.insert(0, 'tools/deployment')
    import rope_vit2onnx
    torch.manual_seed(0)
    rope = Config.fromfile(config('dinov2', scheme)).model.backbone.rope
    live = RoPEVisionTransformer(arch=dict(ARCH, num_layers=2), img_size=32,
                                 patch_size=8, rope=rope,
                                 out_type='featmap').eval()
    path = str(tmp_path / 'model.onnx')
    img = rope_vit2onnx.export(copy.deepcopy(live), (40, 56), path,
                               batch_size=2)
    ops = {node.op_type for node in onnx.load(path).graph.node}
    assert not ops & {'Sin', 'Cos', 'Resize', 'Range'}, ops
    out, = ort.InferenceSession(
        path, providers=['CPUExecutionProvider']).run(
            None, {'images': img.numpy()})
    with torch.no_grad():
        expected = live(img)[0]
    assert (torch.from_numpy(out) - expected).abs().max() < 1e-4


@pytest.mark.parametrize('scheme', SCHEMES)
def test_schemes_run_in_rope_swin(scheme):
    """RoPE-Swin builds one scheme per stage; shifted windows included
    (biases included: tests/models/backbones/test_rope_swin.py)."""
    from mmpos.models.backbones.rope_swin import RoPESwinTransformer
    rope = Config.fromfile(config('dinov2', scheme)).model.backbone.rope
    model = RoPESwinTransformer(
        arch=dict(embed_dims=32, depths=[2, 2], num_heads=[2, 4]),
        window_size=4, rope=rope, out_indices=(0, 1))
    model.eval()  # (mmpretrain's Swin.train returns None)
    outs = model(torch.randn(1, 3, 64, 48))
    assert [tuple(o.shape) for o in outs] == [(1, 32, 16, 12),
                                               (1, 64, 8, 6)]
    assert all(torch.isfinite(o).all() for o in outs)
