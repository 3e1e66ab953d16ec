"""Pictures of what a backbone learned, composed as exact-size PNG grids.

* :func:`pca_rgb`: the first three principal components of the patch
  features of one image as RGB (DINOv2 Fig. 1 style): patch tokens
  ``(C, h, w)`` are centred over the ``h * w`` patches, projected on their
  top-3 right singular vectors and each component min-max scaled to
  ``[0, 1]``;
* :func:`cls_attention`: the class token's attention over the patches,
  ``(heads, h, w)``, of one block of a RoPE ViT (recomputed from the
  block's own ``qkv`` and RoPE, :mod:`mmpos.analysis.attention`);
* :func:`draw_positions`: DropPos' predicted position of every
  dropped-position patch against its true one, as a line from the true
  patch centre to the predicted one (green: right, red: wrong);
* :func:`tile_grid`: equally sized tiles with captions as one RGB image.

Every picture is ``uint8`` ``(H, W, 3)``; :func:`save_png` writes it, and
:func:`save_figure` a matplotlib figure (the tools' plots), both atomically
(:func:`mmpos.checkpoint.atomic_path`: a killed tool leaves the old file or
none, never a partial one).
"""
import os.path as osp
from typing import List, Optional, Sequence

import numpy as np
import torch
import torch.nn.functional as F
from PIL import Image, ImageDraw
from torch import Tensor

from mmpos.checkpoint import atomic_path
from mmpos.errors import BadInputError, UnsupportedModelError

CAPTION_PX = 14


def pca_rgb(patch_tokens: Tensor) -> np.ndarray:
    """``(C, h, w)`` features -> ``(h, w, 3)`` float in ``[0, 1]``."""
    c, h, w = patch_tokens.shape
    x = patch_tokens.reshape(c, h * w).T.double()
    x = x - x.mean(0, keepdim=True)
    _, _, v = torch.linalg.svd(x, full_matrices=False)
    comps = x @ v[:3].T  # (h*w, 3)
    if comps.shape[1] < 3:
        comps = F.pad(comps, (0, 3 - comps.shape[1]))
    low, high = comps.min(0).values, comps.max(0).values
    comps = (comps - low) / (high - low).clamp_min(1e-12)
    return comps.reshape(h, w, 3).float().numpy()


def cls_attention(backbone, images: Tensor, layer: int) -> Tensor:
    """Class-token attention of block ``layer`` over the patches of
    ``images[0]``, ``(heads, h, w)`` (each head's row sums to 1 with the
    class token's own weight, which is left out)."""
    from mmpos.analysis.attention import record_attention, records_attention
    from mmpos.apis.features import patch_stride
    if not records_attention(backbone):
        raise UnsupportedModelError(
            f'{type(backbone).__name__}: attention maps need a '
            'RoPEVisionTransformer (layers[i].attn.qkv, position tables)')
    maps = record_attention(backbone, images[:1])
    extra = getattr(backbone, 'num_extra_tokens', 1)
    if not extra:
        raise UnsupportedModelError(
            f'{type(backbone).__name__} has no class token')
    sh, sw = patch_stride(backbone)
    h, w = images.shape[-2] // sh, images.shape[-1] // sw
    return maps[layer][0, :, 0, extra:].reshape(-1, h, w)


def colorize(values: np.ndarray, cmap: str = 'inferno') -> np.ndarray:
    """``(h, w)`` scalars -> ``(h, w, 3)`` in ``[0, 1]`` (min-max scaled)."""
    from matplotlib import colormaps
    low, high = float(values.min()), float(values.max())
    scaled = (values - low) / max(high - low, 1e-12)
    return colormaps[cmap](scaled)[..., :3]


def to_tile(picture: np.ndarray, size: int) -> np.ndarray:
    """A ``[0, 1]`` float or uint8 ``(h, w, 3)`` picture scaled to a
    ``size x size`` uint8 tile (nearest: patches stay visible squares)."""
    if picture.dtype != np.uint8:
        picture = (np.clip(picture, 0, 1) * 255).round().astype(np.uint8)
    return np.asarray(Image.fromarray(picture).resize((size, size),
                                                      Image.NEAREST))


def tile_grid(rows: Sequence[Sequence[np.ndarray]],
              captions: Optional[Sequence[Sequence[str]]] = None,
              size: int = 160) -> np.ndarray:
    """Tiles (any ``(h, w, 3)`` pictures) in rows, each scaled to
    ``size x size``, with a caption strip of ``CAPTION_PX`` above each row
    when ``captions`` are given: ``(rows * (size [+ CAPTION_PX]), max
    columns * size, 3)`` uint8, white background."""
    cap = CAPTION_PX if captions else 0
    cols = max(len(r) for r in rows)
    canvas = Image.new('RGB', (cols * size, len(rows) * (size + cap)),
                       'white')
    draw = ImageDraw.Draw(canvas)
    for i, row in enumerate(rows):
        top = i * (size + cap)
        for j, picture in enumerate(row):
            canvas.paste(Image.fromarray(to_tile(picture, size)),
                         (j * size, top + cap))
            if captions:
                draw.text((j * size + 2, top + 1), captions[i][j],
                          fill='black')
    return np.asarray(canvas)


