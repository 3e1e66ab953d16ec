"""RoPE-ViT's resolution claim in miniature, with its two factors apart.

Heo et al. (ECCV 2024, Fig. 3-4, Table 5): a ViT with RoPE keeps its
accuracy when the test resolution grows past the training resolution, one
with an absolute position embedding (APE, interpolated) does not. Here the
demo-size ViT (4 blocks, width 96, 3 heads of 32 channels, 8 px patches,
LayerScale as the authors' DeiT-III recipe, starting at CaiT's 0.1 for
shallow models) learns mini-cls' task
(a textured circle, square or triangle, circumradius 18-40 % of the side,
:func:`render_image`) at one training size (default 64 px: an 8 x 8 grid)
with each position scheme and several seeds, and is tested on larger grids
(up to twice the side) in two ways, each its own table:

* **resize** (the paper's setting): the same validation images at more
  pixels. Every image is rendered once at the largest test size and
  downsampled (antialiased) to each size, so the object grows with the
  grid.
* **canvas**: a larger canvas at the same object scale (more context):
  the same kind of scene rendered on a canvas ``s / train_size`` times as
  large, the shape and the textures' features of the training pixel size,
  the shape anywhere on the canvas.

Controls: no position embedding at all (``none``), and every model tested
with its patches shuffled at the training size (a fixed permutation per
validation image, :func:`shuffle_patches`; a third table). DINOv3's scheme
runs with its training-time coordinate augmentation (``DINOv3``) and
without (``DINOv3-noaug``). The linear-angle RoPEs are also tested with
test-time frequency scaling (``freq_scaling``: NTK-aware and YaRN) on the
larger grids. Training: AdamW, weight decay 0.05 except on what the RoPE-ViT
authors' recipe exempts (:func:`decay_split`), warm-up and cosine
schedule, horizontal flips; every scheme trains seed ``k`` with the same
initial draw, batches and flips. :func:`turning_pairs` reports per scheme
how many of its frequency pairs complete a turn over the largest training
offset.

    python tools/paper_tables/position_study.py OUT_DIR [--schemes ...]
        [--seeds 0 1 2 3 4] [--iters N] [--num-train N] [--num-val 1200]
        [--train-size 64] [--sizes 80 96 128] [--batch-size 32] [--lr 1e-3]
        [--layer-scale 0.1] [--threads 1]
    python tools/paper_tables/position_study.py OUT_DIR [...]
        [--rrc-scale 0.08 1] [--factors resize pad] [--scalings pi ntk
        yarn] [--embed-dims 64 --num-heads 2] [--summary NAME]
    python tools/paper_tables/position_study.py OUT_DIR --calibrate
        [--calibrate-iters ...] [--num-train N] [--layer-scale V]
        [--schemes APE RoPE-Mixed]
    python tools/paper_tables/position_study.py --retable STUDY.json

Every run writes ``OUT_DIR/runs/<scheme>/seed<k>.json`` (accuracies per
table, size and scaling; command, date, machine, CPU and wall seconds) and
is skipped when that file exists and records the command's settings
(:func:`settings`; other settings are refused: the study resumes; rendered
images are
cached in ``OUT_DIR/data``). Then ``OUT_DIR/position_study.{md,json,png}``:
per table, row and column the top-1 mean +- std over the seeds (sample
std) and a paired t over the training seeds
(:func:`mmpos_stats.paired`): at each size against APE at that
size; in the change column (largest size minus training size) against
APE's change, APE's own change against 0; in the shuffle table the
shuffled accuracy against the same model's intact one. Each table is one
family, adjusted by Benjamini-Hochberg (the position-study grids are
exploratory, docs/user_guides/statistics.md). ``--retable JSON`` rewrites
a stored ``JSON`` and its ``.md`` from the per-seed values in it.
``--calibrate`` trains the given schemes (default APE and RoPE-Mixed) with
the first seed for each ``--calibrate-iters`` at ``--num-train`` images,
keeps each run in ``OUT_DIR/calibration/`` (skipped when there) and
writes ``OUT_DIR/calibration.{md,json}`` over every calibration run kept
there: training-size top-1, its change at the largest size in each table,
the shuffled top-1, CPU minutes.

Every file is written atomically, so a study killed at any moment resumes
(the same command again) to the same tables; a second study on the same
``OUT_DIR`` is refused while one runs
(:func:`mmpos.guardrails.launch.work_dir_lock`).
"""
import argparse
import glob
import json
import math
import os.path as osp
import shlex
import sys
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

import mmpos_stats as stats
from mmpos.analysis.pictures import save_figure
from mmpos.apis.features import init_quietly
from mmpos.checkpoint import atomic_open, write_atomically
from mmpos.guardrails.cli import cli_main
from mmpos.guardrails.launch import work_dir_lock
from mmpos_positions.linear import FREQ_SCALINGS

from . import provenance
from .comparison.seeds import write_json

ARCH = dict(embed_dims=96, num_layers=4, num_heads=3,
            feedforward_channels=384)
PATCH = 8
# LayerScale's initial value: CaiT's for depth <= 18 (the authors' DeiT-III
# recipe uses LayerScale with 1e-4, set for 12 to 24 blocks)
LAYER_SCALE = 0.1
WEIGHT_DECAY = 0.05
RADIUS = (0.18, 0.4)  # mini-cls' circumradius, share of the side
NUM_CLASSES = 3
SCALINGS = ('ntk', 'yarn')  # the default; ``--scalings`` adds 'pi'
FACTORS = ('resize', 'canvas')  # the default; ``--factors`` adds 'pad'
ALL_FACTORS = ('resize', 'canvas', 'pad')
PAD_VALUE = 128  # the padded canvas' grey (uint8), about 0 normalised
REFERENCE = 'APE'
DEFAULT_SCHEMES = ('none', 'APE', 'RoPE-Axial', 'RoPE-Mixed', 'DINOv3',
                   'DINOv3-noaug')
SHUFFLE_SEED = 2024  # the patch permutations: the same for every model
EVAL_BATCH = 200
# an evaluation batch holds fewer images where theirs (n, heads, N, N)
# fp32 logits or bias would pass this many bytes (PaPE's bias is one
# tensor per block: 200 images at 512 px would need 27 GB)
EVAL_BYTES = 2**30
TOOL = 'tools/paper_tables/position_study.py'
# the code every run goes through (mmpos_harness.provenance)
CODE = ('mmpos_harness/position_study.py', 'mmpos/models/backbones',
        'mmpos/models/layers', 'mmpos_harness/mini_data', TOOL)


