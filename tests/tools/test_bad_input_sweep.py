"""Bad input into every tool: one line, a non-zero exit, nothing changed
(issue 19).

``CASES`` is the table of the README's "Bad input and failure behaviour"
section: each row runs one tool's ``main(argv)`` in this process (what the
command line calls, with ``sys.argv[0]`` set so that argparse names the
tool) and asserts

* the exit status (1; 2 where argparse reports a bad argument),
* that the error is one line ``<tool>: error: ...`` naming the file, key or
  value at fault, and no traceback,
* that every file under the test's folder (the inputs, an existing work dir
  or output) is unchanged and that nothing was added or removed.

The exit behaviour of the real processes, ``MMPOS_DEBUG=1``, the lock of a
killed run and atomic checkpoint saves are tested after the table (unit
tests of the guardrails: tests/guardrails/).
"""
import hashlib
import importlib.util
import json
import os
import signal
import subprocess
import sys
from types import SimpleNamespace

import pytest
import torch
import torch.nn as nn
from PIL import Image

from mmengine.logging import MMLogger

from conftest import REPO, data_root_options, run_tool
from mmpos.guardrails.launch import work_dir_lock

SEG = 'configs/demo/upernet_vit-tiny-rope-mixed_mini-ade.py'
DROPPOS = 'configs/droppos/droppos_vit-tiny_mini.py'
CLS = 'configs/rope_vit/vit-mini_rope-mixed_mini-cls.py'
DET = 'configs/demo/mask-rcnn_vit-tiny-rope-mixed_mini-coco.py'
LINEAR = 'configs/demo/linear-probe_vit-tiny-rope-mixed_mini-ade.py'
QUIET = {'OMP_NUM_THREADS': '1'}


class RunsCommand:
    """Unpickling it would run a shell command."""

    def __reduce__(self):
        return os.system, ('true', )


