"""Linear monocular-depth probe of a frozen backbone (DINOv2's "linear"
depth evaluation, settings "lin. 1" and "lin. 4" of Oquab et al. 2023),
as the authors' code does it (``dinov2/hub/depthers.py``,
``dinov2/hub/depth/decode_heads.py`` ``BNHead``,
``dinov2/eval/depth/models/losses/sigloss.py``):

* features: the patch tokens of the last block (``lin. 1``) or of 4 evenly
  spaced blocks (``lin. 4``; ViT-S/B blocks 3, 6, 9, 12), the class token
  concatenated to every patch token (``cls_token=True``);
* every block's map is upsampled bilinearly by ``upsample = 4`` and the
  blocks concatenated (``resize_concat``); no normalisation layer (the
  ``BNHead``'s batch norm is commented out in the authors' code);
* one 1x1 convolution to ``n_bins = 256`` logits; depth is classification
  over bins ("UD": uniform between ``min_depth = 1e-3`` and ``max_depth``,
  10 m for NYU-Depth v2) with AdaBins' "linear" normalisation of the bin
  scores (``p = (relu(l) + 0.1) / sum``), the prediction the expectation
  ``d = sum_k p_k c_k`` (Bhat et al. 2021, Eq. 2) -- or regression
  (``classify=False``: ``d = relu(l) + min_depth``);
* the loss is the scale-invariant log loss of the authors' ``SigLoss``
  (:class:`SigLoss`), on the prediction upsampled bilinearly to the depth
  map's size;
* metrics (:func:`depth_metrics`) as the authors' evaluation code computes
  them: RMSE (the headline), abs-rel, delta < 1.25 ``d1`` ... of each image
  over its evaluated pixels, averaged over the images; NYU: ground truth in
  (1e-3, 10) m, the Eigen crop (:func:`eigen_crop_box`), predictions
  clamped to [1e-3, 10] m. :func:`depth_constant_baseline` and
  :func:`depth_prior_baseline` score image-free predictions with the same
  function. A probe run and these baselines also report ``si_d1``
  (:func:`probe_depth_metrics`): δ1 after scaling each image's prediction
  to its true depth's geometric mean (:func:`scale_aligned_d1`), i.e. how
  depth varies within the image, not its mean.

:class:`LinearDepthHead` is an mmseg decode head, so a config can train it
inside mmseg's :class:`~mmseg.models.segmentors.DepthEstimator`
(``configs/dense_probes/depth_estimator_*``). :func:`fit_depth_probe` trains
the same head on cached frozen features without a runner: used by
``tools/analysis_tools/depth_probe.py`` and the online probe
(:class:`mmpos.engine.hooks.dense_probes.OnlineDepthProbeHook`).

SID bins (``bins_strategy='SID'``) are DORN's log-uniform spacing
``exp(linspace(log min, log max))``; the authors' code (which never uses
them) calls ``torch.logspace(min, max)``, i.e. exponents, not depths.

The metrics, their sources and where they differ (shipped code follows the
authors' code). DINOv2's paper reports RMSE (its Table 11) and "follows
the evaluation protocol of Li et al. (2022b)"; its repository has no depth
metric code, and its ``dinov2/eval/depth`` (depther, heads, ``SigLoss``)
is Li et al.'s Monocular-Depth-Estimation-Toolbox's. The toolbox's
``depth/core/evaluation/metrics.py`` is restated by DINOv3 in
``dinov3/eval/depth/metrics.py`` (``calculate_depth_metrics``; the mask in
``eval/depth/datasets/datasets_utils.py`` ``make_valid_mask``, the loop in
``eval/depth/eval.py``, the range 1e-3 to 10 m in
``eval/depth/configs/config-nyu.yaml``):

* valid pixels: ground truth strictly inside ``(min_depth_eval,
  max_depth_eval)`` -- invalid depth (0) and depth at or beyond the maximum
  are left out (toolbox, DINOv3, mmseg alike);
* the Eigen crop: rows 45:471, columns 41:601 of a 480 x 640 frame. The
  toolbox and mmseg's ``DepthMetric`` index these pixels whatever the map's
  size (at 64 x 64 that keeps rows 45:64, columns 41:64); DINOv3 scales the
  box to an ``H x W`` map as ``int(45 / 480 * H)``, ``int(471 / 480 * H)``,
  ``int(41 / 640 * W)``, ``int(601 / 640 * W)`` -- followed here (64 x 64:
  rows 6:62, columns 4:60);
* predictions are clamped to ``[min_depth_eval, max_depth_eval]`` before the
  metrics (DINOv3's eval loop; DINOv2's ``DepthEncoderDecoder`` clamps to
  the head's range); mmseg does not clamp;
* per image ``g = log d - log d*``: ``d1 / d2 / d3`` the share of pixels
  with ``max(d / d*, d* / d) < 1.25, 1.25^2, 1.25^3``; ``abs_rel =
  mean(|d - d*| / d*)``, ``sq_rel = mean((d - d*)^2 / d*)``, ``rmse =
  sqrt(mean((d - d*)^2))``, ``rmse_log = sqrt(mean(g^2))``, ``log10 =
  mean(|log10 d - log10 d*|)``, ``silog = 100 sqrt(mean(g^2) -
  mean(g)^2)`` (toolbox and DINOv3; mmseg's ``silog`` is ``sqrt(mean(g^2)
  - 0.5 mean(g)^2)``, without the 100);
* the reported value is the mean over images (NaN-mean in the toolbox and
  DINOv3), so an image without a valid pixel is left out of every metric,
  as in the toolbox (whose ``calculate`` returns NaN for all of them);
  DINOv3 turns that image's NaN ``silog`` into 0 and averages it in, and
  mmseg's plain mean turns every metric into NaN. No valid pixel in any
  image is an error.

Paper text vs code: DINOv2's paper trains the linear layer "using a
classification loss" over the 256 bins; the authors' code has only
regression losses on the bins' expected depth (``SigLoss``,
``GradientLoss``; the training configs are not public), so the head here
trains with :class:`SigLoss`. DINOv3's linear depth evaluation
(``eval/depth/configs/config-nyu.yaml``) differs from DINOv2's "lin. 1" in
the head (no class token, batch norm, the backbone's final norm) and
evaluates with horizontal-flip test-time augmentation; mmpos keeps DINOv2's
head and predicts without flips.
"""
import math
from typing import Dict, List, Optional, Sequence, Tuple, Union

