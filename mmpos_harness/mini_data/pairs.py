"""mini-SPair: image pairs with exactly known keypoint correspondences, in
SPair-71k's layout (read by
:func:`mmpos.evaluation.correspondence.read_spair_pairs`).

The source image is a random view of one of scikit-image's photographs
(:func:`.photos._random_view`; the photograph's name is the pair's
category) or, where none is shipped, a synthetic shape scene. The target is
the source warped by a random homography (:func:`_random_homography`:
rotation up to 25 degrees, scale 0.75-1.25, shear, a mild perspective, a
shift and, for a third of the pairs, a horizontal flip, about the image
centre), resampled bilinearly (OpenCV, reflected borders). Keypoints are
random points of the source bounding box (``src_bndbox``); their target
positions are the homography applied to them (:func:`_apply_homography`),
kept where they land inside the target image; ``trg_bndbox`` bounds the
warped source box, clipped to the image. Coordinates are continuous pixels
(image corner at 0, pixel ``i`` covering ``[i, i + 1)``).

Layout: ``JPEGImages/<category>/<split>_<index>_{a,b}.jpg``,
``PairAnnotation/{trn,test}/<index>-<src>-<trg>:<category>.json`` with
SPair's keys (``src_imname``, ``trg_imname``, ``src_kps``, ``trg_kps``,
``src_bndbox``, ``trg_bndbox``, ``src_imsize`` / ``trg_imsize`` ``[W, H,
3]``, ``category``, ``mirror``, ``kps_ids``) plus ``mini_homography`` (the
3x3 source-to-target map).
"""
import json
import os
import os.path as osp

import cv2
import numpy as np

from ._io import _check_sizes, _rng, _save_jpeg, _staged_splits
from .photos import _load_photo, _random_view, available_skimage_photos
from .shapes import _render_scene, _sample_layout

_SPAIR = 8  # random-stream tag (see ._io)
NUM_KEYPOINTS = 10


def _random_homography(rng, size):
    """Random 3x3 source -> target map in continuous pixel coordinates."""
    angle = np.deg2rad(rng.uniform(-25, 25))
    scale = rng.uniform(0.75, 1.25)
    shear = rng.uniform(-0.15, 0.15)
    flip = -1.0 if rng.random() < 1 / 3 else 1.0
    linear = scale * np.array([[np.cos(angle), -np.sin(angle)],
                               [np.sin(angle), np.cos(angle)]]) @ np.array(
                                   [[flip, shear], [0.0, 1.0]])
    centre = np.eye(3)
    centre[:2, 2] = -size / 2
    model = np.eye(3)
    model[:2, :2] = linear
    model[2, :2] = rng.uniform(-0.3, 0.3, 2) / size  # perspective
    back = np.eye(3)
    back[:2, 2] = size / 2 + rng.uniform(-0.1, 0.1, 2) * size
    return back @ model @ centre, flip < 0


def _apply_homography(matrix, points):
    """``points`` ``(K, 2)`` mapped by the 3x3 ``matrix``."""
    ones = np.ones((len(points), 1))
    mapped = np.concatenate([points, ones], 1) @ matrix.T
    return mapped[:, :2] / mapped[:, 2:]


def _warp(img, matrix):
    """``img`` warped by ``matrix`` (continuous coordinates), so that the
    content at source point ``p`` appears at ``matrix(p)``. OpenCV puts
    pixel centres at integers, ours at ``i + 0.5``: conjugate by the
    half-pixel shift."""
    shift = np.eye(3)
    shift[:2, 2] = 0.5
    cv_matrix = np.linalg.inv(shift) @ matrix @ shift
    size = img.shape[1], img.shape[0]
    return cv2.warpPerspective(img, cv_matrix, size, flags=cv2.INTER_LINEAR,
                               borderMode=cv2.BORDER_REFLECT_101)


