"""Run a detector / instance segmenter (mmdet) or a semantic segmenter
(mmseg) on images and draw the predictions on them (PNG).

    python tools/infer.py CONFIG CHECKPOINT IMAGE [IMAGE ...]
        [--out-dir DIR] [--score-thr 0.3] [--opacity 0.5] [--device cpu]
        [--cfg-options KEY=VALUE ...]

The config's ``default_scope`` picks the library: ``mmdet`` configs are run
with ``mmdet.apis.inference_detector`` and drawn with mmdet's
``DetLocalVisualizer`` (boxes, class names, scores, instance masks above
``--score-thr``); ``mmseg`` configs with ``mmseg.apis.inference_model`` and
``SegLocalVisualizer`` (the class map blended at ``--opacity``). Each image
gives ``DIR/<stem>_pred.png`` at the image's own size; images of the same
file name in different folders keep distinct names (``DIR/<folder>_<stem>
_pred.png``). Images of any size are taken: mmseg models get them padded to
a multiple of the backbone's patch (``data_preprocessor.test_cfg``), mmdet
models pad by their ``pad_size_divisor``.

CHECKPOINT is a checkpoint of the whole model (what ``tools/train.py``
writes): a backbone-only checkpoint, or one missing any model tensor, is
refused. An image that cannot be read is reported and skipped; the others
are still drawn, and the run ends with status 1 naming the skipped ones.
"""
import argparse
import os
import os.path as osp
import sys

from mmengine.config import DictAction

from mmpos.guardrails.cli import cli_main, distinct_stems
from mmpos.errors import BadInputError
from mmpos.guardrails.launch import check_work_dir, load_config

SCOPES = ('mmdet', 'mmseg')


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('config')
    parser.add_argument('checkpoint')
    parser.add_argument('images', nargs='+')
    parser.add_argument('--out-dir', default='work_dirs/infer')
    parser.add_argument('--score-thr', type=float, default=0.3)
    parser.add_argument('--opacity', type=float, default=0.5)
    parser.add_argument('--device', default='cpu')
    parser.add_argument(
        '--cfg-options',
        nargs='+',
        action=DictAction,
        help='override config entries, e.g. model.test_cfg.mode=slide')
    return parser.parse_args(argv)


def build(cfg, device):
    """``(model, predict(image) -> data sample, visualizer)``, the model
    with its initial weights."""
    scope = cfg.get('default_scope')
    if scope == 'mmdet':
        from mmdet.apis import inference_detector, init_detector
        from mmdet.visualization import DetLocalVisualizer
        model = init_detector(cfg, None, device=device)
        visualizer = DetLocalVisualizer()
        return model, lambda img: inference_detector(model, img), visualizer
    if scope == 'mmseg':
        from mmseg.apis import inference_model, init_model
        from mmseg.visualization import SegLocalVisualizer
        # pad test images to a multiple of the patch (training crops are)
        patch = cfg.model.get('backbone', {}).get('patch_size', 16)
        cfg.model.data_preprocessor.setdefault(
            'test_cfg', dict(size_divisor=patch))
        model = init_model(cfg, None, device=device)
        visualizer = SegLocalVisualizer()
        return model, lambda img: inference_model(model, img), visualizer
    raise BadInputError(f'{cfg.filename}: default_scope {scope!r}; infer.py '
                        f'draws {" and ".join(SCOPES)} models')


def load_whole_model(model, path):
    """Load the checkpoint at ``path`` into ``model`` with the strict policy
    of :mod:`mmpos.checkpoint` (a backbone-only file is refused naming the
    fix); returns its ``meta.dataset_meta`` (``None`` if it has none)."""
    from mmpos.checkpoint import load_state, read_checkpoint, state_dict_of
    from mmpos.checkpoint.load import without_ddp_prefix
    checkpoint = read_checkpoint(path)
    load_state(model, without_ddp_prefix(state_dict_of(checkpoint)),
               'strict', f'checkpoint {path}')
    meta = checkpoint.get('meta') if isinstance(checkpoint, dict) else None
    return (meta or {}).get('dataset_meta')


def config_dataset_meta(cfg) -> dict:
    """Class names and palette of the config's test dataset (its class'
    ``METAINFO`` updated by the config's ``metainfo``)."""
    from mmengine.registry import DATASETS
    dataset = cfg.test_dataloader.dataset
    with DATASETS.switch_scope_and_registry(cfg.default_scope) as registry:
        cls = registry.get(dataset.type)
    meta = dict(getattr(cls, 'METAINFO', {}))
    meta.update(dataset.get('metainfo') or {})
    return meta


@cli_main('infer.py')
def main(argv=None):
    args = parse_args(argv)
    import mmcv
    from mmengine.utils import import_modules_from_strings

    import mmpos  # noqa: F401
    from mmpos.checkpoint import use_safe_io
    use_safe_io()  # safe checkpoint reads (mmpos.checkpoint)
    cfg = load_config(args.config, args.cfg_options)
    if cfg.get('custom_imports'):
        import_modules_from_strings(**cfg.custom_imports)
    if not osp.exists(args.checkpoint):
        raise FileNotFoundError(f'checkpoint not found: {args.checkpoint}')
    for path in args.images:
        if not osp.isfile(path):
            raise FileNotFoundError(f'image not found: {path}')
    check_work_dir(args.out_dir)  # not one a training run is using
    model, predict, visualizer = build(cfg, args.device)
    model.dataset_meta = load_whole_model(model, args.checkpoint) or \
        config_dataset_meta(cfg)
    visualizer.dataset_meta = model.dataset_meta
    stems = distinct_stems(args.images)
    skipped = []
    for path in args.images:
        try:
            image = mmcv.imread(path)  # BGR, as the pipelines read it
        except Exception:  # cv2/PIL raise several types for bad bytes
            image = None
        if image is None:
            skipped.append(path)
            print(f'infer.py: cannot read image {path}: not a decodable '
                  'image; skipped', file=sys.stderr)
            continue
        sample = predict(image)
        os.makedirs(args.out_dir, exist_ok=True)
        out = osp.join(args.out_dir, f'{stems[path]}_pred.png')
        extra = dict(pred_score_thr=args.score_thr) if cfg.default_scope \
            == 'mmdet' else {}
        if cfg.default_scope == 'mmseg':
            visualizer.alpha = args.opacity
        visualizer.add_datasample(osp.basename(path),
                                  mmcv.bgr2rgb(image), sample,
                                  draw_gt=False, show=False, out_file=out,
                                  **extra)
        print(f'written {out}')
    if skipped:
        raise BadInputError(
            f'cannot read image{"s" if len(skipped) > 1 else ""} '
            f'{", ".join(skipped)}: not a decodable image '
            f'({len(args.images) - len(skipped)} of {len(args.images)} '
            'drawn)')


if __name__ == '__main__':
    main()
