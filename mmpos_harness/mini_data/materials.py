"""Materials: textures cut from the photographs scikit-image ships, with
brightness, contrast and tint jittered per patch alike for all materials.
Colour alone separates only some of them (brick, grass, cells); the grey
ones (gravel, moon, coins, fur, stars) differ by texture.

They define the classes of mini-objects and mini-stuff; the unlabeled
pretraining views crop the same photographs.
"""
import numpy as np
from PIL import Image

from .photos import _load_photo

# Material class -> the skimage.data photograph its texture is cut from.
MINI_MATERIALS = {
    'brick': 'brick',
    'grass': 'grass',
    'gravel': 'gravel',
    'moon': 'moon',
    'fur': 'chelsea',
    'cells': 'immunohistochemistry',
    'coins': 'coins',
    'stars': 'hubble_deep_field',
}
# Photographs whose crops serve as (non-material) scene backgrounds.
SCENE_PHOTOS = ('astronaut', 'camera', 'rocket', 'coffee', 'retina')


class PhotoBank:
    """The RGB photographs of ``names``, loaded once."""

    def __init__(self, names):
        self.photos = {
            name: _load_photo(name).astype(np.float32)
            for name in dict.fromkeys(names)
        }

    def patch(self, rng, name, size, scale=(0.15, 0.35)):
        """Random square crop of photograph ``name`` (side ``scale`` x its
        short side), random flip and quarter turn, resized to ``size``,
        float32 (size, size, 3)."""
        photo = self.photos[name]
        h, w = photo.shape[:2]
        side = int(rng.uniform(*scale) * min(h, w))
        y0 = int(rng.integers(0, h - side + 1))
        x0 = int(rng.integers(0, w - side + 1))
        crop = np.rot90(photo[y0:y0 + side, x0:x0 + side], rng.integers(4))
        if rng.random() < 0.5:
            crop = crop[:, ::-1]
        img = Image.fromarray(np.ascontiguousarray(crop).astype(np.uint8))
        return np.asarray(img.resize((size, size), Image.BILINEAR),
                          np.float32)


def _paint(rng, patch):
    """``patch`` (H, W, 3) with its contrast scaled by 0.7..1.3 about its
    mean, brightness by 0.75..1.25 and each channel by 0.9..1.1 (the same
    ranges for every material), float32 (H, W, 3)."""
    mean = patch.mean((0, 1))
    out = mean + rng.uniform(0.7, 1.3) * (patch - mean)
    gain = rng.uniform(0.75, 1.25) * rng.uniform(0.9, 1.1, 3)
    return out * gain.astype(np.float32)
