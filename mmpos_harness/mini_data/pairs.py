"""mini-SPair: image pairs with exactly known keypoint correspondences, in
SPair-71k's layout (read by
:func:`mmpos.evaluation.correspondence.read_spair_pairs`).

Two kinds of pairs, by index ``i`` of a split:

* **cross-instance** (``i % 4 != 0``, category = the object's kind, see
  :data:`OBJECT_CATEGORIES`), SPair-like: source and target show two
  different instances of one category -- a textured polygon whose
  proportions are drawn anew for each image (:data:`_TEMPLATES`), painted
  with its category's two colours blended along its length (the part
  colours of the category, jittered per instance, :func:`_paint`) and a
  texture of its own, with its own in-plane rotation (-60..60 degrees, no
  mirror), size (longest box side 45-80% of the image) and position, over
  its own textured background with one distractor shape (circle, square or
  triangle of :mod:`.shapes`) behind it. The keypoints are the polygon's
  vertices, the same semantic ids (``kps_ids``: vertex index of the
  category's template) in both images; the boxes bound them. Images are
  rendered with 4 x 4 supersampling (:func:`_coverage`), so the polygon is
  where its vertices say to a small fraction of a pixel.
* **geometric** (``i % 4 == 0``, category ``'homography'``): the source is a
  random view of one of scikit-image's photographs
  (:func:`.photos._random_view`) or, where none is shipped, a synthetic
  shape scene; the target is the source warped by a random homography
  (:func:`_random_homography`: rotation up to 25 degrees, scale
  0.75-1.25, shear, a mild perspective, a shift up to a quarter of the
  image and, for a third of the pairs, a horizontal flip, about the image
  centre), resampled bilinearly
  (OpenCV, reflected borders). Keypoints are random points of the source
  bounding box; their target positions are the homography applied to them
  (:func:`_apply_homography`), kept where they land inside the target
  image (away from its border, below); ``trg_bndbox`` bounds the warped
  source box, clipped to the image.

Every keypoint keeps :data:`MARGIN` (1/16) of the image side from the
border, in both images.

Per-pair difficulty, SPair-71k's keys with our bins (SPair bins the
difference of annotated 3D viewpoints; ours the in-plane rotation):
``viewpoint_variation`` 0 / 1 / 2 where the source and target rotations
differ by < 20, 20-60, >= 60 degrees (geometric pairs: 0, their rotation is
at most 25 degrees), ``scale_variation`` 0 / 1 / 2 where the ratio of the
boxes' longest sides is < 1.25, 1.25-1.6, >= 1.6; ``truncation``,
``occlusion`` 0 (every keypoint is visible); ``mirror`` 1 for flipped
geometric pairs.

Coordinates are continuous pixels (image corner at 0, pixel ``i``
covering ``[i, i + 1)``). Layout: ``JPEGImages/<category>/
<split>_<index>_{a,b}.jpg``, ``PairAnnotation/{trn,test}/
<index>-<src>-<trg>:<category>.json`` with SPair's keys (``src_imname``,
``trg_imname``, ``src_kps``, ``trg_kps``, ``src_bndbox``, ``trg_bndbox``
``[x1, y1, x2, y2]``, ``src_imsize`` / ``trg_imsize`` ``[W, H, 3]``,
``category``, ``kps_ids``, ``mirror``, ``viewpoint_variation``,
``scale_variation``, ``truncation``, ``occlusion``) plus, for geometric
pairs, ``mini_homography`` (the 3x3 source-to-target map) and, for
cross-instance pairs, ``mini_rotation`` (source and target rotation in
degrees).

Size: 320 test pairs (the default) hold about 2,500 keypoints (3/4
cross-instance pairs of 6-8 keypoints, 1/4 geometric pairs of 10).
"""
import json
import os
import os.path as osp

import cv2
import numpy as np

from ._io import _check_sizes, _rng, _save_jpeg, _staged_splits
from .photos import _load_photo, _random_view, available_skimage_photos
from .shapes import _render_scene, _sample_layout, _sample_shape
from .textures import (_background, _distinct_colour, _grid, _pattern,
                       _to_uint8)