def _source_image(rng, photos, size):
    """``(category, uint8 image)``: a view of one of ``photos`` (name ->
    array), or a shape scene where there is none."""
    if photos:
        name = sorted(photos)[int(rng.integers(len(photos)))]
        return name, _random_view(rng, photos[name], size)
    _, visible = _sample_layout(rng, size, 5)
    return 'shapes', _render_scene(rng, size, visible)


def _draw_pair(rng, photos, size):
    """One pair: source / target images and the SPair annotation."""
    category, src = _source_image(rng, photos, size)
    while True:
        matrix, mirror = _random_homography(rng, size)
        x1, y1 = rng.uniform(0.05, 0.3, 2) * size
        x2, y2 = rng.uniform(0.7, 0.95, 2) * size
        kps = np.stack([rng.uniform(x1, x2, 4 * NUM_KEYPOINTS),
                        rng.uniform(y1, y2, 4 * NUM_KEYPOINTS)], 1)
        mapped = _apply_homography(matrix, kps)
        inside = np.all((mapped >= 0.5) & (mapped <= size - 0.5), axis=1)
        if inside.sum() >= NUM_KEYPOINTS:
            break
    keep = np.flatnonzero(inside)[:NUM_KEYPOINTS]
    corners = _apply_homography(matrix, np.array(
        [[x1, y1], [x2, y1], [x2, y2], [x1, y2]]))
    lo = np.clip(corners.min(0), 0, size)
    hi = np.clip(corners.max(0), 0, size)
    ann = dict(
        category=category,
        src_kps=kps[keep].round(3).tolist(),
        trg_kps=mapped[keep].round(3).tolist(),
        src_bndbox=[round(float(v), 3) for v in (x1, y1, x2, y2)],
        trg_bndbox=[round(float(v), 3) for v in (*lo, *hi)],
        src_imsize=[size, size, 3], trg_imsize=[size, size, 3],
        mirror=int(mirror), kps_ids=[str(i) for i in range(len(keep))],
        mini_homography=matrix.tolist())
    return src, _warp(src, matrix), ann


def make_mini_spair(root, num_train=64, num_val=16, img_size=64, seed=0,
                    force=False):
    """Write the mini-SPair correspondence dataset to ``root``.

    Args:
        root (str): Target directory (must be absent or empty unless
            ``force``).
        num_train (int): Pairs in ``PairAnnotation/trn``.
        num_val (int): Pairs in ``PairAnnotation/test``.
        img_size (int): Side of the square images, >= 32.
        seed (int): Seed of all randomness.
        force (bool): Replace an existing mini-data directory at ``root``.

    Returns:
        str: The absolute path of the dataset.
    """
    _check_sizes(img_size, num_train=num_train, num_val=num_val)
    photos = {name: _load_photo(name) for name in available_skimage_photos()}
    with _staged_splits(root, force, 'spair', num_train, num_val, img_size,
                        seed) as tmp:
        for split, num in (('trn', num_train), ('test', num_val)):
            pair_dir = osp.join(tmp, 'PairAnnotation', split)
            os.makedirs(pair_dir)
            for index in range(num):
                rng = _rng(seed, _SPAIR, split == 'test', index)
                src, trg, ann = _draw_pair(rng, photos, img_size)
                image_dir = osp.join(tmp, 'JPEGImages', ann['category'])
                os.makedirs(image_dir, exist_ok=True)
                names = [f'{split}_{index:05d}_{s}' for s in 'ab']
                for name, img in zip(names, (src, trg)):
                    _save_jpeg(img, osp.join(image_dir, name + '.jpg'))
                ann.update(src_imname=names[0] + '.jpg',
                           trg_imname=names[1] + '.jpg')
                stem = f'{index:06d}-{names[0]}-{names[1]}:{ann["category"]}'
                with open(osp.join(pair_dir, stem + '.json'), 'w') as f:
                    json.dump(ann, f)
    return osp.abspath(root)
