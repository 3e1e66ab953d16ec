"""PixelPatches: the raw-pixel baseline backbone gives each patch its own
pixels, in the token layout the probes read from a ViT."""
import pytest
import torch
import torch.nn.functional as F

from mmpos.apis.features import extract_features
from mmpos.models.backbones import PixelPatches
from mmpos.errors import BadInputError


def test_patch_tokens_are_the_patches_pixels():
    x = torch.randn(2, 3, 24, 32)
    feats = extract_features(PixelPatches(patch_size=8), x)
    patches = feats['patch_tokens']
    assert patches.shape == (2, 3 * 8 * 8, 3, 4)
    for i, j in ((0, 0), (1, 3), (2, 2)):
        block = x[:, :, 8 * i:8 * i + 8, 8 * j:8 * j + 8]
        assert torch.equal(patches[:, :, i, j], block.reshape(2, -1))
    # the patches fold back into the image; the class token is their mean
    folded = F.fold(patches.flatten(2), (24, 32), 8, stride=8)
    assert torch.equal(folded, x)
    assert torch.allclose(feats['cls_token'], patches.mean((2, 3)),
                          atol=1e-6)
    featmap = PixelPatches(patch_size=8, out_type='featmap')(x)[0]
    assert torch.equal(featmap, patches)
    assert not list(PixelPatches().parameters())


def test_input_not_a_multiple_of_the_patch_is_refused():
    with pytest.raises(BadInputError, match=r'\(20, 32\) is not a multiple '
                       'of the patch size 8'):
        PixelPatches(patch_size=8)(torch.zeros(1, 3, 20, 32))


def test_naflex_batch_gives_each_images_patches():
    """A padded NaFlex batch of two sizes: each image's patch map and class
    token are what it gives alone as a square input."""
    from mmpos.datasets.naflex import naflex_batch
    from mmpos.models.backbones.rope_vit import naflex_featmaps
    images = [torch.rand(24, 32, 3).numpy(), torch.rand(16, 8, 3).numpy()]
    batch = naflex_batch(images, 8)
    model = PixelPatches(patch_size=8)
    tokens = model(batch)[0]
    maps = naflex_featmaps(tokens, batch['patch_coord'],
                           batch['patch_valid'], 1)
    for b, img in enumerate(images):
        alone = extract_features(model, torch.from_numpy(img).permute(
            2, 0, 1)[None])
        assert torch.equal(maps[b], alone['patch_tokens'][0])
        assert torch.allclose(tokens[b, 0], alone['cls_token'][0],
                              atol=1e-6)