_SPAIR = 8  # random-stream tag (see ._io)
NUM_KEYPOINTS = 10  # of a geometric pair
GEOMETRIC_CATEGORY = 'homography'
# Pair i of a split is geometric where i % GEOMETRIC_EVERY == 0.
GEOMETRIC_EVERY = 4
# Upper edges of the viewpoint- and scale-variation bins 0 and 1.
VIEWPOINT_EDGES = (20.0, 60.0)  # |rotation difference|, degrees
SCALE_EDGES = (1.25, 1.6)  # ratio of the boxes' longest sides
_MAX_ROTATION = 60.0  # degrees, each image
_OBJECT_SIZE = (0.45, 0.8)  # longest box side / image side
# Keypoints keep this share of the image side from its border: half a
# patch of the 64 px / 8 px-patch probe, beyond which the matcher's
# bilinear patch map is clamped (mmpos.evaluation.correspondence).
MARGIN = 1 / 16
_SUPERSAMPLE = 4


def _arrow(u):
    """Arrow along +x: tip, barbs and shaft corners."""
    head, barb, shaft = 0.6 + 0.4 * u[0], 0.55 + 0.4 * u[1], 0.15 + 0.2 * u[2]
    x = 1 - head
    return [(1, 0), (x, barb), (x, shaft), (-1, shaft), (-1, -shaft),
            (x, -shaft), (x, -barb)]


def _bolt(u):
    """Lightning bolt: a zig-zag of 7 corners, each moved by up to 0.08."""
    base = np.array([(-0.2, -1), (0.7, -1), (0.15, -0.1), (0.6, -0.1),
                     (-0.5, 1), (-0.05, 0.1), (-0.6, 0.1)])
    return base + 0.16 * (u[:14].reshape(7, 2) - 0.5)


def _ell(u):
    """L: upright bar and foot to the right."""
    foot, thick_x, thick_y = 0.3 + 0.7 * u[0], 0.35 + 0.3 * u[1], \
        0.35 + 0.3 * u[2]
    return [(-1, -1), (-1 + thick_x, -1), (-1 + thick_x, 1 - thick_y),
            (foot, 1 - thick_y), (foot, 1), (-1, 1)]


def _flag(u):
    """Flag on a pole, with a swallow-tail notch."""
    pole, low, notch = -0.85 + 0.15 * u[0], -0.3 + 0.5 * u[1], \
        0.2 + 0.4 * u[2]
    return [(-1, 1), (-1, -1), (1, -1), (1 - notch, (low - 1) / 2),
            (1, low), (pole, low), (pole, 1)]


def _stairs(u):
    """Three steps rising to the right."""
    x1, x2 = -1 / 3 + 0.2 * (u[0] - 0.5), 1 / 3 + 0.2 * (u[1] - 0.5)
    y1, y2 = 1 / 3 + 0.2 * (u[2] - 0.5), -1 / 3 + 0.2 * (u[3] - 0.5)
    return [(-1, 1), (1, 1), (1, -1), (x2, -1), (x2, y2), (x1, y2),
            (x1, y1), (-1, y1)]


def _tee(u):
    """T: bar on top of a stem."""
    half, bar, stem = 0.7 + 0.3 * u[0], 0.35 + 0.25 * u[1], 0.15 + 0.15 * u[2]
    y = -1 + bar
    return [(-half, -1), (half, -1), (half, y), (stem, y), (stem, 1),
            (-stem, 1), (-stem, y), (-half, y)]


# Object category -> its template: uniform draws u (14,) -> the simple
# polygon's vertices (K, 2) in about [-1, 1]^2; vertex k is keypoint k.
# None has a rotational symmetry, so under rotations without mirroring
# each vertex is told apart by the shape around it.
_TEMPLATES = dict(arrow=_arrow, bolt=_bolt, ell=_ell, flag=_flag,
                  stairs=_stairs, tee=_tee)
OBJECT_CATEGORIES = tuple(sorted(_TEMPLATES))
# Category -> the RGB colours of its template's x = -1 and x = 1 ends (see
# _paint): parts keep their colour across instances, as an object's parts
# keep their look across SPair's instances. Arrow / tee, bolt / stairs and
# ell / flag have about the same two colours in opposite order, so colour
# alone does not name the category.
_PAINT = dict(arrow=((230, 60, 60), (25, 195, 195)),
              bolt=((60, 200, 60), (195, 55, 195)),
              ell=((60, 60, 230), (195, 195, 25)),
              flag=((220, 200, 40), (35, 55, 215)),
              stairs=((200, 60, 200), (55, 195, 55)),
              tee=((40, 200, 200), (215, 55, 55)))


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
    back[:2, 2] = size / 2 + rng.uniform(-0.25, 0.25, 2) * size
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


