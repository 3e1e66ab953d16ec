"""RoPEVisionTransformer on NaFlex batches: each image of a padded batch of
mixed sizes gets the output it gets alone (fp32 rounding), for every
position scheme of the registry, every coordinate frame and pooled output;
what cannot run on a padded sequence is refused in one line."""
import pytest
import torch

import mmpos_positions
from mmpos.datasets.naflex import naflex_batch
from mmpos.models.backbones import RoPEVisionTransformer

TINY = dict(embed_dims=32, num_layers=2, num_heads=2, feedforward_channels=64)
SIZES = [(32, 64), (48, 16), (16, 16), (64, 48)]  # pixels, patch 8
TOL = 1e-5


def tiny(**kwargs) -> RoPEVisionTransformer:
    """Random init with queries and keys scaled up (peaked attention), so
    that positions and padding change the tokens visibly."""
    torch.manual_seed(0)
    model = RoPEVisionTransformer(arch=TINY, patch_size=8, img_size=32,
                                  **kwargs)
    model.init_weights()
    with torch.no_grad():
        for layer in model.layers:
            layer.attn.qkv.weight[:64].mul_(20)
    return model.eval()


def images():
    g = torch.Generator().manual_seed(0)
    return [torch.randn(3, h, w, generator=g) for h, w in SIZES]


def naflex(imgs) -> dict:
    return naflex_batch([img.permute(1, 2, 0).numpy() for img in imgs], 8)


def max_error_to_alone(model, imgs, batch) -> float:
    """Largest difference between an image's outputs in the batch and
    alone (``'raw'``: its own tokens; padding left out)."""
    with torch.no_grad():
        mixed = model(batch)[0]
        errors = []
        for i, img in enumerate(imgs):
            alone = model(img[None])[0][0]
            ours = mixed[i][:alone.shape[0]] if model.out_type == 'raw' \
                else mixed[i]
            errors.append(((ours - alone).abs().max() /
                           alone.abs().max()).item())
    return max(errors)


@pytest.mark.parametrize('frame', ['patch', 'separate', 'max'])
@pytest.mark.parametrize('scheme', list(mmpos_positions.SCHEMES))
def test_mixed_batch_gives_every_image_its_own_output(scheme, frame):
    model = tiny(rope=dict(type=scheme, coords=dict(frame=frame)),
                 use_ape=True, out_type='raw', num_register_tokens=1)
    imgs = images()
    batch = naflex(imgs)
    assert batch['patch_valid'].float().mean() < 0.8  # padding to ignore
    assert max_error_to_alone(model, imgs, batch) < TOL


@pytest.mark.parametrize('out_type', ['cls_token', 'avg_featmap', 'raw'])
@pytest.mark.parametrize('rope', [None, dict(type='mixed')])
def test_pooled_outputs_ignore_padding(out_type, rope):
    model = tiny(rope=rope, use_ape=True, out_type=out_type)
    imgs = images()
    assert max_error_to_alone(model, imgs, naflex(imgs)) < TOL


def test_without_the_mask_padding_changes_the_outputs():
    """The test above can fail: attending to the padding (no key mask)
    moves every padded image's tokens."""
    model = tiny(rope=dict(type='mixed'), out_type='avg_featmap')
    imgs = images()
    batch = naflex(imgs)
    with torch.no_grad():
        x = model.embed_patches(batch['patches'])
        coords = batch['patch_coord'].flip(-1).float()
        unmasked = model.forward_tokens(x, coords=coords, hw=(8, 8))[0]
        alone = model(imgs[1][None])[0][0]  # 6 x 2 patches, 52 padded
    assert (unmasked[1] - alone).abs().max() > 0.05 * alone.abs().max()


def test_key_mask_of_real_tokens_only_is_the_plain_forward():
    model = tiny(rope=dict(type='axial'), out_type='raw')
    img = torch.randn(2, 3, 32, 48)
    with torch.no_grad():
        x, hw = model.embed(img)
        plain = model.forward_tokens(x, hw=hw)[0]
        masked = model.forward_tokens(
            x, hw=hw, key_mask=torch.ones(2, x.shape[1], dtype=torch.bool))[0]
    torch.testing.assert_close(masked, plain, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize('options, message', [
    (dict(window_size=2, with_cls_token=False, out_type='raw'),
     'global attention'),
    (dict(out_type='featmap'), 'featmap'),
    (dict(rope=dict(type='axial', freq_scaling=dict(method='yarn',
                                                    train_grid=(4, 4)))),
     'freq_scaling'),
])
def test_what_a_padded_sequence_cannot_run_is_refused(options, message):
    model = tiny(**options)
    with pytest.raises(ValueError, match=message):
        model(naflex(images()))


@pytest.mark.parametrize('scheme', list(mmpos_positions.SCHEMES))
def test_nan_positions_of_the_padding_never_leak(scheme):
    """Training mode with DINOv3's coordinate augmentation: every token's
    output (padding included) and every gradient stays finite, so a loss
    that masks padding by multiplication is safe."""
    model = tiny(rope=dict(type=scheme, coords=dict(
        frame='separate', shift=0.5, jitter=1.2, rescale=1.5)),
        use_ape=True, out_type='raw', num_register_tokens=1).train()
    out = model(naflex(images()))[0]
    out.sum().backward()
    assert torch.isfinite(out).all()
    assert all(torch.isfinite(p.grad).all() for p in model.parameters()
               if p.grad is not None)