import torch
import torch.nn as nn
import torch.nn.functional as F
from mmengine.evaluator import BaseMetric
from mmseg.models.decode_heads.decode_head import BaseDecodeHead
from torch import Tensor

from mmpos.apis.features import init_quietly
from mmpos.registry import METRICS, MODELS
from mmpos.errors import BadInputError
from .frozen import with_progress

NORM_STRATEGIES = ('linear', 'softmax', 'sigmoid')


def depth_bins(min_depth: float, max_depth: float, n_bins: int,
               strategy: str = 'UD', device=None) -> Tensor:
    """Bin centres ``(n_bins,)``: ``'UD'`` uniform, ``'SID'`` log-uniform
    (spacing-increasing discretisation, DORN) in ``[min_depth,
    max_depth]``."""
    if not 0 < min_depth < max_depth:
        raise BadInputError(f'need 0 < min_depth < max_depth, got '
                            f'{min_depth}, {max_depth}')
    if strategy == 'UD':
        return torch.linspace(min_depth, max_depth, n_bins, device=device)
    if strategy == 'SID':
        return torch.linspace(math.log(min_depth), math.log(max_depth),
                              n_bins, device=device).exp()
    raise BadInputError(f"bins_strategy must be 'UD' or 'SID', got "
                        f'{strategy!r}')


def bin_probabilities(logits: Tensor, norm_strategy: str = 'linear') -> Tensor:
    """Bin scores ``(B, K, h, w)`` -> probabilities over ``K``: AdaBins'
    ``'linear'`` ``(relu(l) + 0.1) / sum``, ``'softmax'`` or ``'sigmoid'``
    (normalised)."""
    if norm_strategy == 'linear':
        scores = logits.relu() + 0.1
    elif norm_strategy == 'softmax':
        return logits.softmax(dim=1)
    elif norm_strategy == 'sigmoid':
        scores = logits.sigmoid()
    else:
        raise BadInputError(f'norm_strategy must be one of {NORM_STRATEGIES}'
                            f', got {norm_strategy!r}')
    return scores / scores.sum(dim=1, keepdim=True)


@MODELS.register_module()
class SigLoss(nn.Module):
    """Scale-invariant log loss of DINOv2's depth code (after Eigen et al.
    2014, Eq. 4 with ``lambda = 0.85``):
    ``sqrt(Var(g) + 0.15 * mean(g)^2)``, ``g = log(d + eps) - log(d* +
    eps)`` over the valid pixels (``0 < d* <= max_depth``), ``eps = 1e-3``,
    ``Var`` the unbiased variance (as ``torch.var``).

    mmseg's ``SiLogLoss`` is the ``lambda = 0.5`` form; DINOv2 trains with
    this one.

    Args:
        max_depth: pixels deeper than this are not valid (``None``: all
            positive depths are).
        loss_weight: factor of the loss.
        loss_name: its key in the loss dict.
    """

    def __init__(self, max_depth: Optional[float] = None,
                 loss_weight: float = 1.0, loss_name: str = 'loss_sig'):
        super().__init__()
        self.max_depth = max_depth
        self.loss_weight = loss_weight
        self._loss_name = loss_name

    @property
    def loss_name(self) -> str:
        return self._loss_name

    def forward(self, pred: Tensor, target: Tensor) -> Tensor:
        """``pred``, ``target``: depths of the same shape."""
        valid = target > 0
        if self.max_depth is not None:
            valid &= target <= self.max_depth
        if not valid.any():
            return pred.sum() * 0.
        g = (pred[valid] + 1e-3).log() - (target[valid] + 1e-3).log()
        var = g.var() if g.numel() > 1 else g.new_zeros(())
        return self.loss_weight * (var + 0.15 * g.mean()**2).sqrt()