def schemes(train_grid: int) -> dict:
    """``{name: backbone kwargs}`` of the position schemes for a
    ``train_grid`` x ``train_grid`` training grid (ComRoPE / LieRE
    normalise it to ``[0, 1]`` as their code). ``none``: no position at
    all; ``DINOv3-noaug``: DINOv3's scheme without its training-time
    coordinate augmentation."""
    ape = dict(use_ape=True)
    return {
        'none': dict(rope=None),
        'APE': dict(rope=None, **ape),
        'RoPE-Axial': dict(rope=dict(type='axial')),
        'RoPE-Mixed': dict(rope=dict(type='mixed')),
        'RoPE-Axial+APE': dict(rope=dict(type='axial'), **ape),
        'RoPE-Mixed+APE': dict(rope=dict(type='mixed'), **ape),
        'DINOv3': dict(rope=dict(type='dinov3')),
        'DINOv3-noaug': dict(rope=dict(type='dinov3',
                                       coords=dict(rescale=None))),
        'Spiral': dict(rope=dict(type='spiral')),
        'STRING': dict(rope=dict(type='string')),
        'ComRoPE-LD': dict(rope=dict(type='comrope',
                                     position_scale=1 / train_grid)),
        'LieRE': dict(rope=dict(type='liere',
                                position_scale=1 / (train_grid - 1))),
        'LookHere': dict(rope=dict(type='lookhere')),
    }


# schemes of the zoo added after the stored study (results/position_study):
# kept out of :func:`schemes`, whose table that study's runs recorded
LATER_SCHEMES = {
    'PaPE': dict(rope=dict(type='pape')),
    'PaPE-RI': dict(rope=dict(type='pape_ri')),
    'Golden-Gate': dict(rope=dict(type='golden_gate')),
}


def all_schemes(train_grid: int) -> dict:
    """:func:`schemes` and :data:`LATER_SCHEMES`: every scheme of the zoo
    by its study name."""
    return dict(schemes(train_grid), **LATER_SCHEMES)


def scalable(kwargs: dict) -> bool:
    """Whether test-time frequency scaling applies: linear-angle RoPE in
    the patch frame (DINOv3's normalised frame keeps the extent)."""
    from mmpos_positions import SCHEMES
    from mmpos_positions.linear import DINOv3RoPE, LinearAngleRoPE
    rope = kwargs.get('rope')
    cls = SCHEMES.get(rope['type']) if rope is not None else None
    return cls is not None and issubclass(cls, LinearAngleRoPE) and \
        not issubclass(cls, DINOv3RoPE)


def with_scaling(kwargs: dict, method: str, train_grid: int) -> dict:
    """``kwargs`` with test-time frequency scaling ``method`` in its
    ``rope`` (:class:`mmpos.models.layers.positions.FrequencyScaling`)."""
    rope = dict(kwargs['rope'],
                freq_scaling=dict(method=method, train_grid=train_grid))
    return dict(kwargs, rope=rope)


# ---------------------------------------------------------------- data
def draw_shape(rng: np.random.Generator, base: int, canvas_scale: float,
               label: int) -> np.ndarray:
    """The shape of a :func:`render_image`: a boolean mask of side
    ``round(base * canvas_scale)`` holding a shape of class ``label`` with
    circumradius ``RADIUS`` of ``base`` (as mini-cls at side ``base``,
    whatever the canvas), random rotation, anywhere fully inside."""
    from .mini_data.shapes import _SIDES, MINI_COCO_CLASSES, _shape_mask
    from .mini_data.textures import _grid
    side = int(round(base * canvas_scale))
    xs, ys = _grid(side)
    radius = base * rng.uniform(*RADIUS)
    cx, cy = rng.uniform(radius, side - radius, 2)
    return _shape_mask(xs, ys, _SIDES[MINI_COCO_CLASSES[label]], cx, cy,
                       radius, rng.uniform(0, 2 * np.pi))


def render_image(rng: np.random.Generator, base: int, canvas_scale: float,
                 label: int) -> np.ndarray:
    """One mini-cls image, uint8 ``(H, W, 3)``: :func:`draw_shape`'s shape
    on a textured background whose features keep their pixel size on any
    canvas. ``canvas_scale=1`` draws exactly
    :func:`mmpos_harness.mini_data.cls._class_image`'s image."""
    from .mini_data.shapes import _render_scene
    mask = draw_shape(rng, base, canvas_scale, label)
    return _render_scene(rng, mask.shape[0], [mask], canvas_scale)


def downsample(images: torch.Tensor, size: int) -> torch.Tensor:
    """uint8 ``(n, 3, S, S)`` -> uint8 at ``size`` (antialiased bilinear,
    rounded); unchanged at ``S``."""
    if images.shape[-1] == size:
        return images
    x = F.interpolate(images.float(), size=(size, size), mode='bilinear',
                      antialias=True, align_corners=False)
    return x.round().clamp(0, 255).to(torch.uint8)


def image_set(path: str, stream: tuple, num: int, base: int,
              canvas_scale: float, size: int) -> tuple:
    """``(uint8 (num, 3, size, size), labels)``: image ``i`` is
    :func:`render_image` of class ``i % 3`` drawn from the random stream
    ``(*stream, i)`` and downsampled to ``size``; cached at ``path``
    (written atomically)."""
    if osp.isfile(path):
        return torch.load(path, weights_only=True)
    images = torch.stack([
        downsample(torch.from_numpy(render_image(
            np.random.default_rng([*stream, i]), base, canvas_scale,
            i % NUM_CLASSES)).permute(2, 0, 1)[None], size)[0]
        for i in range(num)])
    data = (images, torch.arange(num) % NUM_CLASSES)
    with atomic_open(path) as f:
        torch.save(data, f)
    return data


def make_data(root: str, num_train: int, num_val: int, train_size: int,
              sizes, canvas: bool = True) -> dict:
    """The study's images (cached under ``root``). Every image is rendered
    at ``render = max(sizes)`` px per training side: ``train`` downsampled
    to ``train_size``; ``val`` kept at ``render`` (the resize table
    downsamples it to each size); ``canvas[s]`` for each ``s`` in
    ``sizes``: canvases ``s / train_size`` times as large, downsampled by
    the training ratio to ``s`` px (the object keeps its training pixel
    size; none without ``canvas``)."""
    render = max(sizes)
    base = osp.join(root, f'{render}px')
    data = dict(
        train=image_set(f'{base}_train{num_train}_{train_size}px.pt', (0, ),
                        num_train, render, 1., train_size),
        val=image_set(f'{base}_val{num_val}.pt', (1, ), num_val, render, 1.,
                      render),
        canvas={})
    for size in sizes if canvas else ():
        data['canvas'][size] = image_set(
            f'{base}_canvas{num_val}_{size}of{train_size}px.pt', (2, size),
            num_val, render, size / train_size, size)
    return data


