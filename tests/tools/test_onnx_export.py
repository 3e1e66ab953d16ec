"""tools/deployment/rope_vit2onnx.py: a RoPEVisionTransformer (any RoPE
scheme, registers, APE, window attention on a padded grid) exported for one
input size runs in onnxruntime with torch's outputs (within 1e-4), and the
graph holds static RoPE tables (no trigonometry, no resizing)."""
import copy
import os
import os.path as osp
import stat
import sys

import pytest
import torch

onnx = pytest.importorskip('onnx')
pytest.importorskip('onnxruntime')

from mmpos.models.backbones import RoPEVisionTransformer  # noqa: E402
from mmpos.checkpoint import save_state_dict  # noqa: E402

REPO = osp.dirname(osp.dirname(osp.dirname(osp.abspath(__file__))))
sys.path.insert(0, osp.join(REPO, 'tools', 'deployment'))
import rope_vit2onnx  # noqa: E402

ARCH = dict(embed_dims=64, num_layers=2, num_heads=2,
            feedforward_channels=128)
DINOV3_STYLE = dict(rope=dict(type='axial', periods=dict(base=100.),
                              axes='yx', layout='half',
                              coords=dict(frame='separate', rescale=2.)),
                    num_register_tokens=4, layer_scale_init_value=0.5)


def make(**kwargs):
    torch.manual_seed(0)
    kwargs.setdefault('arch', ARCH)
    model = RoPEVisionTransformer(patch_size=8, img_size=32, **kwargs)
    model.init_weights()
    with torch.no_grad():  # weights large enough for positions to matter
        for p in model.parameters():
            if p.dim() >= 2:
                p.normal_(0, 1.5 / p[0].numel()**0.5)
    return model.eval()


# ViTDet window attention: 3 x 3 windows on 4 x 4 and 5 x 7 patch grids
# (neither a multiple of 3: padded), block 1 of 3 global
WINDOWED = dict(window_size=3, global_attn_indexes=(1, ),
                with_cls_token=False, out_type='featmap')


@pytest.mark.parametrize('options', [
    dict(DINOV3_STYLE, out_type='featmap'),
    dict(rope=dict(type='mixed'), use_ape=True, out_type='raw'),
    dict(WINDOWED, rope=dict(type='mixed'), use_ape=True,
         arch=dict(ARCH, num_layers=3)),
    dict(WINDOWED, **{k: v for k, v in DINOV3_STYLE.items()
                      if k != 'num_register_tokens'}),
], ids=['dinov3-style', 'mixed-ape', 'windowed-mixed-ape',
        'windowed-dinov3-style'])
def test_onnxruntime_matches_torch_at_two_sizes(tmp_path, options):
    import onnxruntime as ort
    live = make(**options)
    for size in [(32, 32), (40, 56)]:
        path = str(tmp_path / f'{size[0]}x{size[1]}.onnx')
        img = rope_vit2onnx.export(copy.deepcopy(live), size, path,
                                   batch_size=2)
        ops = {node.op_type for node in onnx.load(path).graph.node}
        assert not ops & {'Sin', 'Cos', 'Resize', 'Range'}, ops
        if 'window_size' in options:  # the grid is padded to the windows
            assert 'Pad' in ops, ops
        out, = ort.InferenceSession(
            path, providers=['CPUExecutionProvider']).run(
                None, {'images': img.numpy()})
        with torch.no_grad():
            expected = live(img)[0]
        assert out.shape == tuple(expected.shape)
        assert (torch.from_numpy(out) - expected).abs().max() < 1e-4


def test_cli_reads_the_converters_meta_and_checks(tmp_path, capsys):
    model = make(**DINOV3_STYLE)
    cfg = dict(type='RoPEVisionTransformer', arch=ARCH, patch_size=8,
               img_size=32, **DINOV3_STYLE)
    ckpt = str(tmp_path / 'converted.pth')
    save_state_dict({'backbone.' + k: v
                     for k, v in model.state_dict().items()}, ckpt,
                    meta=dict(model=dict(type='ImageClassifier',
                                         backbone=cfg)))
    out = str(tmp_path / 'vit.onnx')
    old = os.umask(0o022)
    try:
        rope_vit2onnx.main([ckpt, out, '--size', '48', '32', '--out-type',
                            'raw', '--check'])
    finally:
        os.umask(old)
    assert stat.S_IMODE(os.stat(out).st_mode) == 0o644  # issue 27: not 0600
    assert sorted(os.listdir(tmp_path)) == ['converted.pth', 'vit.onnx']
    printed = capsys.readouterr().out
    err = float(printed.split('max abs difference ')[1])
    assert err < 1e-4
    with pytest.raises(SystemExit) as exit_:
        rope_vit2onnx.main([ckpt, out, '--size', '48', '32'])
    assert exit_.value.code.startswith('rope_vit2onnx.py: error: ')
    assert 'exists; pass --force' in exit_.value.code
    with pytest.raises(SystemExit) as exit_:
        rope_vit2onnx.main([ckpt, str(tmp_path / 'x.onnx'), '--size', '50',
                            '32'])
    assert 'not divisible by the patch size' in exit_.value.code
    state = {'backbone.' + k: v for k, v in model.state_dict().items()
             if k != 'ln1.bias'}
    save_state_dict(state, ckpt, force=True,
                    meta=dict(model=dict(type='ImageClassifier',
                                         backbone=cfg)))
    with pytest.raises(SystemExit) as exit_:
        rope_vit2onnx.main([ckpt, str(tmp_path / 'y.onnx'), '--size', '32',
                            '32'])
    assert exit_.value.code == (
        f'rope_vit2onnx.py: error: checkpoint {ckpt} does not fit '
        'RoPEVisionTransformer: 1 model tensors missing (ln1.bias)')