@MODELS.register_module()
class LinearDepthHead(BaseDecodeHead):
    """DINOv2's linear depth head: ``[patch tokens ++ class token] of each
    block -> bilinear x upsample -> concat -> Conv1x1 -> depth``.

    Inputs (``forward``): one entry per backbone output, each a patch map
    ``(B, C, h, w)`` or a pair ``(patch map, class token (B, C))`` (the
    class token is then concatenated to every patch token).

    Args:
        in_channels: width of one block's entry (``2 C`` with the class
            token, ``C`` without).
        num_inputs: backbone outputs used (1: ``lin. 1``, 4: ``lin. 4``).
        classify: depth as classification over bins (DINOv2) or as a
            regression.
        n_bins, bins_strategy, norm_strategy: see :func:`depth_bins` and
            :func:`bin_probabilities`.
        min_depth, max_depth: depth range in metres.
        upsample: bilinear upsampling factor of the patch maps.
        loss_decode: the loss (default :class:`SigLoss`).
        **kwargs: :class:`BaseDecodeHead` arguments.

    Output: depth ``(B, 1, upsample h, upsample w)`` in metres.
    """

    def __init__(self,
                 in_channels: int,
                 num_inputs: int = 1,
                 classify: bool = True,
                 n_bins: int = 256,
                 bins_strategy: str = 'UD',
                 norm_strategy: str = 'linear',
                 min_depth: float = 1e-3,
                 max_depth: float = 10.,
                 upsample: int = 4,
                 loss_decode=dict(type='mmpretrain.SigLoss'),
                 **kwargs):
        kwargs.setdefault('dropout_ratio', 0.)
        super().__init__(
            in_channels=in_channels * num_inputs,
            channels=in_channels * num_inputs,
            num_classes=n_bins if classify else 1,
            out_channels=n_bins if classify else 1,
            loss_decode=loss_decode,
            **kwargs)
        self.num_inputs = num_inputs
        self.classify = classify
        self.norm_strategy = norm_strategy
        self.min_depth = min_depth
        self.max_depth = max_depth
        self.upsample = upsample
        bins = depth_bins(min_depth, max_depth, n_bins, bins_strategy)
        self.register_buffer('bins', bins, persistent=False)
        bin_probabilities(torch.zeros(1, 1, 1, 1), norm_strategy)  # checks

    def _concat(self, inputs: Sequence[Union[Tensor, tuple]]) -> Tensor:
        inputs = list(inputs)[-self.num_inputs:]
        if len(inputs) != self.num_inputs:
            raise BadInputError(f'LinearDepthHead: {self.num_inputs} inputs '
                                f'expected, got {len(inputs)}')
        maps = []
        for x in inputs:
            if isinstance(x, (tuple, list)):
                x, cls = x
                x = torch.cat([x, cls[:, :, None, None].expand_as(x)], 1)
            maps.append(x)
        h, w = maps[0].shape[-2:]
        size = (h * self.upsample, w * self.upsample)
        return torch.cat([
            F.interpolate(x, size=size, mode='bilinear',
                          align_corners=self.align_corners) for x in maps
        ], 1)

    def forward(self, inputs) -> Tensor:
        """Backbone outputs -> depth ``(B, 1, H', W')``."""
        logits = self.cls_seg(self._concat(inputs))
        if not self.classify:
            return logits.relu() + self.min_depth
        probs = bin_probabilities(logits, self.norm_strategy)
        return torch.einsum('bkhw,k->bhw', probs, self.bins)[:, None]

    def loss_by_feat(self, pred_depth: Tensor, batch_data_samples) -> dict:
        """``self.loss_decode`` of the depth upsampled to the ground truth
        (mmseg ``gt_depth_map``)."""
        gt = torch.stack([s.gt_depth_map.data for s in batch_data_samples])
        return self.depth_losses(pred_depth, gt)

    def depth_losses(self, pred_depth: Tensor, gt: Tensor) -> dict:
        """Losses of ``pred_depth`` ``(B, 1, h, w)`` against ``gt``
        ``(B, 1, H, W)``."""
        pred = F.interpolate(pred_depth, size=gt.shape[-2:], mode='bilinear',
                             align_corners=self.align_corners)
        return self._losses(pred, gt)

    def depth_losses_maps(self, pred_depths: Sequence[Tensor],
                          gts: Sequence[Tensor]) -> dict:
        """Losses of images of their own sizes (NaFlex): each prediction
        ``(1, 1, h_i, w_i)`` upsampled to its ground truth ``(H_i, W_i)``,
        the losses over the pixels of all images together, as
        :meth:`depth_losses` over a batch of one size (:class:`SigLoss`
        pools the batch's valid pixels)."""
        pred = [F.interpolate(p, size=g.shape[-2:], mode='bilinear',
                              align_corners=self.align_corners).flatten()
                for p, g in zip(pred_depths, gts)]
        return self._losses(torch.cat(pred), torch.cat(
            [g.flatten() for g in gts]))

    def _losses(self, pred: Tensor, gt: Tensor) -> dict:
        """``self.loss_decode`` of depths of the same shape, by name."""
        losses = {}
        for loss in (self.loss_decode if isinstance(
                self.loss_decode, nn.ModuleList) else [self.loss_decode]):
            losses[loss.loss_name] = losses.get(loss.loss_name, 0.) + loss(
                pred, gt)
        return losses


