"""kNN probe of the backbone during pretraining, without touching training.

Every ``interval`` iterations and after the last one, the hook classifies a
small labelled set with DINO's weighted kNN
(:mod:`mmpos.evaluation.knn`) on the frozen features of the current
backbone (the EMA teacher's where the algorithm has one: DINOv2 / ICPF
``teacher``, CR2PQ's EMA ``target_generator``) and logs the top-1 accuracy
of each feature (``knn_cls_top1``: class token, ``knn_avg_top1``: mean
patch token) through the message hub, so it appears in the training log
line of that iteration (and, as the last measured value, in the later
ones) and in ``vis_data/scalars.json``.

Training is left exactly as it would be without the hook:

* features are computed under ``torch.no_grad`` in eval mode (no dropout,
  drop path or BN statistics update), the module's train / eval state is
  put back afterwards, and no gradient, optimizer or parameter is touched;
* every random generator the probe could consume (Python, numpy, torch CPU
  and CUDA: :func:`mmpos.engine.hooks.rng_state.get_rng_state`) is saved
  before and restored after it; the training dataloader is not used (the
  probe images are read once, before training, without a DataLoader).

So a run with the probe logs the same losses as one without it, and a
resumed run the same as an uninterrupted one (tested). The probe has no
state of its own to checkpoint.

Under FSDP (``configs/_base_/fsdp.py``) every process runs the probe on the
same images: the root unit's parameters (patch embedding, tokens, norm) are
gathered read-only around it (``summon_full_params(recurse=False,
writeback=False)``) and each block unit gathers its own in its forward, so
the collectives match across processes; nothing is written back.

The probe feeds whole images through the backbone alone. For ICPF, whose
positions live in the positional field outside the backbone (converted into
the APE by ``mmpos2backbone.py``), the probed backbone therefore sees its
own untrained ``pos_embed``; its numbers track the content features only.

The labelled sets are mmpretrain classification dataset configs
(``train_dataset``: the kNN memory, ``val_dataset``: the queries). In their
``data_root``, ``{train_data_root}`` stands for the ``data_root`` of the
training dataset, so a config can place the probe set beside the
pretraining images (the mini configs: ``'{train_data_root}/../cls'``).

A monitor observes training and never blocks it: when that folder does not
exist (a run on a user's own images), the probe logs one warning naming the
path, how to write the set and how to switch the probe off, and training
goes on without it. Anything else (a probe set that exists but cannot be
read, a bad argument) is still an error.
"""
import os.path as osp
import time
from contextlib import contextmanager, nullcontext
from typing import Optional, Sequence

import torch
from mmengine.hooks import Hook
from mmengine.model import BaseAveragedModel, is_model_wrapper
from torch.distributed.fsdp import FullyShardedDataParallel as FSDP

from mmpos.registry import HOOKS
from .rng_state import get_rng_state, set_rng_state


class ProbeSetMissing(FileNotFoundError):
    """The ``data_root`` of a probe set does not exist
    (:meth:`OnlineProbeHook.resolve_dataset`)."""


def probe_backbone(model):
    """``(backbone, 'teacher' | 'student')``: the EMA teacher's backbone of
    ``model`` where it has one (an averaged model in ``teacher`` or
    ``target_generator`` wrapping the backbone or a module dict with one),
    else ``model.backbone``."""
    for name in ('teacher', 'target_generator'):
        ema = getattr(model, name, None)
        if not isinstance(ema, BaseAveragedModel):
            continue
        inner = ema.module
        if isinstance(inner, torch.nn.ModuleDict) and 'backbone' in inner:
            return inner['backbone'], 'teacher'
        if hasattr(inner, 'backbone'):
            return inner.backbone, 'teacher'
        if type(inner) is type(model.backbone):
            return inner, 'teacher'
    return model.backbone, 'student'


