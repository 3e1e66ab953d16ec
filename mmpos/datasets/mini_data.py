"""Deterministic mini datasets in the real on-disk formats.

Three generators, each writing one dataset directory:

* :func:`make_mini_coco` -- COCO instance segmentation (``annotations/
  instances_{train,val}2017.json`` + ``{train,val}2017/*.jpg``): textured
  circles, squares and triangles of varied size on a textured background,
  occluding one another. Boxes, areas and polygons describe the *visible*
  part of every instance; the polygons rasterise (pycocotools) back to
  exactly that part.
* :func:`make_mini_ade` -- ADE20K layout (``images/{training,validation}/
  *.jpg`` + ``annotations/{training,validation}/*.png``), label 0 meaning
  "other" and ids ``1..6`` (see :data:`MINI_ADE_CLASSES`) each rendered with
  its own colour and texture statistics.
* :func:`make_unlabeled_images` -- a flat folder of JPEG views for
  self-supervised pretraining: random crops of the photographs that
  scikit-image ships inside its package, plus synthetic shape scenes.
* :func:`make_mini_cls` -- image classification in mmpretrain's
  ``CustomDataset`` folder-per-class layout (``{train,val}/<class>/*.jpg``):
  one textured circle, square or triangle per image.

The output depends only on the arguments: the same ``seed`` gives
byte-identical files. Each image draws from its own random stream, so image
``i`` of a split does not change with the number of images requested.

Every dataset is written into a hidden temporary sibling of its target and
renamed into place at the end, so an interrupted run never leaves a half
dataset. An existing non-empty target is an error; with ``force=True`` it is
replaced as a whole, but only if it holds the marker file
(:data:`MARKER`) that these generators write, so ``force`` never deletes a
directory they did not create.
"""
import contextlib
import json
import os
import os.path as osp
import shutil
import tempfile

import cv2
import numpy as np
from PIL import Image

MINI_COCO_CLASSES = ('circle', 'square', 'triangle')
# Label-map ids used in mini-ADE and the ADE20K class each one stands for.
MINI_ADE_CLASSES = {
    1: 'wall',
    2: 'building',
    3: 'sky',
    4: 'floor',
    5: 'tree',
    6: 'ceiling'
}
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
MARKER = '.mini_data.json'
JPEG_QUALITY = 95

# Per-generator tags that keep the random streams of the datasets apart.
_COCO, _ADE, _UNLABELED, _CLS = 1, 2, 3, 4
# Instances keeping less than this share (or pixel count) of their own
# area visible are dropped.
_MIN_VISIBLE_FRACTION = 0.3
_MIN_VISIBLE_PIXELS = 20
# Number of polygon sides of each COCO category (0 = circle).
_SIDES = {'circle': 0, 'square': 4, 'triangle': 3}


# --------------------------------------------------------------------------
# Safe, atomic output directories
# --------------------------------------------------------------------------
def _check_parent(parent):
    """Raise a clear error if ``parent`` cannot hold a new directory."""
    probe = parent
    while not osp.exists(probe):
        probe = osp.dirname(probe)
    if not osp.isdir(probe):
        raise NotADirectoryError(
            f'cannot create {parent}: {probe} is not a directory')
    if not os.access(probe, os.W_OK | os.X_OK):
        raise PermissionError(f'cannot write to {probe}: permission denied')
    try:
        os.makedirs(parent, exist_ok=True)
    except OSError as err:
        raise PermissionError(
            f'cannot create {parent}: {err.strerror}') from err


def _check_target(root, force):
    """Raise if writing ``root`` would clobber something it should not."""
    if not osp.exists(root):
        return
    if not osp.isdir(root):
        raise FileExistsError(f'{root} exists and is not a directory')
    if not os.listdir(root):
        return
    if not force:
        raise FileExistsError(
            f'{root} is not empty; choose another directory or pass '
            'force=True (--force) to replace it')
    if not osp.isfile(osp.join(root, MARKER)):
        raise FileExistsError(
            f'{root} is not empty and was not written by mmpos mini_data '
            f'(no {MARKER}); refusing to replace it even with force')


def _mkdtemp(parent, name, suffix):
    """Hidden temporary directory in ``parent`` with umask permissions."""
    path = tempfile.mkdtemp(prefix=f'.{name}.', suffix=suffix, dir=parent)
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(path, 0o777 & ~umask)
    return path