def head_inputs(feats: dict, index, cls_token: bool) -> List:
    """The entries of :meth:`LinearDepthHead.forward` from
    :func:`mmpos.evaluation.dense.dense_features` output (``index``: a
    slice or index tensor of images), or of one image (``index`` an int)
    as a batch of one, e.g. of
    :func:`mmpos.evaluation.naflex.naflex_features` output (per block a
    list of maps ``(C, h_i, w_i)``)."""
    one = isinstance(index, int)
    out = []
    for patch, cls in zip(feats['patch'], feats['cls']):
        if cls_token and cls is None:
            raise BadInputError('cls_token=True, but the backbone has no '
                                'class token')
        patch = patch[index][None] if one else patch[index]
        out.append((patch, cls[index:index + 1] if one else cls[index])
                   if cls_token else patch)
    return out


def is_naflex(feats: dict) -> bool:
    """Whether ``feats`` hold one map per image (NaFlex,
    :func:`mmpos.evaluation.naflex.naflex_features`) rather than one
    ``(N, C, h, w)`` tensor per block."""
    return not isinstance(feats['patch'][0], Tensor)


def fit_depth_probe(feats: dict, depths: Tensor, cls_token: bool = True,
                    iters: int = 500, batch_size: int = 16, lr: float = 1e-3,
                    weight_decay: float = 1e-4, seed: int = 0,
                    progress: bool = False, **head_cfg) -> LinearDepthHead:
    """Train a :class:`LinearDepthHead` on cached frozen features.

    Args:
        feats: :func:`~mmpos.evaluation.dense.dense_features` of the
            training images (the blocks the head uses), or
            :func:`~mmpos.evaluation.naflex.naflex_features` (NaFlex: each
            image of a batch through the head alone, the loss over the
            batch's pixels, :meth:`LinearDepthHead.depth_losses_maps`).
        depths: ground truth ``(N, H, W)`` in metres (0: invalid); NaFlex:
            one ``(H_i, W_i)`` per image.
        cls_token: concatenate the class token to the patch tokens.
        iters, batch_size, lr, weight_decay: AdamW on random batches.
        seed: seed of the head's init and the batch draws (a private
            generator: the global random state is not touched).
        progress: show mmengine's progress bar over the iterations.
        **head_cfg: :class:`LinearDepthHead` arguments.

    Returns:
        The trained head (eval mode).
    """
    naflex = is_naflex(feats)
    width = (feats['patch'][0][0].shape[0] if naflex else
             feats['patch'][0].shape[1]) * (2 if cls_token else 1)
    head_cfg.setdefault('num_inputs', len(feats['patch']))
    gen = torch.Generator().manual_seed(seed)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        head = LinearDepthHead(in_channels=width, **head_cfg)
        init_quietly(head)
    optim = torch.optim.AdamW(head.parameters(), lr=lr,
                              weight_decay=weight_decay)
    num = len(depths)
    head.train()
    for _ in with_progress(range(iters), progress):
        idx = torch.randint(num, (min(batch_size, num), ), generator=gen)
        if naflex:
            losses = head.depth_losses_maps(
                [head(head_inputs(feats, i, cls_token)) for i in idx.tolist()],
                [depths[i] for i in idx.tolist()])
        else:
            losses = head.depth_losses(head(head_inputs(feats, idx, cls_token)),
                                       depths[idx, None])
        loss = sum(losses.values())
        optim.zero_grad()
        loss.backward()
        optim.step()
    return head.eval()


