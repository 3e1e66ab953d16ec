"""mini-NYU: rooms with known depth in NYU-Depth v2's layout as mmseg's
``NYUDataset`` reads it.

Each image is a pinhole view of a box-shaped room (floor, ceiling, four
walls) with 1-4 axis-aligned boxes standing on the floor. World
coordinates: metres, ``x`` right, ``y`` down, ``z`` forward, the camera at
the origin, the floor at ``y = cam_h``. Every camera parameter is drawn
per image (:func:`_sample_scene`), so that where a pixel sits in the frame
says little about its depth and the image content has to:

* height ``cam_h`` above the floor, anywhere between 0.4 m above the floor
  and 0.4 m below the ceiling;
* yaw, pitch (> 0 looks down) and roll of the camera
  (:func:`_rotation`, ``R = R_yaw R_pitch R_roll``, camera to world);
* horizontal field of view (focal length ``f = size / (2 tan(fov / 2))``
  pixels);
* crop: the principal point ``(cx, cy)`` anywhere within 20% of the side
  from the image centre, i.e. the image is an off-centre crop of a wider
  view.

The ray of pixel centre ``(u, v)`` is ``d = R ((u - cx) / f, (v - cy) / f,
1)``; the point at camera depth ``t`` is ``t d``, so the depth map -- the
``t`` of the nearest surface along the ray (:func:`_scene_depth`: the exit
through the room's walls, slab entries into the boxes) -- is exact and is
NYU's z-depth (along the optical axis). Each surface carries a texture
fixed in world coordinates (checkers, stripes or blotches of its own
colours, period in metres), so texture gradients, the vanishing lines and
the occlusions carry depth; brightness falls off slowly with distance,
times a random exposure per image.

Layout: ``images/{train,test}/<room>_<index>.jpg`` and
``annotations/{train,test}/<room>_<index>.png`` (uint16, millimetres:
mmseg's ``LoadDepthAnnotation(depth_rescale_factor=1e-3)`` reads metres).
"""
import os
import os.path as osp

import numpy as np
from PIL import Image

from ._io import _check_sizes, _rng, _save_jpeg, _staged_splits
from .ade import _ade_region
from .materials import MINI_MATERIALS, PhotoBank, _paint
from .textures import _grid, _smooth_noise, _to_uint8

_NYU, _LAYERS = 7, 10  # random-stream tags (see ._io)
ROOMS = ('bedroom', 'kitchen', 'living_room', 'office')
# Surface ids of the room (boxes follow: ``BOX + i`` is box ``i``).
BACK, FLOOR, CEILING, LEFT, RIGHT, FRONT, BOX = range(7)


def _sample_scene(rng):
    """Random camera, room and boxes (metres, radians); see the module
    docstring for the ranges' meaning."""
    room_h = rng.uniform(2.4, 3.2)
    scene = dict(
        cam_h=rng.uniform(0.4, room_h - 0.4), room_h=room_h,
        yaw=np.radians(rng.uniform(-35, 35)),
        pitch=np.radians(rng.uniform(-35, 35)),
        roll=np.radians(rng.uniform(-25, 25)),
        fov=np.radians(rng.uniform(50, 95)),
        centre=0.5 + rng.uniform(-0.2, 0.2, 2),
        left=-rng.uniform(0.8, 3.0), right=rng.uniform(0.8, 3.0),
        back=rng.uniform(2.5, 8.0), front=-rng.uniform(0.5, 2.5))
    boxes = []
    for _ in range(int(rng.integers(1, 5))):
        width, depth = rng.uniform(0.4, 1.4), rng.uniform(0.3, 1.0)
        height = rng.uniform(0.3, min(1.6, room_h - 0.2))
        x0 = rng.uniform(scene['left'], scene['right'] - width)
        z0 = rng.uniform(0.8, scene['back'] - depth)
        boxes.append(dict(lo=(x0, scene['cam_h'] - height, z0),
                          hi=(x0 + width, scene['cam_h'], z0 + depth)))
    scene['boxes'] = boxes
    return scene


def _rotation(yaw, pitch, roll):
    """Camera-to-world rotation ``(3, 3)``: roll about the optical axis,
    then pitch (> 0: down), then yaw (> 0: right)."""
    cy, sy, cp, sp, cr, sr = (np.cos(yaw), np.sin(yaw), np.cos(pitch),
                              np.sin(pitch), np.cos(roll), np.sin(roll))
    r_yaw = np.array([[cy, 0, sy], [0, 1, 0], [-sy, 0, cy]])
    r_pitch = np.array([[1, 0, 0], [0, cp, sp], [0, -sp, cp]])
    r_roll = np.array([[cr, -sr, 0], [sr, cr, 0], [0, 0, 1]])
    return r_yaw @ r_pitch @ r_roll