def _bin(value, edges):
    """0, 1 or 2: where ``value`` falls among the two ``edges``."""
    return int(np.searchsorted(edges, value, side='right'))


def _box(points):
    """``[x1, y1, x2, y2]`` bounding ``points`` ``(K, 2)``."""
    return [*points.min(0), *points.max(0)]


def _difficulty(src_box, trg_box, rotations):
    """SPair's difficulty keys of a pair (bins of the module docstring);
    ``rotations``: source and target rotation in degrees."""
    sides = [max(b[2] - b[0], b[3] - b[1]) for b in (src_box, trg_box)]
    return dict(viewpoint_variation=_bin(abs(rotations[1] - rotations[0]),
                                         VIEWPOINT_EDGES),
                scale_variation=_bin(max(sides) / min(sides), SCALE_EDGES),
                truncation=0, occlusion=0)


def _source_image(rng, photos, size):
    """A view of one of ``photos`` (name -> array), or a shape scene where
    there is none, uint8."""
    if photos:
        name = sorted(photos)[int(rng.integers(len(photos)))]
        return _random_view(rng, photos[name], size)
    _, visible = _sample_layout(rng, size, 5)
    return _render_scene(rng, size, visible)


def _draw_geometric_pair(rng, photos, size):
    """One geometric pair: source / target images and the annotation."""
    src = _source_image(rng, photos, size)
    while True:
        matrix, mirror = _random_homography(rng, size)
        x1, y1 = rng.uniform(MARGIN, 0.3, 2) * size
        x2, y2 = rng.uniform(0.7, 1 - MARGIN, 2) * size
        kps = np.stack([rng.uniform(x1, x2, 4 * NUM_KEYPOINTS),
                        rng.uniform(y1, y2, 4 * NUM_KEYPOINTS)], 1)
        mapped = _apply_homography(matrix, kps)
        inside = np.all((mapped >= MARGIN * size) &
                        (mapped <= (1 - MARGIN) * size), axis=1)
        if inside.sum() >= NUM_KEYPOINTS:
            break
    keep = np.flatnonzero(inside)[:NUM_KEYPOINTS]
    corners = _apply_homography(matrix, np.array(
        [[x1, y1], [x2, y1], [x2, y2], [x1, y2]]))
    src_box = [x1, y1, x2, y2]
    trg_box = [*np.clip(corners.min(0), 0, size),
               *np.clip(corners.max(0), 0, size)]
    ann = dict(category=GEOMETRIC_CATEGORY, src_kps=kps[keep],
               trg_kps=mapped[keep], src_bndbox=src_box, trg_bndbox=trg_box,
               mirror=int(mirror), kps_ids=list(range(len(keep))),
               mini_homography=matrix.tolist())
    return src, _warp(src, matrix), ann


def _coverage(polygon, size):
    """Share of each pixel of a ``size`` x ``size`` image inside
    ``polygon`` ``(K, 2)`` (continuous coordinates), float32 (size, size):
    the share of a 4 x 4 grid of points per pixel (their centres) inside
    it by the even-odd rule."""
    fine = (np.arange(size * _SUPERSAMPLE) + 0.5) / _SUPERSAMPLE
    xs, ys = np.meshgrid(fine, fine)
    inside = np.zeros(xs.shape, bool)
    for (x0, y0), (x1, y1) in zip(polygon, np.roll(polygon, -1, 0)):
        if y0 == y1:
            continue  # a horizontal edge crosses no horizontal ray
        crosses = (y0 > ys) != (y1 > ys)
        inside ^= crosses & (xs < x0 + (ys - y0) * (x1 - x0) / (y1 - y0))
    return inside.reshape(size, _SUPERSAMPLE, size, _SUPERSAMPLE).mean(
        (1, 3), dtype=np.float32)


def _place_instance(rng, category, size):
    """A new instance of ``category`` at a random pose: ``(vertices (K, 2)
    in pixels, rotation in degrees, (A (2, 2), b (2,)))`` with ``pixel =
    template point @ A + b``; its box keeps :data:`MARGIN` from the image
    border."""
    template = np.asarray(_TEMPLATES[category](rng.uniform(0, 1, 14)), float)
    stretch = np.exp(rng.uniform(-0.25, 0.25))
    rotation = rng.uniform(-_MAX_ROTATION, _MAX_ROTATION)
    theta = np.deg2rad(rotation)
    linear = np.diag([stretch, 1 / stretch]) @ np.array(
        [[np.cos(theta), np.sin(theta)], [-np.sin(theta), np.cos(theta)]])
    shape = template @ linear
    low = shape.min(0)
    scale = rng.uniform(*_OBJECT_SIZE) * size / (shape - low).max()
    margin = MARGIN * size
    shift = rng.uniform(margin, size - margin - (shape.max(0) - low) * scale)
    offset = shift - low * scale
    return template @ (linear * scale) + offset, rotation, (linear * scale,
                                                            offset)