def _swap_in(tmp, root):
    """Rename ``tmp`` to ``root``; an existing ``root`` is removed after."""
    if not (osp.isdir(root) and os.listdir(root)):
        os.replace(tmp, root)  # absent or empty target: one atomic rename
        return
    old = _mkdtemp(osp.dirname(root), osp.basename(root), '.old')
    os.replace(root, old)
    try:
        os.replace(tmp, root)
    except OSError:
        os.replace(old, root)
        raise
    shutil.rmtree(old)


@contextlib.contextmanager
def _staged_dir(root, force, params):
    """Yield a temporary directory that becomes ``root`` on success.

    ``params`` (JSON-serialisable) is written to the :data:`MARKER` file.
    On any error the temporary directory is removed and ``root`` is left
    exactly as it was.
    """
    root = osp.abspath(root)
    _check_target(root, force)
    parent = osp.dirname(root)
    _check_parent(parent)
    tmp = _mkdtemp(parent, osp.basename(root), '.tmp')
    try:
        yield tmp
        _write_json(osp.join(tmp, MARKER), params)
        _swap_in(tmp, root)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def _staged_splits(root, force, dataset, num_train, num_val, img_size, seed,
                   **extra):
    """:func:`_staged_dir` of a dataset with a train and a val split, the
    generator's arguments (``extra`` last) as the marker's content."""
    return _staged_dir(
        root, force,
        dict(dataset=dataset, num_train=num_train, num_val=num_val,
             img_size=img_size, seed=seed, **extra))


def _write_json(path, obj):
    with open(path, 'w') as f:
        json.dump(obj, f)


def _save_jpeg(img, path):
    Image.fromarray(img).save(path, quality=JPEG_QUALITY)


def _check_sizes(img_size, **counts):
    """Validate the size arguments shared by the generators."""
    if int(img_size) != img_size or img_size < 32:
        raise ValueError(f'img_size must be an integer >= 32, got {img_size}')
    for name, value in counts.items():
        if int(value) != value or value < 1:
            raise ValueError(f'{name} must be an integer >= 1, got {value}')


def _rng(seed, *keys):
    """Independent generator for one (dataset, split, image) stream."""
    return np.random.default_rng([seed, *keys])


# --------------------------------------------------------------------------
# Textures
# --------------------------------------------------------------------------
def _grid(size):
    """Pixel-centre coordinates ``(xs, ys)``, each of shape (size, size)."""
    coords = np.arange(size, dtype=np.float32) + 0.5
    return np.meshgrid(coords, coords)


def _smooth_noise(rng, size, cells):
    """Zero-mean, unit-scale noise varying over about ``size / cells``."""
    coarse = rng.standard_normal((cells + 1, cells + 1)).astype(np.float32)
    img = Image.fromarray(coarse, mode='F')
    return np.asarray(img.resize((size, size), Image.BILINEAR))


def _stripes(rng, size, period, angle=None):
    """Sinusoidal stripes in [-1, 1] with the given period and angle."""
    xs, ys = _grid(size)
    angle = rng.uniform(0, np.pi) if angle is None else angle
    phase = rng.uniform(0, 2 * np.pi)
    u = xs * np.cos(angle) + ys * np.sin(angle)
    return np.sin(2 * np.pi * u / period + phase)


def _pattern(rng, size):
    """A random grey-level pattern (stripes, blotches or grain), (H, W)."""
    kind = rng.integers(3)
    if kind == 0:
        return 35 * _stripes(rng, size, rng.uniform(4, 12))
    if kind == 1:
        return 35 * _smooth_noise(rng, size, int(rng.integers(4, 12)))
    return 25 * rng.standard_normal((size, size)).astype(np.float32)


def _background(rng, size):
    """Low-saturation textured background, float32 (H, W, 3)."""
    mean = rng.uniform(70, 180) + rng.uniform(-20, 20, 3)
    tint = _smooth_noise(rng, size, 3)[..., None] * rng.uniform(-25, 25, 3)
    blotch = 25 * _smooth_noise(rng, size, int(rng.integers(6, 16)))
    grain = 8 * rng.standard_normal((size, size, 1))
    return mean + tint + (blotch[..., None] + grain).astype(np.float32)


def _distinct_colour(rng, avoid, min_dist=90):
    """Random RGB colour at least ``min_dist`` from every colour in
    ``avoid`` (best of a few tries)."""
    best, best_dist = None, -1.0
    for _ in range(20):
        colour = rng.uniform(0, 255, 3)
        dist = min(np.linalg.norm(colour - a) for a in avoid)
        if dist > best_dist:
            best, best_dist = colour, dist
        if dist >= min_dist:
            break
    return best


