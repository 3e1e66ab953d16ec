"""Materials: textures cut from the photographs scikit-image ships, with
brightness, contrast and tint randomised per patch, so that only the
texture itself (not the mean colour) tells one material from another.

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
    """The grey-level photographs of ``names``, loaded once."""

    def __init__(self, names):
        self.grey = {
            name: _load_photo(name).astype(np.float32).mean(-1)
            for name in dict.fromkeys(names)
        }

    def patch(self, rng, name, size, scale=(0.15, 0.35)):
        """Random square crop of photograph ``name`` (side ``scale`` x its
        short side), random flip and quarter turn, resized to ``size``,
        normalised to zero mean and unit std, float32 (size, size)."""
        photo = self.grey[name]
        h, w = photo.shape
        side = int(rng.uniform(*scale) * min(h, w))
        y0 = int(rng.integers(0, h - side + 1))
        x0 = int(rng.integers(0, w - side + 1))
        crop = np.rot90(photo[y0:y0 + side, x0:x0 + side], rng.integers(4))
        if rng.random() < 0.5:
            crop = crop[:, ::-1]
        img = Image.fromarray(np.ascontiguousarray(crop), mode='F')
        grey = np.asarray(img.resize((size, size), Image.BILINEAR))
        return (grey - grey.mean()) / max(float(grey.std()), 1e-3)


def _paint(rng, normalised):
    """A normalised grey patch (H, W) with random brightness (80..170),
    contrast (std 18..40) and tint (gain 0.8..1.2 per channel), float32
    (H, W, 3); the same ranges for every material."""
    grey = rng.uniform(80, 170) + rng.uniform(18, 40) * normalised
    return grey[..., None] * rng.uniform(0.8, 1.2, 3).astype(np.float32)