@torch.no_grad()
def predict_depth(head: LinearDepthHead, feats: dict, size,
                  cls_token: bool = True, batch_size: int = 32):
    """Depth ``(N, H, W)`` of cached features, upsampled bilinearly to
    ``size = (H, W)``; of NaFlex features
    (:func:`~mmpos.evaluation.naflex.naflex_features`), each image's depth
    alone, upsampled to its own size of the list ``size``: a list of
    ``(H_i, W_i)``."""
    if is_naflex(feats):
        return [F.interpolate(head(head_inputs(feats, i, cls_token)),
                              size=tuple(hw), mode='bilinear',
                              align_corners=head.align_corners)[0, 0]
                for i, hw in enumerate(size)]
    num = feats['patch'][0].shape[0]
    out = []
    for start in range(0, num, batch_size):
        pred = head(head_inputs(feats, slice(start, start + batch_size),
                                cls_token))
        out.append(F.interpolate(pred, size=size, mode='bilinear',
                                 align_corners=head.align_corners)[:, 0])
    return torch.cat(out)


# The Eigen crop of NYU-Depth v2: rows y1:y2, columns x1:x2 of a 480 x 640
# frame (BTS, AdaBins, Li et al.'s toolbox).
EIGEN_CROP = (45, 471, 41, 601)
EIGEN_FRAME = (480, 640)
CROP_TYPES = (None, 'nyu_crop')
DEPTH_METRICS = ('d1', 'd2', 'd3', 'abs_rel', 'sq_rel', 'rmse', 'rmse_log',
                 'log10', 'silog')


def eigen_crop_box(height: int, width: int) -> Tuple[int, int, int, int]:
    """``(y1, y2, x1, x2)`` of the Eigen crop on an ``height x width`` map:
    :data:`EIGEN_CROP` scaled as DINOv3's ``make_valid_mask`` does,
    ``int(y1 / 480 * height)`` ... (exact at 480 x 640)."""
    (y1, y2, x1, x2), (h0, w0) = EIGEN_CROP, EIGEN_FRAME
    return (int(y1 / h0 * height), int(y2 / h0 * height),
            int(x1 / w0 * width), int(x2 / w0 * width))


def depth_eval_mask(gt: Tensor, min_depth_eval: float = 1e-3,
                    max_depth_eval: float = 10.,
                    crop_type: Optional[str] = None) -> Tensor:
    """The evaluated pixels of ground-truth depths ``(..., H, W)``: the same
    shape, True where ``min_depth_eval < gt < max_depth_eval`` and (with
    ``crop_type='nyu_crop'``) inside :func:`eigen_crop_box`."""
    if crop_type not in CROP_TYPES:
        raise BadInputError(f'crop_type must be one of {CROP_TYPES}, got '
                            f'{crop_type!r}')
    mask = (gt > min_depth_eval) & (gt < max_depth_eval)
    if crop_type == 'nyu_crop':
        y1, y2, x1, x2 = eigen_crop_box(*gt.shape[-2:])
        crop = torch.zeros_like(mask)
        crop[..., y1:y2, x1:x2] = True
        mask &= crop
    return mask


def image_depth_metrics(pred: Tensor, gt: Tensor,
                        min_depth_eval: float = 1e-3,
                        max_depth_eval: float = 10.,
                        crop_type: Optional[str] = None
                        ) -> Optional[Dict[str, float]]:
    """:data:`DEPTH_METRICS` of one image (module docstring) from its
    predicted and true depths ``(H, W)`` in metres, on the pixels of
    :func:`depth_eval_mask`, the prediction clamped to ``[min_depth_eval,
    max_depth_eval]``; ``None`` if no pixel is evaluated."""
    if pred.shape != gt.shape:
        raise BadInputError(f'predicted depth {tuple(pred.shape)} vs ground '
                            f'truth {tuple(gt.shape)}')
    mask = depth_eval_mask(gt, min_depth_eval, max_depth_eval, crop_type)
    if not mask.any():
        return None
    true = gt[mask].double()
    est = pred[mask].double().clamp(min_depth_eval, max_depth_eval)
    ratio = torch.maximum(true / est, est / true)
    diff = est - true
    g = est.log() - true.log()
    out = {f'd{k}': (ratio < 1.25**k).double().mean() for k in (1, 2, 3)}
    out.update(
        abs_rel=(diff.abs() / true).mean(),
        sq_rel=(diff**2 / true).mean(),
        rmse=(diff**2).mean().sqrt(),
        rmse_log=(g**2).mean().sqrt(),
        log10=(est.log10() - true.log10()).abs().mean(),
        silog=100 * ((g**2).mean() - g.mean()**2).clamp(min=0).sqrt())
    return {k: float(out[k]) for k in DEPTH_METRICS}


def mean_depth_metrics(per_image: Sequence[Optional[Dict[str, float]]]
                       ) -> Dict[str, float]:
    """Mean over the images of :func:`image_depth_metrics` results, images
    without an evaluated pixel (``None``) left out."""
    scored = [m for m in per_image if m is not None]
    if not scored:
        raise BadInputError(f'no evaluated depth pixel in any of '
                            f'{len(per_image)} images (all outside the '
                            'depth range or the crop)')
    return {k: sum(m[k] for m in scored) / len(scored) for k in DEPTH_METRICS}


