"""The three dense probes of one backbone in one call, for comparisons over
checkpoints and seeds (``tools/analysis_tools/dense_probe_suite.py``):
the linear depth probe, keypoint correspondence and in-context dense
retrieval, each configured by its probe config
(``configs/dense_probes/*.py``).

The seed sets what is random in a probe run: the random init of the
backbone when there is no checkpoint, the depth head's init and batch
draws, and the retrieval memory's augmentations (correspondence has no
randomness). Beside the backbones, every probe has its baselines from the
same code: the image-free one (:func:`image_free_run`) and the raw pixels
(``checkpoint=RAW_PIXELS``); :func:`informative` says whether trained
backbones beat the image-free one.
"""
import dataclasses
from typing import Callable, Dict, Optional, Tuple

import torch

from mmpos.errors import BadInputError


def depth_run(cfg, backbone, mean, std, seed: int = 0,
              data_root: Optional[str] = None, batch_size: int = 32,
              device='cpu', progress: bool = False,
              max_tokens: Optional[int] = None, **overrides):
    """The depth probe of probe config ``cfg`` on ``backbone`` (built with
    the config's ``blocks`` out). Returns ``(metrics, details)``:
    :func:`~mmpos.evaluation.depth_probe.depth_metrics`' keys, and the
    settings, validation paths, true and predicted depths, and
    ``baselines``: the same metrics of the image-free ``constant`` and
    per-pixel ``prior`` (``depth_constant_baseline``,
    ``depth_prior_baseline``) on the same training and validation depths
    at the square ``size``; ``progress``: a progress bar over the head's
    training. ``max_tokens``: on NaFlex maps
    (:func:`.naflex.naflex_features`; ``backbone`` a RoPE ViT with
    ``out_type='raw'``), each image at its aspect ratio within that many
    patches, its depth map resized (nearest) to the same size and
    predicted at it (true and predicted depths: lists of ``(H_i,
    W_i)``)."""
    from .dense import probe_settings, split_features
    from .depth_probe import (DEPTH_PROBE, FIT_KEYS, HEAD_KEYS,
                              depth_constant_baseline, depth_eval_settings,
                              depth_prior_baseline, depth_split,
                              run_depth_probe)
    s = probe_settings(cfg, 'depth_probe', DEPTH_PROBE, **overrides)
    data, paths, squares = [], {}, []
    for split in ('train', 'val'):
        limit = s['max_train_images'] if split == 'train' else None
        paths[split], depths = depth_split(cfg, split, s['size'], data_root,
                                           limit)
        squares.append(depths)
        if max_tokens is None:
            data += [split_features(backbone, paths[split], s['size'], mean,
                                    std, batch_size, device), depths]
        else:
            data += naflex_depth_data(cfg, split, backbone, max_tokens, mean,
                                      std, data_root, limit, batch_size,
                                      device)[1:]
    metrics, pred = run_depth_probe(
        *data, seed=seed, cls_token=s['cls_token'], progress=progress,
        **{k: s[k] for k in HEAD_KEYS + FIT_KEYS}, **depth_eval_settings(cfg))
    counts = {f'{k}_images': len(v) for k, v in paths.items()}
    baselines = {name: fn(*squares, **depth_eval_settings(cfg))
                 for name, fn in (('constant', depth_constant_baseline),
                                  ('prior', depth_prior_baseline))}
    if max_tokens is not None:
        counts['max_tokens'] = max_tokens
    return metrics, dict(settings=dict(s, **depth_eval_settings(cfg),
                                       **counts),
                         paths=paths, gt=data[3], pred=pred,
                         baselines=baselines)