def pad_canvas(images: torch.Tensor, train_size: int,
               size: int) -> torch.Tensor:
    """The ``pad`` factor's images: uint8 ``images`` downsampled to
    ``train_size`` and centred on a ``size`` x ``size`` canvas of grey
    :data:`PAD_VALUE` (no texture, no object: nothing distracts). With
    ``size - train_size`` a multiple of ``2 PATCH`` every image patch is a
    training-time token, only its grid position moves."""
    small = downsample(images, train_size)
    low = (size - train_size) // 2
    high = size - train_size - low
    return F.pad(small, (low, high, low, high), value=PAD_VALUE)


def random_resized_crop(images: torch.Tensor, scale: tuple,
                        gen: torch.Generator) -> torch.Tensor:
    """uint8 ``(n, 3, S, S)`` -> each image's random crop resized back to
    ``S`` (bilinear), as torchvision's ``RandomResizedCrop`` (DeiT's and
    the RoPE-ViT authors' training crop): area a share ``U(scale)`` of the
    image, aspect ratio log-uniform in ``[3/4, 4/3]``, 10 tries, else the
    whole image; every draw from ``gen``."""
    n, _, side, _ = images.shape
    out = torch.empty_like(images)
    log_ratio = (math.log(3 / 4), math.log(4 / 3))
    for k in range(n):
        top, left, h, w = 0, 0, side, side
        for _ in range(10):
            u = torch.rand(4, generator=gen, dtype=torch.float64).tolist()
            area = side * side * (scale[0] + (scale[1] - scale[0]) * u[0])
            ratio = math.exp(log_ratio[0] + (log_ratio[1] - log_ratio[0]) *
                             u[1])
            cw = int(round(math.sqrt(area * ratio)))
            ch = int(round(math.sqrt(area / ratio)))
            if 0 < cw <= side and 0 < ch <= side:
                top = int(u[2] * (side - ch + 1))
                left = int(u[3] * (side - cw + 1))
                h, w = ch, cw
                break
        crop = images[k:k + 1, :, top:top + h, left:left + w].float()
        out[k] = F.interpolate(crop, size=(side, side), mode='bilinear',
                               align_corners=False)[0].round().clamp(0, 255)
    return out


def normalise(images: torch.Tensor) -> torch.Tensor:
    """uint8 images -> float, about zero mean and unit std."""
    return (images.float() / 255. - 0.5) / 0.25


def shuffle_patches(images: torch.Tensor, perm: torch.Tensor) -> torch.Tensor:
    """``images`` ``(n, C, H, W)`` with image ``j``'s ``PATCH`` x ``PATCH``
    patches moved so that token ``k`` (row-major) shows the patch that was
    token ``perm[j, k]``: the patch tokens permuted, their contents
    intact."""
    n, c, h, w = images.shape
    gh, gw = h // PATCH, w // PATCH
    tokens = images.reshape(n, c, gh, PATCH, gw, PATCH).permute(
        0, 2, 4, 1, 3, 5).reshape(n, gh * gw, c, PATCH, PATCH)
    tokens = tokens[torch.arange(n)[:, None], perm]
    return tokens.reshape(n, gh, gw, c, PATCH, PATCH).permute(
        0, 3, 1, 4, 2, 5).reshape(n, c, h, w)


def permutations(num: int, grid: int) -> torch.Tensor:
    """A fixed random permutation of the ``grid ** 2`` tokens per image,
    ``(num, grid ** 2)``, the same for every model (``SHUFFLE_SEED``)."""
    gen = torch.Generator().manual_seed(SHUFFLE_SEED)
    return torch.rand(num, grid * grid, generator=gen).argsort(dim=1)


# ---------------------------------------------------------------- model
class Classifier(nn.Module):
    """The demo-size RoPE ViT (class token, LayerScale starting at
    ``layer_scale``) and a linear head."""

    def __init__(self, train_size: int, layer_scale: float = LAYER_SCALE,
                 arch: dict = ARCH, **backbone):
        super().__init__()
        from mmpos.models.backbones import RoPEVisionTransformer
        self.backbone = RoPEVisionTransformer(
            arch=arch, img_size=train_size, patch_size=PATCH,
            layer_scale_init_value=layer_scale, **backbone)
        self.head = nn.Linear(arch['embed_dims'], NUM_CLASSES)

    def forward(self, x):
        return self.head(self.backbone(x)[0])


def arch_of(embed_dims: int, num_heads: int) -> dict:
    """:data:`ARCH` at another width (MLP 4x, the depth kept)."""
    return dict(ARCH, embed_dims=embed_dims, num_heads=num_heads,
                feedforward_channels=4 * embed_dims)


def decay_split(model: nn.Module) -> tuple:
    """``(decayed, exempt)`` parameter names, as the RoPE-ViT authors'
    recipe splits them (their DeiT ``main.py`` builds AdamW with timm's
    ``create_optimizer``: no weight decay on 1-D parameters and biases,
    i.e. norms, biases and LayerScale, nor on the model's
    ``no_weight_decay()`` names ``pos_embed``, ``cls_token`` and
    ``freqs``). The position scheme's parameters (``backbone.rope.*``:
    RoPE-Mixed's ``freqs.<i>``, the authors' ``freqs``) are exempt for
    every scheme."""
    decayed, exempt = [], []
    for name, param in model.named_parameters():
        position = name in ('backbone.pos_embed', 'backbone.cls_token') or \
            name.startswith('backbone.rope.')
        if param.ndim <= 1 or name.endswith('.bias') or position:
            exempt.append(name)
        else:
            decayed.append(name)
    return decayed, exempt


def make_optimizer(model: nn.Module, lr: float) -> torch.optim.AdamW:
    """AdamW with weight decay ``WEIGHT_DECAY`` on :func:`decay_split`'s
    decayed parameters only."""
    params = dict(model.named_parameters())
    decayed, exempt = decay_split(model)
    return torch.optim.AdamW(
        [dict(params=[params[n] for n in decayed],
              weight_decay=WEIGHT_DECAY),
         dict(params=[params[n] for n in exempt], weight_decay=0.)], lr=lr)