def _rays(scene, size):
    """World directions ``(3, H, W)`` of the pixel-centre rays, scaled to
    unit camera depth (a point at depth ``t`` is ``t * ray``)."""
    xs, ys = _grid(size)
    focal = size / (2 * np.tan(scene['fov'] / 2))
    cam = np.stack([(xs - scene['centre'][0] * size) / focal,
                    (ys - scene['centre'][1] * size) / focal,
                    np.ones_like(xs)]).astype(np.float64)
    rot = _rotation(scene['yaw'], scene['pitch'], scene['roll'])
    return np.einsum('ij,jhw->ihw', rot, cam)


def _scene_depth(scene, size):
    """``(depth (H, W) float64 metres, surface id (H, W))`` of the nearest
    surface along each pixel-centre ray; ids :data:`BACK` ... :data:`FRONT`
    for the room, ``BOX + i`` for box ``i``."""
    ray = _rays(scene, size)
    inf = np.full(ray.shape[1:], np.inf)
    lo = (scene['left'], scene['cam_h'] - scene['room_h'], scene['front'])
    hi = (scene['right'], scene['cam_h'], scene['back'])
    with np.errstate(divide='ignore', invalid='ignore'):
        # the room: the first wall each ray leaves through (axis order x,
        # y, z; the camera is inside, so every ray leaves)
        exits = [np.where(d > 0, h / d, np.where(d < 0, low / d, inf))
                 for d, low, h in zip(ray, lo, hi)]
        candidates = [
            np.where(ray[2] > 0, exits[2], inf),  # BACK
            np.where(ray[1] > 0, exits[1], inf),  # FLOOR
            np.where(ray[1] < 0, exits[1], inf),  # CEILING
            np.where(ray[0] < 0, exits[0], inf),  # LEFT
            np.where(ray[0] > 0, exits[0], inf),  # RIGHT
            np.where(ray[2] < 0, exits[2], inf),  # FRONT
        ]
        for box in scene['boxes']:  # slab entry (the camera is outside)
            t_lo = [np.asarray(b / d) for b, d in zip(box['lo'], ray)]
            t_hi = [np.asarray(b / d) for b, d in zip(box['hi'], ray)]
            near = np.max([np.fmin(a, b) for a, b in zip(t_lo, t_hi)], 0)
            far = np.min([np.fmax(a, b) for a, b in zip(t_lo, t_hi)], 0)
            candidates.append(np.where((near <= far) & (near > 0), near,
                                       inf))
    stack = np.stack(candidates)
    surface = stack.argmin(0)
    return np.take_along_axis(stack, surface[None], 0)[0], surface


def _surface_texture(rng, u, v):
    """A texture fixed on a surface, from its coordinates ``(u, v)`` in
    metres: checkers, stripes or blotches of two random colours."""
    colours = rng.uniform(40, 230, (2, 3))
    period = rng.uniform(0.25, 0.7)
    kind = rng.integers(3)
    if kind == 0:
        mix = (np.floor(u / period) + np.floor(v / period)) % 2
    elif kind == 1:
        angle = rng.uniform(0, np.pi)
        mix = 0.5 + 0.5 * np.sin(2 * np.pi * (u * np.cos(angle) + v * np.sin(
            angle)) / period)
    else:
        mix = (np.sin(u * 7.1 / period + rng.uniform(0, 6)) *
               np.sin(v * 5.3 / period + rng.uniform(0, 6)) > 0)
    mix = np.asarray(mix, np.float32)[..., None]
    return colours[0] * (1 - mix) + colours[1] * mix


def _render_room(rng, scene, size):
    """``(uint8 image (H, W, 3), depth (H, W) metres)`` of a scene."""
    depth, surface = _scene_depth(scene, size)
    x, y, z = _rays(scene, size) * depth
    # texture coordinates: the two world axes along the surface (for a
    # box, along the face the ray enters)
    coords = [(x, y), (x, z), (x, z), (z, y), (z, y), (x, y)]
    img = np.zeros((size, size, 3), np.float32)
    for sid in range(BOX + len(scene['boxes'])):
        where = surface == sid
        if not where.any():
            continue
        if sid >= BOX:
            box = scene['boxes'][sid - BOX]
            p = np.stack([x[where], y[where], z[where]])
            gap = np.minimum(np.abs(p - np.array(box['lo'])[:, None]),
                             np.abs(p - np.array(box['hi'])[:, None]))
            face = gap.argmin(0)  # axis of the face the ray enters
            u = np.where(face == 0, p[2], p[0])
            v = np.where(face == 1, p[2], p[1])
        else:
            u, v = coords[sid][0][where], coords[sid][1][where]
        img[where] = _surface_texture(rng, u, v)
    exposure = rng.uniform(0.8, 1.25)
    img *= (exposure * 1.3 / (1.0 + 0.06 * depth))[..., None]
    img += 6 * _smooth_noise(rng, size, 8)[..., None]
    img += 3 * rng.standard_normal(img.shape).astype(np.float32)
    return _to_uint8(img), depth