def depth_pairs(pred, gt) -> List[Tuple[Tensor, Tensor]]:
    """``(predicted, true)`` depth of each image, from ``(N, H, W)``
    tensors or (NaFlex) lists of ``(H_i, W_i)``; shapes checked."""
    if isinstance(gt, Tensor):
        if pred.shape != gt.shape or gt.dim() != 3:
            raise BadInputError(f'predicted depth {tuple(pred.shape)} vs '
                                f'ground truth {tuple(gt.shape)}: both '
                                '(N, H, W)')
    elif len(pred) != len(gt) or any(p.shape != g.shape or g.dim() != 2
                                     for p, g in zip(pred, gt)):
        raise BadInputError(f'predicted depths {[tuple(p.shape) for p in pred]}'
                            f' vs ground truth {[tuple(g.shape) for g in gt]}'
                            ': one (H_i, W_i) of each per image')
    return list(zip(pred, gt))


def depth_metrics(pred, gt, min_depth_eval: float = 1e-3,
                  max_depth_eval: float = 10.,
                  crop_type: Optional[str] = None) -> Dict[str, float]:
    """The metrics of predicted vs ground-truth depths ``(N, H, W)``
    (metres), as the authors' code computes them (module docstring):
    :data:`DEPTH_METRICS` of each image (:func:`image_depth_metrics`),
    averaged over the images that have an evaluated pixel.

    Args:
        pred, gt: depths ``(N, H, W)``, or lists of ``(H_i, W_i)`` (NaFlex:
            each image at its own size); ``gt`` 0 (or outside the range):
            not evaluated.
        min_depth_eval, max_depth_eval: the evaluated ground-truth range
            (open interval) and the prediction's clamp.
        crop_type: ``None`` or ``'nyu_crop'`` (the Eigen crop, scaled to
            ``H x W`` by :func:`eigen_crop_box`).

    Returns:
        ``{'d1', 'd2', 'd3', 'abs_rel', 'sq_rel', 'rmse', 'rmse_log',
        'log10', 'silog'}`` floats (``d*`` fractions in [0, 1]).
    """
    return mean_depth_metrics([
        image_depth_metrics(p, g, min_depth_eval, max_depth_eval, crop_type)
        for p, g in depth_pairs(pred, gt)])


def scale_aligned_d1(pred, gt, min_depth_eval: float = 1e-3,
                     max_depth_eval: float = 10.,
                     crop_type: Optional[str] = None) -> float:
    """δ1 up to each image's scale (a fraction in [0, 1]): per image, the
    clamped prediction (as :func:`image_depth_metrics`) times ``exp(mean
    log d* - mean log d)`` over its evaluated pixels, the scale that
    minimises its log error (the scale that Eigen et al. 2014's
    scale-invariant error, ``silog``, removes), then the share of pixels
    with ``max(d / d*, d* / d) < 1.25``; the mean over the images with an
    evaluated pixel. It scores how depth varies within an image, not the
    image's mean depth (the relative-depth protocols' alignment, e.g.
    MiDaS, Ranftl et al. 2020, there by least squares in disparity).

    Args:
        pred, gt: depths ``(N, H, W)`` (or lists of ``(H_i, W_i)``)
            metres, as :func:`depth_metrics`.
        min_depth_eval, max_depth_eval, crop_type: see
            :func:`depth_metrics`.
    """
    scores = []
    for p, g in depth_pairs(pred, gt):
        mask = depth_eval_mask(g, min_depth_eval, max_depth_eval, crop_type)
        if not mask.any():
            continue
        true = g[mask].double()
        est = p[mask].double().clamp(min_depth_eval, max_depth_eval)
        est = est * (true.log().mean() - est.log().mean()).exp()
        scores.append((torch.maximum(true / est, est / true) < 1.25
                       ).double().mean())
    if not scores:
        raise BadInputError(f'no evaluated depth pixel in any of '
                            f'{len(gt)} images')
    return float(torch.stack(scores).mean())


def probe_depth_metrics(pred, gt, **settings
                        ) -> Dict[str, float]:
    """What a depth probe and its image-free baselines report:
    :func:`depth_metrics` and ``si_d1``, :func:`scale_aligned_d1` (the
    method ranking's deciding metric on mini-NYU layers)."""
    return dict(depth_metrics(pred, gt, **settings),
                si_d1=scale_aligned_d1(pred, gt, **settings))


