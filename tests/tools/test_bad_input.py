"""Bad input gives one line naming the file, key or value and leaves no
partial output behind (issue 10: images, annotations, checkpoints, config
keys, input sizes, crop boxes, untrusted checkpoints)."""
import importlib.util
import json
import os
import shutil

import numpy as np
import pytest
import torch
import torch.nn as nn
from mmengine.logging import MMLogger
from mmengine.model import BaseModel
from mmengine.runner import Runner
from PIL import Image

from conftest import REPO, data_root_options, run_tool
from mmpos.datasets.robust_loading import SafeLoadImageFromFile
from mmpos.datasets.transforms.crop_boxes import (MultiViewWithBoxes,
                                                  RandomFlipWithBox,
                                                  check_crop_boxes)
from mmpos.engine.hooks import CheckpointFitHook
from mmpos.errors import (CheckpointMismatchError, CropBoxError,
                          ImageLoadError)
from mmpos.guardrails.cli import one_line

SEG_CONFIG = 'configs/demo/upernet_vit-tiny-rope-mixed_mini-ade.py'
DET_CONFIG = 'configs/demo/mask-rcnn_vit-tiny-rope-mixed_mini-coco.py'


def _tool(name):
    spec = importlib.util.spec_from_file_location(
        f'bad_input_{name.replace("/", "_")}', REPO / 'tools' / f'{name}.py')
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


train_tool = _tool('train')


def run_train(*argv):
    """tools/train.py in this process; its exit message, None on success."""
    try:
        train_tool.main([str(a) for a in argv])
    except SystemExit as exit_:
        return exit_.code
    return None


def log_to(tmp_path):
    """A fresh current MMLogger writing to a file; returns the file."""
    path = tmp_path / 'log.txt'
    MMLogger.get_instance(f'bad_input_{tmp_path.name}', log_file=str(path))
    return path


def seg_options(root, name, iters=2):
    """Options of a 2-iteration mini-ADE run; ``name`` keeps in-process runs
    apart (mmengine's logger and visualizer are global instances by name,
    and a second run would reuse the first one's removed directory)."""
    return data_root_options(root, 'ade') + [
        f'train_cfg.max_iters={iters}', f'train_cfg.val_interval={iters}',
        f'default_hooks.checkpoint.interval={iters}',
        'train_dataloader.batch_size=2', f'experiment_name={name}',
        f'visualizer.name={name}'
    ]


@pytest.fixture
def ade_copy(mini_data, tmp_path):
    """A private copy of mini-ADE (tests may break files in it)."""
    root = tmp_path / 'data'
    shutil.copytree(mini_data / 'ade', root / 'ade')
    return root


def write_images(folder, n):
    folder.mkdir(parents=True)
    rng = np.random.default_rng(0)
    for i in range(n):
        Image.fromarray(rng.integers(0, 255, (16, 16, 3), np.uint8)).save(
            folder / f'{i}.jpg')
    return sorted(folder.glob('*.jpg'))


# 1. missing / corrupt images ---------------------------------------------

def test_unreadable_images_skip_with_warning_or_raise(tmp_path):
    from mmpretrain.datasets import CustomDataset
    files = write_images(tmp_path / 'imgs', 4)
    log = log_to(tmp_path)

    def dataset(on_error):
        return CustomDataset(
            data_prefix=str(tmp_path / 'imgs'), with_label=False,
            pipeline=[SafeLoadImageFromFile(on_error=on_error)])

    skipping, raising = dataset('skip'), dataset('raise')
    files[1].unlink()  # listed, then gone
    files[2].write_bytes(b'not a jpeg')
    for i in range(4):  # the broken ones are replaced by good ones
        sample = skipping[i]
        assert sample['img'].shape == (16, 16, 3)
        assert sample['img_path'] in (str(files[0]), str(files[3]))
    text = log.read_text()
    assert f'skipping image {files[1]}: No such file or directory' in text
    assert f'skipping image {files[2]}: not a decodable image' in text

    with pytest.raises(ImageLoadError,
                       match=f'cannot read image {files[2]}: not a '
                       'decodable image'):
        raising[2]
    # From a DataLoader worker the error comes back wrapped in a traceback;
    # the tools print the original message only.
    loader = torch.utils.data.DataLoader(
        raising, batch_size=None, num_workers=1, sampler=[1])
    with pytest.raises(ImageLoadError) as info:
        next(iter(loader))
    assert 'Original Traceback' in str(info.value)
    assert one_line(info.value) == (
        f'cannot read image {files[1]}: No such file or directory')