def naflex_depth_data(cfg, split: str, backbone, max_tokens: int, mean, std,
                      data_root: Optional[str] = None,
                      max_images: Optional[int] = None,
                      batch_size: int = 32, device='cpu'):
    """The ``split`` of a depth probe config on NaFlex maps: ``(image
    paths, features, depths)``, the features
    (:func:`.naflex.naflex_features`: per output block one map ``(C, h_i,
    w_i)`` per image) of each image at its aspect ratio within
    ``max_tokens`` patches, its depth map (metres) resized (nearest) to
    the same size ``(H_i, W_i) = (h_i p, w_i p)``."""
    from .depth_probe import depth_split
    from .naflex import check_naflex_backbone, naflex_features, naflex_patch
    check_naflex_backbone(backbone)
    ph, pw = naflex_patch(backbone)
    paths, depths = depth_split(cfg, split, None, data_root, max_images,
                                ((ph, pw), max_tokens))
    feats = naflex_features(backbone, paths, max_tokens, mean, std,
                            batch_size, device)
    for path, feat, depth in zip(paths, feats['patch'][-1], depths):
        if tuple(depth.shape) != (feat.shape[1] * ph, feat.shape[2] * pw):
            raise BadInputError(f'{path}: its depth map and image differ in '
                                'size')
    return paths, feats, depths


def correspondence_run(cfg, backbone, mean, std,
                       data_root: Optional[str] = None,
                       batch_size: int = 32, device='cpu', categories=None,
                       max_tokens: Optional[int] = None, **overrides):
    """The correspondence probe of probe config ``cfg`` on ``backbone``
    (``max_tokens``: on NaFlex maps, :func:`.naflex.naflex_pair_features`).
    Returns ``(metrics, details)``: :func:`.correspondence.spair_pck`'s
    ``pck@<alpha>`` (mean over categories), ``.../vp<bin>``,
    ``.../category/<name>``, ``.../keypoints``; and the settings (with the
    counts of pairs, keypoints, missing keypoints left out, keypoints per
    category), pairs, predicted target keypoints and image sizes."""
    from .correspondence import (CORRESPONDENCE_PROBE, correspondence_pck,
                                 pair_features, read_spair_pairs)
    from .dense import probe_settings
    s = probe_settings(cfg, 'correspondence_probe', CORRESPONDENCE_PROBE,
                       **overrides)
    pairs = read_spair_pairs(data_root or cfg.data_root, s['split'],
                             categories)
    if max_tokens is None:
        src, trg, hws = pair_features(backbone, pairs, s['size'], mean, std,
                                      batch_size, device)
    else:
        from .naflex import naflex_pair_features
        src, trg, hws = naflex_pair_features(backbone, pairs, max_tokens,
                                             mean, std, batch_size, device)
        s['max_tokens'] = max_tokens
    metrics, preds = correspondence_pck(pairs, src, trg, hws, s['by'],
                                        s['alphas'], s['upsample'])
    per_category = {}
    for p in pairs:
        per_category[p['category']] = per_category.get(
            p['category'], 0) + len(p['src_kps'])
    counts = dict(pairs=len(pairs), keypoints=sum(per_category.values()),
                  missing_keypoints=sum(p['missing'] for p in pairs),
                  category_keypoints=dict(sorted(per_category.items())))
    return metrics, dict(settings=dict(s, **counts), pairs=pairs,
                         preds=preds, hws=hws)