@torch.no_grad()
def turning_pairs(backbone: nn.Module, grid: int) -> dict:
    """How many frequency pairs of ``backbone``'s position scheme complete
    a turn over the largest offset of a ``grid`` x ``grid`` grid.

    A pair rotating by ``f_x x + f_y y`` (``x``, ``y`` in patches) turns
    ``|f| (grid - 1) / 2 pi`` times over the largest offset along an axis.
    ``f`` is read off the scheme's eval-mode tables at the origin and a
    hundredth of a patch along each axis (in the scheme's own frame, e.g.
    DINOv3's normalised one), far below any wrap-around. Returns
    ``{'pairs': [fewest, most] pairs per head with at least one turn (over
    blocks and heads), 'of': pairs per head, 'fastest': the most turns of
    any pair}``; ``{}`` for a scheme that does not rotate channel pairs
    (none, APE, ComRoPE, LieRE, LookHere)."""
    eps = 0.01
    probe = torch.tensor([[0., 0.], [eps, 0.], [0., eps]])
    training = backbone.training
    backbone.eval()
    tables = backbone.position_tables(probe, (grid, grid), 1)
    backbone.train(training)
    counts, fastest, pairs = [], 0., None
    for table in tables:
        # STRING's table is a change of basis around a pair rotation
        phasors = getattr(getattr(table, 'rope', table), 'phasors', None)
        if phasors is None:
            return {}
        ref = phasors[0, :, 0].conj()  # (heads | 1, D/2) at the origin
        freq = torch.hypot((phasors[0, :, 1] * ref).angle(),
                           (phasors[0, :, 2] * ref).angle()).double() / eps
        turns = freq * (grid - 1) / (2 * math.pi)
        counts += (turns >= 1).sum(-1).tolist()
        fastest, pairs = max(fastest, turns.max().item()), turns.shape[-1]
    return dict(pairs=[min(counts), max(counts)], of=pairs, fastest=fastest)