@pytest.mark.slow
def test_train_tool_corrupt_images(ade_copy, tmp_path):
    """Folder datasets list what exists, so break files instead: all
    training images but two."""
    images = sorted((ade_copy / 'ade/images/training').glob('*.jpg'))
    for image in images[2:]:
        image.write_bytes(b'truncated')
    work_dir = tmp_path / 'run'
    message = run_train(SEG_CONFIG, '--work-dir', work_dir, '--cfg-options',
                        *seg_options(ade_copy, 'bad1'))
    prefix = 'train.py: error: cannot read image '
    assert message.startswith(prefix)
    assert message.endswith(': not a decodable image')
    assert message[len(prefix):].split(':')[0] in map(str, images[2:])
    assert not work_dir.exists()  # failed before an iteration: removed

    message = run_train(SEG_CONFIG, '--work-dir', work_dir, '--bad-images',
                        'skip', '--cfg-options',
                        *seg_options(ade_copy, 'bad2'))
    assert message is None
    assert (work_dir / 'iter_2.pth').is_file()
    log = next(work_dir.glob('*/*.log')).read_text()
    skipped = {line.split('skipping image ')[1].split(':')[0]
               for line in log.splitlines() if 'skipping image' in line}
    assert skipped and skipped <= set(map(str, images[2:]))


# 2. annotations ------------------------------------------------------------


def test_train_tool_checks_annotations_first(mini_data, tmp_path):
    root = tmp_path / 'data'
    (root / 'coco/annotations').mkdir(parents=True)
    for split in ('train2017', 'val2017'):
        os.symlink(mini_data / 'coco' / split, root / 'coco' / split)
    for split in ('train', 'val'):
        name = f'annotations/instances_{split}2017.json'
        data = json.loads((mini_data / 'coco' / name).read_text())
        if split == 'train':
            data['annotations'][4]['bbox'] = [3, 3, 10]
        (root / 'coco' / name).write_text(json.dumps(data))
    work_dir = tmp_path / 'run'
    message = run_train(DET_CONFIG, '--work-dir', work_dir, '--cfg-options',
                        *data_root_options(root, 'coco'))
    ann = root / 'coco/annotations/instances_train2017.json'
    assert message.startswith(f'train.py: error: {ann}: annotations[4] ')
    assert 'bbox [3, 3, 10] is not 4 finite numbers' in message
    assert not work_dir.exists()


def test_validate_dataset_cli_lists_label_problems(ade_copy, capsys):
    label = sorted((ade_copy / 'ade/annotations/validation').glob('*.png'))[2]
    values = np.array(Image.open(label))
    values[0, 0] = 200
    Image.fromarray(values).save(label)
    tool = _tool('misc/validate_dataset')
    with pytest.raises(SystemExit,
                       match=r'^validate_dataset.py: error: 1 problem\(s\)$'):
        tool.main([SEG_CONFIG, '--cfg-options',
                   *data_root_options(ade_copy, 'ade')])
    out = capsys.readouterr().out.splitlines()
    # MiniADEDataset: the 6 classes mini-ADE draws, raw 0..6 (0 = other)
    assert out == [f'{label}: label values [200] out of range (allowed '
                   '0..6 or 255: num_classes=6, reduce_zero_label=True)']


# 3. checkpoints --------------------------------------------------------------

class Toy(BaseModel):

    def __init__(self, width=2):
        super().__init__()
        self.fc = nn.Linear(width, 1)
        self.head = nn.Linear(1, 1)

    def forward(self, inputs, data_samples=None, mode='loss'):
        return dict(loss=self.head(self.fc(inputs)).sum())


def toy_runner(tmp_path, checkpoint, strict):
    runner = Runner(model=Toy(), work_dir=str(tmp_path / 'toy'),
                    load_from=str(checkpoint))
    runner.register_hook(CheckpointFitHook(str(checkpoint), strict=strict))
    return runner


def test_checkpoint_fit_hook(tmp_path):
    path = tmp_path / 'ckpt.pth'
    torch.save({'fc.weight': torch.full((1, 2), 3.)}, path)  # no head
    runner = toy_runner(tmp_path, path, strict=False)
    runner.load_or_resume()  # fine-tuning: a partial fit is loaded, logged
    assert torch.equal(runner.model.fc.weight, torch.full((1, 2), 3.))
    with pytest.raises(CheckpointMismatchError,
                       match=f'{path} does not fit Toy: 3 model tensors '
                       r'missing \(fc.bias, head.bias, head.weight\)'):
        toy_runner(tmp_path, path, strict=True).load_or_resume()
    torch.save({'fc.weight': torch.zeros(1, 5)}, path)  # another width
    with pytest.raises(CheckpointMismatchError,
                       match='none of its 1 tensors matches'):
        toy_runner(tmp_path, path, strict=False).load_or_resume()


