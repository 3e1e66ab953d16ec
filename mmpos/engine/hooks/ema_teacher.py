"""The EMA-teacher update of DINOv2 / ICPF / CR2PQ as a training hook.

Models with an EMA teacher list ``(averaged model, student module)`` pairs
in ``ema_teachers()``; this hook copies the student into each teacher
before training (unless resumed: the step counter is a checkpointed
buffer) and moves each teacher one EMA step after every training iteration,
i.e. after the optimizer step, with :func:`mmpos.models.utils.update_ema`
(which handles FSDP shards). Every pretraining config has it
(``default_hooks.ema_teacher`` of ``configs/_base_/default_runtime_pretrain
.py``); models without ``ema_teachers`` are left alone.
"""
from mmengine.hooks import Hook
from mmpretrain.utils import get_ori_model

from mmpos.models.utils import update_ema
from mmpos.registry import HOOKS


@HOOKS.register_module()
class EMATeacherHook(Hook):
    """Update EMA teachers between training steps (module docstring).

    Runs before the online probe (``NORMAL``) and the checkpoint hook, so
    both see the teacher after this iteration's update.
    """
    priority = 'ABOVE_NORMAL'

    @staticmethod
    def _pairs(runner) -> list:
        model = get_ori_model(runner.model)
        return model.ema_teachers() if hasattr(model, 'ema_teachers') else []

    def before_train(self, runner) -> None:
        for ema, source in self._pairs(runner):
            if int(ema.steps) == 0:
                update_ema(ema, source, runner.model)

    def after_train_iter(self, runner, batch_idx: int, data_batch=None,
                         outputs=None) -> None:
        for ema, source in self._pairs(runner):
            update_ema(ema, source, runner.model)
