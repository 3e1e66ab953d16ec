"""Unlabeled views for self-supervised pretraining."""
import os.path as osp

from ._io import _UNLABELED, _check_sizes, _rng, _save_jpeg, _staged_dir
from .photos import (SKIMAGE_PHOTOS, _load_photo, _random_view,
                     available_skimage_photos)
from .shapes import _render_scene, _sample_layout


def make_unlabeled_images(root, num_images=256, img_size=128, seed=0,
                          photo_fraction=0.75, force=False):
    """Write a flat folder of unlabeled JPEG views for pretraining.

    About ``photo_fraction`` of the views are random crops of the sample
    photographs scikit-image ships (:func:`available_skimage_photos`),
    named ``<index>_<photo>.jpg``; the rest are synthetic shape scenes,
    ``<index>_synthetic.jpg``. The folder is read by mmpretrain's
    ``CustomDataset(data_root=root, with_label=False)``.

    Args:
        root (str): Target directory (must be absent or empty unless
            ``force``).
        num_images (int): Number of views.
        img_size (int): Side of the square views, >= 32.
        seed (int): Seed of all randomness.
        photo_fraction (float): Share of photograph views, in [0, 1].
        force (bool): Replace an existing mini-data directory at ``root``.

    Returns:
        str: The absolute path of the folder.
    """
    _check_sizes(img_size, num_images=num_images)
    if not 0 <= photo_fraction <= 1:
        raise ValueError(
            f'photo_fraction must be in [0, 1], got {photo_fraction}')
    names = available_skimage_photos() if photo_fraction > 0 else []
    if photo_fraction > 0 and not names:
        raise RuntimeError('the installed scikit-image ships none of '
                           f'{sorted(SKIMAGE_PHOTOS)}; use photo_fraction=0')
    photos = {name: _load_photo(name) for name in names}
    params = dict(dataset='unlabeled', num_images=num_images,
                  img_size=img_size, seed=seed, photo_fraction=photo_fraction,
                  photos=names)
    with _staged_dir(root, force, params) as tmp:
        for index in range(num_images):
            rng = _rng(seed, _UNLABELED, index)
            if rng.random() < photo_fraction:
                source = names[int(rng.integers(len(names)))]
                img = _random_view(rng, photos[source], img_size)
            else:
                source = 'synthetic'
                _, masks = _sample_layout(rng, img_size, 6)
                img = _render_scene(rng, img_size, masks)
            _save_jpeg(img, osp.join(tmp, f'{index:05d}_{source}.jpg'))
    return osp.abspath(root)