def test_missing_checkpoint_paths_stop_before_the_run(tmp_path):
    work_dir = tmp_path / 'run'
    missing = tmp_path / 'nowhere.pth'
    for option, expected in [
        (f'model.backbone.init_cfg.checkpoint={missing}',
         f'model.backbone.init_cfg.checkpoint: pretrained checkpoint not '
         f'found: {missing}'),
        (f'load_from={missing}', f'load_from checkpoint not found: {missing}')
    ]:
        message = run_train(SEG_CONFIG, '--work-dir', work_dir,
                            '--cfg-options', option)
        assert message == f'train.py: error: {expected}'
    assert not work_dir.exists()


@pytest.mark.slow
def test_wrong_checkpoint_one_line_and_no_partial_output(mini_data,
                                                         tmp_path):
    """A checkpoint of another model: --resume into an existing work dir
    and Pretrained in-process, load_from through the real command line."""
    wrong = tmp_path / 'other_model.pth'
    torch.save(Toy().state_dict(), wrong)
    work_dir = tmp_path / 'mine'
    work_dir.mkdir()
    (work_dir / 'notes.txt').write_text('user data')
    message = run_train(SEG_CONFIG, '--work-dir', work_dir, '--resume', wrong,
                        '--cfg-options', *seg_options(mini_data, 'bad3'))
    assert message.startswith(f'train.py: error: {wrong} does not fit '
                              'EncoderDecoder: none of its 4 tensors')
    assert sorted(os.listdir(work_dir)) == ['notes.txt']  # run's own gone
    assert (work_dir / 'notes.txt').read_text() == 'user data'

    message = run_train(SEG_CONFIG, '--work-dir', tmp_path / 'pre',
                        '--cfg-options', *seg_options(mini_data, 'bad4'),
                        f'model.backbone.init_cfg.checkpoint={wrong}')
    assert message.startswith(f'train.py: error: pretrained checkpoint {wrong}'
                              ' does not fit RoPEVisionTransformer: none of '
                              'its 4 tensors matches')
    assert not (tmp_path / 'pre').exists()

    result = run_tool('tools/train.py', SEG_CONFIG, '--work-dir',
                      tmp_path / 'new', '--cfg-options',
                      *seg_options(mini_data, 'bad5'), f'load_from={wrong}',
                      env={'OMP_NUM_THREADS': '1'})
    assert result.returncode == 1
    assert 'Traceback' not in result.stderr
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith(f'train.py: error: {wrong} does not fit '
                           'EncoderDecoder')
    assert not (tmp_path / 'new').exists()


# 4. misspelled config keys ---------------------------------------------------


@pytest.mark.slow
def test_misspelled_option_one_line(tmp_path):
    result = run_tool('tools/train.py', SEG_CONFIG, '--work-dir',
                      tmp_path / 'run', '--cfg-options',
                      'model.backbone.arhc=tiny',
                      env={'OMP_NUM_THREADS': '1'})
    assert result.returncode == 1
    assert 'Traceback' not in result.stderr
    assert result.stderr.strip().splitlines()[-1] == (
        f'train.py: error: {SEG_CONFIG}: model.backbone.arhc: '
        "RoPEVisionTransformer takes no argument 'arhc' (did you mean "
        "'arch'?)")
    assert not (tmp_path / 'run').exists()


# 5. input size vs patch size -------------------------------------------------

def test_input_size_not_divisible_by_patch_size():
    """The backbone pads at the bottom and right as mmpretrain's ViT does
    (tests/models/backbones/test_rope_vit.py compares the two); dense
    configs pad in the data preprocessor, with the same zeros."""
    from mmdet.models.data_preprocessors import DetDataPreprocessor
    from mmpos.models.backbones.rope_vit import RoPEVisionTransformer
    vit = RoPEVisionTransformer(
        arch=dict(embed_dims=32, num_layers=1, num_heads=2,
                  feedforward_channels=64),
        img_size=64, patch_size=8, out_type='featmap').eval()
    image = torch.rand(3, 60, 44) * 255
    padded = DetDataPreprocessor(pad_size_divisor=8)(
        dict(inputs=[image]))['inputs']
    assert padded.shape[-2:] == (64, 48)
    with torch.no_grad():
        out = vit(image[None])[0]
        assert out.shape == (1, 32, 8, 6)
        assert torch.equal(out, vit(padded)[0])