def _to_uint8(img):
    return np.clip(np.rint(img), 0, 255).astype(np.uint8)


# --------------------------------------------------------------------------
# Shape scenes (mini-COCO and the synthetic unlabeled views)
# --------------------------------------------------------------------------
def _shape_mask(xs, ys, sides, cx, cy, radius, angle):
    """Boolean mask of a circle (``sides == 0``) or regular polygon of
    circumradius ``radius`` centred at (cx, cy)."""
    dx, dy = xs - cx, ys - cy
    if sides == 0:
        return dx * dx + dy * dy <= radius * radius
    normals = angle + (np.arange(sides) + 0.5) * 2 * np.pi / sides
    proj = (dx[..., None] * np.cos(normals) + dy[..., None] * np.sin(normals))
    return proj.max(-1) <= radius * np.cos(np.pi / sides)


def _sample_shape(rng, xs, ys, size):
    """Random shape fully inside the image: (category index, mask)."""
    label = int(rng.integers(len(MINI_COCO_CLASSES)))
    radius = size * np.exp(rng.uniform(np.log(0.05), np.log(0.33)))
    radius = max(radius, 5.0)
    cx, cy = rng.uniform(radius, size - radius, 2)
    sides = _SIDES[MINI_COCO_CLASSES[label]]
    return label, _shape_mask(xs, ys, sides, cx, cy, radius,
                              rng.uniform(0, 2 * np.pi))


def _owner_map(masks, shape):
    """Index of the topmost (last) mask covering each pixel, -1 if none."""
    if not masks:
        return np.full(shape, -1)
    stack = np.stack(masks)[::-1]
    owner = len(masks) - 1 - stack.argmax(0)
    owner[~stack.any(0)] = -1
    return owner


def _has_hole(mask):
    """True if ``mask`` encloses background (COCO polygons cannot)."""
    _, hierarchy = cv2.findContours(
        mask.astype(np.uint8), cv2.RETR_CCOMP, cv2.CHAIN_APPROX_SIMPLE)
    return hierarchy is not None and bool((hierarchy[0, :, 3] >= 0).any())


def _is_visible(visible, mask):
    """Whether enough of ``mask`` is left in its ``visible`` part."""
    count = int(visible.sum())
    return (count >= _MIN_VISIBLE_PIXELS
            and count >= _MIN_VISIBLE_FRACTION * mask.sum())


def _visible_layout(masks):
    """Indices of the masks (back to front) that stay visible enough.

    Masks left almost hidden by later ones are dropped, repeatedly, since
    dropping one only uncovers the others. Returns ``(keep, visible)``
    with the visible masks of the kept ones, or ``None`` if a kept mask
    would have a hole.
    """
    keep = list(range(len(masks)))
    while True:
        owner = _owner_map([masks[i] for i in keep], masks[0].shape)
        visible = [owner == j for j in range(len(keep))]
        kept = [
            i for i, vis in zip(keep, visible) if _is_visible(vis, masks[i])
        ]
        if kept == keep:
            break
        keep = kept
    if any(_has_hole(vis) for vis in visible):
        return None
    return keep, visible


def _sample_layout(rng, size, max_instances):
    """Place 2..``max_instances`` shapes back to front.

    Each new shape occludes the earlier ones; a shape that would punch a
    hole into an earlier one is rejected, and earlier shapes it leaves
    almost hidden are dropped. Returns the labels and visible masks.
    """
    xs, ys = _grid(size)
    target = int(rng.integers(2, max_instances + 1))
    labels, masks, visible = [], [], []
    for _ in range(4 * target):
        if len(masks) == target:
            break
        label, mask = _sample_shape(rng, xs, ys, size)
        layout = _visible_layout(masks + [mask])
        if layout is None:
            continue
        keep, visible = layout
        labels = [(labels + [label])[i] for i in keep]
        masks = [(masks + [mask])[i] for i in keep]
    return labels, visible


def _render_scene(rng, size, visible_masks):
    """Textured background with each textured shape painted where it is
    visible, uint8 (H, W, 3)."""
    img = _background(rng, size)
    colours = [img.reshape(-1, 3).mean(0)]
    for mask in visible_masks:
        colour = _distinct_colour(rng, colours)
        colours.append(colour)
        fill = colour + _pattern(rng, size)[..., None]
        img[mask] = fill[mask]
    img += 4 * rng.standard_normal(img.shape).astype(np.float32)
    return _to_uint8(img)


