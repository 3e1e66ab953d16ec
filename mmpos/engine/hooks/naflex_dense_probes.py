"""The online dense probes (:mod:`.dense_probes`) on NaFlex maps, for a
NaFlex pretraining (``configs/naflex/``): :class:`NaFlexOnlineDepthProbeHook`
and :class:`NaFlexOnlineRetrievalProbeHook` take the arguments of
:class:`~.dense_probes.OnlineDepthProbeHook` and
:class:`~.dense_probes.OnlineRetrievalProbeHook` and ``max_tokens``.

Each probe image is resized at its aspect ratio within ``max_tokens``
patches and the images made into padded NaFlex batches once before
training (:func:`mmpos.evaluation.naflex.naflex_inputs`), its depth or
label map resized (nearest) to the image's NaFlex size; every probe runs
the batches through the backbone and splits the outputs into one map per
image (:func:`mmpos.evaluation.naflex.naflex_batch_features`), and the
depth head (:func:`mmpos.evaluation.depth_probe.run_depth_probe`) and the
unaugmented retrieval memory
(:func:`mmpos.evaluation.dense_retrieval.hummingbird_miou`) take one map
per image, as the probes' tools do with ``--max-tokens``. A backbone
without NaFlex maps (a RoPE ViT with ``out_type='raw'`` has them) is
refused in one line before training. The schedule, the probed backbone,
the saved and restored random generators and the logged scalars are the
square hooks'. (The square hooks run on a NaFlex pretraining too: its RoPE
ViT also takes the square probe images.)
"""
import time

from mmpos.errors import UnsupportedModelError
from mmpos.registry import HOOKS
from .dense_probes import OnlineDepthProbeHook, OnlineRetrievalProbeHook
from .online_probe import ProbeSetMissing
from .rng_state import get_rng_state, set_rng_state


class _NaFlexDenseProbe:
    """Before a square dense probe hook in the bases: its splits read at
    each image's NaFlex size (:meth:`read_naflex_split`) and probed on
    NaFlex maps."""

    def __init__(self, *args, max_tokens: int, **kwargs):
        if max_tokens < 1:
            raise ValueError(f'{type(self).__name__}: max_tokens must be '
                             f'>= 1, got {max_tokens}')
        super().__init__(*args, **kwargs)
        self.max_tokens = max_tokens

    def read_naflex_split(self, dataset: dict, naflex) -> tuple:
        """``(image paths, targets at each image's NaFlex size)`` of one
        split; ``naflex = (patch size (p_h, p_w), max_tokens)``."""
        raise NotImplementedError

    def naflex_settings(self, runner):
        """``(the probed backbone's patch size (p_h, p_w), max_tokens)``; a
        backbone without NaFlex maps is refused (one line)."""
        from mmpos.evaluation.naflex import (check_naflex_backbone,
                                             naflex_patch)
        with self.probing(runner) as (backbone, _, _):
            try:
                check_naflex_backbone(backbone)
            except UnsupportedModelError as error:
                raise UnsupportedModelError(
                    f'{type(self).__name__}: {error}') from None
            return naflex_patch(backbone), self.max_tokens

    def before_train(self, runner) -> None:
        """Read both splits and make their NaFlex batches, once."""
        if not self.interval:
            return
        from mmpos.apis.features import read_images
        from mmpos.evaluation.naflex import naflex_inputs
        naflex = self.naflex_settings(runner)
        _, mean, std = self.input_settings(runner)
        norm = (mean, std) if mean is not None else ()
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
                paths, targets = self.read_naflex_split(cfg, naflex)
                batches = [naflex_inputs(
                    read_images(paths[start:start + self.batch_size]),
                    naflex[0][0], self.max_tokens, *norm)
                           for start in range(0, len(paths),
                                              self.batch_size)]
                self._data[split] = (batches, targets)
        finally:
            set_rng_state(state)
        runner.logger.info(
            f'{type(self).__name__}: {self.name} on '
            f'{len(self._data["train"][1])} / {len(self._data["val"][1])} '
            f'images at their aspect ratios within {self.max_tokens} '
            f'patches every {self.interval} iterations')

    def probe(self, runner) -> dict:
        """Run the probe on NaFlex maps now; returns the logged values."""
        from mmpos.evaluation.naflex import naflex_batch_features
        start = time.perf_counter()
        with self.probing(runner) as (backbone, which, device):
            results = self.evaluate({
                split: naflex_batch_features(backbone, batches, device)
                for split, (batches, _) in self._data.items()})
        for key, value in results.items():
            runner.message_hub.update_scalar(f'train/{key}', value)
        runner.logger.info(
            f'{type(self).__name__}: iter {runner.iter + 1}, {which} '
            f'backbone, NaFlex within {self.max_tokens} patches: ' +
            ', '.join(f'{k} {v:.4f}' for k, v in results.items()) +
            f' ({time.perf_counter() - start:.2f} s)')
        return results


@HOOKS.register_module()
class NaFlexOnlineDepthProbeHook(_NaFlexDenseProbe, OnlineDepthProbeHook):
    """:class:`~.dense_probes.OnlineDepthProbeHook` on NaFlex maps (module
    docstring): its arguments and ``max_tokens``, the patches per image."""

    def read_naflex_split(self, dataset: dict, naflex) -> tuple:
        from mmpos.evaluation.depth_probe import depth_data
        return depth_data(dataset, None, self.depth_rescale_factor,
                          naflex=naflex)


@HOOKS.register_module()
class NaFlexOnlineRetrievalProbeHook(_NaFlexDenseProbe,
                                     OnlineRetrievalProbeHook):
    """:class:`~.dense_probes.OnlineRetrievalProbeHook` on NaFlex maps
    (module docstring): its arguments and ``max_tokens``, the patches per
    image."""

    def read_naflex_split(self, dataset: dict, naflex) -> tuple:
        from mmpos.evaluation.dense_retrieval import seg_data
        paths, labels, self.classes, self.ignore_index = seg_data(
            dataset, None, naflex)
        return paths, labels
