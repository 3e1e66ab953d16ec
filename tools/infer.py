"""Run a detector / instance segmenter (mmdet) or a semantic segmenter
(mmseg) on images and draw the predictions on them (PNG).

    python tools/infer.py CONFIG CHECKPOINT IMAGE [IMAGE ...]
        [--out-dir DIR] [--score-thr 0.3] [--opacity 0.5] [--device cpu]

The config's ``default_scope`` picks the library: ``mmdet`` configs are run
with ``mmdet.apis.inference_detector`` and drawn with mmdet's
``DetLocalVisualizer`` (boxes, class names, scores, instance masks above
``--score-thr``); ``mmseg`` configs with ``mmseg.apis.inference_model`` and
``SegLocalVisualizer`` (the class map blended at ``--opacity``). Each image
gives ``DIR/<stem>_pred.png`` at the image's own size. CHECKPOINT is a
checkpoint of the whole model (what ``tools/train.py`` writes).
"""
import argparse
import os
import os.path as osp
import sys

sys.path.insert(0, osp.dirname(osp.dirname(osp.abspath(__file__))))

from mmpos.utils.cli import cli_main  # noqa: E402

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
    return parser.parse_args(argv)


def build(cfg, checkpoint, device):
    """``(model, predict(image) -> data sample, visualizer)``."""
    scope = cfg.get('default_scope')
    if scope == 'mmdet':
        from mmdet.apis import inference_detector, init_detector
        from mmdet.visualization import DetLocalVisualizer
        model = init_detector(cfg, checkpoint, device=device)
        visualizer = DetLocalVisualizer()
        return model, lambda img: inference_detector(model, img), visualizer
    if scope == 'mmseg':
        from mmseg.apis import inference_model, init_model
        from mmseg.visualization import SegLocalVisualizer
        model = init_model(cfg, checkpoint, device=device)
        visualizer = SegLocalVisualizer()
        return model, lambda img: inference_model(model, img), visualizer
    from mmpos.utils.errors import BadInputError
    raise BadInputError(f'{cfg.filename}: default_scope {scope!r}; infer.py '
                        f'draws {" and ".join(SCOPES)} models')


@cli_main('infer.py')
def main(argv=None):
    args = parse_args(argv)
    import mmcv
    from mmengine.config import Config
    from mmengine.utils import import_modules_from_strings

    import mmpos  # noqa: F401
    from mmpos.checkpoint import use_safe_io
    use_safe_io()  # safe checkpoint reads (mmpos.checkpoint)
    cfg = Config.fromfile(args.config)
    if cfg.get('custom_imports'):
        import_modules_from_strings(**cfg.custom_imports)
    if not osp.isfile(args.checkpoint):
        raise FileNotFoundError(f'checkpoint not found: {args.checkpoint}')
    for path in args.images:
        if not osp.isfile(path):
            raise FileNotFoundError(f'image not found: {path}')
    model, predict, visualizer = build(cfg, args.checkpoint, args.device)
    visualizer.dataset_meta = model.dataset_meta
    os.makedirs(args.out_dir, exist_ok=True)
    for path in args.images:
        image = mmcv.imread(path, channel_order='rgb')
        sample = predict(mmcv.imread(path))  # the pipelines read BGR
        out = osp.join(args.out_dir,
                       osp.splitext(osp.basename(path))[0] + '_pred.png')
        extra = dict(pred_score_thr=args.score_thr) if cfg.default_scope \
            == 'mmdet' else {}
        if cfg.default_scope == 'mmseg':
            visualizer.alpha = args.opacity
        visualizer.add_datasample(osp.basename(path), image, sample,
                                  draw_gt=False, show=False, out_file=out,
                                  **extra)
        print(f'written {out}')


if __name__ == '__main__':
    main()
