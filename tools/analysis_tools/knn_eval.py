"""kNN classification of frozen features (DINO's weighted kNN).

    python tools/analysis_tools/knn_eval.py CONFIG CHECKPOINT --work-dir DIR
        [--data DATA_CONFIG] [--data-root ROOT] [--size S] [--center-crop R]
        [--k 20] [--temperature 0.07] [--features cls avg]
        [--prefix backbone.] [--batch-size B] [--device cpu|cuda]

The backbone comes from CONFIG (any mmpos / mmpretrain / mmdet / mmseg
config) and CHECKPOINT (a training checkpoint, a bare or ``backbone.``-
prefixed backbone; ``--prefix teacher.module.backbone.`` takes a DINOv2
teacher); CHECKPOINT ``pixels`` is the raw-pixel baseline (the patches'
pixels, :class:`~mmpos.models.backbones.PixelPatches` with the config
backbone's patch size; ``cls`` is their mean). The labelled sets are ``train_dataloader.dataset`` (memory bank)
and ``val_dataloader.dataset`` (queries) of DATA_CONFIG (default: CONFIG),
any mmpretrain classification dataset (ImageNet layout, CustomDataset
folders); ``--data-root`` points both at another root. Images are resized
to ``size / center_crop`` and centre-cropped to ``size`` (DINO: 256 -> 224).
Features: ``cls`` (the class token) and ``avg`` (mean-pooled patch tokens).

Writes ``DIR/metrics.json`` (``knn/<feature>_top1``, ``_top5``; read by
``tools/paper_tables/gen_tables.py``; beside them the image-free baseline
``knn/class_prior_top1``, ``_top5``: every query given the memory bank's
class counts, :func:`~mmpos.evaluation.knn.class_prior_accuracy`) and
``DIR/result.md``.
"""
import os.path as osp
import time

from mmpos.apis.cli import backbone_parser
from mmpos.guardrails.cli import cli_main
from mmpos.errors import BadInputError


def parse_args(argv=None):
    parser = backbone_parser(__doc__, images=False)
    parser.add_argument('--work-dir', required=True)
    parser.add_argument('--data', help='config with train_dataloader and '
                        'val_dataloader datasets (default: CONFIG)')
    parser.add_argument('--data-root', help='data_root of both datasets')
    parser.add_argument('--size', type=int, default=224)
    parser.add_argument('--center-crop', type=float, default=224 / 256)
    parser.add_argument('--k', type=int, default=20)
    parser.add_argument('--temperature', type=float, default=0.07)
    parser.add_argument('--features', nargs='+', default=['cls', 'avg'],
                        choices=['cls', 'avg'])
    parser.add_argument('--batch-size', type=int, default=64)
    return parser.parse_args(argv)


def split_dataset(cfg, split: str, data_root=None) -> dict:
    loader = cfg.get(f'{split}_dataloader')
    if not loader or 'dataset' not in loader:
        raise BadInputError(f'{cfg.filename}: no {split}_dataloader.dataset '
                            '(give a classification config with --data)')
    dataset = dict(loader['dataset'])
    if data_root:
        dataset['data_root'] = data_root
    return dataset


@cli_main('knn_eval.py')
def main(argv=None):
    args = parse_args(argv)
    from mmengine.config import Config

    from mmpos.apis import init_backbone
    from mmpos.apis.features import data_mean_std
    from mmpos.evaluation.frozen import (batch_features, dataset_items,
                                        load_inputs, write_result)
    from mmpos.evaluation.dense_suite import RAW_PIXELS, probed_backbone
    from mmpos.evaluation.knn import class_prior_accuracy, knn_accuracy
    for name in ('metrics.json', 'result.md'):
        if osp.exists(osp.join(args.work_dir, name)):
            raise FileExistsError(f'{osp.join(args.work_dir, name)} exists; '
                                  'choose another work dir')
    data_cfg = Config.fromfile(args.data or args.config)
    sets = {split: dataset_items(split_dataset(data_cfg, split,
                                               args.data_root))
            for split in ('train', 'val')}
    classes = sets['train'][2]
    num_classes = len(classes) or int(sets['train'][1].max()) + 1
    if args.checkpoint == RAW_PIXELS:
        backbone = probed_backbone('knn', None, args.config, RAW_PIXELS,
                                   device=args.device)
    else:
        backbone = init_backbone(args.config, args.checkpoint, args.device,
                                 prefix=args.prefix)
    mean, std = data_mean_std(args.config)
    start = time.perf_counter()
    feats = {}
    for split, (paths, _, _) in sets.items():
        inputs = load_inputs(paths, args.size, mean, std, args.center_crop)
        feats[split] = batch_features(backbone, inputs, args.batch_size,
                                      args.device)
    metrics = {}
    for name in args.features:
        if name not in feats['train']:
            raise BadInputError(f'{args.config}: the backbone gives no '
                                f'{name!r} feature (it has {sorted(feats["train"])})')
        acc = knn_accuracy(feats['train'][name], sets['train'][1],
                           feats['val'][name], sets['val'][1], num_classes,
                           args.k, args.temperature)
        metrics.update({f'knn/{name}_{k}': v for k, v in acc.items()})
    prior = class_prior_accuracy(sets['train'][1], sets['val'][1],
                                 num_classes)
    metrics.update({f'knn/class_prior_{k}': v for k, v in prior.items()})
    seconds = time.perf_counter() - start
    images = sum(len(s[0]) for s in sets.values())
    settings = dict(config=args.config, checkpoint=args.checkpoint,
                    data=args.data or args.config, train_images=len(
                        sets['train'][0]), val_images=len(sets['val'][0]),
                    classes=num_classes, size=args.size,
                    center_crop=round(args.center_crop, 4), k=args.k,
                    temperature=args.temperature, device=args.device,
                    seconds_per_1k_images=round(1000 * seconds / images, 2))
    paths = write_result(args.work_dir, metrics, 'kNN classification '
                         '(frozen features)', settings)
    for key, value in metrics.items():
        print(f'{key}: {value:.2f}')
    print(f'{images} images in {seconds:.1f} s; written {", ".join(paths)}')


if __name__ == '__main__':
    main()
