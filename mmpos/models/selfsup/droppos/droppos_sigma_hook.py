"""Linear decay of DropPos' position-smoothing width (Eq. 7).

``sigma_t = sigma_0 + (sigma_T - sigma_0) * t / T`` with ``t`` the current
iteration and ``T`` the run's total iterations (``runner.max_iters``, also
for epoch-based loops), written into the head's ``sigma`` buffer before
every training iteration and before training starts. The value depends on
``runner.iter`` only, which mmengine restores on resume, and the buffer is
part of the model's state dict, so a resumed run continues the schedule
exactly and every checkpoint records the ``sigma`` it was trained with.
"""
import operator

from mmengine.hooks import Hook
from mmpretrain.utils import get_ori_model

from mmpos.registry import HOOKS


@HOOKS.register_module()
class DropPosSigmaHook(Hook):
    """Set ``model.<attr>`` to ``sigma_t`` (Eq. 7) each iteration.

    Args:
        start: ``sigma_0`` (paper: 1).
        end: ``sigma_T`` (paper: 0). ``start == end`` keeps it constant.
        attr: dotted path of the sigma buffer on the (unwrapped) model.
    """
    priority = 'NORMAL'

    def __init__(self, start: float = 1., end: float = 0.,
                 attr: str = 'head.sigma'):
        if min(start, end) < 0:
            raise ValueError(f'sigma must be >= 0, got start={start}, '
                             f'end={end}')
        self.start = float(start)
        self.end = float(end)
        self.get = operator.attrgetter(attr)
        self.attr = attr

    def value(self, cur_iter: int, max_iters: int) -> float:
        """``sigma`` at iteration ``cur_iter`` of ``max_iters`` (Eq. 7)."""
        frac = min(1., cur_iter / max_iters) if max_iters > 0 else 1.
        return self.start + (self.end - self.start) * frac

    def _update(self, runner):
        try:
            buffer = self.get(get_ori_model(runner.model))
        except AttributeError:
            raise AttributeError(f'DropPosSigmaHook: the model has no '
                                 f'attribute {self.attr!r}') from None
        buffer.fill_(self.value(runner.iter, runner.max_iters))

    def before_train(self, runner):
        self._update(runner)

    def before_train_iter(self, runner, batch_idx: int, data_batch=None):
        self._update(runner)
