"""What every position scheme gets from the interface of
``mmpos.models.layers.positions.base``: the precision policy (tables and
rotation outside autocast, fp32), eval-mode tables cached per grid, and a
backbone that ``torch.compile(fullgraph=True)`` traces in training and eval
mode, window attention included, with eager's outputs.

Compile checks use ``backend='eager'`` (dynamo's tracing, which raises on a
graph break with ``fullgraph=True``, then the eager kernels); inductor's
code generation (~40 s per model on 2 cores) is exercised by
``benchmarks/rope_compile.py``.
"""
import pytest
import torch
import torch._dynamo as dynamo

from conftest import SMALL_HEAD_SCHEME_OPTIONS as OPTIONS
from mmpos.models.backbones import RoPEVisionTransformer
from mmpos_positions import SCHEMES

WINDOWED = dict(window_size=3, global_attn_indexes=(1, ),
                with_cls_token=False, out_type='featmap')


def vit(rope, embed_dims=32, patch_size=8, **kwargs):
    """A tiny ViT (2 blocks, 2 heads) with weights large enough for the
    positions to matter."""
    torch.manual_seed(0)
    model = RoPEVisionTransformer(
        arch=dict(embed_dims=embed_dims, num_layers=2, num_heads=2,
                  feedforward_channels=2 * embed_dims),
        img_size=32, patch_size=patch_size, rope=rope, **kwargs)
    with torch.no_grad():
        for p in model.parameters():
            if p.dim() >= 2 and p.shape[0] > 2:  # not the RoPE frequencies
                p.normal_(0, 1.5 / p[0].numel()**0.5)
    return model


@pytest.mark.parametrize('mode', ['train', 'eval'])
@pytest.mark.parametrize('scheme', list(SCHEMES))
def test_compiled_backbone_is_one_graph_equal_to_eager(scheme, mode):
    """Windowed and global blocks (3 x 3 windows on a padded 5 x 7 grid),
    the scheme's training-mode coordinate augmentation included (DINOv3's
    per-block draws, same seed): one graph, eager's outputs and, in
    training, gradients that reach the scheme's parameters."""
    model = vit(dict(type=scheme, **OPTIONS.get(scheme, {})), **WINDOWED)
    model.train(mode == 'train')
    dynamo.reset()
    compiled = torch.compile(model, fullgraph=True, backend='eager')
    x = torch.randn(2, 3, 40, 56)
    outs = []
    for run in (compiled, model):
        torch.manual_seed(1)
        outs.append(run(x)[0])
    torch.testing.assert_close(outs[0], outs[1], atol=1e-5, rtol=0)
    if mode == 'train':
        outs[0].square().mean().backward()
        assert all(p.grad is not None for p in model.rope.parameters())


def token_error(model, img):
    """RMS of the tokens' ``bf16 autocast - fp32`` difference over the RMS
    of the fp32 tokens (the largest entry is too noisy to compare
    models)."""
    model.eval()
    with torch.no_grad():
        full = model(img)[0]
        with torch.autocast('cpu', dtype=torch.bfloat16):
            half = model(img)[0]
    return ((half.float() - full).square().mean().sqrt() /
            full.square().mean().sqrt()).item()


@pytest.mark.parametrize('scheme', ['mixed', 'comrope'])
def test_bf16_token_error_is_no_larger_than_without_positions(scheme):
    """Under bf16 autocast the tables and the rotation run in fp32
    (``full_precision``), so the positions add no error of their own: at
    224 and 1024 px (14 x 14 and 64 x 64 patches, positions up to 63, where
    a bf16 angle would be off by up to 0.125 rad) the RoPE model's token
    error is at most 1.5x that of the same weights without positions
    (measured 1.06x .. 1.29x over two inputs: the RoPE model's sharper
    attention, not its tables). The tables a bf16 forward builds are
    fp32."""
    rope = vit(dict(type=scheme, **OPTIONS.get(scheme, {})), embed_dims=64,
               patch_size=16, out_type='raw')
    plain = vit(None, embed_dims=64, patch_size=16, out_type='raw')
    plain.load_state_dict(rope.state_dict(), strict=False)
    for size in (224, 1024):
        img = torch.randn(1, 3, size, size)
        ratio = token_error(rope, img) / token_error(plain, img)
        assert ratio < 1.5, (size, ratio)
    with torch.autocast('cpu', dtype=torch.bfloat16):
        tables = rope.position_tables(None, (4, 4), 1)
    state = vars(tables[0])
    assert all(t.dtype == torch.float32 for t in state.values()
               if isinstance(t, torch.Tensor) and t.is_floating_point())


def test_eval_tables_are_cached_per_grid_and_follow_parameter_changes():
    """Eval-mode forwards without gradient reuse the last grid's tables; a
    new grid, training mode or parameters changed in place (an EMA
    teacher's ``.data`` update) compute them again."""
    model = vit(dict(type='mixed'), out_type='featmap')
    scheme = model.rope
    img = torch.randn(1, 3, 32, 48)
    model.eval()
    with torch.no_grad():
        first = model.position_tables(None, (4, 6), 1)
        assert model.position_tables(None, (4, 6), 1) is first
        assert model.position_tables(None, (5, 6), 1) is not first
        before = model(img)[0]
        scheme.freqs[0].data.mul_(2.)  # no version bump
        after = model(img)[0]
        fresh = vit(dict(type='mixed'), out_type='featmap').eval()
        fresh.rope.freqs[0].data.mul_(2.)
        torch.testing.assert_close(after, fresh(img)[0], atol=0, rtol=0)
    assert not torch.equal(before, after)
    # tables that need a gradient or a training draw are never cached
    tables = model.position_tables(None, (4, 6), 1)
    assert tables is not model.position_tables(None, (4, 6), 1)
    model.train()
    with torch.no_grad():
        tables = model.position_tables(None, (4, 6), 1)
        assert tables is not model.position_tables(None, (4, 6), 1)