def retrieval_run(cfg, backbone, mean, std, data_root: Optional[str] = None,
                  batch_size: int = 32, device='cpu', seed: int = 0,
                  max_tokens: Optional[int] = None, **overrides):
    """The retrieval probe of probe config ``cfg`` on ``backbone``: the
    augmented memory of the ``train`` split
    (:func:`~.dense_retrieval.augmented_memory`, its views and bounded
    memory drawn with ``seed``), the ``val`` split retrieved from it
    (``max_tokens``: on NaFlex maps, the views and images at their aspect
    ratios within that many patches).
    Returns ``(metrics, details)``: mmseg's ``IoUMetric`` keys, and the
    settings (with the memory's patch count), validation paths, true and
    retrieved labels, classes, ignore index."""
    from .dense import probe_dataset, probe_settings
    from .dense_retrieval import (RETRIEVAL_PROBE, augmented_memory,
                                  retrieval_miou, retrieval_val, seg_infos)
    s = probe_settings(cfg, 'retrieval_probe', RETRIEVAL_PROBE, **overrides)
    infos, classes, ignore = seg_infos(probe_dataset(cfg, 'train',
                                                     data_root))
    memory = augmented_memory(backbone, infos, s['size'], mean, std,
                              len(classes), ignore, s['augment_epochs'],
                              s['memory_size'], seed, batch_size, device,
                              max_tokens)
    paths, labels, feats = retrieval_val(cfg, backbone, s['size'], mean, std,
                                         data_root, batch_size, device,
                                         max_tokens)
    metrics, pred = retrieval_miou(memory, feats, labels, classes, s['k'],
                                   s['temperature'], ignore,
                                   return_pred=True)
    settings = dict(s, train_images=len(infos), val_images=len(paths),
                    memory_patches=memory[0].shape[0], seed=seed,
                    classes=len(classes))
    if max_tokens is not None:
        settings['max_tokens'] = max_tokens
    return metrics, dict(settings=settings, paths=dict(
        train=[i['img_path'] for i in infos], val=paths), gt=labels,
                         pred=pred, classes=classes, ignore_index=ignore)


def depth_image_free(cfg, data_root: Optional[str] = None
                     ) -> Dict[str, float]:
    """The depth probe's image-free baseline: the per-pixel mean of the
    training depths (:func:`~.depth_probe.depth_prior_baseline`)."""
    from .dense import probe_settings
    from .depth_probe import (DEPTH_PROBE, depth_eval_settings,
                              depth_prior_baseline, depth_split)
    s = probe_settings(cfg, 'depth_probe', DEPTH_PROBE)
    depths = [depth_split(cfg, split, s['size'], data_root,
                          s['max_train_images'] if split == 'train'
                          else None)[1] for split in ('train', 'val')]
    return depth_prior_baseline(*depths, **depth_eval_settings(cfg))


def correspondence_image_free(cfg, data_root: Optional[str] = None
                              ) -> Dict[str, float]:
    """The correspondence probe's image-free baseline: every keypoint
    where it was in the source image
    (:func:`~.correspondence.identity_baseline`)."""
    from .correspondence import (CORRESPONDENCE_PROBE, identity_baseline,
                                 pair_image_hws, read_spair_pairs)
    from .dense import probe_settings
    s = probe_settings(cfg, 'correspondence_probe', CORRESPONDENCE_PROBE)
    pairs = read_spair_pairs(data_root or cfg.data_root, s['split'])
    return identity_baseline(pairs, pair_image_hws(pairs), s['by'],
                             s['alphas'])[0]


def retrieval_image_free(cfg, data_root: Optional[str] = None
                         ) -> Dict[str, float]:
    """The retrieval probe's image-free baseline: the per-pixel class
    prior of the training labels
    (:func:`~.dense_retrieval.class_prior_run`)."""
    from .dense import probe_settings
    from .dense_retrieval import RETRIEVAL_PROBE, class_prior_run
    s = probe_settings(cfg, 'retrieval_probe', RETRIEVAL_PROBE)
    return class_prior_run(cfg, s['size'], data_root)[0]