@METRICS.register_module()
class DinoDepthMetric(BaseMetric):
    """:func:`depth_metrics` as an mmengine metric (for mmseg's
    ``DepthEstimator``, ``type='mmpretrain.DinoDepthMetric'``): reads
    ``pred_depth_map`` and ``gt_depth_map`` of each data sample (mmseg's
    ``SegDataSample``), keys :data:`DEPTH_METRICS`.

    Args:
        min_depth_eval, max_depth_eval, crop_type: see
            :func:`depth_metrics`.
        collect_device, prefix: :class:`~mmengine.evaluator.BaseMetric`'s.
    """

    def __init__(self, min_depth_eval: float = 1e-3,
                 max_depth_eval: float = 10.,
                 crop_type: Optional[str] = None,
                 collect_device: str = 'cpu',
                 prefix: Optional[str] = None):
        super().__init__(collect_device=collect_device, prefix=prefix)
        depth_eval_mask(torch.zeros(1, 1), crop_type=crop_type)  # checks
        self.settings = dict(min_depth_eval=min_depth_eval,
                             max_depth_eval=max_depth_eval,
                             crop_type=crop_type)

    def process(self, data_batch, data_samples: Sequence[dict]) -> None:
        for sample in data_samples:
            pred = sample['pred_depth_map']['data'].squeeze(0)
            gt = sample['gt_depth_map']['data'].squeeze(0).to(pred)
            self.results.append(image_depth_metrics(pred, gt,
                                                    **self.settings))

    def compute_metrics(self, results: list) -> Dict[str, float]:
        return mean_depth_metrics(results)


def _training_mask(train_depths: Tensor, val_depths: Tensor,
                   settings: dict) -> Tensor:
    """The evaluated pixels of the training depths ``(N, H, W)`` (same
    ``H, W`` as the validation depths, at least one)."""
    if train_depths.dim() != 3 or train_depths.shape[1:] != \
            val_depths.shape[1:]:
        raise BadInputError(f'training depths {tuple(train_depths.shape)} '
                            f'and validation depths '
                            f'{tuple(val_depths.shape)}: (N, H, W) of one '
                            'H, W')
    mask = depth_eval_mask(train_depths, **settings)
    if not mask.any():
        raise BadInputError('no training depth inside the evaluated range '
                            'and crop')
    return mask


def depth_constant_baseline(train_depths: Tensor, val_depths: Tensor,
                            min_depth_eval: float = 1e-3,
                            max_depth_eval: float = 10.,
                            crop_type: Optional[str] = None
                            ) -> Dict[str, float]:
    """The image-free constant: every validation pixel predicted as the
    mean of the training depths over their evaluated pixels
    (:func:`depth_eval_mask`), scored by :func:`probe_depth_metrics`.

    Args:
        train_depths, val_depths: ``(N, H, W)``, ``(M, H, W)`` metres.
        min_depth_eval, max_depth_eval, crop_type: see
            :func:`depth_metrics` (also select the training pixels).

    Returns:
        :func:`probe_depth_metrics`' dict.
    """
    settings = dict(min_depth_eval=min_depth_eval,
                    max_depth_eval=max_depth_eval, crop_type=crop_type)
    mask = _training_mask(train_depths, val_depths, settings)
    mean = train_depths[mask].double().mean()
    return probe_depth_metrics(torch.full_like(val_depths, float(mean)),
                               val_depths, **settings)


def depth_prior_baseline(train_depths: Tensor, val_depths: Tensor,
                         min_depth_eval: float = 1e-3,
                         max_depth_eval: float = 10.,
                         crop_type: Optional[str] = None
                         ) -> Dict[str, float]:
    """The image-free per-pixel prior: every validation pixel predicted as
    the mean of the training depths at that pixel over the training images
    in which it is evaluated (:func:`depth_eval_mask`; a pixel evaluated in
    none gets the mean over all evaluated training pixels), scored by
    :func:`probe_depth_metrics`. What a probe can reach from the pixel's
    position alone, without looking at the image.

    Args:
        train_depths, val_depths: ``(N, H, W)``, ``(M, H, W)`` metres.
        min_depth_eval, max_depth_eval, crop_type: see
            :func:`depth_metrics` (also select the training pixels).

    Returns:
        :func:`probe_depth_metrics`' dict.
    """
    settings = dict(min_depth_eval=min_depth_eval,
                    max_depth_eval=max_depth_eval, crop_type=crop_type)
    mask = _training_mask(train_depths, val_depths, settings)
    depths = torch.where(mask, train_depths.double(), 0.)
    count = mask.sum(0)
    prior = torch.where(count > 0, depths.sum(0) / count.clamp(min=1),
                        depths.sum() / count.sum())
    return probe_depth_metrics(prior.to(val_depths).expand_as(val_depths),
                               val_depths, **settings)