# ------------------------------------------------------------ training
def train(kwargs: dict, images: torch.Tensor, labels: torch.Tensor,
          seed: int, iters: int, train_size: int, batch_size: int,
          lr: float, layer_scale: float, arch: dict = ARCH,
          rrc_scale=None) -> tuple:
    """Train a :class:`Classifier` with scheme ``kwargs`` on uint8
    ``images`` at ``train_size``: ``iters`` AdamW steps (:func:`
    make_optimizer`, linear warm-up over a tenth, cosine), batches and
    flips drawn from ``seed``, with ``rrc_scale`` a random-resized crop of
    each image first (:func:`random_resized_crop`). Returns ``(model, mean
    loss of the last tenth of the steps)``."""
    torch.manual_seed(seed)
    model = Classifier(train_size, layer_scale, arch, **kwargs)
    init_quietly(model.backbone)  # no INFO line per parameter
    opt = make_optimizer(model, lr)
    warmup = max(1, iters // 10)
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda i: min(1., (i + 1) / warmup) * 0.5 *
        (1 + math.cos(math.pi * min(i, iters) / iters)))
    gen = torch.Generator().manual_seed(seed)
    model.train()
    losses = []
    for _ in range(iters):
        idx = torch.randint(len(images), (batch_size, ), generator=gen)
        batch = images[idx]
        if rrc_scale is not None:
            batch = random_resized_crop(batch, rrc_scale, gen)
        x = normalise(batch)
        flip = torch.rand(batch_size, generator=gen) < 0.5
        x = torch.where(flip[:, None, None, None], x.flip(-1), x)
        loss = F.cross_entropy(model(x), labels[idx])
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        sched.step()
        losses.append(loss.item())
    model.eval()
    return model, float(np.mean(losses[-max(1, iters // 10):]))


def eval_batch(model: Classifier, size: int) -> int:
    """Images per evaluation batch at ``size`` px: :data:`EVAL_BATCH`, or
    as many as keep one block's ``(n, heads, N, N)`` fp32 logits within
    :data:`EVAL_BYTES` (at least 1): with 2 heads 200 up to 192 px, 127
    at 256 px, 7 at 512 px."""
    tokens = (size // PATCH)**2 + 1
    heads = model.backbone.arch_settings['num_heads']
    return max(1, min(EVAL_BATCH, EVAL_BYTES // (4 * heads * tokens**2)))


@torch.no_grad()
def accuracy(model: nn.Module, images: torch.Tensor, labels: torch.Tensor,
             size: int, perm=None) -> float:
    """Top-1 (%) of ``model`` on uint8 ``images`` downsampled to ``size``,
    with the patches of image ``j`` shuffled by ``perm[j]`` if given; in
    batches of :func:`eval_batch` images."""
    correct, step = 0, eval_batch(model, size)
    for i in range(0, len(images), step):
        x = normalise(downsample(images[i:i + step], size))
        if perm is not None:
            x = shuffle_patches(x, perm[i:i + step])
        correct += (model(x).argmax(-1) == labels[i:i + step]).sum().item()
    return 100. * correct / len(images)


def evaluate(model: nn.Module, kwargs: dict, data: dict, train_size: int,
             sizes, layer_scale: float, arch: dict = ARCH,
             factors=FACTORS, scalings=SCALINGS) -> dict:
    """Top-1 (%) of a trained ``model`` (scheme ``kwargs``, LayerScale
    ``layer_scale``, width ``arch``): each factor's top-1 per size (the
    training size and ``sizes``; the factors share the training-size
    images), ``shuffled`` at the training
    size, and for a scalable scheme ``<factor>_<scaling>`` on ``sizes``
    (the trained weights with test-time frequency scaling), for each of
    ``factors`` (``pad``: :func:`pad_canvas`) and ``scalings``."""
    val = data['val']
    out = {factor: {} for factor in factors}
    intact = accuracy(model, *val, train_size)
    for factor in factors:
        out[factor][str(train_size)] = intact
    out['shuffled'] = {str(train_size): accuracy(
        model, *val, train_size, permutations(len(val[0]),
                                              train_size // PATCH))}
    models = {'': model}
    if scalable(kwargs):
        for method in scalings:
            scaled = Classifier(train_size, layer_scale, arch,
                                **with_scaling(kwargs, method,
                                               train_size // PATCH))
            scaled.load_state_dict(model.state_dict())
            models[f'_{method}'] = scaled.eval()
    sets = {}
    for size in sizes:
        sets[('resize', size)] = val
        if 'canvas' in factors:
            sets[('canvas', size)] = data['canvas'][size]
        if 'pad' in factors:
            sets[('pad', size)] = (pad_canvas(val[0], train_size, size),
                                   val[1])
    for suffix, net in models.items():
        for size in sizes:
            for factor in factors:
                out.setdefault(f'{factor}{suffix}', {})[str(size)] = \
                    accuracy(net, *sets[(factor, size)], size)
    return out


def forward_flops(tokens: int, embed_dims: int = ARCH['embed_dims'],
                  feedforward_channels: int = ARCH['feedforward_channels'],
                  num_layers: int = ARCH['num_layers']) -> float:
    """FLOPs (2 per multiply-add) of one image's forward pass with
    ``tokens`` tokens (patches and the class token): per block the four
    projections ``8 N D^2``, the MLP ``4 N D F`` and attention's two
    products ``4 N^2 D``; the patch embedding ``6 PATCH^2 N D``. Norms,
    softmax, the position scheme and the head are left out (the cost
    model of :func:`cpu_minutes_estimate`)."""
    n, d = tokens, embed_dims
    return num_layers * (8 * n * d * d + 4 * n * d * feedforward_channels +
                         4 * n * n * d) + 6 * PATCH**2 * n * d


def run_flops(train_size: int, sizes, iters: int, batch_size: int,
              num_val: int, factors: int = len(FACTORS), variants: int = 1,
              **arch) -> float:
    """FLOPs of one study run (:func:`one_run`): ``iters`` training steps
    of ``batch_size`` images (backward as twice the forward), the intact
    and shuffled validation images at ``train_size`` and each of
    ``factors`` tables at every size in ``sizes`` for each of
    ``variants`` models (1 + the test-time scalings of a scalable
    scheme), ``num_val`` images each (:func:`forward_flops`)."""
    def tokens(size):
        return (size // PATCH)**2 + 1
    train = 3 * forward_flops(tokens(train_size), **arch) * iters * \
        batch_size
    evals = 2 * num_val * forward_flops(tokens(train_size), **arch)
    evals += sum(factors * variants * num_val * forward_flops(tokens(s),
                                                              **arch)
                 for s in sizes)
    return train + evals


def run_folder(name: str) -> str:
    """The file-name form of scheme ``name`` (its run folder under
    ``runs/``, its calibration file): a ``+`` written as ``_``."""
    return name.replace('+', '_')


def cpu_seconds_per_flop(study_dir: str, skip=()) -> float:
    """The stored study ``study_dir``'s CPU seconds per FLOP: the mean
    over its runs (``runs/*/seed*.json``, not those of the run folders
    ``skip``) of the run's ``cpu_seconds``
    over its :func:`run_flops` (sizes, iterations, batch, scalings, and
    the width and tables where the run records them, else the demo-size
    model's and both tables, read off the run; ``num_val`` off the
    study's ``position_study.json``)."""
    with open(osp.join(study_dir, 'position_study.json')) as f:
        num_val = json.load(f)['num_val']
    rates = []
    for path in sorted(glob.glob(osp.join(study_dir, 'runs', '*',
                                          'seed*.json'))):
        if osp.basename(osp.dirname(path)) in skip:
            continue
        with open(path) as f:
            run = json.load(f)
        train_size = int(next(iter(run['shuffled'])))
        sizes = [int(s) for s in run['resize'] if int(s) != train_size]
        variants = 1 + sum(1 for k in run if k.startswith('resize_'))
        width = run.get('embed_dims', ARCH['embed_dims'])
        rates.append(run['cpu_seconds'] / run_flops(
            train_size, sizes, run['iters'], run['batch_size'], num_val,
            len(run.get('factors', FACTORS)), variants, embed_dims=width,
            feedforward_channels=4 * width))
    if not rates:
        raise FileNotFoundError(f'{study_dir}: no stored runs '
                                '(runs/*/seed*.json)')
    return float(np.mean(rates))


def code(names) -> list:
    """The paths runs of the schemes ``names`` go through: :data:`CODE` and
    the positions package without the position modules of schemes not among them
    (:func:`mmpos_harness.provenance.without_schemes`), so that a change to
    LieRE does not make an APE run stale."""
    table = all_schemes(2)  # the grid does not change which modules run
    return provenance.without_schemes(
        (*CODE, provenance.POSITIONS),
        {(table[n].get('rope') or {}).get('type') for n in names})


def run_record(args, names) -> dict:
    """What every result file records of the command that wrote it
    (:func:`mmpos_harness.provenance.record`) for runs of the schemes
    ``names`` (:func:`code`)."""
    return dict(provenance.record(args.command, code(names)),
                threads=torch.get_num_threads())


def settings(args, iters: int) -> dict:
    """What a run's numbers depend on besides its scheme and seed, as its
    file records them (the stored study's files record the first five)."""
    return dict(iters=iters, num_train=args.num_train, lr=args.lr,
                layer_scale=args.layer_scale, batch_size=args.batch_size,
                train_size=args.train_size, sizes=args.sizes,
                num_val=args.num_val, rrc_scale=args.rrc_scale,
                embed_dims=args.embed_dims, num_heads=args.num_heads,
                factors=args.factors, scalings=args.scalings)


def stored_run(path: str, args) -> dict:
    """The run file ``path`` a resumed study reuses; refused (one line)
    when it records other :func:`settings` than the command's."""
    with open(path) as f:
        run = json.load(f)
    for key, value in settings(args, args.iters).items():
        if key in run and run[key] != value:
            raise SystemExit(f'{path}: recorded {key}={run[key]!r}, this '
                             f'command asks {value!r}; give another OUT_DIR')
    return run


def one_run(name: str, data: dict, seed: int, iters: int, args) -> dict:
    """Train and evaluate scheme ``name``'s model; its result with its
    cost."""
    wall, cpu = time.time(), time.process_time()
    kwargs = all_schemes(args.train_size // PATCH)[name]
    arch = arch_of(args.embed_dims, args.num_heads)
    model, loss = train(kwargs, *data['train'], seed, iters,
                        args.train_size, args.batch_size, args.lr,
                        args.layer_scale, arch, args.rrc_scale)
    out = evaluate(model, kwargs, data, args.train_size, args.sizes,
                   args.layer_scale, arch, args.factors, args.scalings)
    out.update(loss=loss, **settings(args, iters),
               cpu_seconds=time.process_time() - cpu,
               wall_seconds=time.time() - wall, **run_record(args, [name]))
    return out


# -------------------------------------------------------------- tables
def _label(name: str, scaling: str) -> str:
    return name + (f' +{scaling.upper()}' if scaling else '')


def factor_table(runs: dict, factor: str, train_size: int, sizes) -> dict:
    """One factor's table from ``runs`` (``{scheme: {seed: result}}``,
    the same seeds in the same order for every scheme): a row per scheme
    and per scheme + scaling, a column per size and ``change`` (largest
    size minus training size, per seed), each cell its per-seed ``values``
    and what its test compares them ``against``."""
    train, largest = str(train_size), str(max(sizes))
    columns = [train, *map(str, sizes), 'change']
    rows = {}
    for name, seeds in runs.items():
        base = [run[factor][train] for run in seeds.values()]
        for scaling in ('', *FREQ_SCALINGS):
            key = factor + (f'_{scaling}' if scaling else '')
            if not all(key in run for run in seeds.values()):
                continue
            row = {col: dict(values=[run[key][col] for run in seeds.values()]
                             if col in next(iter(seeds.values()))[key] else [])
                   for col in columns[:-1]}
            row['change'] = dict(values=[
                run[key][largest] - b for run, b in zip(seeds.values(), base)])
            rows[_label(name, scaling)] = row
    for label, row in rows.items():
        for col, cell in row.items():
            if not cell['values']:
                continue
            if label != REFERENCE:
                if rows.get(REFERENCE, {}).get(col, {}).get('values'):
                    cell['against'] = [REFERENCE, col]
            elif col == 'change':
                cell['against'] = 'zero'
    return dict(factor=factor, train_size=train_size, columns=columns,
                rows=rows)


def shuffle_table(runs: dict, train_size: int) -> dict:
    """The shuffled-patch control: per scheme the intact and the
    shuffled top-1 at the training size, the shuffled tested against the
    intact."""
    train, rows = str(train_size), {}
    for name, seeds in runs.items():
        rows[name] = dict(
            intact=dict(values=[r['resize'][train] for r in seeds.values()]),
            shuffled=dict(values=[r['shuffled'][train]
                                  for r in seeds.values()],
                          against=[name, 'intact']))
    return dict(factor='shuffled', train_size=train_size,
                columns=['intact', 'shuffled'], rows=rows)


def analyse(table: dict) -> dict:
    """(Re)compute a table's statistics from its cells' ``values``:
    ``mean``, ``std``, and for a cell with ``against`` the paired test
    (:func:`~mmpos_stats.paired` over the seeds) of its values
    against that cell's (``'zero'``: against 0), adjusted by
    Benjamini-Hochberg over the table (one family). Returns ``table``."""
    rows, tested = table['rows'], []
    for row in rows.values():
        for col, cell in row.items():
            cell.pop('test', None)
            cell['mean'], cell['std'] = stats.mean_std(cell['values'])
    for row in rows.values():
        for cell in row.values():
            against = cell.get('against')
            if against is None:
                continue
            other = [0.] * len(cell['values']) if against == 'zero' else \
                rows[against[0]][against[1]]['values']
            tested.append((cell, stats.paired(cell['values'], other)))
    for (cell, _), test in zip(tested, stats.family(
            [t for _, t in tested], stats.BH)):
        cell['test'] = test.asdict()
    return table


def _cell(cell: dict) -> str:
    if cell['mean'] is None:
        return '-'
    text = stats.format_mean_std(cell['mean'], cell['std'])
    if 'test' in cell:
        test = stats.Comparison.from_dict(cell['test'])
        text += f' ({stats.format_cell(test)})'
    return text


def _heading(table: dict, col: str) -> str:
    train = table['train_size']
    if col == 'change':
        return f"{table['columns'][-2]} - {train} px"
    if col in ('intact', 'shuffled'):
        return f'{col} ({train} px)'
    size = int(col)
    if size == train:
        return f'{size} px (train)'
    return f'{size} px' + (f" ({table['factor']} x{size / train:g})"
                           if table['factor'] in ('canvas', 'pad') else '')


CAPTIONS = {
    'resize': 'Resize (the paper\'s setting): the same validation images at '
    'more pixels, the object growing with the grid. In brackets: the '
    'difference to APE at the same size; in the change column (largest size '
    'minus training size, per seed) the difference to APE\'s change, and for '
    'APE its change against 0.',
    'canvas': 'Canvas: the same kind of scene on a canvas larger by the '
    'factor given, the object and the textures at their training pixel size '
    '(more context). Brackets as in the resize table.',
    'pad': 'Padded canvas: the training-size image centred on a larger '
    'uniform grey canvas (no texture, no object: position without scale '
    'or distractors). Brackets as in the resize table.',
    'shuffled': 'Shuffled patches: each validation image\'s patches permuted '
    '(the same permutation for every model) at the training size; in '
    'brackets the shuffled top-1 minus the intact one.',
}


def table_markdown(table: dict) -> list:
    cols = table['columns']
    header = ['scheme'] + [_heading(table, c) for c in cols]
    lines = [CAPTIONS[table['factor']], '',
             '| ' + ' | '.join(header) + ' |', '|' + ' --- |' * len(header)]
    for label, row in table['rows'].items():
        lines.append('| ' + ' | '.join(
            [label] + [_cell(row[c]) if c in row else '-' for c in cols]) +
            ' |')
    columns = {_heading(table, c): [
        stats.Comparison.from_dict(row[c]['test'])
        for row in table['rows'].values() if 'test' in row.get(c, {})]
        for c in cols}
    columns = {k: v for k, v in columns.items() if v}
    if columns:
        lines += ['', 'Test: paired t over the training seeds (each seed: '
                  'the same initial draw, batches and flips for every '
                  'scheme); the table is one family, exploratory, so '
                  'corrected for the false discovery rate. ' +
                  stats.describe(columns)]
    return lines


def turns_markdown(turns: dict, train_size: int) -> list:
    """The table of :func:`turning_pairs` per scheme (none if no scheme
    rotates channel pairs)."""
    if not any(turns.values()):
        return []
    grid = train_size // PATCH
    lines = [f'Frequency pairs completing a turn over the largest training '
             f'offset ({grid - 1} patch steps on the {grid} x {grid} grid), '
             'per head at initialisation (`turning_pairs`):', '',
             '| scheme | pairs with >= 1 turn | turns of the fastest pair |',
             '| --- | --- | --- |']
    for name, t in turns.items():
        if t:
            low, high = t['pairs']
            count = f'{low}' if low == high else f'{low}-{high}'
            lines.append(f"| {name} | {count} of {t['of']} | "
                         f"{t['fastest']:.2f} |")
    return lines


def markdown(summary: dict) -> str:
    cpu = summary['cpu_minutes']
    lines = [
        f"Top-1 (%) on {summary['num_val']} validation images, mean ± std "
        f"over seeds {summary['seeds']}; {summary['iters']} iterations of "
        f"batch {summary['batch_size']} on {summary['num_train']} training "
        f"images at {summary['train_size']} px "
        f"({summary['train_size'] // PATCH} x "
        f"{summary['train_size'] // PATCH} patches), lr {summary['lr']:g}, "
        f"LayerScale from {summary['layer_scale']:g}. "
        f"Command `{summary['command']}`, {summary['date']}, "
        f"{summary['machine']}; {cpu:.0f} CPU minutes over "
        f"{summary['num_runs']} runs.", '']
    for factor in summary['tables']:
        lines += [f'**{factor}**', '', *table_markdown(
            summary['tables'][factor]), '']
    lines += turns_markdown(summary['turns'], summary['train_size'])
    return '\n'.join(lines) + '\n'


def summarise(runs: dict, args, turns: dict) -> dict:
    tables = {factor: analyse(factor_table(runs, factor, args.train_size,
                                           args.sizes))
              for factor in args.factors}
    tables['shuffled'] = analyse(shuffle_table(runs, args.train_size))
    costs = [r['cpu_seconds'] for seeds in runs.values()
             for r in seeds.values()]
    return dict(tables=tables, turns=turns, seeds=args.seeds,
                iters=args.iters, batch_size=args.batch_size, lr=args.lr,
                layer_scale=args.layer_scale,
                num_train=args.num_train, num_val=args.num_val,
                train_size=args.train_size, sizes=args.sizes,
                cpu_minutes=sum(costs) / 60, num_runs=len(costs),
                **run_record(args, runs))


def write_tables(summary: dict, base: str) -> str:
    """``base.json`` and ``base.md`` of a study's summary; returns the
    markdown."""
    text = markdown(summary)
    write_json(base + '.json', summary, indent=1)
    write_atomically(text.encode(), base + '.md')
    return text


def retable(path: str) -> str:
    """Rewrite a stored study ``path`` (``.json``) and its ``.md`` from the
    per-seed values it holds (:func:`analyse`); nothing is trained."""
    with open(path) as f:
        summary = json.load(f)
    if not isinstance(summary, dict) or 'tables' not in summary:
        raise SystemExit(f'{path}: not a position-study summary (no '
                         '"tables")')
    for table in summary['tables'].values():
        analyse(table)
    return write_tables(summary, osp.splitext(path)[0])


def plot(summary: dict, path: str) -> None:
    """Top-1 against test size, one panel per factor: the schemes as
    trained (solid), with NTK (dotted) and YaRN (dashed) scaling."""
    import matplotlib
    matplotlib.use('Agg')
    import matplotlib.pyplot as plt
    factors = [f for f in summary['tables'] if f != 'shuffled']
    fig, axes = plt.subplots(1, len(factors), figsize=(6 * len(factors), 5),
                             sharey=True)
    train = summary['train_size']
    for ax, factor in zip(axes, factors):
        rows = summary['tables'][factor]['rows']
        bases = [label for label in rows if ' +' not in label]
        colours = dict(zip(bases, plt.get_cmap('tab20').colors))
        for label, row in rows.items():
            base, _, scaling = label.partition(' +')
            pts = [(int(c), v['mean'], v['std'] or 0.)
                   for c, v in row.items()
                   if c != 'change' and v['mean'] is not None]
            if scaling:  # the training size joins the scaled curve
                cell = rows[base][str(train)]
                pts = [(train, cell['mean'], 0.)] + pts
            xs, ys, es = zip(*pts)
            ax.errorbar(xs, ys, yerr=es, marker='o', markersize=3,
                        capsize=2, color=colours[base], label=label,
                        linestyle={'': '-', 'PI': '-.', 'NTK': ':',
                                   'YARN': '--'}[scaling])
        ax.axvline(train, color='grey', linewidth=0.8)
        ax.set_xlabel('test size (px; training: grey line)')
        ax.set_title(factor)
        ax.legend(fontsize=6, ncol=2)
    axes[0].set_ylabel('top-1 (%)')
    fig.tight_layout()
    save_figure(fig, path, dpi=120)


# --------------------------------------------------------- calibration
def calibration_markdown(records: list, turns: dict, train_size: int,
                         largest: int) -> str:
    """The calibration table over ``records`` (stored calibration runs)."""
    lines = [f'Calibration runs (`--calibrate`, first seed; top-1 % on the '
             f'validation images at the {train_size} px training size, with '
             'the binomial standard error of one accuracy; the change at '
             f'{largest} px in each table, the padded one in a study without '
             'the canvas; the shuffled-patch top-1):', '',
             '| training images | iterations | LayerScale init | lr | '
             f'scheme | top-1 at {train_size} px | resize {largest} px '
             f'(change) | canvas {largest} px (change) | shuffled | final '
             'loss | CPU min |', '|' + ' --- |' * 11]
    for r in records:
        acc = r['resize'][str(train_size)]
        se = math.sqrt(acc * (100 - acc) / r['num_val'])
        big = str(largest)
        # a study without the canvas factor calibrates on the padded one
        other = r['canvas'] if 'canvas' in r else r['pad']
        lines.append(
            f"| {r['num_train']} | {r['iters']} | {r['layer_scale']:g} | "
            f"{r['lr']:g} | {r['scheme']} | "
            f"{acc:.1f} ± {se:.1f} | {r['resize'][big]:.1f} "
            f"({r['resize'][big] - acc:+.1f}) | {other[big]:.1f} "
            f"({other[big] - acc:+.1f}) | "
            f"{r['shuffled'][str(train_size)]:.1f} | {r['loss']:.3f} | "
            f"{r['cpu_seconds'] / 60:.1f} |")
    cpu = sum(r['cpu_seconds'] for r in records) / 60
    dates = sorted(r['date'] for r in records)
    lines += ['', f'{len(records)} runs, {cpu:.0f} CPU minutes, '
              f'{dates[0]} to {dates[-1]}; machines: '
              + '; '.join(sorted({r['machine'] for r in records})) + '.',
              '', 'Commands:', '']
    lines += [f'    {c}' for c in dict.fromkeys(r['command'] for r in records)]
    lines += ['', *turns_markdown(turns, train_size)]
    return '\n'.join(lines) + '\n'


def calibrate(args, data: dict, table: dict, names, turns: dict) -> list:
    """Each scheme in ``names`` for each ``--calibrate-iters`` budget at
    ``--num-train`` images, the first seed; each run kept in
    ``OUT_DIR/calibration/`` (skipped when there). Writes
    ``OUT_DIR/calibration.{md,json}`` over every kept calibration run."""
    root = osp.join(args.out_dir, 'calibration')
    for iters in args.calibrate_iters:
        for name in names:
            path = osp.join(root, f'n{args.num_train}_it{iters}_ls'
                            f'{args.layer_scale:g}_lr{args.lr:g}_'
                            f'{args.train_size}px',
                            f'{run_folder(name)}.json')
            if osp.isfile(path):
                continue
            result = one_run(name, data, args.seeds[0], iters, args)
            result.update(scheme=name, num_val=args.num_val,
                          seed=args.seeds[0])
            write_json(path, result, indent=1)
            print(f"calibration: {name}, {args.num_train} images, {iters} "
                  f"it: {result['resize']} ({result['cpu_seconds']:.0f} CPU "
                  's)', flush=True)
    records = []
    for path in glob.glob(osp.join(root, f'*_{args.train_size}px', '*.json')):
        with open(path) as f:
            records.append(json.load(f))
    order = {name: i for i, name in enumerate(table)}
    records.sort(key=lambda r: (r['layer_scale'], r['lr'], r['num_train'],
                                r['iters'],
                                order.get(r['scheme'], len(order))))
    records = [r for r in records if str(max(args.sizes)) in r['resize']]
    text = calibration_markdown(records, turns, args.train_size,
                                max(args.sizes))
    write_json(osp.join(args.out_dir, 'calibration.json'), records, indent=1)
    write_atomically(text.encode(), osp.join(args.out_dir, 'calibration.md'))
    print(text)
    return records


# ------------------------------------------------------------------ CLI
def run_study(args):
    table = all_schemes(args.train_size // PATCH)
    names = args.schemes or (['APE', 'RoPE-Mixed'] if args.calibrate else
                             list(DEFAULT_SCHEMES))
    unknown = set(names) - set(table)
    if unknown:
        raise SystemExit(f'unknown schemes {sorted(unknown)}; choose from '
                         f'{list(table)}')
    data = make_data(osp.join(args.out_dir, 'data'), args.num_train,
                     args.num_val, args.train_size, args.sizes,
                     'canvas' in args.factors)
    turns = {}
    for name in names:
        torch.manual_seed(0)
        turns[name] = turning_pairs(Classifier(
            args.train_size, arch=arch_of(args.embed_dims, args.num_heads),
            **table[name]).backbone,
            args.train_size // PATCH)
    if args.calibrate:
        return calibrate(args, data, table, names, turns)
    runs = {name: {} for name in names}
    for seed in args.seeds:  # seed by seed: a stopped study holds pairs
        for name in names:
            path = osp.join(args.out_dir, 'runs', run_folder(name),
                            f'seed{seed}.json')
            if not osp.isfile(path):
                result = one_run(name, data, seed, args.iters, args)
                write_json(path, result, indent=1)  # the run's done marker
                print(f"{name} seed {seed}: {result['resize']} "
                      f"({result['cpu_seconds']:.0f} CPU s)", flush=True)
            runs[name][seed] = stored_run(path, args)
    summary = summarise(runs, args, turns)
    base = osp.join(args.out_dir, args.summary)
    text = write_tables(summary, base)
    plot(summary, base + '.png')
    print(text)
    return summary


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('out_dir', nargs='?')
    parser.add_argument('--retable', metavar='JSON',
                        help='rewrite a stored study JSON and its .md from '
                        'its per-seed values (no training)')
    parser.add_argument('--schemes', nargs='+',
                        help=f'default: {" ".join(DEFAULT_SCHEMES)} '
                        '(--calibrate: APE RoPE-Mixed)')
    parser.add_argument('--seeds', nargs='+', type=int,
                        default=[0, 1, 2, 3, 4])
    parser.add_argument('--iters', type=int, default=6000)
    parser.add_argument('--batch-size', type=int, default=32)
    parser.add_argument('--lr', type=float, default=1e-3)
    parser.add_argument('--layer-scale', type=float, default=LAYER_SCALE,
                        help='LayerScale\'s initial value')
    parser.add_argument('--train-size', type=int, default=64)
    parser.add_argument('--sizes', nargs='+', type=int, default=[80, 96, 128],
                        help='test sizes above the training size (the '
                        'largest is the change column\'s)')
    parser.add_argument('--num-train', type=int, default=12000)
    parser.add_argument('--num-val', type=int, default=1200)
    parser.add_argument('--threads', type=int, default=1)
    parser.add_argument('--rrc-scale', nargs=2, type=float, metavar=('LO',
                        'HI'), help='random-resized-crop training with '
                        'this area share (the RoPE-ViT recipe: 0.08 1); '
                        'default: flips only')
    parser.add_argument('--factors', nargs='+', choices=ALL_FACTORS,
                        default=list(FACTORS), help='test factors (pad: '
                        'the image on a plain grey canvas)')
    parser.add_argument('--scalings', nargs='*', choices=FREQ_SCALINGS,
                        default=list(SCALINGS), help='test-time frequency '
                        'scalings of the linear-angle RoPEs (pi: position '
                        'interpolation)')
    parser.add_argument('--embed-dims', type=int,
                        default=ARCH['embed_dims'])
    parser.add_argument('--num-heads', type=int, default=ARCH['num_heads'])
    parser.add_argument('--summary', default='position_study',
                        help='the tables\' file name in OUT_DIR (e.g. '
                        'a second family of schemes and seeds beside the '
                        'first)')
    parser.add_argument('--calibrate', action='store_true')
    parser.add_argument('--calibrate-iters', nargs='+', type=int,
                        default=[1000, 2000, 3000])
    args = parser.parse_args(argv)
    if (args.out_dir is None) == (args.retable is None):
        parser.error('give OUT_DIR (a study) or --retable JSON, not both')
    if args.train_size % PATCH or any(s % PATCH for s in args.sizes):
        parser.error(f'sizes must be multiples of the patch size {PATCH}')
    if args.train_size < 2 * PATCH or min(args.sizes) <= args.train_size:
        parser.error('--train-size must be at least 2 patches and every '
                     '--sizes entry larger')
    args.sizes = sorted(set(args.sizes))
    args.command = shlex.join(['python', TOOL, *(
        sys.argv[1:] if argv is None else argv)])
    return args


@cli_main('position_study.py')
def main(argv=None):
    args = parse_args(argv)
    if args.retable:
        print(retable(args.retable))
        return
    torch.set_num_threads(args.threads)
    # subnormal floats flushed to 0: PaPE's parabolas drive far tokens'
    # attention weights below 1e-38, and their gradients through the bias
    # then ran 4.5x slower on CPU (a training step 4.6 s -> 1.0 s at width
    # 64, 2 heads, batch 32, 128 px); what they change is below 1e-38.
    # Off again afterwards (torch's default) for a caller in this process
    torch.set_flush_denormal(True)
    try:
        # one study per OUT_DIR at a time; what it wrote stays (it resumes)
        with work_dir_lock(args.out_dir, keep_output=lambda: True,
                           option='OUT_DIR'):
            run_study(args)
    finally:
        torch.set_flush_denormal(False)
