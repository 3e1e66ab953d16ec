"""The three dense probes of one backbone in one call, for comparisons over
checkpoints and seeds (``tools/analysis_tools/dense_probe_suite.py``):
the linear depth probe, keypoint correspondence and in-context dense
retrieval, each configured by its probe config
(``configs/dense_probes/*.py``).

The seed sets what is random in a probe run: the random init of the
backbone when there is no checkpoint, and the depth head's init and batch
draws (correspondence and retrieval have no randomness).
"""
from typing import Dict, Optional

import torch

# Probe configs of the mini data (the demo's sizes, 64 px).
MINI_PROBES = dict(
    depth='configs/dense_probes/depth_mini-nyu.py',
    correspondence='configs/dense_probes/correspondence_mini-spair.py',
    retrieval='configs/dense_probes/retrieval_mini-stuff.py')
# Reported metric of each probe (the suite's flat keys).
HEADLINE = ('depth/rmse', 'depth/abs_rel', 'depth/d1',
            'correspondence/pck@0.05', 'correspondence/pck@0.1',
            'retrieval/mIoU')


def depth_run(cfg, backbone, mean, std, seed: int = 0,
              data_root: Optional[str] = None, batch_size: int = 32,
              device='cpu', **overrides):
    """The depth probe of probe config ``cfg`` on ``backbone`` (built with
    the config's ``blocks`` out). Returns ``(metrics, details)``: mmseg's
    ``DepthMetric`` keys, and the settings, validation paths, true and
    predicted depths."""
    from .dense import probe_settings, split_features
    from .depth_probe import (DEPTH_PROBE, FIT_KEYS, HEAD_KEYS,
                              depth_eval_settings, depth_split,
                              run_depth_probe)
    s = probe_settings(cfg, 'depth_probe', DEPTH_PROBE, **overrides)
    data, paths = [], {}
    for split in ('train', 'val'):
        paths[split], depths = depth_split(
            cfg, split, s['size'], data_root,
            s['max_train_images'] if split == 'train' else None)
        data += [split_features(backbone, paths[split], s['size'], mean, std,
                                batch_size, device), depths]
    metrics, pred = run_depth_probe(
        *data, seed=seed, cls_token=s['cls_token'],
        **{k: s[k] for k in HEAD_KEYS + FIT_KEYS}, **depth_eval_settings(cfg))
    counts = {f'{k}_images': len(v) for k, v in paths.items()}
    return metrics, dict(settings=dict(s, **depth_eval_settings(cfg),
                                       **counts),
                         paths=paths, gt=data[3], pred=pred)


def correspondence_run(cfg, backbone, mean, std,
                       data_root: Optional[str] = None,
                       batch_size: int = 32, device='cpu', categories=None,
                       **overrides):
    """The correspondence probe of probe config ``cfg`` on ``backbone``.
    Returns ``(metrics, details)``: ``pck@<alpha>``, and the settings,
    pairs, predicted target keypoints and image sizes."""
    from .correspondence import (CORRESPONDENCE_PROBE, correspondence_pck,
                                 pair_features, read_spair_pairs)
    from .dense import probe_settings
    s = probe_settings(cfg, 'correspondence_probe', CORRESPONDENCE_PROBE,
                       **overrides)
    pairs = read_spair_pairs(data_root or cfg.data_root, s['split'],
                             categories)
    src, trg, hws = pair_features(backbone, pairs, s['size'], mean, std,
                                  batch_size, device)
    metrics, preds = correspondence_pck(pairs, src, trg, hws, s['by'],
                                        s['alphas'])
    counts = dict(pairs=len(pairs),
                  keypoints=sum(len(p['src_kps']) for p in pairs))
    return metrics, dict(settings=dict(s, **counts), pairs=pairs,
                         preds=preds, hws=hws)


def retrieval_run(cfg, backbone, mean, std, data_root: Optional[str] = None,
                  batch_size: int = 32, device='cpu', **overrides):
    """The retrieval probe of probe config ``cfg`` on ``backbone``. Returns
    ``(metrics, details)``: mmseg's ``IoUMetric`` keys, and the settings,
    validation paths, true and retrieved labels, classes, ignore index."""
    from .dense import probe_settings, split_features
    from .dense_retrieval import RETRIEVAL_PROBE, hummingbird_miou, seg_split
    s = probe_settings(cfg, 'retrieval_probe', RETRIEVAL_PROBE, **overrides)
    data, paths = [], {}
    for split in ('train', 'val'):
        paths[split], labels, classes, ignore = seg_split(
            cfg, split, s['size'], data_root)
        data += [split_features(backbone, paths[split], s['size'], mean, std,
                                batch_size, device)['patch'][-1], labels]
    metrics, pred = hummingbird_miou(*data, classes, s['k'],
                                     s['temperature'], ignore,
                                     return_pred=True)
    counts = {f'{k}_images': len(v) for k, v in paths.items()}
    return metrics, dict(settings=dict(s, **counts, classes=len(classes)),
                         paths=paths, gt=data[3], pred=pred,
                         classes=classes, ignore_index=ignore)