@dataclasses.dataclass(frozen=True)
class DenseProbe:
    """One probe of the suite: all that the suite, its tool
    (``tools/analysis_tools/dense_probe_suite.py``), the harness and the
    tests read of it (the recipe: docs/advanced/contributing.md).

    Attributes:
        run: ``(cfg, backbone, mean, std, data_root=, batch_size=, device=,
            [seed=], [progress=], **overrides) -> (metrics, details)`` on a
            backbone.
        image_free: ``(cfg, data_root) -> metrics``: what never looks at an
            image, deterministic.
        config: its probe config on the mini data (64 px).
        data: its folder under a ``--data-root`` (the mini data's name).
        headline: the reported metrics (keys of ``run``'s metrics).
        deciding: the headline metric that decides whether the probe is
            informative (:func:`informative`).
        lower_is_better: of ``deciding``.
        seeded: its run draws from the seed (beside a random init).
        progress: its run takes ``progress=True`` to show a progress bar
            (a loop that runs for minutes at full size); its tool sets it.
        naflex: its run takes ``max_tokens`` (NaFlex maps,
            :mod:`.naflex`); its tool's ``--max-tokens``.
    """
    run: Callable
    image_free: Callable
    config: str
    data: str
    headline: Tuple[str, ...]
    deciding: str
    lower_is_better: bool
    seeded: bool
    progress: bool = False
    naflex: bool = False


#: the suite's probes, in the order of its tables
PROBES = {
    'depth': DenseProbe(
        depth_run, depth_image_free, 'configs/dense_probes/depth_mini-nyu.py',
        'nyu', ('rmse', 'abs_rel', 'd1'), 'rmse', True, True, True,
        naflex=True),
    'correspondence': DenseProbe(
        correspondence_run, correspondence_image_free,
        'configs/dense_probes/correspondence_mini-spair.py', 'spair',
        ('pck@0.05', 'pck@0.1'), 'pck@0.1', False, False, naflex=True),
    'retrieval': DenseProbe(
        retrieval_run, retrieval_image_free,
        'configs/dense_probes/retrieval_mini-scenes.py', 'scenes',
        ('mIoU', ), 'mIoU', False, True, naflex=True),
}
#: ``{probe: its mini probe config}``
MINI_PROBES = {name: p.config for name, p in PROBES.items()}
#: the reported metrics as the suite's flat keys (``<probe>/<metric>``)
HEADLINE = tuple(f'{name}/{key}' for name, p in PROBES.items()
                 for key in p.headline)


def _probe(name: str) -> DenseProbe:
    if name not in PROBES:
        raise ValueError(f'unknown probe {name!r}; choose from '
                         f'{sorted(PROBES)}')
    return PROBES[name]


def check_naflex_probe(name: str) -> None:
    """Refuse, in one line, NaFlex maps (``--max-tokens``) for probe
    ``name`` if its run does not take them (:attr:`DenseProbe.naflex`)."""
    if not _probe(name).naflex:
        raise BadInputError(f'--max-tokens: the {name} probe does not run on '
                            'NaFlex maps')


def image_free_run(name: str, cfg,
                   data_root: Optional[str] = None) -> Dict[str, float]:
    """Probe ``name``'s image-free baseline on its data (what never looks
    at an image, :attr:`DenseProbe.image_free`), as the probe's metrics."""
    return _probe(name).image_free(cfg, data_root)


def image_free_probes(probes: Dict[str, str] = MINI_PROBES,
                      data_roots: Optional[Dict[str, str]] = None
                      ) -> Dict[str, float]:
    """:func:`image_free_run` of every probe, as the flat keys of
    :func:`run_dense_probes`."""
    from mmpos.apis.features import load_config
    data_roots = data_roots or {}
    out: Dict[str, float] = {}
    for name, path in probes.items():
        metrics = image_free_run(name, load_config(path),
                                 data_roots.get(name))
        out.update({f'{name}/{k}': float(v) for k, v in metrics.items()})
    return out


