"""Online dense probes of the backbone during pretraining: the linear depth
probe (:mod:`mmpos.evaluation.depth_probe`) and in-context dense retrieval
(:mod:`mmpos.evaluation.dense_retrieval`), every ``interval`` iterations and
after the last one.

They are :class:`~mmpos.engine.hooks.online_probe.OnlineProbeHook`\\ s with
another probe: the same schedule, the same backbone (the EMA teacher's where
the algorithm has one), the same ``{train_data_root}`` placeholder, and the
same guarantees -- features under ``torch.no_grad`` in eval mode, every
random generator saved and restored around the probe (the depth head's
init and batch draws use a private, seeded generator), no training
dataloader, nothing to checkpoint -- so a run logs the same losses with
and without them, and a resumed run the same as an uninterrupted one.

The probed features are those of the backbone's own outputs
(``out_indices``): for the mini ViTs, the last block (DINOv2's "lin. 1").
Logged scalars (``vis_data/scalars.json`` and the training log line):
``depth_rmse``, ``depth_abs_rel``, ``depth_d1`` and ``retrieval_miou``.

With ``max_tokens`` (e.g. on a NaFlex pretraining, ``configs/naflex/``)
they probe NaFlex maps, as the probes' tools' ``--max-tokens`` do: each
image at its aspect ratio within that many patches (the NaFlex batches
made once before training), its depth or label map resized to the same
size (:mod:`mmpos.evaluation.naflex`); a backbone without NaFlex maps (a
RoPE ViT with ``out_type='raw'``) is refused in one line before
training. Without it they probe squares of ``img_size``, NaFlex runs
included (their RoPE ViT takes both).
"""
import time
from typing import Optional

from mmpos.apis.features import IMAGENET_MEAN, IMAGENET_STD
from mmpos.errors import UnsupportedModelError
from mmpos.registry import HOOKS
from .online_probe import OnlineProbeHook, ProbeSetMissing
from .rng_state import get_rng_state, set_rng_state


class _DenseProbeHook(OnlineProbeHook):
    """Reads its two splits once before training (images preprocessed as
    the training model's data preprocessor says) with :meth:`read_split`
    and runs :meth:`evaluate` on their features."""
    name = ''

    @property
    def what(self) -> str:  # named when the probe is switched off
        return f'the online {self.name}'

    def __init__(self, train_dataset: dict, val_dataset: dict,
                 interval: int = 1000, img_size=None, batch_size: int = 64,
                 max_tokens: Optional[int] = None):
        if interval < 0:
            raise ValueError(f'interval must be >= 0, got {interval}')
        if max_tokens is not None and max_tokens < 1:
            raise ValueError(f'{type(self).__name__}: max_tokens must be '
                             f'>= 1, got {max_tokens}')
        self.max_tokens = max_tokens
        self.datasets = dict(train=dict(train_dataset),
                             val=dict(val_dataset))
        self.interval = interval
        self.img_size = img_size
        self.batch_size = batch_size
        self._data: Optional[dict] = None

    def read_split(self, dataset: dict, size, naflex=None):
        """``(image paths, targets)`` of one split; ``naflex = (patch size,
        max_tokens)``: targets at each image's NaFlex size, a list."""
        raise NotImplementedError

    def evaluate(self, feats: dict) -> dict:
        """Logged ``{name: value}`` of the split features."""
        raise NotImplementedError

    def before_train(self, runner) -> None:
        if not self.interval:
            return
        from mmpos.evaluation.frozen import load_inputs
        size, mean, std = self.input_settings(runner)
        naflex = self.naflex_settings(runner)
        try:
            datasets = {split: self.resolve_dataset(runner, split, cfg)
                        for split, cfg in self.datasets.items()}
        except ProbeSetMissing as missing:  # observe, never block
            self.switch_off(runner, missing)
            return
        state = get_rng_state()
        try:
            self._data = {}
            for split, cfg in datasets.items():
                paths, targets = self.read_split(cfg, size, naflex)
                norm = (mean, std) if mean is not None else ()
                self._data[split] = (load_inputs(paths, size, *norm) if (
                    naflex is None) else self.naflex_batches(
                        paths, naflex[0][0], *norm), targets)
        finally:
            set_rng_state(state)
        at = (f'{size} px' if naflex is None else 'their aspect ratios '
              f'within {self.max_tokens} patches')
        runner.logger.info(
            f'{type(self).__name__}: {self.name} on '
            f'{len(self._data["train"][1])} / {len(self._data["val"][1])} '
            f'images at {at} every {self.interval} iterations')

    def naflex_settings(self, runner):
        """``None`` without ``max_tokens``, else ``(the probed backbone's
        patch size (p_h, p_w), max_tokens)``; a backbone without NaFlex
        maps is refused (one line)."""
        if self.max_tokens is None:
            return None
        from mmpos.evaluation.naflex import check_naflex_backbone, \
            naflex_patch
        with self.probing(runner) as (backbone, _, _):
            try:
                check_naflex_backbone(backbone)
            except UnsupportedModelError as error:
                raise UnsupportedModelError(
                    f'{type(self).__name__} max_tokens={self.max_tokens}: '
                    f'{error}') from None
            return naflex_patch(backbone), self.max_tokens

    def naflex_batches(self, paths, patch_size: int,
                       mean=IMAGENET_MEAN, std=IMAGENET_STD) -> list:
        """The images at ``paths`` as padded NaFlex batches of
        ``batch_size`` (:func:`~mmpos.evaluation.naflex.naflex_inputs`),
        made once."""
        from mmpos.apis.features import read_images
        from mmpos.evaluation.naflex import naflex_inputs
        return [naflex_inputs(read_images(paths[start:start +
                                                self.batch_size]),
                              patch_size, self.max_tokens, mean, std)
                for start in range(0, len(paths), self.batch_size)]

    def probe(self, runner) -> dict:
        """Run the probe now; returns the logged values."""
        from mmpos.evaluation.dense import dense_features
        from mmpos.evaluation.naflex import naflex_batch_features
        start = time.perf_counter()
        with self.probing(runner) as (backbone, which, device):
            feats = {split: dense_features(backbone, inputs,
                                           self.batch_size, device)
                     if self.max_tokens is None else
                     naflex_batch_features(backbone, inputs, device)
                     for split, (inputs, _) in self._data.items()}
            results = self.evaluate(feats)
        for key, value in results.items():
            runner.message_hub.update_scalar(f'train/{key}', value)
        runner.logger.info(
            f'{type(self).__name__}: iter {runner.iter + 1}, {which} '
            'backbone: ' + ', '.join(f'{k} {v:.4f}'
                                     for k, v in results.items()) +
            f' ({time.perf_counter() - start:.2f} s)')
        return results


