"""rope_vit2onnx.py's ``--dynamic-batch`` (issue 58): one file serves any
batch, at a fixed size (frozen tables) and with ``--dynamic`` (any size
too), with torch's outputs in onnxruntime (the pretraining backbones' files
are checked at batch 1 and 3 in tests/converters/test_pretraining_export.py).
"""
import copy

import pytest
import torch

from conftest import load_tool
from mmpos.models.backbones import RoPEVisionTransformer

ort = pytest.importorskip('onnxruntime')


@pytest.mark.parametrize('dynamic', [False, True], ids=['fixed', 'any-size'])
def test_one_file_serves_every_batch(tmp_path, dynamic):
    torch.manual_seed(0)
    live = RoPEVisionTransformer(
        arch=dict(embed_dims=64, num_layers=1, num_heads=2,
                  feedforward_channels=128),
        patch_size=8, img_size=32, rope=dict(type='mixed'),
        out_type='raw').eval()
    path = str(tmp_path / 'vit.onnx')
    example = load_tool('rope_vit2onnx', 'deployment').export(
        copy.deepcopy(live), (32, 48), path, dynamic=dynamic,
        dynamic_batch=True)
    assert len(example) == 2  # torch.export fixes an axis of size 1
    session = ort.InferenceSession(path, providers=['CPUExecutionProvider'])
    sizes = [(32, 48), (64, 40)] if dynamic else [(32, 48)]
    for batch in (1, 3):
        for size in sizes:
            images = torch.randn(batch, 3, *size)
            out, = session.run(None, {'images': images.numpy()})
            with torch.no_grad():
                expected = live(images)[0]
            assert out.shape == tuple(expected.shape)
            assert (torch.from_numpy(out) - expected).abs().max() < 1e-4
