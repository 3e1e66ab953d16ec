"""Write the deterministic mini datasets used by the demo and the tests.

    python tools/misc/make_mini_data.py OUT_DIR
        [--which coco ade unlabeled cls objects stuff nyu layers spair scenes]
        [--num-train N] [--num-val N] [--num-unlabeled N] [--img-size S]
        [--seed S] [--force]

Each chosen dataset goes to ``OUT_DIR/<name>``. An existing non-empty
dataset directory is an error unless ``--force``, which replaces it only if
an earlier run of this tool wrote it.

It needs numpy, Pillow and scikit-image only: it does not import mmpos
(whose import registers the whole OpenMMLab stack, several CPU seconds per
call), and reports the generators' errors in one line itself.
"""
import argparse
import time

from mmpos_harness.mini_data import make_all

DATASETS = ('coco', 'ade', 'unlabeled')
CHOICES = DATASETS + ('cls', 'objects', 'stuff', 'nyu', 'layers', 'spair',
                      'scenes')


def parse_args(argv=None):
    parser = argparse.ArgumentParser(
        description='Write deterministic mini COCO / ADE20K / unlabeled / '
        'classification / materials datasets.')
    parser.add_argument('out_dir', help='parent directory of the datasets')
    parser.add_argument(
        '--which', nargs='+', choices=CHOICES, default=list(DATASETS),
        help='datasets to write (default: coco ade unlabeled; cls is the '
        'mini classification set, objects and stuff the demo\'s material '
        'detection and segmentation tasks, nyu, spair and scenes the depth, '
        'correspondence and retrieval probes\' data, layers the method '
        'ranking\'s depth probe data)')
    parser.add_argument(
        '--num-train', type=int, default=64,
        help='training images of coco, ade, cls, objects, stuff, nyu, '
        'spair (pairs) and scenes')
    parser.add_argument(
        '--num-val', type=int,
        help='validation images of coco, ade, cls, objects, stuff, nyu, '
        'spair (pairs) and scenes (default: 16; cls 240 and scenes 256, '
        'so that one query or image moves their metric by at most 0.5 '
        'point)')
    parser.add_argument('--num-unlabeled', type=int, default=256,
                        help='images in the unlabeled folder')
    parser.add_argument('--img-size', type=int, default=128,
                        help='side of the square images')
    parser.add_argument('--seed', type=int, default=0)
    parser.add_argument(
        '--force', action='store_true',
        help='replace dataset directories written earlier by this tool')
    return parser, parser.parse_args(argv)


def main(argv=None):
    parser, args = parse_args(argv)
    start = time.time()
    try:
        paths = make_all(
            args.out_dir, which=list(dict.fromkeys(args.which)),
            num_train=args.num_train, num_val=args.num_val,
            num_unlabeled=args.num_unlabeled, img_size=args.img_size,
            seed=args.seed, force=args.force)
    except (OSError, ValueError, RuntimeError) as err:
        parser.exit(1, f'{parser.prog}: error: {err}\n')
    for name, path in paths.items():
        print(f'{name}: {path}')
    print(f'done in {time.time() - start:.1f}s')


if __name__ == '__main__':
    main()
