"""mini-NYU: rooms with known depth in NYU-Depth v2's layout as mmseg's
``NYUDataset`` reads it.

A pinhole camera (focal length ``0.8 * size`` pixels, principal point at
the image centre, looking along ``+z`` with ``y`` down) stands ``cam_h``
metres above the floor of a box-shaped room: floor, ceiling, two side walls
and a back wall, with 1-3 boxes standing on the floor whose fronts face the
camera. Every pixel's ray is intersected analytically with these planes
(:func:`_scene_depth`), so the depth map is exact: the z-depth (along the
optical axis, NYU's convention) of the surface seen through the pixel
centre. Each surface carries a texture fixed in world coordinates
(checkers, stripes or blotches of its own colours, period in metres), so
texture gradients, the horizon and the occlusions all carry depth;
brightness falls off slowly with distance.

Layout: ``images/{train,test}/<room>_<index>.jpg`` and
``annotations/{train,test}/<room>_<index>.png`` (uint16, millimetres:
mmseg's ``LoadDepthAnnotation(depth_rescale_factor=1e-3)`` reads metres).
"""
import os
import os.path as osp

import numpy as np
from PIL import Image

from ._io import _check_sizes, _rng, _save_jpeg, _staged_splits
from .textures import _grid, _smooth_noise, _to_uint8

_NYU = 7  # random-stream tag (see ._io)
ROOMS = ('bedroom', 'kitchen', 'living_room', 'office')
FOCAL = 0.8  # focal length in image sides


def _sample_scene(rng):
    """Random room and boxes (metres)."""
    cam_h = rng.uniform(1.0, 1.6)
    back = rng.uniform(4.0, 9.0)
    boxes = []
    for _ in range(int(rng.integers(1, 4))):
        z = rng.uniform(1.5, back - 0.5)
        width, height = rng.uniform(0.4, 1.4), rng.uniform(0.4, 1.5)
        x0 = rng.uniform(-1.5, 1.5 - width)
        boxes.append(dict(z=z, x0=x0, x1=x0 + width, y0=cam_h - height,
                          y1=cam_h))
    return dict(cam_h=cam_h, room_h=rng.uniform(2.4, 3.0), back=back,
                half_width=rng.uniform(1.6, 3.0), boxes=boxes)


def _rays(size):
    """Ray slopes ``(x / z, y / z)`` through the pixel centres."""
    xs, ys = _grid(size)
    focal = FOCAL * size
    return (xs - size / 2) / focal, (ys - size / 2) / focal


def _scene_depth(scene, size):
    """``(depth (H, W) float64 metres, surface id (H, W))`` of the nearest
    surface along each pixel-centre ray; ids: 0 back wall, 1 floor, 2
    ceiling, 3 left, 4 right wall, 5 + i box ``i``."""
    sx, sy = _rays(size)
    inf = np.full(sx.shape, np.inf)
    with np.errstate(divide='ignore'):
        candidates = [
            np.full(sx.shape, scene['back']),
            np.where(sy > 0, scene['cam_h'] / sy, inf),
            np.where(sy < 0, (scene['cam_h'] - scene['room_h']) / sy, inf),
            np.where(sx < 0, -scene['half_width'] / sx, inf),
            np.where(sx > 0, scene['half_width'] / sx, inf),
        ]
    for box in scene['boxes']:
        x, y = sx * box['z'], sy * box['z']
        hit = (x >= box['x0']) & (x <= box['x1']) & (y >= box['y0']) & (
            y <= box['y1'])
        candidates.append(np.where(hit, box['z'], inf))
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
    sx, sy = _rays(size)
    x, y, z = sx * depth, sy * depth, depth
    coords = [(x, y), (x, z), (x, z), (z, y), (z, y)] + [
        (x, y)] * len(scene['boxes'])
    img = np.zeros((size, size, 3), np.float32)
    for sid, (u, v) in enumerate(coords):
        where = surface == sid
        if where.any():
            img[where] = _surface_texture(rng, u[where], v[where])
    img *= (1.0 / (1.0 + 0.06 * depth))[..., None] * 1.3
    img += 6 * _smooth_noise(rng, size, 8)[..., None]
    img += 3 * rng.standard_normal(img.shape).astype(np.float32)
    return _to_uint8(img), depth


def make_mini_nyu(root, num_train=64, num_val=16, img_size=64, seed=0,
                  force=False):
    """Write the mini-NYU depth dataset to ``root``.

    Args:
        root (str): Target directory (must be absent or empty unless
            ``force``).
        num_train (int): Scenes in ``train``.
        num_val (int): Scenes in ``test`` (NYU's evaluation split).
        img_size (int): Side of the square images, >= 32.
        seed (int): Seed of all randomness.
        force (bool): Replace an existing mini-data directory at ``root``.

    Returns:
        str: The absolute path of the dataset (mmseg's ``data_root``).
    """
    _check_sizes(img_size, num_train=num_train, num_val=num_val)
    with _staged_splits(root, force, 'nyu', num_train, num_val, img_size,
                        seed) as tmp:
        for split, num in (('train', num_train), ('test', num_val)):
            img_dir = osp.join(tmp, 'images', split)
            ann_dir = osp.join(tmp, 'annotations', split)
            os.makedirs(img_dir)
            os.makedirs(ann_dir)
            for index in range(num):
                rng = _rng(seed, _NYU, split == 'test', index)
                room = ROOMS[int(rng.integers(len(ROOMS)))]
                img, depth = _render_room(rng, _sample_scene(rng), img_size)
                stem = f'{room}_{index + 1:05d}'
                _save_jpeg(img, osp.join(img_dir, stem + '.jpg'))
                Image.fromarray(np.round(depth * 1000).astype(
                    np.uint16)).save(osp.join(ann_dir, stem + '.png'))
    return osp.abspath(root)