@HOOKS.register_module()
class OnlineDepthProbeHook(_DenseProbeHook):
    """Log the linear depth probe's RMSE, abs-rel and delta < 1.25 of the
    current backbone every ``interval`` iterations.

    Args:
        train_dataset / val_dataset: mmseg depth dataset configs
            (``NYUDataset`` layout; ``{train_data_root}`` allowed).
        interval, img_size, batch_size: see :class:`OnlineProbeHook`.
        max_tokens: NaFlex maps within this many patches per image (module
            docstring); ``None``: squares of ``img_size``.
        depth_rescale_factor: metres per depth-PNG unit (NYU: ``1e-3``).
        cls_token: concatenate the class token to the patch tokens.
        seed: seed of the head's init and batch draws.
        **probe: :func:`mmpos.evaluation.depth_probe.run_depth_probe`
            settings (head, schedule, ``min_depth_eval`` ...), default
            DINOv2's head with a 300-iteration schedule.
    """
    name = 'linear depth probe'
    hint = ('mini data: python tools/misc/make_mini_data.py data/mini '
            '--which nyu --img-size 64')

    def __init__(self, train_dataset: dict, val_dataset: dict,
                 interval: int = 1000, img_size=None, batch_size: int = 64,
                 depth_rescale_factor: float = 1e-3, cls_token: bool = True,
                 seed: int = 0, max_tokens: Optional[int] = None, **probe):
        from mmpos.evaluation.depth_probe import (EVAL_KEYS, FIT_KEYS,
                                                  HEAD_KEYS)
        super().__init__(train_dataset, val_dataset, interval, img_size,
                         batch_size, max_tokens)
        unknown = sorted(set(probe) - set(HEAD_KEYS + FIT_KEYS + EVAL_KEYS))
        if unknown:
            raise ValueError(f'OnlineDepthProbeHook: unknown settings '
                             f'{unknown}')
        self.depth_rescale_factor = depth_rescale_factor
        self.cls_token = cls_token
        self.seed = seed
        self.settings = dict(dict(iters=300), **probe)

    def read_split(self, dataset: dict, size, naflex=None):
        from mmpos.evaluation.depth_probe import depth_data
        return depth_data(dataset, size, self.depth_rescale_factor,
                          naflex=naflex)

    def evaluate(self, feats: dict) -> dict:
        from mmpos.evaluation.depth_probe import run_depth_probe
        metrics, _ = run_depth_probe(
            feats['train'], self._data['train'][1], feats['val'],
            self._data['val'][1], self.seed, self.cls_token,
            **self.settings)
        return {f'depth_{k}': float(metrics[k])
                for k in ('rmse', 'abs_rel', 'd1')}


@HOOKS.register_module()
class OnlineRetrievalProbeHook(_DenseProbeHook):
    """Log the in-context dense retrieval mIoU (Hummingbird) of the current
    backbone every ``interval`` iterations.

    Args:
        train_dataset / val_dataset: mmseg segmentation dataset configs
            (memory and queries; ``{train_data_root}`` allowed).
        interval, img_size, batch_size: see :class:`OnlineProbeHook`.
        max_tokens: NaFlex maps within this many patches per image (module
            docstring); ``None``: squares of ``img_size``.
        k, temperature: neighbours and softmax temperature (Open
            Hummingbird: 30, 0.02).
    """
    name = 'in-context dense retrieval'
    hint = ('mini data: python tools/misc/make_mini_data.py data/mini '
            '--which stuff --img-size 64')

    def __init__(self, train_dataset: dict, val_dataset: dict,
                 interval: int = 1000, img_size=None, batch_size: int = 64,
                 k: int = 30, temperature: float = 0.02,
                 max_tokens: Optional[int] = None):
        super().__init__(train_dataset, val_dataset, interval, img_size,
                         batch_size, max_tokens)
        self.k = k
        self.temperature = temperature

    def read_split(self, dataset: dict, size, naflex=None):
        from mmpos.evaluation.dense_retrieval import seg_data
        paths, labels, classes, ignore = seg_data(dataset, size, naflex)
        self.classes, self.ignore_index = classes, ignore
        return paths, labels

    def evaluate(self, feats: dict) -> dict:
        from mmpos.evaluation.dense_retrieval import hummingbird_miou
        metrics = hummingbird_miou(
            feats['train']['patch'][-1], self._data['train'][1],
            feats['val']['patch'][-1], self._data['val'][1], self.classes,
            self.k, self.temperature, self.ignore_index)
        return dict(retrieval_miou=float(metrics['mIoU']))
