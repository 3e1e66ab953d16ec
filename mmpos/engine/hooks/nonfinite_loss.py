"""Stop training at the first NaN/Inf loss, naming the iteration.

mmdet's ``CheckInvalidLossHook`` covers part of this and is not used: it
checks only the total ``loss``, every 50 iterations by default, with a bare
``assert`` (an ``AssertionError`` without a message, gone under
``python -O``), and lives in mmdet's scope while the pretraining configs
are mmpretrain's. :class:`NonFiniteLossHook` names the iteration and every
non-finite loss term, can warn instead of stopping, and its error is what
``tools/train.py`` prints as one line.
"""
import math

import torch
from mmengine.hooks import Hook

from mmpos.registry import HOOKS


class NonFiniteLossError(FloatingPointError):
    """Raised by :class:`NonFiniteLossHook`; ``tools/train.py`` prints it as
    one line."""


@HOOKS.register_module()
class NonFiniteLossHook(Hook):
    """Check the logged losses after every ``interval`` training iterations.

    Args:
        interval (int): Check every this many iterations. Defaults to 1.
        action (str): ``'raise'`` stops training with
            :class:`NonFiniteLossError`; ``'warn'`` logs and goes on.
            Defaults to ``'raise'``.

    Mmpos's runtime bases enable it as ``default_hooks.check_loss``; set
    ``default_hooks.check_loss.action='warn'`` (or ``=None``) to relax it.
    """
    priority = 'VERY_HIGH'

    def __init__(self, interval: int = 1, action: str = 'raise'):
        if action not in ('raise', 'warn'):
            raise ValueError(
                f"NonFiniteLossHook action must be 'raise' or 'warn', got "
                f'{action!r}')
        self.interval = interval
        self.action = action

    def after_train_iter(self, runner, batch_idx, data_batch=None,
                         outputs=None):
        if not outputs or not self.every_n_train_iters(runner, self.interval):
            return
        values = {
            key: float(value.detach().float().mean())
            if torch.is_tensor(value) else float(value)
            for key, value in outputs.items() if key.startswith('loss')
        }
        bad = {k: v for k, v in values.items() if not math.isfinite(v)}
        if not bad:
            return
        message = (f'non-finite loss at iteration {runner.iter + 1}: ' +
                   ', '.join(f'{k}={v}' for k, v in bad.items()))
        if self.action == 'raise':
            raise NonFiniteLossError(message)
        runner.logger.warning(message)