def draw_positions(image: np.ndarray, grid: Sequence[int], target: Tensor,
                   pred: Tensor, dropped: Tensor,
                   size: int = 384) -> np.ndarray:
    """DropPos position predictions on ``image`` resized to ``size x size``.

    ``target`` / ``pred`` ``(K,)`` are row-major indices into the ``h x w``
    ``grid`` (true and predicted positions of the ``K`` kept patches),
    ``dropped`` ``(K,)`` marks the patches whose position was dropped (the
    others keep theirs and get a grey dot).
    """
    h, w = grid
    canvas = Image.fromarray(to_tile(image, size))
    draw = ImageDraw.Draw(canvas)
    ch, cw = size / h, size / w
    for i in range(1, h):
        draw.line([(0, i * ch), (size, i * ch)], fill=(255, 255, 255))
    for j in range(1, w):
        draw.line([(j * cw, 0), (j * cw, size)], fill=(255, 255, 255))

    def centre(index):
        row, col = divmod(int(index), w)
        return ((col + 0.5) * cw, (row + 0.5) * ch)

    r = max(2, size // (8 * max(h, w)))
    for t, p, d in zip(target.tolist(), pred.tolist(), dropped.tolist()):
        x, y = centre(t)
        if not d:
            draw.ellipse([x - r, y - r, x + r, y + r], fill=(160, 160, 160))
            continue
        colour = (0, 200, 0) if p == t else (230, 0, 0)
        px, py = centre(p)
        draw.line([(x, y), (px, py)], fill=colour, width=2)
        draw.ellipse([px - r, py - r, px + r, py + r], fill=colour)
        draw.rectangle([x - r, y - r, x + r, y + r], outline=colour)
    return np.asarray(canvas)


def save_png(picture: np.ndarray, path: str) -> str:
    with atomic_path(path) as tmp:
        Image.fromarray(picture).save(tmp, format='PNG')
    return path


def save_figure(fig, path: str, dpi: int) -> str:
    """Write the matplotlib figure ``fig`` to ``path`` (format from its
    extension, PNG without one) atomically, and close it."""
    import matplotlib.pyplot as plt
    with atomic_path(path) as tmp:
        fig.savefig(tmp, format=osp.splitext(path)[1][1:] or 'png', dpi=dpi)
    plt.close(fig)
    return path


def pca_picture(backbone, image: np.ndarray, sizes: Sequence[int],
                mean, std, tile: int = 160) -> np.ndarray:
    """One row: the image, then the PCA picture of the last output's patch
    features at every input size in ``sizes``."""
    from mmpos.apis.features import extract_features, preprocess
    row: List[np.ndarray] = [image]
    captions = ['image']
    for s in sizes:
        feats = extract_features(backbone, preprocess([image], s, mean, std))
        if feats['patch_tokens'] is None:
            raise UnsupportedModelError(
                f'{type(backbone).__name__} gives no patch tokens')
        row.append(pca_rgb(feats['patch_tokens'][0]))
        h, w = feats['patch_tokens'].shape[-2:]
        captions.append(f'PCA {s}px ({h}x{w})')
    return tile_grid([row], [captions], tile)


def attention_picture(backbone, image: np.ndarray, sizes: Sequence[int],
                      layers: Sequence[int], heads: Sequence[int], mean,
                      std, tile: int = 160) -> np.ndarray:
    """One row per (input size, block): the image, then the class-token
    attention of each chosen head."""
    from mmpos.apis.features import preprocess
    rows, captions = [], []
    for s in sizes:
        inputs = preprocess([image], s, mean, std)
        for layer in layers:
            attn = cls_attention(backbone, inputs, layer)
            for head in heads:
                if not 0 <= head < attn.shape[0]:
                    raise BadInputError(f'head {head}: block {layer} has '
                                        f'{attn.shape[0]} heads')
            rows.append([image] + [colorize(attn[hd].numpy())
                                   for hd in heads])
            captions.append([f'{s}px block {layer}'] +
                            [f'head {hd}' for hd in heads])
    return tile_grid(rows, captions, tile)


def draw_matches(src: np.ndarray, trg: np.ndarray, src_kps: Tensor,
                 pred: Tensor, correct: Tensor,
                 size: int = 192) -> np.ndarray:
    """Keypoint matches: ``src`` and ``trg`` images side by side, each
    scaled to ``size x size``; a line from every source keypoint ``(K, 2)``
    to its predicted target position ``(K, 2)`` (original pixels of each
    image), green where ``correct`` ``(K,)``, red elsewhere."""
    canvas = Image.new('RGB', (2 * size, size), 'white')
    canvas.paste(Image.fromarray(to_tile(src, size)), (0, 0))
    canvas.paste(Image.fromarray(to_tile(trg, size)), (size, 0))
    draw = ImageDraw.Draw(canvas)
    sx, sy = size / src.shape[1], size / src.shape[0]
    tx, ty = size / trg.shape[1], size / trg.shape[0]
    r = max(2, size // 64)
    for (x, y), (u, v), ok in zip(src_kps.tolist(), pred.tolist(),
                                  correct.tolist()):
        colour = (0, 200, 0) if ok else (230, 0, 0)
        a, b = (x * sx, y * sy), (size + u * tx, v * ty)
        draw.line([a, b], fill=colour, width=1)
        draw.ellipse([a[0] - r, a[1] - r, a[0] + r, a[1] + r], fill=colour)
        draw.ellipse([b[0] - r, b[1] - r, b[0] + r, b[1] + r], fill=colour)
    return np.asarray(canvas)