def _polygons(mask):
    """COCO polygons, one per connected part of ``mask``.

    Contours are traced on the mask upsampled 2x, so that, mapped back,
    their vertices lie a quarter pixel inside the mask's pixel edges:
    pycocotools rasterises them back to exactly ``mask``.
    """
    upsampled = np.kron(mask.astype(np.uint8), np.ones((2, 2), np.uint8))
    contours, _ = cv2.findContours(upsampled, cv2.RETR_EXTERNAL,
                                   cv2.CHAIN_APPROX_SIMPLE)
    return [((c.reshape(-1, 2) + 0.5) / 2).ravel().tolist()
            for c in contours]


def _bbox(mask):
    """[x, y, w, h] of the pixels of ``mask`` (pixel-corner convention)."""
    ys, xs = np.nonzero(mask)
    x0, y0 = int(xs.min()), int(ys.min())
    return [x0, y0, int(xs.max()) - x0 + 1, int(ys.max()) - y0 + 1]


def _coco_split(root, split, num, img_size, seed, max_instances):
    """Write ``{split}2017/*.jpg`` and return the split's COCO dict."""
    os.makedirs(osp.join(root, f'{split}2017'))
    images, annotations = [], []
    for index in range(num):
        rng = _rng(seed, _COCO, split == 'val', index)
        labels, masks = _sample_layout(rng, img_size, max_instances)
        image_id = index + 1
        file_name = f'{image_id:012d}.jpg'
        _save_jpeg(_render_scene(rng, img_size, masks),
                   osp.join(root, f'{split}2017', file_name))
        images.append(
            dict(id=image_id, file_name=file_name, width=img_size,
                 height=img_size, license=1))
        for label, mask in zip(labels, masks):
            annotations.append(
                dict(id=len(annotations) + 1, image_id=image_id,
                     category_id=label + 1, segmentation=_polygons(mask),
                     area=int(mask.sum()), bbox=_bbox(mask), iscrowd=0))
    return dict(
        info=dict(
            description=f'mmpos mini-COCO ({split}), synthetic shapes',
            version='1.0', year=2024, contributor='mmpos', url='',
            date_created='2024-01-01'),
        licenses=[dict(id=1, name='CC0 1.0', url='')],
        images=images,
        annotations=annotations,
        categories=[
            dict(id=i + 1, name=name, supercategory='shape')
            for i, name in enumerate(MINI_COCO_CLASSES)
        ])


def make_mini_coco(root, num_train=64, num_val=16, img_size=128, seed=0,
                   max_instances=6, force=False):
    """Write a mini COCO instance-segmentation dataset to ``root``.

    Categories are :data:`MINI_COCO_CLASSES` (ids 1, 2, 3). Each image holds
    2..``max_instances`` shapes (circumradius 5% to 33% of ``img_size``)
    before occlusion drops; every annotation describes the visible part.

    Args:
        root (str): Target directory (created; must be absent or empty
            unless ``force``).
        num_train (int): Images in ``train2017``.
        num_val (int): Images in ``val2017``.
        img_size (int): Side of the square images, >= 32.
        seed (int): Seed of all randomness.
        max_instances (int): Most shapes placed per image, >= 2.
        force (bool): Replace an existing mini-data directory at ``root``.

    Returns:
        str: The absolute path of the dataset.
    """
    _check_sizes(img_size, num_train=num_train, num_val=num_val)
    if max_instances < 2:
        raise ValueError(f'max_instances must be >= 2, got {max_instances}')
    with _staged_splits(root, force, 'coco', num_train, num_val, img_size,
                        seed, max_instances=max_instances) as tmp:
        os.makedirs(osp.join(tmp, 'annotations'))
        for split, num in (('train', num_train), ('val', num_val)):
            coco = _coco_split(tmp, split, num, img_size, seed, max_instances)
            _write_json(
                osp.join(tmp, 'annotations', f'instances_{split}2017.json'),
                coco)
    return osp.abspath(root)