def informative(trained: Dict[str, list], image_free: Dict[str, float]):
    """Per probe, whether its trained backbones beat what never looks at
    the image: the best trained run (by mean) on the probe's deciding
    metric (:attr:`DenseProbe.deciding`) against the image-free value, a paired t
    over the seeds (the baseline is the same at every seed), Holm over the
    probes. A probe where no trained backbone is significantly better is
    not informative: its differences are shown, not ranked.

    Args:
        trained: ``{label: [per-seed flat metrics]}`` of the runs from
            pretrained checkpoints.
        image_free: :func:`image_free_probes`' values.

    Returns:
        ``{probe: (informative, best label, Comparison of best minus
        image-free, lower is better)}`` for the probes with a deciding
        metric in the results.
    """
    import mmpos_stats as stats
    found = {}
    for probe, spec in PROBES.items():
        key, lower = f'{probe}/{spec.deciding}', spec.lower_is_better
        if key not in image_free or not trained:
            continue
        means = {label: sum(r[key] for r in runs) / len(runs)
                 for label, runs in trained.items()}
        best = (min if lower else max)(means, key=means.get)
        values = [r[key] for r in trained[best]]
        found[probe] = (best, stats.paired(values,
                                           [image_free[key]] * len(values)),
                        lower)
    tests = stats.family([t for _, t, _ in found.values()], stats.HOLM)
    return {probe: ((test.verdict == 'lower') if lower else
                    (test.verdict == 'higher'), best, test, lower)
            for (probe, (best, _, lower)), test in zip(found.items(), tests)}


#: ``checkpoint`` value that probes the raw pixels
#: (:class:`~mmpos.models.backbones.PixelPatches` with the config
#: backbone's patch size) instead of the config's backbone
RAW_PIXELS = 'pixels'


def probed_backbone(name: str, cfg, config: str,
                    checkpoint: Optional[str], seed: int = 0,
                    blocks: Optional[int] = None, prefix: str = 'backbone.',
                    device='cpu'):
    """The backbone of ``config`` / ``checkpoint`` as probe ``name`` of
    probe config ``cfg`` needs it (the depth probe: its ``blocks`` out,
    unless ``blocks`` is given), a random init drawn with ``seed``;
    ``checkpoint`` :data:`RAW_PIXELS`: the patchified pixels."""
    from .dense import probe_backbone
    if checkpoint == RAW_PIXELS:
        from mmpos.apis.features import backbone_config
        from mmpos.models.backbones import PixelPatches
        return PixelPatches(backbone_config(config).get('patch_size', 16)
                            ).to(device).eval()
    if blocks is None:
        blocks = cfg.get('depth_probe', {}).get('blocks', 1) if (
            name == 'depth') else 1
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)  # the random init, where there is one
        return probe_backbone(config, checkpoint, blocks, device, prefix)


def run_dense_probes(config: str, checkpoint: Optional[str],
                     probes: Dict[str, str] = MINI_PROBES, seed: int = 0,
                     data_roots: Optional[Dict[str, str]] = None,
                     prefix: str = 'backbone.', device='cpu',
                     batch_size: int = 32,
                     max_tokens: Optional[int] = None) -> Dict[str, float]:
    """Run the probes of ``probes`` (``{'depth' | 'correspondence' |
    'retrieval': probe config}``) on the backbone of ``config`` loaded from
    ``checkpoint`` (``None``: random init drawn with ``seed``;
    :data:`RAW_PIXELS`: the raw-pixel baseline); ``max_tokens``: every
    probe on NaFlex maps (each image at its aspect ratio within that many
    patches, :attr:`DenseProbe.naflex`; a RoPE ViT or the raw pixels).

    Returns:
        Flat metrics: ``depth/<DepthMetric key>``,
        ``correspondence/pck@<alpha>``, ``retrieval/{mIoU,mAcc,aAcc}``.
    """
    from mmpos.apis.features import data_mean_std, load_config
    unknown = sorted(set(probes) - set(PROBES))
    if unknown:
        raise ValueError(f'unknown probes {unknown}; choose from '
                         f'{sorted(PROBES)}')
    if max_tokens is not None:
        for name in probes:
            check_naflex_probe(name)
    data_roots = data_roots or {}
    mean, std = data_mean_std(config)
    out: Dict[str, float] = {}
    for name, path in probes.items():
        cfg = load_config(path)
        backbone = probed_backbone(name, cfg, config, checkpoint, seed,
                                   prefix=prefix, device=device)
        extra = dict(seed=seed) if PROBES[name].seeded else {}
        if max_tokens is not None:
            extra['max_tokens'] = max_tokens
        metrics, _ = PROBES[name].run(cfg, backbone, mean, std,
                                      data_root=data_roots.get(name),
                                      batch_size=batch_size, device=device,
                                      **extra)
        out.update({f'{name}/{k}': float(v) for k, v in metrics.items()})
    return out


