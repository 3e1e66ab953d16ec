"""DropPos' predicted position of each patch against its true one (PNG).

    python tools/analysis_tools/droppos_positions.py CONFIG CHECKPOINT IMAGE
        --out PNG [--gamma 0] [--gamma-pos 0.75] [--size 384] [--seed 0]
        [--device cpu]

The image is resized to the backbone's ``img_size``; ``gamma`` of the
patches are masked and the positions of ``gamma_pos`` of the visible ones
dropped as in pretraining (drawn from ``--seed``); the DropPos head then
predicts every patch's position. The picture (``--size`` pixels square)
shows the image with the patch grid and, for each dropped-position patch, a
line from its true cell to the predicted one (green: right, red: wrong;
grey dots: patches that kept their position). The title line of the output
gives the accuracy on the dropped positions.
"""
import argparse

from mmpos.guardrails.cli import cli_main
from mmpos.errors import UnsupportedModelError


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('config')
    parser.add_argument('checkpoint')
    parser.add_argument('image')
    parser.add_argument('--out', required=True)
    parser.add_argument('--gamma', type=float, default=0.)
    parser.add_argument('--gamma-pos', type=float, default=0.75)
    parser.add_argument('--size', type=int, default=384)
    parser.add_argument('--seed', type=int, default=0)
    parser.add_argument('--device', default='cpu')
    return parser.parse_args(argv)


def droppos_picture(model, image, gamma, gamma_pos, size, mean, std,
                    seed=0):
    """``(picture, accuracy %)`` of a DropPos model on one uint8 image."""
    import torch

    from mmpos.analysis.pictures import draw_positions
    from mmpos.apis.features import preprocess
    from mmpos.apis.features import patch_stride
    img_size = tuple(getattr(model.backbone, 'img_size', None)
                     or model.backbone.patch_embed.init_input_size)
    inputs = preprocess([image], img_size, mean, std)
    torch.manual_seed(seed)
    model.eval()
    with torch.no_grad():
        out = model.position_predictions(
            inputs.to(next(model.parameters()).device), gamma, gamma_pos)
    stride = patch_stride(model.backbone)
    grid = (img_size[0] // stride[0], img_size[1] // stride[1])
    picture = draw_positions(image, grid, out['target'][0].cpu(),
                             out['pred'][0].cpu(), out['dropped'][0].cpu(),
                             size)
    return picture, float(out['acc'])


@cli_main('droppos_positions.py')
def main(argv=None):
    args = parse_args(argv)
    from mmengine.config import Config
    from mmengine.registry import init_default_scope

    from mmpos.analysis.pictures import save_png
    from mmpos.apis import read_images
    from mmpos.apis.features import data_mean_std
    from mmpos.checkpoint import load_checkpoint_into
    from mmpos.registry import MODELS
    cfg = Config.fromfile(args.config)
    init_default_scope('mmpretrain')
    model = MODELS.build(cfg.model)
    if not hasattr(model, 'position_predictions'):
        raise UnsupportedModelError(
            f'{args.config}: {type(model).__name__} is not a DropPos model')
    load_checkpoint_into(model, args.checkpoint)
    model.to(args.device)
    mean, std = data_mean_std(args.config)
    picture, acc = droppos_picture(model, read_images([args.image])[0],
                                   args.gamma, args.gamma_pos, args.size,
                                   mean, std, args.seed)
    save_png(picture, args.out)
    print(f'position accuracy on the dropped positions: {acc:.1%} '
          f'(gamma {args.gamma}, gamma_pos {args.gamma_pos}); written '
          f'{args.out}')


if __name__ == '__main__':
    main()