# Head / training / evaluation settings of a depth probe and their defaults
# (``configs/dense_probes/depth_*.py`` ``depth_probe``): DINOv2's head;
# the training schedule is ours (the authors' training configs are not
# public; their code fixes the head and the loss only).
HEAD_KEYS = ('classify', 'n_bins', 'bins_strategy', 'norm_strategy',
             'min_depth', 'max_depth', 'upsample')
FIT_KEYS = ('iters', 'batch_size', 'lr', 'weight_decay')
EVAL_KEYS = ('min_depth_eval', 'max_depth_eval', 'crop_type')


def run_depth_probe(train_feats: dict, train_depths: Tensor, val_feats: dict,
                    val_depths: Tensor, seed: int = 0, cls_token: bool = True,
                    progress: bool = False, **settings) -> Tuple[Dict[str, float], Tensor]:
    """Fit the probe on the training features and depths, predict the
    validation depths ``(M, H, W)`` and score them
    (:func:`probe_depth_metrics`); on NaFlex features and depths (one map
    per image, :func:`fit_depth_probe`), each validation image's depth at
    its own size.

    Args:
        settings: :class:`LinearDepthHead` (:data:`HEAD_KEYS`),
            :func:`fit_depth_probe` (:data:`FIT_KEYS`) and
            :func:`depth_metrics` (:data:`EVAL_KEYS`) arguments.
        progress: show the fit's progress bar (:func:`fit_depth_probe`).

    Returns:
        ``(metrics, predicted depths (M, H, W) or NaFlex's list)``.
    """
    unknown = sorted(set(settings) - set(HEAD_KEYS + FIT_KEYS + EVAL_KEYS))
    if unknown:
        raise BadInputError(f'unknown depth probe settings {unknown}')
    head = fit_depth_probe(
        train_feats, train_depths, cls_token=cls_token, seed=seed,
        progress=progress, **{k: v for k, v in settings.items() if k in HEAD_KEYS + FIT_KEYS})
    pred = predict_depth(head, val_feats, [tuple(d.shape) for d in val_depths]
                         if is_naflex(val_feats) else
                         tuple(val_depths.shape[-2:]), cls_token)
    metrics = probe_depth_metrics(pred, val_depths, **{
        k: v for k, v in settings.items() if k in EVAL_KEYS})
    return metrics, pred


# ``depth_probe`` of a probe config: data settings, then run_depth_probe's.
DEPTH_PROBE = dict(blocks=1, cls_token=True, size=224, max_train_images=None,
                   classify=True, n_bins=256, bins_strategy='UD',
                   norm_strategy='linear', min_depth=1e-3, max_depth=10.,
                   upsample=4, iters=500, batch_size=16, lr=1e-3,
                   weight_decay=1e-4)


def depth_data(dataset_cfg: dict, size, depth_rescale_factor: float = 1e-3,
               max_images: Optional[int] = None,
               naflex: Optional[Tuple[int, int]] = None):
    """``(image paths, depths (N, h, w) metres)`` of an mmseg depth dataset
    config (``NYUDataset`` or alike), the depths read by mmseg's
    ``LoadDepthAnnotation`` and resized (nearest) to ``size``; the first
    ``max_images`` only where given. ``naflex = (patch size, max_tokens)``:
    each depth map resized instead to its image's NaFlex size
    (:func:`~mmpos.evaluation.naflex.naflex_targets`), a list of
    ``(H_i, W_i)``."""
    from .dense import (dataset_files, image_size, read_depth_maps,
                        resize_maps)
    infos, _ = dataset_files(dataset_cfg, 'depth_map_path')
    infos = infos[:max_images] if max_images else infos
    maps = read_depth_maps(infos, depth_rescale_factor)
    if naflex is None:
        depths = resize_maps(maps, image_size(size))
    else:
        from .naflex import naflex_targets
        depths = naflex_targets(maps, *naflex)
    return [info['img_path'] for info in infos], depths


def depth_split(cfg, split: str, size, data_root: Optional[str] = None,
                max_images: Optional[int] = None,
                naflex: Optional[Tuple[int, int]] = None):
    """:func:`depth_data` of a probe config's ``train`` / ``val`` split,
    with the ``depth_rescale_factor`` of its ``LoadDepthAnnotation``."""
    from .dense import probe_dataset
    factor = next((t.get('depth_rescale_factor', 1.) for t in
                   cfg[f'{split}_dataloader'].dataset.get('pipeline', [])
                   if t.get('type') == 'LoadDepthAnnotation'), 1e-3)
    return depth_data(probe_dataset(cfg, split, data_root), size, factor,
                      max_images, naflex)


def depth_eval_settings(cfg) -> dict:
    """:data:`EVAL_KEYS` of the probe config's ``val_evaluator``
    (:class:`DinoDepthMetric`), for :func:`depth_metrics` on depths of the
    probe's size."""
    evaluator = dict(cfg.get('val_evaluator') or {})
    return {k: evaluator[k] for k in EVAL_KEYS if k in evaluator}