def probe_parser(doc: str, name: str):
    """Arguments of a probe's tool: :func:`mmpos.apis.cli.backbone_parser`'s
    ``CONFIG CHECKPOINT --prefix --device``, and ``--probe`` (a
    ``configs/dense_probes/<name>_*.py``), ``--work-dir``, ``--data-root``
    (of both splits), ``--pictures N``, ``--batch-size``, ``--max-tokens``
    (NaFlex maps, for the probes that take them:
    :attr:`DenseProbe.naflex`)."""
    from mmpos.apis.cli import backbone_parser
    parser = backbone_parser(doc, images=False)
    parser.add_argument('--probe', required=True,
                        help=f'configs/dense_probes/{name}_*.py')
    parser.add_argument('--work-dir', required=True)
    parser.add_argument('--data-root', help='data root of the probe data')
    parser.add_argument('--pictures', type=int, default=4,
                        help='pictures of the first N validation items')
    parser.add_argument('--batch-size', type=int, default=32)
    parser.add_argument('--max-tokens', type=int,
                        help='NaFlex: each image at its aspect ratio within '
                        'this many patches (a RoPE ViT)')
    return parser


def probe_tool(args, name: str, title: str, **overrides):
    """The body of a probe's tool (``tools/analysis_tools/{depth_probe,
    keypoint_correspondence,dense_retrieval}.py``): ``args`` ``config``,
    ``checkpoint``, ``probe``, ``work_dir``, ``data_root``, ``prefix``,
    ``device``, ``batch_size`` (and ``seed``, ``max_tokens``: NaFlex
    maps); ``overrides`` of the probe
    config's settings (``None``: keep). Writes ``metrics.json`` and
    ``result.md`` into the work dir (which must not hold them yet).

    Returns:
        ``(metrics with the probe's prefix, details of the run, paths
        written)``.
    """
    import os.path as osp
    import time

    from mmpos.apis.features import data_mean_std, load_config
    from .frozen import write_result
    for file in ('metrics.json', 'result.md'):
        if osp.exists(osp.join(args.work_dir, file)):
            raise FileExistsError(f'{osp.join(args.work_dir, file)} exists; '
                                  'choose another work dir')
    cfg = load_config(args.probe)
    seed = getattr(args, 'seed', 0)
    max_tokens = getattr(args, 'max_tokens', None)
    if max_tokens is not None:
        check_naflex_probe(name)
    backbone = probed_backbone(name, cfg, args.config, args.checkpoint, seed,
                               overrides.get('blocks'), args.prefix,
                               args.device)
    start = time.perf_counter()
    extra = dict(seed=seed) if _probe(name).seeded else {}
    if max_tokens is not None:
        extra['max_tokens'] = max_tokens
    metrics, details = PROBES[name].run(
        cfg, backbone, *data_mean_std(args.config), data_root=args.data_root,
        batch_size=args.batch_size, device=args.device, **extra,
        **(dict(progress=True) if _probe(name).progress else {}), **overrides)
    metrics = {f'{name}/{k}': float(v) for k, v in metrics.items()}
    settings = dict(config=args.config, checkpoint=args.checkpoint,
                    probe=args.probe, out_indices=list(getattr(
                        backbone, 'out_indices', [])),
                    **{**extra, **details['settings']},
                    seconds=round(time.perf_counter() - start, 1))
    paths = write_result(args.work_dir, metrics, title, settings)
    for key, value in metrics.items():
        print(f'{key}: {value:.4f}')
    return metrics, details, paths