def _paint(rng, category, to_pixels, size):
    """The fill of an instance of ``category`` placed by ``to_pixels``
    (``(A, b)`` of :func:`_place_instance`), float32 (size, size, 3): its
    category's two colours (:data:`_PAINT`, each jittered by 20 per channel
    and both by a brightness of 0.8-1.2 for this instance) blended along
    the template's x axis (-1 to 1), plus a texture of its own."""
    matrix, offset = to_pixels
    xs, ys = _grid(size)
    along = ((np.stack([xs, ys], -1) - offset) @ np.linalg.inv(matrix))[
        ..., :1]
    first, second = (np.asarray(c) + rng.normal(0, 20, 3)
                     for c in _PAINT[category])
    blend = np.clip((along + 1) / 2, 0, 1)
    fill = rng.uniform(0.8, 1.2) * (first * (1 - blend) + second * blend)
    return (fill + 0.5 * _pattern(rng, size)[..., None]).astype(np.float32)


def _render_instance(rng, polygon, fill, size):
    """uint8 (size, size, 3): a textured background, one distractor shape,
    and ``polygon`` filled with ``fill`` (size, size, 3) on top."""
    img = _background(rng, size)
    colours = [img.reshape(-1, 3).mean(0)]
    xs, ys = _grid(size)
    _, mask = _sample_shape(rng, xs, ys, size)
    colours.append(_distinct_colour(rng, colours))
    img[mask] = (colours[-1] + _pattern(rng, size)[..., None])[mask]
    alpha = _coverage(polygon, size)[..., None]
    img = img * (1 - alpha) + fill * alpha
    img += 4 * rng.standard_normal(img.shape).astype(np.float32)
    return _to_uint8(img)


def _draw_cross_pair(rng, size):
    """One cross-instance pair: source / target images and the
    annotation."""
    category = OBJECT_CATEGORIES[int(rng.integers(len(OBJECT_CATEGORIES)))]
    images, kps, rotations = [], [], []
    for _ in range(2):
        vertices, rotation, to_pixels = _place_instance(rng, category, size)
        images.append(_render_instance(
            rng, vertices, _paint(rng, category, to_pixels, size), size))
        kps.append(vertices)
        rotations.append(round(rotation, 3))
    ann = dict(category=category, src_kps=kps[0], trg_kps=kps[1],
               src_bndbox=_box(kps[0]), trg_bndbox=_box(kps[1]), mirror=0,
               kps_ids=list(range(len(kps[0]))), mini_rotation=rotations)
    return images[0], images[1], ann


def _draw_pair(rng, photos, size, index):
    """Pair ``index`` of a split: images and its SPair annotation (JSON
    types, coordinates rounded to 1e-3 px; difficulty bins of the rounded
    values; geometric pairs count as not rotated)."""
    if index % GEOMETRIC_EVERY == 0:
        src, trg, ann = _draw_geometric_pair(rng, photos, size)
    else:
        src, trg, ann = _draw_cross_pair(rng, size)
    for key in ('src_kps', 'trg_kps'):
        ann[key] = np.asarray(ann[key]).round(3).tolist()
    for key in ('src_bndbox', 'trg_bndbox'):
        ann[key] = [round(float(v), 3) for v in ann[key]]
    ann.update(kps_ids=[str(i) for i in ann['kps_ids']],
               src_imsize=[size, size, 3], trg_imsize=[size, size, 3],
               **_difficulty(ann['src_bndbox'], ann['trg_bndbox'],
                             ann.get('mini_rotation', (0, 0))))
    return src, trg, ann


def make_mini_spair(root, num_train=64, num_val=320, img_size=64, seed=0,
                    force=False):
    """Write the mini-SPair correspondence dataset to ``root``.

    Args:
        root (str): Target directory (must be absent or empty unless
            ``force``).
        num_train (int): Pairs in ``PairAnnotation/trn``.
        num_val (int): Pairs in ``PairAnnotation/test`` (320: about 2,500
            keypoints).
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
                src, trg, ann = _draw_pair(rng, photos, img_size, index)
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
