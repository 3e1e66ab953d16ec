"""The photographs scikit-image ships inside its package (no download is
ever attempted) and random views of them."""
import os.path as osp

import numpy as np
from PIL import Image

# scikit-image sample photographs (``skimage.data`` function -> the file it
# reads from the package directory), used by make_unlabeled_images when the
# installed package ships them; no download is ever attempted.
SKIMAGE_PHOTOS = {
    'astronaut': 'astronaut.png',
    'chelsea': 'chelsea.png',
    'coffee': 'coffee.png',
    'rocket': 'rocket.jpg',
    'camera': 'camera.png',
    'immunohistochemistry': 'ihc.png',
    'hubble_deep_field': 'hubble_deep_field.jpg',
    'retina': 'retina.jpg',
    'coins': 'coins.png',
    'moon': 'moon.png',
    'brick': 'brick.png',
    'grass': 'grass.png',
    'gravel': 'gravel.png',
}


def available_skimage_photos():
    """Names of the :data:`SKIMAGE_PHOTOS` that the installed scikit-image
    ships inside its package (these load without any download)."""
    from skimage import data
    data_dir = osp.dirname(data.__file__)
    return [
        name for name, file_name in SKIMAGE_PHOTOS.items()
        if hasattr(data, name) and osp.isfile(osp.join(data_dir, file_name))
    ]


def _load_photo(name):
    """An skimage sample photograph as uint8 RGB (H, W, 3)."""
    from skimage import data
    img = np.asarray(getattr(data, name)())
    if img.ndim == 2:
        img = np.repeat(img[..., None], 3, axis=-1)
    return np.ascontiguousarray(img[..., :3]).astype(np.uint8)


def _random_view(rng, photo, size):
    """Random crop (35-100% of the short side, aspect 3:4..4:3), random
    horizontal flip, resized to ``size`` x ``size``."""
    h, w = photo.shape[:2]
    side = rng.uniform(0.35, 1.0) * min(h, w)
    aspect = np.exp(rng.uniform(np.log(3 / 4), np.log(4 / 3)))
    cw = int(min(w, round(side * np.sqrt(aspect))))
    ch = int(min(h, round(side / np.sqrt(aspect))))
    x0 = int(rng.integers(0, w - cw + 1))
    y0 = int(rng.integers(0, h - ch + 1))
    crop = photo[y0:y0 + ch, x0:x0 + cw]
    if rng.random() < 0.5:
        crop = crop[:, ::-1]
    img = Image.fromarray(np.ascontiguousarray(crop))
    return np.asarray(img.resize((size, size), Image.BICUBIC))
