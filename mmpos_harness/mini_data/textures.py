"""Procedural grey-level patterns and textured backgrounds, (H, W[, 3])
float32 arrays in 0..255 units before :func:`_to_uint8`."""
import numpy as np
from PIL import Image


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


def _cells(cells, canvas_scale):
    """Noise cells on a canvas ``canvas_scale`` times the side they are
    counted for (rounded): features of the same pixel size."""
    return max(1, int(round(cells * canvas_scale)))


def _pattern(rng, size, canvas_scale=1.):
    """A random grey-level pattern (stripes, blotches or grain), (H, W).
    ``canvas_scale``: ``size`` is that many times the side the pattern's
    features are drawn for (their pixel size does not change)."""
    kind = rng.integers(3)
    if kind == 0:
        return 35 * _stripes(rng, size, rng.uniform(4, 12))
    if kind == 1:
        return 35 * _smooth_noise(
            rng, size, _cells(int(rng.integers(4, 12)), canvas_scale))
    return 25 * rng.standard_normal((size, size)).astype(np.float32)


def _background(rng, size, canvas_scale=1.):
    """Low-saturation textured background, float32 (H, W, 3);
    ``canvas_scale`` as :func:`_pattern`."""
    mean = rng.uniform(70, 180) + rng.uniform(-20, 20, 3)
    tint = _smooth_noise(rng, size, _cells(3, canvas_scale))[..., None] * \
        rng.uniform(-25, 25, 3)
    blotch = 25 * _smooth_noise(
        rng, size, _cells(int(rng.integers(6, 16)), canvas_scale))
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