def truncated(path, obj):
    torch.save(obj, path)
    data = path.read_bytes()
    path.write_bytes(data[:len(data) // 2])  # a save cut short
    return path


@pytest.fixture
def inputs(tmp_path):
    """Bad (and some good) inputs, all under ``tmp_path``."""
    d = SimpleNamespace(root=tmp_path)
    backbone = {f'backbone.w{i}': torch.rand(8, 8) for i in range(4)}
    d.trunc = truncated(tmp_path / 'trunc.pth', {'state_dict': backbone})
    d.text = tmp_path / 'notes.pth'
    d.text.write_text('{"lr": 0.1}')
    d.empty = tmp_path / 'empty.pth'
    d.empty.write_bytes(b'')
    d.evil = tmp_path / 'evil.pth'
    torch.save({'state_dict': backbone, 'x': RunsCommand()}, d.evil)
    d.as_list = tmp_path / 'list.pth'
    torch.save([torch.ones(2)], d.as_list)
    d.train_ckpt = tmp_path / 'train.pth'
    torch.save({'state_dict': backbone, 'meta': {}}, d.train_ckpt)
    d.heads_only = tmp_path / 'heads.pth'
    torch.save({'state_dict': {'head.w': torch.ones(2)}}, d.heads_only)
    d.exists = tmp_path / 'exists.pth'
    d.exists.write_bytes(b'user data')
    d.missing = tmp_path / 'nowhere.pth'
    d.syntax = tmp_path / 'broken.py'
    d.syntax.write_text('model = dict(type="X"\n')
    # a work dir whose newest checkpoint was cut short, an older intact one
    d.cut = tmp_path / 'cut'
    d.cut.mkdir()
    torch.save({'state_dict': {}}, d.cut / 'iter_4.pth')
    truncated(d.cut / 'iter_8.pth', {'state_dict': backbone})
    (d.cut / 'last_checkpoint').write_text(str(d.cut / 'iter_8.pth'))
    d.used = tmp_path / 'used'
    d.used.mkdir()
    torch.save({'state_dict': {}}, d.used / 'iter_8.pth')
    (d.used / 'last_checkpoint').write_text(str(d.used / 'iter_8.pth'))
    d.busy = tmp_path / 'busy'
    d.busy.mkdir()
    d.target = tmp_path / 'mini'  # coco/ holds the user's own files
    (d.target / 'coco').mkdir(parents=True)
    (d.target / 'coco/mine.txt').write_text('user data')
    d.logs = tmp_path / 'logs'
    d.logs.mkdir()
    d.manifest = tmp_path / 'manifest.yaml'
    d.manifest.write_text('tables: [1, 2\n')
    d.run = tmp_path / 'run'  # work dir of train/test, must not remain
    d.photo = tmp_path / 'photo.png'
    Image.new('RGB', (48, 32), (120, 80, 40)).save(d.photo)
    d.corrupt = tmp_path / 'corrupt.jpg'
    d.corrupt.write_bytes(b'\xff\xd8\xff\xe0 not really a jpeg')
    d.no_anns = tmp_path / 'no_anns.json'
    d.no_anns.write_text(json.dumps(dict(
        images=[dict(id=1, file_name='a.jpg', height=8, width=8)],
        annotations=[], categories=[
            dict(id=i, name=name)
            for i, name in enumerate(('circle', 'square', 'triangle'))])))
    return d


@pytest.fixture(scope='module')
def checkpoints(tmp_path_factory):
    """Checkpoints that fit: CLS's backbone, SEG's whole model (random
    weights)."""
    from mmengine.config import Config
    from mmengine.registry import DefaultScope
    from mmseg.registry import MODELS

    from mmpos.apis import init_backbone
    root = tmp_path_factory.mktemp('fitting')
    cls_backbone = root / 'cls_backbone.pth'
    torch.save({'state_dict': {f'backbone.{k}': v for k, v in init_backbone(
        CLS).state_dict().items()}}, cls_backbone)
    with DefaultScope.overwrite_default_scope('mmseg'):
        model = MODELS.build(Config.fromfile(REPO / SEG).model)
    seg_model = root / 'seg_model.pth'
    torch.save({'state_dict': model.state_dict()}, seg_model)
    return SimpleNamespace(cls_backbone=cls_backbone, seg_model=seg_model)


def train(*args):
    return ('tools/train.py', SEG, '--work-dir', '{run}', *args)


def evaluate(checkpoint, *args):
    return ('tools/test.py', SEG, checkpoint, '--work-dir', '{run}', *args)


OPT = '--cfg-options'
# (id, argv (``{name}``: a path of ``inputs``; ``{data}``: mini-ADE options
#  go after --cfg-options), what the line must name, exit status)
CASES = [
    ('train-missing-config', ('tools/train.py', '{missing}.py'),
     ['config file not found: {missing}.py']),
    ('train-config-syntax', ('tools/train.py', '{syntax}'),
     ['cannot read config {syntax}']),
    ('train-misspelled-option', train(OPT, 'model.backbone.arhc=tiny'),
     ["model.backbone.arhc", "did you mean 'arch'"]),
    # MAERoPEViT's **kwargs go on to RoPEVisionTransformer: both checked
    ('train-misspelled-subclass-option',
     ('tools/train.py', DROPPOS, '--work-dir', '{run}', OPT,
      'model.backbone.mask_ration=0.5', 'model.backbone.ape_typ=sincos'),
     ["model.backbone.mask_ration", "did you mean 'mask_ratio'",
      "model.backbone.ape_typ", "did you mean 'ape_type'"]),
    ('train-unknown-top-level-key', train(OPT, 'trian_cfg.max_iters=2'),
     ["'trian_cfg'", "did you mean 'train_cfg'"]),
    ('train-out-type-rejected',
     train(OPT, '{data}', 'model.backbone.out_type=tokens'),
     ['RoPEVisionTransformer rejected its config arguments: ValueError: '
      "Unsupported out_type 'tokens'"]),
    ('train-negative-lr',
     train(OPT, '{data}', 'optim_wrapper.optimizer.lr=-1'),
     ['AdamW rejected its config arguments: ValueError: Invalid learning '
      'rate: -1']),
    ('train-load-from-missing', train(OPT, 'load_from={missing}'),
     ['load_from checkpoint not found: {missing}']),
    ('train-load-from-truncated', train(OPT, 'load_from={trunc}'),
     ['load_from checkpoint {trunc} cannot be read: truncated']),
    ('train-load-from-text', train(OPT, 'load_from={text}'),
     ['{text} cannot be read: not a PyTorch checkpoint']),
    ('train-pretrained-empty',
     train(OPT, 'model.backbone.init_cfg.checkpoint={empty}'),
     ['model.backbone.init_cfg.checkpoint', '{empty}', 'empty']),
    ('train-pretrained-truncated',
     train(OPT, 'model.backbone.init_cfg.checkpoint={trunc}'),
     ['model.backbone.init_cfg.checkpoint', '{trunc}', 'truncated']),
    ('train-pretrained-untrusted',
     train(OPT, '{data}', 'model.backbone.init_cfg.checkpoint={evil}'),
     ['refusing to load {evil}', 'posix.system']),
    ('train-resume-truncated', train('--resume', '{trunc}'),
     ['--resume checkpoint {trunc} cannot be read']),
    ('train-resume-newest-cut',
     ('tools/train.py', SEG, '--work-dir', '{cut}', '--resume'),
     ['newest checkpoint {cut}/iter_8.pth cannot be read',
      'newest intact one is {cut}/iter_4.pth']),
    ('train-work-dir-holds-checkpoints',
     ('tools/train.py', SEG, '--work-dir', '{used}'),
     ['work dir {used} already holds checkpoints', '--resume']),
    ('train-work-dir-in-use',
     ('tools/train.py', SEG, '--work-dir', '{busy}'),
     ['work dir {busy} is in use by another run (pid {pid}']),
    ('train-misspelled-type',
     train(OPT, '{data}', 'model.backbone.type=mmpretrain.RoPEVisionTransfomer'),
     ["model.backbone.type='mmpretrain.RoPEVisionTransfomer'",
      "did you mean 'mmpretrain.RoPEVisionTransformer'"]),
    ('train-negative-window-size',
     train(OPT, '{data}', 'model.backbone.window_size=-2'),
     ['RoPEVisionTransformer rejected', 'window_size', '-2']),
    ('train-nested-option-misspelled',
     train(OPT, 'model.backbone.rope.thetaa=10'),
     ["model.backbone.rope.thetaa: MixedRoPE takes no argument 'thetaa' "
      "(did you mean 'theta'?)"]),
    ('train-batch-size-zero',
     train(OPT, '{data}', 'train_dataloader.batch_size=0'),
     ['train_dataloader.batch_size=0']),
    ('train-num-classes-below-dataset',
     train(OPT, '{data}', 'model.decode_head.num_classes=2'),
     ['model.decode_head.num_classes=2', '6 classes']),
    ('train-coco-without-annotations',
     ('tools/train.py', DET, '--work-dir', '{run}', OPT,
      'train_dataloader.dataset.data_root={mini}/coco/',
      'train_dataloader.dataset.ann_file={no_anns}'),
     ['{no_anns}', 'no annotations']),
    ('train-resume-nothing',
     ('tools/train.py', SEG, '--work-dir', '{logs}', '--resume'),
     ['--resume: nothing to resume in {logs}', '--auto-resume']),
    ('test-work-dir-of-a-running-training',
     ('tools/test.py', SEG, '{train_ckpt}', '--work-dir', '{busy}', OPT,
      '{data}'),
     ['work dir {busy} is in use by another run (pid {pid}']),
    ('train-data-root-missing',
     train(OPT, 'train_dataloader.dataset.data_root={missing}/'),
     ['{missing}']),
    ('test-missing-checkpoint', evaluate('{missing}'),
     ['checkpoint not found: {missing}']),
    ('test-truncated-checkpoint', evaluate('{trunc}'),
     ['checkpoint {trunc} cannot be read: truncated']),
    ('test-text-checkpoint', evaluate('{text}'),
     ['checkpoint {text} cannot be read: not a PyTorch checkpoint']),
    ('test-empty-checkpoint', evaluate('{empty}'),
     ['checkpoint {empty} cannot be read: the file is empty']),
    ('test-untrusted-checkpoint', evaluate('{evil}', OPT, '{data}'),
     ['refusing to load {evil}', 'posix.system']),
    ('test-list-checkpoint', evaluate('{as_list}', OPT, '{data}'),
     ['{as_list} holds a list, not a checkpoint']),
    ('test-out-type-rejected',
     evaluate('{train_ckpt}', OPT, '{data}', 'model.backbone.out_type=tokens'),
     ["RoPEVisionTransformer rejected", "'tokens'"]),
    ('test-fails-in-a-trained-work-dir',
     ('tools/test.py', SEG, '{train_ckpt}', '--work-dir', '{used}', OPT,
      '{data}', 'model.backbone.out_type=tokens'),
     ["RoPEVisionTransformer rejected", "'tokens'"]),
    ('mmpos2backbone-truncated',
     ('tools/model_converters/mmpos2backbone.py', '{trunc}', '{root}/o.pth'),
     ['checkpoint {trunc} cannot be read: truncated']),
    ('mmpos2backbone-text',
     ('tools/model_converters/mmpos2backbone.py', '{text}', '{root}/o.pth'),
     ['{text} cannot be read: not a PyTorch checkpoint']),
    ('mmpos2backbone-untrusted',
     ('tools/model_converters/mmpos2backbone.py', '{evil}', '{root}/o.pth'),
     ['refusing to load {evil}']),
    ('mmpos2backbone-output-exists',
     ('tools/model_converters/mmpos2backbone.py', '{train_ckpt}',
      '{exists}'), ['{exists} exists; pass --force']),
    ('mmpos2backbone-no-backbone',
     ('tools/model_converters/mmpos2backbone.py', '{heads_only}',
      '{root}/o.pth'), ["no 'backbone.' keys", "['head']"]),
    ('timm2mmpos-truncated',
     ('tools/model_converters/timm2mmpos.py', '{trunc}', '{root}/o.pth'),
     ['checkpoint {trunc} cannot be read: truncated']),
    ('timm2mmpos-missing',
     ('tools/model_converters/timm2mmpos.py', '{missing}', '{root}/o.pth'),
     ['checkpoint not found: {missing}']),
    ('rope_vit_official2mmpos-empty',
     ('tools/model_converters/rope_vit_official2mmpos.py', '{empty}',
      '{root}/o.pth'),
     ['checkpoint {empty} cannot be read: the file is empty']),
    ('make_mini_data-non-empty-target',
     ('tools/misc/make_mini_data.py', '{target}'),
     ['{target}/coco', '--force']),
    ('validate_dataset-missing-config',
     ('tools/misc/validate_dataset.py', '{missing}.py'),
     ['config file not found: {missing}.py']),
    ('gen_tables-missing-manifest',
     ('tools/paper_tables/gen_tables.py', '{missing}.yaml'),
     ['{missing}.yaml']),
    ('paper_tables-run-broken-manifest',
     ('tools/paper_tables/run.py', '{manifest}', '--dry-run'),
     ['{manifest}']),
    ('attention_stats-truncated',
     ('tools/analysis_tools/attention_stats.py', SEG, '--checkpoint',
      '{trunc}', '--img-dir', '{logs}', '--out-dir', '{root}/out'),
     ['checkpoint {trunc} cannot be read: truncated']),
    ('attention_nmi-untrusted',
     ('tools/analysis_tools/attention_nmi.py', SEG, '--checkpoint', '{evil}',
      '--img-dir', '{logs}', '--out-dir', '{root}/out'),
     ['refusing to load {evil}']),
    ('rope_fourier-layer-out-of-range',
     ('tools/analysis_tools/rope_fourier.py', '--config', SEG, '--layer',
      '99', '--out-dir', '{root}/out'), ['--layer 99']),
    ('qbheat_spectrum-truncated',
     ('tools/analysis_tools/qbheat_spectrum.py', '{trunc}', '--out',
      '{root}/s.png'), ['checkpoint {trunc} cannot be read: truncated']),
    ('multires_eval-text',
     ('tools/analysis_tools/multires_eval.py', CLS, '{text}', '--out-dir',
      '{root}/out'), ['{text} cannot be read: not a PyTorch checkpoint']),
    ('position_linear_probe-empty',
     ('tools/analysis_tools/position_linear_probe.py', DROPPOS, '{empty}',
      '--images', '{mini}/unlabeled'), ['{empty}', 'the file is empty']),
    ('droppos_position_acc-truncated',
     ('tools/analysis_tools/droppos_position_acc.py', DROPPOS, '{trunc}'),
     ['checkpoint {trunc} cannot be read: truncated']),
    ('infer-missing-image',
     ('tools/infer.py', SEG, '{train_ckpt}', '{missing}.jpg', '--out-dir',
      '{root}/out'), ['image not found: {missing}.jpg']),
    ('infer-backbone-only-checkpoint',
     ('tools/infer.py', SEG, '{train_ckpt}', '{photo}', '--out-dir',
      '{root}/out'), ['{train_ckpt}', 'holds only backbone weights',
                      'EncoderDecoder']),
    ('infer-corrupt-image',
     ('tools/infer.py', SEG, '{seg_model}', '{corrupt}', '--out-dir',
      '{root}/out'), ['cannot read image {corrupt}']),
    ('extract_features-layer-out-of-range',
     ('tools/analysis_tools/extract_features.py', CLS, '{cls_backbone}',
      '{photo}', '--layers', '99', '--out-dir', '{root}/out'),
     ['--layers 99']),
    ('feature_pictures-layer-out-of-range',
     ('tools/analysis_tools/feature_pictures.py', CLS, '{cls_backbone}',
      '{photo}', '--layers', '99', '--out-dir', '{root}/out'),
     ['--layers 99']),
    ('infer-truncated-checkpoint',
     ('tools/infer.py', SEG, '{trunc}', '{photo}', '--out-dir',
      '{root}/out'), ['{trunc}', 'truncated']),
    ('knn_eval-truncated',
     ('tools/analysis_tools/knn_eval.py', CLS, '{trunc}', '--data-root',
      '{mini}/cls', '--work-dir', '{root}/out'), ['{trunc}', 'truncated']),
    ('extract_features-empty',
     ('tools/analysis_tools/extract_features.py', CLS, '{empty}', '{photo}',
      '--out-dir', '{root}/out'), ['{empty}', 'empty']),
    ('feature_pictures-untrusted',
     ('tools/analysis_tools/feature_pictures.py', CLS, '{evil}', '{photo}',
      '--out-dir', '{root}/out'), ['refusing to load {evil}']),
    ('droppos_positions-not-droppos',
     ('tools/analysis_tools/droppos_positions.py', CLS, '{train_ckpt}',
      '{photo}', '--out', '{root}/p.png'), ['is not a DropPos model']),
    ('linear_seg_probe-missing-backbone',
     ('tools/analysis_tools/linear_seg_probe.py', SEG, '{missing}',
      '--work-dir', '{root}/out'),
     ['backbone checkpoint not found: {missing}']),
    ('rope_vit2onnx-truncated',
     ('tools/deployment/rope_vit2onnx.py', '{trunc}', '{root}/m.onnx',
      '--size', '32', '32'), ['{trunc}']),
    ('rope_vit2onnx-output-exists',
     ('tools/deployment/rope_vit2onnx.py', '{train_ckpt}', '{exists}',
      '--size', '32', '32'), ['{exists} exists; pass --force']),
    ('dinov3_official2mmpos-truncated',
     ('tools/model_converters/dinov3_official2mmpos.py', '{trunc}',
      '{root}/o.pth'), ['checkpoint {trunc} cannot be read: truncated']),
    ('plot_curves-no-logs',
     ('tools/analysis_tools/plot_curves.py', '{logs}', '--out-dir',
      '{root}/out'), ['{logs}: no <timestamp>/vis_data/scalars.json']),
]
if not torch.cuda.is_available():
    CASES += [
        ('train-amp-without-cuda', train('--amp'), ['--amp needs a CUDA']),
        ('benchmarks-run-cuda-device',
         ('benchmarks/run.py', '--device', 'cuda', '--out', '{root}/b'),
         ['device cuda: CUDA is not available'], 2),
    ]

_MODULES = {}


def tool_module(path):
    """The tool at ``path`` imported once (as ``python path`` would run
    it, minus ``__main__``)."""
    if path not in _MODULES:
        folder = str(REPO / os.path.dirname(path))
        if folder not in sys.path:  # benchmarks/run.py imports _timing
            sys.path.insert(0, folder)
        spec = importlib.util.spec_from_file_location(
            'sweep_' + path.replace('/', '_')[:-3], REPO / path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        _MODULES[path] = module
    return _MODULES[path]


def snapshot(root):
    """Every file and folder under ``root`` with a digest of its bytes."""
    state = {}
    for folder, dirs, files in os.walk(root):
        state[folder] = 'dir'
        for name in files:
            path = os.path.join(folder, name)
            with open(path, 'rb') as f:
                state[path] = hashlib.sha1(f.read()).hexdigest()
    return state


def run_in_process(argv, capsys, monkeypatch):
    """``(exit status, stderr lines)`` of ``main(argv[1:])`` of the tool
    ``argv[0]``; a message passed to ``SystemExit`` counts as stderr."""
    monkeypatch.setattr(sys, 'argv', [str(REPO / argv[0])])
    try:
        tool_module(argv[0]).main(list(argv[1:]))
        status, message = 0, None
    except SystemExit as exit_:
        status = 1 if isinstance(exit_.code, str) else exit_.code
        message = exit_.code if isinstance(exit_.code, str) else None
    err = capsys.readouterr().err
    lines = err.splitlines() + ([message] if message else [])
    return status, lines


@pytest.mark.parametrize('case', CASES, ids=[c[0] for c in CASES])
def test_bad_input_table(case, inputs, checkpoints, mini_data, capsys,
                         monkeypatch):
    name, argv, names, *status = case
    expected_status = status[0] if status else 1
    values = dict(vars(inputs), **vars(checkpoints), pid=os.getpid(),
                  mini=mini_data)
    data = [f'{o}' for o in data_root_options(mini_data, 'ade')] + [
        f'experiment_name=sweep_{name}', f'visualizer.name=sweep_{name}']
    args = []
    for arg in argv:
        args += data if arg == '{data}' else [arg.format(**values)]
    # mmengine logs to the 'current' logger, whose stream is the sys.stdout
    # of the test that made it; a fresh one writes to this test's.
    MMLogger.get_instance(f'sweep_{name}')
    before = snapshot(inputs.root)
    with work_dir_lock(str(inputs.busy)):  # a run holding busy/
        status, lines = run_in_process(args, capsys, monkeypatch)

    prog = os.path.basename(argv[0])
    errors = [line for line in lines if line.startswith(f'{prog}: error: ')]
    assert status == expected_status, lines
    assert len(errors) == 1, lines
    assert not any("Traceback" in line for line in lines), lines
    if expected_status == 1:  # argparse adds its usage lines to exit 2
        assert lines[-1] == errors[0] and '\n' not in errors[0]
    for part in names:
        assert part.format(**values) in errors[0]
    assert snapshot(inputs.root) == before


# The real processes ------------------------------------------------------

def test_processes_exit_with_one_line(inputs):
    """``python tools/test.py`` on a truncated checkpoint (the issue's
    659-line traceback): one line, status 1; ``MMPOS_DEBUG=1`` shows the
    traceback."""
    command = ('tools/test.py', SEG, inputs.trunc, '--work-dir', inputs.run)
    result = run_tool(*command, env=QUIET)
    assert result.returncode == 1
    assert 'Traceback' not in result.stderr
    assert result.stderr.strip().splitlines()[-1] == (
        f'test.py: error: checkpoint {inputs.trunc} cannot be read: '
        'truncated: a zip archive without its end '
        f'({inputs.trunc.stat().st_size} bytes; an interrupted save or a '
        'full disk?)')
    result = run_tool(*command, env=dict(QUIET, MMPOS_DEBUG='1'))
    assert result.returncode == 1
    assert 'Traceback' in result.stderr
    assert result.stderr.strip().splitlines()[-1].startswith(
        'mmpos.errors.CheckpointReadError: checkpoint ')
    assert not inputs.run.exists()


def test_a_type_no_module_registered_is_named(tmp_path, mini_data):
    """A config whose dataset type no imported module registers (the
    demo linear probe without its custom_imports, in a fresh process): the
    line names the key and the registry, not ``_scope_``."""
    result = run_tool(
        'tools/train.py', LINEAR, '--work-dir', tmp_path / 'run',
        '--cfg-options', *data_root_options(mini_data, 'ade'),
        'train_dataloader.dataset.type=NoSuchADEDataset', env=QUIET)
    assert result.returncode == 1
    line = result.stderr.strip().splitlines()[-1]
    assert line.startswith(f"train.py: error: {LINEAR}: "
                           "train_dataloader.dataset.type="
                           "'NoSuchADEDataset' is not registered in "
                           "dataset (did you mean"), result.stderr[-3000:]
    assert '_scope_' not in line and 'Traceback' not in result.stderr
    assert not (tmp_path / 'run').exists()


# Atomic checkpoint saves ---------------------------------------------------

class Toy(nn.Module):

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(64, 64)


def test_full_disk_during_a_save_keeps_the_old_checkpoint(tmp_path,
                                                          monkeypatch):
    """mmengine's save_checkpoint (what Runner.save_checkpoint calls) on a
    disk that fills up: the previous file stays intact, no partial file."""
    import errno

    from mmengine.runner.checkpoint import save_checkpoint

    import mmpos.checkpoint.write as checkpoint_write
    from mmpos.checkpoint import use_safe_io
    use_safe_io()
    path = tmp_path / 'iter_8.pth'
    save_checkpoint({'state_dict': Toy().state_dict()}, str(path))
    before = path.read_bytes()

    def full_disk(fd):
        raise OSError(errno.ENOSPC, 'No space left on device')

    monkeypatch.setattr(checkpoint_write.os, 'fsync', full_disk)
    with pytest.raises(OSError, match='No space left'):
        save_checkpoint({'state_dict': Toy().state_dict()}, str(path))
    assert path.read_bytes() == before
    assert os.listdir(tmp_path) == ['iter_8.pth']


KILLED_SAVE = '''
import os, signal, sys
import torch
from mmengine.model import BaseModel
from mmengine.runner import Runner
import mmpos.checkpoint.write as checkpoint_write
from mmpos.checkpoint import use_safe_io


class Model(BaseModel):
    def __init__(self):
        super().__init__()
        self.w = torch.nn.Parameter(torch.ones(256, 256))

    def forward(self, inputs, data_samples=None, mode='loss'):
        return dict(loss=(self.w * inputs.mean()).square().mean())


replace = os.replace
saves = []


def killed_on_second_save(src, dst):
    saves.append(dst)
    if len(saves) == 2:  # the data is written, the rename has not happened
        os.kill(os.getpid(), signal.SIGKILL)
    replace(src, dst)


checkpoint_write.os.replace = killed_on_second_save
use_safe_io()
Runner(model=Model(), work_dir=sys.argv[1],
       train_dataloader=dict(dataset=[torch.ones(1)] * 8, batch_size=1,
                             sampler=dict(type='DefaultSampler')),
       train_cfg=dict(by_epoch=False, max_iters=4),
       optim_wrapper=dict(optimizer=dict(type='SGD', lr=0.1)),
       default_hooks=dict(checkpoint=dict(type='CheckpointHook', interval=1,
                                          by_epoch=False))).train()
'''


def test_a_run_killed_during_a_save_resumes_from_the_last_complete_one(
        tmp_path):
    """SIGKILL while ``iter_2.pth`` is being saved by a real Runner: the
    newest checkpoint on disk and in ``last_checkpoint`` is the complete
    ``iter_1.pth``, which ``--resume`` takes."""
    from mmpos.checkpoint import checkpoint_problem
    from mmpos.guardrails.launch import resume_checkpoint
    work_dir = tmp_path / 'run'
    result = subprocess.run([sys.executable, '-c', KILLED_SAVE, work_dir],
                            cwd=REPO, capture_output=True, text=True,
                            env={**os.environ, **QUIET}, timeout=300)
    assert result.returncode == -signal.SIGKILL, result.stderr[-2000:]
    checkpoints = sorted(p.name for p in work_dir.glob('iter_*.pth'))
    assert checkpoints == ['iter_1.pth']
    assert checkpoint_problem(work_dir / 'iter_1.pth') is None
    # the killed save's temporary file: hidden, never the newest checkpoint
    assert [p.name.startswith('.iter_2.pth.') for p in work_dir.glob('.*')
            ] == [True]
    assert resume_checkpoint(str(work_dir)) == str(work_dir / 'iter_1.pth')


def test_json_dumps_are_atomic_too(tmp_path):
    """mmengine.dump writes through the same backend."""
    import mmengine
    from mmengine.fileio import get_file_backend

    from mmpos.checkpoint import AtomicLocalBackend, use_safe_io
    use_safe_io()
    assert isinstance(get_file_backend(str(tmp_path)), AtomicLocalBackend)
    mmengine.dump({'a': 1}, str(tmp_path / 'm.json'))
    assert json.loads((tmp_path / 'm.json').read_text()) == {'a': 1}
    assert os.listdir(tmp_path) == ['m.json']