# --------------------------------------------------------------------------
# mini-ADE
# --------------------------------------------------------------------------
def _ade_textures(rng, size):
    """One texture per label 0..6, float32 (7, H, W, 3).

    Each class has its own colour and texture statistic: smooth (wall),
    brick grid (building), vertical gradient (sky), fine horizontal
    stripes (floor), strong blotches (tree), tiles (ceiling); label 0 is
    random-coloured clutter.
    """
    xs, ys = _grid(size)
    flat = np.zeros((size, size), np.float32)
    brick = (np.mod(ys, 8) < 1.5) | (
        np.mod(xs + 8 * (np.floor(ys / 8) % 2), 16) < 1.5)
    tiles = (np.mod(xs, 16) < 1.5) | (np.mod(ys, 16) < 1.5)
    clutter_cells = rng.uniform(0, 255, (size // 8 + 1, size // 8 + 1, 3))
    clutter = np.kron(clutter_cells, np.ones((8, 8, 1)))[:size, :size]
    specs = [
        (np.zeros(3), flat),  # 0: replaced by clutter below
        ((205, 185, 140), flat),
        ((160, 75, 55), -70 * brick),
        ((100, 150, 235), 60 * (0.5 - ys / size)),
        ((170, 125, 60), 25 * _stripes(rng, size, 4.0, angle=np.pi / 2)),
        ((45, 125, 40), 45 * _smooth_noise(rng, size, size // 6)),
        ((230, 230, 225), -60 * tiles),
    ]
    textures = np.stack([
        np.asarray(colour, np.float32) + pattern[..., None]
        for colour, pattern in specs
    ])
    textures[0] = clutter
    return textures


def _ade_label_map(rng, size):
    """Random label map: Voronoi cells of classes 1..6 with 0-labelled
    seams, overlaid by a few ellipses and bands (some labelled 0)."""
    xs, ys = _grid(size)
    num_cells = int(rng.integers(3, 7))
    seeds = rng.uniform(0, size, (num_cells, 2))
    dist = np.hypot(xs[..., None] - seeds[:, 0], ys[..., None] - seeds[:, 1])
    order = np.sort(dist, axis=-1)
    cell_labels = rng.integers(1, len(MINI_ADE_CLASSES) + 1, num_cells)
    labels = cell_labels[dist.argmin(-1)]
    labels[order[..., 1] - order[..., 0] < 1.5] = 0
    for _ in range(int(rng.integers(1, 4))):
        label = 0 if rng.random() < 0.25 else rng.integers(
            1, len(MINI_ADE_CLASSES) + 1)
        labels[_ade_region(rng, xs, ys, size)] = label
    return labels.astype(np.uint8)


def _ade_region(rng, xs, ys, size):
    """A random rotated ellipse or straight band, boolean (H, W)."""
    angle = rng.uniform(0, np.pi)
    cx, cy = rng.uniform(0, size, 2)
    u = (xs - cx) * np.cos(angle) + (ys - cy) * np.sin(angle)
    v = -(xs - cx) * np.sin(angle) + (ys - cy) * np.cos(angle)
    if rng.random() < 0.5:
        return np.abs(v) < rng.uniform(0.05, 0.15) * size
    a, b = rng.uniform(0.1, 0.3, 2) * size
    return (u / a)**2 + (v / b)**2 <= 1


def _render_ade(rng, labels):
    """Image for a label map: class textures, jittered, uint8 (H, W, 3)."""
    size = labels.shape[0]
    textures = _ade_textures(rng, size)
    img = np.take_along_axis(textures, labels[None, ..., None], 0)[0]
    img = img * rng.uniform(0.85, 1.15) + rng.uniform(-12, 12, 3)
    img += 5 * rng.standard_normal(img.shape)
    return _to_uint8(img)


def make_mini_ade(root, num_train=64, num_val=16, img_size=128, seed=0,
                  force=False):
    """Write a mini ADE20K-format semantic-segmentation dataset to ``root``.

    Label maps are uint8 PNGs with 0 = other/ignore and the ids of
    :data:`MINI_ADE_CLASSES` (1..6), matching mmseg's ``ADE20KDataset``
    with ``reduce_zero_label=True`` (training labels 0..5, 255 ignored).

    Args:
        root (str): Target directory (must be absent or empty unless
            ``force``).
        num_train (int): Images in ``images/training``.
        num_val (int): Images in ``images/validation``.
        img_size (int): Side of the square images, >= 32.
        seed (int): Seed of all randomness.
        force (bool): Replace an existing mini-data directory at ``root``.

    Returns:
        str: The absolute path of the dataset (mmseg's ``data_root``).
    """
    _check_sizes(img_size, num_train=num_train, num_val=num_val)
    with _staged_splits(root, force, 'ade', num_train, num_val, img_size,
                        seed) as tmp:
        for split, num in (('training', num_train), ('validation', num_val)):
            img_dir = osp.join(tmp, 'images', split)
            ann_dir = osp.join(tmp, 'annotations', split)
            os.makedirs(img_dir)
            os.makedirs(ann_dir)
            for index in range(num):
                rng = _rng(seed, _ADE, split == 'validation', index)
                labels = _ade_label_map(rng, img_size)
                stem = f'ADE_{split[:5]}_{index + 1:08d}'
                _save_jpeg(_render_ade(rng, labels),
                           osp.join(img_dir, stem + '.jpg'))
                Image.fromarray(labels).save(osp.join(ann_dir, stem + '.png'))
    return osp.abspath(root)


# --------------------------------------------------------------------------
# Unlabeled views
# --------------------------------------------------------------------------
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


# --------------------------------------------------------------------------
# Classification
# --------------------------------------------------------------------------
def _class_image(rng, size, label):
    """One shape of class ``label`` (circumradius 18% to 40% of ``size``,
    random rotation and position, fully inside) on a textured background,
    uint8 (H, W, 3)."""
    xs, ys = _grid(size)
    radius = size * rng.uniform(0.18, 0.4)
    cx, cy = rng.uniform(radius, size - radius, 2)
    mask = _shape_mask(xs, ys, _SIDES[MINI_COCO_CLASSES[label]], cx, cy,
                       radius, rng.uniform(0, 2 * np.pi))
    return _render_scene(rng, size, [mask])


def make_mini_cls(root, num_train=64, num_val=16, img_size=64, seed=0,
                  force=False):
    """Write a mini image-classification dataset to ``root``.

    Classes are :data:`MINI_COCO_CLASSES` (circle, square, triangle), image
    ``i`` of a split showing one shape of class ``i % 3`` (balanced splits).
    Layout ``{train,val}/<class>/<index>.jpg``, read by mmpretrain's
    ``CustomDataset(data_root=root, data_prefix='train')``, which takes the
    sorted folder names (the order above) as classes.

    Args:
        root (str): Target directory (must be absent or empty unless
            ``force``).
        num_train (int): Images in ``train``.
        num_val (int): Images in ``val``.
        img_size (int): Side of the square images, >= 32.
        seed (int): Seed of all randomness.
        force (bool): Replace an existing mini-data directory at ``root``.

    Returns:
        str: The absolute path of the dataset (``CustomDataset``'s
        ``data_root``).
    """
    _check_sizes(img_size, num_train=num_train, num_val=num_val)
    with _staged_splits(root, force, 'cls', num_train, num_val, img_size,
                        seed) as tmp:
        for split, num in (('train', num_train), ('val', num_val)):
            for name in MINI_COCO_CLASSES:
                os.makedirs(osp.join(tmp, split, name))
            for index in range(num):
                label = index % len(MINI_COCO_CLASSES)
                rng = _rng(seed, _CLS, split == 'val', index)
                _save_jpeg(
                    _class_image(rng, img_size, label),
                    osp.join(tmp, split, MINI_COCO_CLASSES[label],
                             f'{index:05d}.jpg'))
    return osp.abspath(root)


def make_all(root, which=('coco', 'ade', 'unlabeled'), num_train=64,
             num_val=16, num_unlabeled=256, img_size=128, seed=0,
             force=False):
    """Write the chosen mini datasets (``'coco'``, ``'ade'``,
    ``'unlabeled'``, ``'cls'``) to ``root/<name>``; see the individual
    generators.

    Returns:
        dict: Dataset name -> absolute path written.
    """
    makers = {
        'coco': lambda path: make_mini_coco(
            path, num_train, num_val, img_size, seed, force=force),
        'ade': lambda path: make_mini_ade(
            path, num_train, num_val, img_size, seed, force=force),
        'unlabeled': lambda path: make_unlabeled_images(
            path, num_unlabeled, img_size, seed, force=force),
        'cls': lambda path: make_mini_cls(
            path, num_train, num_val, img_size, seed, force=force),
    }
    unknown = sorted(set(which) - set(makers))
    if unknown:
        raise ValueError(f'unknown datasets {unknown}; choose from '
                         f'{sorted(makers)}')
    # Refuse before writing anything rather than after the first dataset.
    _check_sizes(img_size, num_train=num_train, num_val=num_val,
                 num_unlabeled=num_unlabeled)
    for name in which:
        _check_target(osp.abspath(osp.join(root, name)), force)
    return {name: makers[name](osp.join(root, name)) for name in which}
