"""Shape scenes (mini-COCO, mini-cls and the synthetic unlabeled views):
textured circles, squares and triangles occluding one another, and the
COCO polygons / boxes of their visible parts."""
import cv2
import numpy as np

from .textures import (_background, _distinct_colour, _grid, _pattern,
                       _to_uint8)

MINI_COCO_CLASSES = ('circle', 'square', 'triangle')
# Instances keeping less than this share (or pixel count) of their own
# area visible are dropped.
_MIN_VISIBLE_FRACTION = 0.3
_MIN_VISIBLE_PIXELS = 20
# Number of polygon sides of each COCO category (0 = circle).
_SIDES = {'circle': 0, 'square': 4, 'triangle': 3}


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


def _render_scene(rng, size, visible_masks, canvas_scale=1.):
    """Textured background with each textured shape painted where it is
    visible, uint8 (H, W, 3). ``canvas_scale``: ``size`` is that many times
    the side the textures' features are drawn for (a larger canvas with
    textures of the same pixel size; :func:`.textures._pattern`)."""
    img = _background(rng, size, canvas_scale)
    colours = [img.reshape(-1, 3).mean(0)]
    for mask in visible_masks:
        colour = _distinct_colour(rng, colours)
        colours.append(colour)
        fill = colour + _pattern(rng, size, canvas_scale)[..., None]
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