def make_mini_nyu(root, num_train=64, num_val=256, img_size=64, seed=0,
                  force=False):
    """Write the mini-NYU depth dataset to ``root``.

    Args:
        root (str): Target directory (must be absent or empty unless
            ``force``).
        num_train (int): Scenes in ``train``.
        num_val (int): Scenes in ``test`` (NYU's evaluation split; 256:
            one image moves d1, a mean over images, by at most 0.4
            points).
        img_size (int): Side of the square images, >= 32.
        seed (int): Seed of all randomness.
        force (bool): Replace an existing mini-data directory at ``root``.

    Returns:
        str: The absolute path of the dataset (mmseg's ``data_root``).
    """
    _check_sizes(img_size, num_train=num_train, num_val=num_val)

    def draw(rng):
        room = ROOMS[int(rng.integers(len(ROOMS)))]
        return room, *_render_room(rng, _sample_scene(rng), img_size)

    with _staged_splits(root, force, 'nyu', num_train, num_val, img_size,
                        seed) as tmp:
        _write_depth_splits(tmp, num_train, num_val, seed, _NYU, draw)
    return osp.abspath(root)


def _write_depth_splits(root, num_train, num_val, seed, tag, draw):
    """NYU's layout under ``root``: for image ``i`` of each split,
    ``draw(rng) -> (name, uint8 image, depth (H, W) metres)`` with the
    image's own stream, written as ``images/<split>/<name>_<i+1>.jpg`` and
    ``annotations/<split>/<name>_<i+1>.png`` (uint16 millimetres)."""
    for split, num in (('train', num_train), ('test', num_val)):
        img_dir = osp.join(root, 'images', split)
        ann_dir = osp.join(root, 'annotations', split)
        os.makedirs(img_dir)
        os.makedirs(ann_dir)
        for index in range(num):
            name, img, depth = draw(_rng(seed, tag, split == 'test', index))
            stem = f'{name}_{index + 1:05d}'
            _save_jpeg(img, osp.join(img_dir, stem + '.jpg'))
            Image.fromarray(np.round(depth * 1000).astype(
                np.uint16)).save(osp.join(ann_dir, stem + '.png'))


# mini-NYU layers: one camera for every image (horizontal field of view,
# degrees), the layers' depth range (metres, log-uniform) and the metres
# that the short side of every material's photograph spans.
LAYERS_FOV = 60.
LAYERS_DEPTH = (0.8, 9.)
PHOTO_METRES = 10.5


def _render_layers(rng, bank, size):
    """``(uint8 image (H, W, 3), depth (H, W) metres)``: 2-5 fronto-parallel
    layers at depths drawn log-uniform in :data:`LAYERS_DEPTH`, the farthest
    filling the frame, each nearer one a random ellipse or band
    (:func:`~.ade._ade_region`) over the farther ones. Each layer is a
    material's photograph (:data:`~.materials.MINI_MATERIALS`, jittered as
    everywhere) lying :data:`PHOTO_METRES` wide at its depth: the frame
    spans ``size z / f`` metres at depth ``z`` (``f`` the focal length of
    :data:`LAYERS_FOV`), so the photograph is cropped to that share of its
    short side and resized to the frame. The texture's scale in the image
    is then its depth (``1 / z``); the image's mean colour and a pixel's
    position are not."""
    focal = size / (2 * np.tan(np.radians(LAYERS_FOV) / 2))
    xs, ys = _grid(size)
    count = int(rng.integers(2, 6))
    depths = np.sort(np.exp(rng.uniform(*np.log(LAYERS_DEPTH), count)))
    names = list(MINI_MATERIALS.values())
    img = np.zeros((size, size, 3), np.float32)
    depth = np.zeros((size, size))
    for i, z in enumerate(depths[::-1]):
        share = min(1., size * z / focal / PHOTO_METRES)
        fill = _paint(rng, bank.patch(rng, names[int(rng.integers(
            len(names)))], size, (share, share)))
        where = _ade_region(rng, xs, ys, size) if i else np.ones(
            (size, size), bool)
        img[where] = fill[where]
        depth[where] = z
    img += 3 * rng.standard_normal(img.shape).astype(np.float32)
    return _to_uint8(img), depth


def make_mini_layers(root, num_train=64, num_val=256, img_size=64, seed=0,
                     force=False):
    """Write mini-NYU layers, the method ranking's depth probe data, to
    ``root``: :func:`_render_layers` scenes in the layout of
    :func:`make_mini_nyu` (NYU-Depth v2's, mmseg's ``NYUDataset``).

    Args:
        root (str): Target directory (must be absent or empty unless
            ``force``).
        num_train (int): Scenes in ``train``.
        num_val (int): Scenes in ``test`` (256: one image moves d1 by at
            most 0.4 points).
        img_size (int): Side of the square images, >= 32.
        seed (int): Seed of all randomness.
        force (bool): Replace an existing mini-data directory at ``root``.

    Returns:
        str: The absolute path of the dataset (mmseg's ``data_root``).
    """
    _check_sizes(img_size, num_train=num_train, num_val=num_val)
    bank = PhotoBank(MINI_MATERIALS.values())
    with _staged_splits(root, force, 'layers', num_train, num_val, img_size,
                        seed) as tmp:
        _write_depth_splits(tmp, num_train, num_val, seed, _LAYERS,
                            lambda rng: ('layers', *_render_layers(
                                rng, bank, img_size)))
    return osp.abspath(root)