RUNS = dict(depth=depth_run, correspondence=correspondence_run,
            retrieval=retrieval_run)


def probed_backbone(name: str, cfg, config: str,
                    checkpoint: Optional[str], seed: int = 0,
                    blocks: Optional[int] = None, prefix: str = 'backbone.',
                    device='cpu'):
    """The backbone of ``config`` / ``checkpoint`` as probe ``name`` of
    probe config ``cfg`` needs it (the depth probe: its ``blocks`` out,
    unless ``blocks`` is given), a random init drawn with ``seed``."""
    from .dense import probe_backbone
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
                     batch_size: int = 32) -> Dict[str, float]:
    """Run the probes of ``probes`` (``{'depth' | 'correspondence' |
    'retrieval': probe config}``) on the backbone of ``config`` loaded from
    ``checkpoint`` (``None``: random init drawn with ``seed``).

    Returns:
        Flat metrics: ``depth/<DepthMetric key>``,
        ``correspondence/pck@<alpha>``, ``retrieval/{mIoU,mAcc,aAcc}``.
    """
    from mmpos.apis.features import data_mean_std, load_config
    unknown = sorted(set(probes) - set(RUNS))
    if unknown:
        raise ValueError(f'unknown probes {unknown}; choose from '
                         f'{sorted(RUNS)}')
    data_roots = data_roots or {}
    mean, std = data_mean_std(config)
    out: Dict[str, float] = {}
    for name, path in probes.items():
        cfg = load_config(path)
        backbone = probed_backbone(name, cfg, config, checkpoint, seed,
                                   prefix=prefix, device=device)
        extra = dict(seed=seed) if name == 'depth' else {}
        metrics, _ = RUNS[name](cfg, backbone, mean, std,
                                data_root=data_roots.get(name),
                                batch_size=batch_size, device=device, **extra)
        out.update({f'{name}/{k}': float(v) for k, v in metrics.items()})
    return out


def probe_parser(doc: str, name: str):
    """Arguments of a probe's tool: :func:`mmpos.apis.cli.backbone_parser`'s
    ``CONFIG CHECKPOINT --prefix --device``, and ``--probe`` (a
    ``configs/dense_probes/<name>_*.py``), ``--work-dir``, ``--data-root``
    (of both splits), ``--pictures N``, ``--batch-size``."""
    from mmpos.apis.cli import backbone_parser
    parser = backbone_parser(doc, images=False)
    parser.add_argument('--probe', required=True,
                        help=f'configs/dense_probes/{name}_*.py')
    parser.add_argument('--work-dir', required=True)
    parser.add_argument('--data-root', help='data root of the probe data')
    parser.add_argument('--pictures', type=int, default=4,
                        help='pictures of the first N validation items')
    parser.add_argument('--batch-size', type=int, default=32)
    return parser


def probe_tool(args, name: str, title: str, **overrides):
    """The body of a probe's tool (``tools/analysis_tools/{depth_probe,
    keypoint_correspondence,dense_retrieval}.py``): ``args`` ``config``,
    ``checkpoint``, ``probe``, ``work_dir``, ``data_root``, ``prefix``,
    ``device``, ``batch_size`` (and ``seed``); ``overrides`` of the probe
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
    backbone = probed_backbone(name, cfg, args.config, args.checkpoint, seed,
                               overrides.get('blocks'), args.prefix,
                               args.device)
    start = time.perf_counter()
    extra = dict(seed=seed) if name == 'depth' else {}
    metrics, details = RUNS[name](
        cfg, backbone, *data_mean_std(args.config), data_root=args.data_root,
        batch_size=args.batch_size, device=args.device, **extra, **overrides)
    metrics = {f'{name}/{k}': float(v) for k, v in metrics.items()}
    settings = dict(config=args.config, checkpoint=args.checkpoint,
                    probe=args.probe, out_indices=list(getattr(
                        backbone, 'out_indices', [])), **extra,
                    **details['settings'],
                    seconds=round(time.perf_counter() - start, 1))
    paths = write_result(args.work_dir, metrics, title, settings)
    for key, value in metrics.items():
        print(f'{key}: {value:.4f}')
    return metrics, details, paths