# 6. crop boxes -----------------------------------------------------------

def test_crop_boxes_outside_the_image():
    flipped = np.array([[[0.9, 0.1, 0.2, 0.8], [0., 0., 1., 1.]]])
    check_crop_boxes(flipped)  # x1 > x2 is a horizontal flip
    check_crop_boxes(torch.tensor([[10., 0., 640., 480.]]),
                     extent=(640, 480))  # pixel boxes
    for box, expected in [
        ([0.1, 0.1, 1.2, 0.5], r'\[0, 1\] = \[0.1, 0.1, 1.2, 0.5\] lies '
         r'outside the image \[0, 1\] x \[0, 1\]'),
        ([0.3, 0.1, 0.3, 0.5], 'has zero width or height'),
        ([float('nan'), 0., 1., 1.], 'is not finite'),
    ]:
        boxes = flipped.copy()
        boxes[0, 1] = box
        with pytest.raises(CropBoxError, match=expected):
            check_crop_boxes(torch.as_tensor(boxes))
    # A box recorded before the multi-view transform is checked there too.
    views = MultiViewWithBoxes(transforms=[[RandomFlipWithBox(prob=0.)]],
                               num_views=2)
    results = dict(img=np.zeros((8, 8, 3), np.uint8), img_path='x.jpg',
                   crop_box=np.array([-0.5, 0., 1., 1.], np.float32))
    with pytest.raises(CropBoxError,
                       match=r'crop_boxes of x.jpg\[0\] = \[-0.5, 0.0, 1.0, '
                       r'1.0\] lies outside'):
        views(results)


# 7. untrusted checkpoints ----------------------------------------------------

class RunsCommand:
    """Unpickling it would run a shell command."""

    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return os.system, (f'touch {self.marker}', )


def test_untrusted_checkpoints(tmp_path):
    from mmengine.runner.checkpoint import _load_checkpoint
    from mmpos.checkpoint import use_safe_io
    from mmpos.errors import UnsafeCheckpointError
    use_safe_io()  # as mmpos' tools do at start-up
    log = log_to(tmp_path)
    plain = tmp_path / 'plain.pth'
    torch.save({'w': torch.ones(2)}, plain)
    assert torch.equal(_load_checkpoint(str(plain))['w'], torch.ones(2))
    assert (f'{plain} pickles no Python objects: loading it with '
            'torch.load(weights_only=True)') in log.read_text()

    marker = tmp_path / 'pwned'
    evil = tmp_path / 'evil.pth'
    torch.save({'w': torch.ones(2), 'x': RunsCommand(marker)}, evil)
    with pytest.raises(UnsafeCheckpointError,
                       match=rf"refusing to load {evil}: .*'posix.system'"):
        _load_checkpoint(str(evil))
    assert not marker.exists()


def test_infer_keeps_names_pads_and_goes_past_a_bad_image(tmp_path):
    """Two images named ``img.png`` in two folders, of a size that is no
    multiple of the patch (50x37), and a corrupt one: both drawn at their
    own size under distinct names, the corrupt one named in the one-line
    error (status 1)."""
    from mmengine.config import Config
    from mmengine.registry import DefaultScope
    from mmseg.registry import MODELS
    with DefaultScope.overwrite_default_scope('mmseg'):
        model = MODELS.build(Config.fromfile(REPO / SEG_CONFIG).model)
    checkpoint = tmp_path / 'seg.pth'
    torch.save({'state_dict': model.state_dict()}, checkpoint)
    images = []
    for folder in ('a', 'b'):
        (tmp_path / folder).mkdir()
        images.append(tmp_path / folder / 'img.png')
        Image.new('RGB', (50, 37), (200, 30, 60)).save(images[-1])
    bad = tmp_path / 'c.jpg'
    bad.write_bytes(b'\xff\xd8\xff\xe0 cut short')
    out = tmp_path / 'out'
    result = run_tool('tools/infer.py', SEG_CONFIG, checkpoint, images[0],
                      bad, images[1], '--out-dir', out, '--cfg-options',
                      'model.test_cfg.mode=whole')
    assert result.returncode == 1, result.stderr[-3000:]
    assert 'Traceback' not in result.stderr
    assert result.stderr.strip().splitlines()[-1] == (
        f'infer.py: error: cannot read image {bad}: not a decodable image '
        '(2 of 3 drawn)')
    assert sorted(os.listdir(out)) == ['a_img_pred.png', 'b_img_pred.png']
    for name in os.listdir(out):
        assert Image.open(out / name).size == (50, 37)
