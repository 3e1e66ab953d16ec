"""Log collapse monitors of a pretraining run (:mod:`mmpos.evaluation.health`)."""
import json
import os.path as osp
from typing import Optional

from mmengine.hooks import Hook
from mmengine.model import is_model_wrapper

from mmpos.checkpoint import write_atomically
from mmpos.registry import HOOKS
from .online_probe import OnlineProbeHook, ProbeSetMissing, probe_backbone
from .rng_state import get_rng_state, set_rng_state

HEALTH_FILE = 'health.json'


def read_health(path: str) -> dict:
    """The ``health.json`` at ``path``; a file without ``"centred": true``
    (written before the statistics were centred, so not comparable with
    the current rule) raises a one-line ``ValueError`` naming it."""
    with open(path) as f:
        health = json.load(f)
    if health.get('centred') is not True:
        raise ValueError(f'{path}: written before the collapse statistics '
                         'were centred (no "centred": true); its numbers '
                         'cannot be judged by the current rule: re-run the '
                         'pretraining with HealthMonitorHook')
    return health


@HOOKS.register_module()
class HealthMonitorHook(Hook):
    """Spread, effective rank and cosines of the centred patch tokens
    (:func:`~mmpos.evaluation.health.token_health`) and the teacher
    entropy of the (teacher) backbone on fixed probe images, before
    training and every ``interval`` iterations; the verdict of
    :func:`~mmpos.evaluation.health.collapse_reasons` is logged after the
    last one and written with the history to ``<work_dir>/health.json``
    (written atomically; read it with :func:`read_health`)::

        {"centred": true, "initial": {...},
         "history": [{"iter": i, ...}, ...], "final": {...},
         "num_prototypes": K or null, "collapsed": bool,
         "reasons": [str], "disabled": null}

    ``"centred": true`` marks statistics of centred tokens; files written
    before they were centred lack it and are refused by
    :func:`read_health`. A run resumed from a checkpoint whose monitor
    state is from before (its starting weights' numbers are of raw
    tokens) has no verdict: the monitor switches itself off for the run
    as below, saying why.

    A monitor observes training and never blocks it: when the probe set's
    ``data_root`` does not exist (a run on a user's own images), it logs
    one warning naming the path, how to write the set and how to switch
    the monitor off, writes ``health.json`` at once with ``"disabled"``
    saying why, ``"final": null`` and ``"collapsed": null`` (not measured,
    not healthy), and training goes on. Any other error is raised.

    Args:
        dataset: images to probe (an mmpretrain dataset config; labels are
            not used), e.g. the mini classification set.
        interval: iterations between measurements (and after the last);
            ``0`` turns the monitor off (nothing is read, run or
            written), e.g.
            ``--cfg-options default_hooks.health_monitor.interval=0``.
        num_images: the first ``num_images`` images of ``dataset``.
        img_size: side the images are resized to; default the backbone's
            ``img_size``.
        num_prototypes: ``K`` of a DINO-style head whose method logs
            ``teacher_entropy`` (DINOv2, ICPF); ``None``: no entropy check.

    The measurements draw no random numbers from the run (RNG state saved
    and restored), so a run with the hook trains as one without it.
    """
    priority = 'NORMAL'  # before LoggerHook, which logs the iteration
    hint = OnlineProbeHook.hint  # named when the probe set is missing
    what = 'the collapse monitor'  # named when it is switched off

    def __init__(self,
                 dataset: dict,
                 interval: int = 100,
                 num_images: int = 16,
                 img_size=None,
                 num_prototypes: Optional[int] = None):
        if interval < 0 or num_images < 2:
            raise ValueError(f'HealthMonitorHook: interval must be >= 0 and '
                             f'num_images >= 2, got {interval}, '
                             f'{num_images}')
        self.dataset = dict(dataset)
        self.interval = interval
        self.num_images = num_images
        self.img_size = img_size
        self.num_prototypes = num_prototypes
        self.inputs = None
        self.initial = None
        self.history = []
        self.stale = None  # why a resumed monitor state cannot be used

    @staticmethod
    def _model(runner):
        return runner.model.module if is_model_wrapper(
            runner.model) else runner.model

    def before_save_checkpoint(self, runner, checkpoint: dict) -> None:
        checkpoint['health_monitor'] = dict(initial=self.initial,
                                            history=self.history,
                                            centred=True)

    def after_load_checkpoint(self, runner, checkpoint: dict) -> None:
        state = checkpoint.get('health_monitor')
        if state and state['initial'] and not state.get('centred'):
            self.stale = ('HealthMonitorHook: the resumed checkpoint holds '
                          'the starting weights\' health of raw tokens, '
                          'from before the statistics were centred; '
                          'without their centred numbers there is no '
                          'verdict')
        elif state:  # a resumed run keeps its starting weights' numbers
            self.initial, self.history = state['initial'], state['history']

    def before_train(self, runner) -> None:
        if not self.interval:
            return
        from mmpos.evaluation.frozen import dataset_items, load_inputs
        model = self._model(runner)
        backbone, _ = probe_backbone(model)
        size = self.img_size or getattr(backbone, 'img_size', None)
        if size is None:
            raise ValueError(f'HealthMonitorHook: {type(backbone).__name__} '
                             'has no img_size; set img_size')
        pre = model.data_preprocessor
        if self.stale:
            self._switch_off(runner, self.stale)
            return
        try:  # the online probe's {train_data_root} resolution and check
            dataset = OnlineProbeHook.resolve_dataset(self, runner, 'probe',
                                                      self.dataset)
        except ProbeSetMissing as missing:
            self._switch_off(runner, str(missing))
            return
        state = get_rng_state()
        try:
            paths = dataset_items(dataset)[0][:self.num_images]
            self.inputs = load_inputs(
                paths, size, pre.mean.flatten().tolist(),
                pre.std.flatten().tolist())
            if self.initial is None:
                self.initial = self.measure(runner)
        finally:
            set_rng_state(state)
        runner.logger.info('HealthMonitorHook: initial ' +
                           self._format(self.initial))

    def _switch_off(self, runner, why: str) -> None:
        """Log one warning (``why``, and how to silence it), stop measuring
        and write ``health.json`` saying why: not measured, not healthy."""
        OnlineProbeHook.switch_off(self, runner, why)
        self._write(runner, dict(
            initial=self.initial, history=self.history, final=None,
            num_prototypes=self.num_prototypes, collapsed=None,
            reasons=[], disabled=why))

    def measure(self, runner) -> dict:
        """Health of the current (teacher) backbone on the probe images."""
        from mmpos.apis.features import extract_features
        from mmpos.evaluation.health import token_health
        # RNG untouched; under FSDP the root unit's parameters gathered
        with OnlineProbeHook.probing(runner) as (backbone, _, device):
            feats = extract_features(backbone, self.inputs.to(device))
        if feats['patch_tokens'] is None:
            raise ValueError(f'HealthMonitorHook: {type(backbone).__name__} '
                             'returns no patch tokens')
        health = token_health(feats['patch_tokens'].float().cpu())
        entropy = runner.message_hub.get_scalar('train/teacher_entropy') \
            if 'train/teacher_entropy' in runner.message_hub.log_scalars \
            else None
        if entropy is not None:
            health['teacher_entropy'] = float(entropy.current())
        return health

    @staticmethod
    def _format(health: dict) -> str:
        return ', '.join(f'{k} {v:.3f}' for k, v in health.items())

    def after_train_iter(self, runner, batch_idx: int, data_batch=None,
                         outputs=None) -> None:
        if not self.interval or not (
                self.every_n_train_iters(runner, self.interval)
                or self.is_last_train_iter(runner)):
            return
        health = self.measure(runner)
        for key, value in health.items():
            runner.message_hub.update_scalar(f'train/health_{key}', value)
        self.history.append(dict(iter=runner.iter + 1, **health))
        if self.is_last_train_iter(runner):
            self._verdict(runner, health)

    def _verdict(self, runner, final: dict) -> None:
        from mmpos.evaluation.health import collapse_reasons
        reasons = collapse_reasons(final, self.initial,
                                   final.get('teacher_entropy'),
                                   self.num_prototypes)
        result = dict(initial=self.initial, history=self.history,
                      final=final, num_prototypes=self.num_prototypes,
                      collapsed=bool(reasons), reasons=reasons, disabled=None)
        self._write(runner, result)
        if reasons:
            runner.logger.warning('HealthMonitorHook: COLLAPSED: ' +
                                  '; '.join(reasons))
        else:
            runner.logger.info('HealthMonitorHook: healthy: ' +
                               self._format(final))

    @staticmethod
    def _write(runner, result: dict) -> None:
        write_atomically(
            json.dumps(dict(centred=True, **result), indent=2).encode(),
            osp.join(runner.work_dir, HEALTH_FILE))