@HOOKS.register_module()
class OnlineProbeHook(Hook):
    """Log kNN top-1 of the current backbone every ``interval`` iterations.

    Args:
        train_dataset: labelled kNN memory (mmpretrain dataset config).
        val_dataset: labelled queries (mmpretrain dataset config).
        interval: iterations between probes; also probes after the last.
            ``0`` turns the probe off (nothing is read or run), e.g.
            ``--cfg-options default_hooks.online_probe.interval=0``
            (mmengine refuses ``None`` for a hook it does not define). A
            missing probe set switches it off too, with one warning.
        img_size: side (or ``(h, w)``) the probe images are resized to;
            default: the backbone's ``img_size``.
        k: neighbours; temperature: ``T`` of the ``exp(s / T)`` votes.
        features: ``'cls'`` and / or ``'avg'`` (those the backbone has).
        batch_size: images per backbone forward.
    """
    priority = 'NORMAL'  # before LoggerHook, which logs the iteration
    hint = ('mini configs: python tools/misc/make_mini_data.py data/mini '
            '--which cls')
    what = 'the online kNN probe'  # named when it is switched off

    def __init__(self,
                 train_dataset: dict,
                 val_dataset: dict,
                 interval: int = 1000,
                 img_size=None,
                 k: int = 20,
                 temperature: float = 0.07,
                 features: Sequence[str] = ('cls', 'avg'),
                 batch_size: int = 64):
        if interval < 0:
            raise ValueError(f'interval must be >= 0, got {interval}')
        unknown = sorted(set(features) - {'cls', 'avg'})
        if unknown or not features:
            raise ValueError(f"features must be among 'cls', 'avg', got "
                             f'{list(features)}')
        self.datasets = dict(train=dict(train_dataset),
                             val=dict(val_dataset))
        self.interval = interval
        self.img_size = img_size
        self.k = k
        self.temperature = temperature
        self.features = tuple(features)
        self.batch_size = batch_size
        self._data: Optional[dict] = None

    def resolve_dataset(self, runner, split: str, dataset: dict) -> dict:
        """``dataset`` with ``{train_data_root}`` in its ``data_root``
        replaced; a missing ``data_root`` raises :class:`ProbeSetMissing`
        naming it (and ``hint``, how to write the mini set)."""
        root = dataset.get('data_root')
        if root and '{train_data_root}' in root:
            train_root = runner.cfg.train_dataloader.dataset.get('data_root')
            if not train_root:
                raise ValueError(f'{type(self).__name__}: data_root uses '
                                 '{train_data_root}, but the training '
                                 'dataset has no data_root')
            root = osp.normpath(root.format(train_data_root=train_root))
            dataset = dict(dataset, data_root=root)
        if root and not osp.exists(root):
            raise ProbeSetMissing(f'{type(self).__name__}: {split} set not '
                                  f'found: {root} ({self.hint})')
        return dataset

    def switch_off(self, runner, missing: ProbeSetMissing) -> None:
        """Log one warning line: what is missing and how to write it (the
        message of ``missing``), that the hook is off for this run and how
        to switch it off in the config; then switch it off
        (``interval = 0``)."""
        name = type(self).__name__
        off = 'interval=0 in its hook config'
        for key, hook in (runner.cfg.get('default_hooks') or {}).items():
            kind = hook.get('type') if isinstance(hook, dict) else None
            if getattr(kind, '__name__', str(kind)).split('.')[-1] == name:
                off = f'--cfg-options default_hooks.{key}.interval=0'
                break
        runner.logger.warning(f'{missing}; {self.what} is off for this run '
                              f'(switch it off to silence this: {off})')
        self.interval = 0

    def before_train(self, runner) -> None:
        """Read and preprocess the probe images once."""
        if not self.interval:
            return
        from mmpos.evaluation.frozen import dataset_items, load_inputs
        size, mean, std = self.input_settings(runner)
        try:
            datasets = {split: self.resolve_dataset(runner, f'kNN {split}',
                                                    cfg)
                        for split, cfg in self.datasets.items()}
        except ProbeSetMissing as missing:
            self.switch_off(runner, missing)
            return
        state = get_rng_state()  # dataset building must not draw either
        try:
            self._data = {}
            for split, cfg in datasets.items():
                paths, labels, classes = dataset_items(cfg)
                inputs = load_inputs(paths, size, *(
                    (mean, std) if mean is not None else ()))
                self._data[split] = (inputs, labels, len(classes))
        finally:
            set_rng_state(state)
        runner.logger.info(
            f'OnlineProbeHook: kNN (k={self.k}, T={self.temperature}) on '
            f'{len(self._data["train"][1])} / {len(self._data["val"][1])} '
            f'labelled images at {size} px every {self.interval} '
            'iterations')

    def input_settings(self, runner):
        """``(size, mean, std)`` of the probe images: ``img_size`` or the
        backbone's, the model's data preprocessor's normalisation (``None``
        where it has none: the ImageNet values)."""
        model = runner.model.module if is_model_wrapper(
            runner.model) else runner.model
        backbone, _ = probe_backbone(model)
        size = self.img_size or getattr(backbone, 'img_size', None)
        if size is None:
            raise ValueError(f'{type(self).__name__}: '
                             f'{type(backbone).__name__} has no img_size; '
                             'set img_size')
        size = tuple(size) if isinstance(size, (list, tuple)) else int(size)
        pre = model.data_preprocessor
        mean = pre.mean.flatten().tolist() if hasattr(pre, 'mean') else None
        std = pre.std.flatten().tolist() if hasattr(pre, 'std') else None
        return size, mean, std

    @staticmethod
    @contextmanager
    def probing(runner):
        """Context of a probe: yields ``(backbone, 'teacher' | 'student',
        device)``; every random generator is saved before and restored
        after, and under FSDP the root unit's parameters are gathered
        read-only (see the module docstring)."""
        model = runner.model.module if is_model_wrapper(
            runner.model) else runner.model
        backbone, which = probe_backbone(model)
        device = next(backbone.parameters()).device
        root_params = FSDP.summon_full_params(
            runner.model, recurse=False, writeback=False) if isinstance(
                runner.model, FSDP) else nullcontext()
        state = get_rng_state()
        try:
            with root_params:
                yield backbone, which, device
        finally:
            set_rng_state(state)

    def after_train_iter(self, runner, batch_idx: int, data_batch=None,
                         outputs=None) -> None:
        if not self.interval:
            return
        if self.every_n_train_iters(runner, self.interval) or \
                self.is_last_train_iter(runner):
            self.probe(runner)

    def probe(self, runner) -> dict:
        """Run the kNN probe now; returns ``{'knn_<feature>_top1': %}``."""
        from mmpos.evaluation.frozen import batch_features
        from mmpos.evaluation.knn import knn_accuracy
        start = time.perf_counter()
        with self.probing(runner) as (backbone, which, device):
            feats = {split: batch_features(backbone, inputs,
                                           self.batch_size, device)
                     for split, (inputs, _, _) in self._data.items()}
        (_, train_labels, num_classes), (_, val_labels, _) = (
            self._data['train'], self._data['val'])
        num_classes = num_classes or int(train_labels.max()) + 1
        results = {}
        for name in self.features:
            if name not in feats['train']:
                continue
            acc = knn_accuracy(feats['train'][name], train_labels,
                               feats['val'][name], val_labels, num_classes,
                               self.k, self.temperature)
            results[f'knn_{name}_top1'] = acc['top1']
            runner.message_hub.update_scalar(f'train/knn_{name}_top1',
                                             acc['top1'])
        runner.logger.info(
            f'OnlineProbeHook: iter {runner.iter + 1}, {which} backbone: ' +
            ', '.join(f'{k} {v:.2f}' for k, v in results.items()) +
            f' ({time.perf_counter() - start:.2f} s)')
        return results
