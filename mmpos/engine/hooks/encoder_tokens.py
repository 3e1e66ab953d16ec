"""Count the tokens the student encoder processes per training image."""
import json
import os.path as osp

from mmengine.hooks import Hook
from mmengine.model import is_model_wrapper

from mmpos.checkpoint import write_atomically
from mmpos.registry import HOOKS

TOKENS_FILE = 'encoder_tokens.json'


@HOOKS.register_module()
class EncoderTokensHook(Hook):
    """Tokens per image through the student backbone in one training
    iteration: the token count of every input to the backbone's first block
    (``backbone.layers[0]``; prefix tokens included, every view and crop
    counted, an EMA teacher's forward not), summed over the first iteration
    this process trains and divided by its images. Logged and written to
    ``<work_dir>/encoder_tokens.json``::

        {"tokens_per_image": float, "images": int, "iter": int}

    With the image budget it gives the tokens a method encodes: MAE and
    DropPos encode the visible quarter of one view, DINOv2 two global and
    several local crops. A backbone without ``layers`` is reported in the
    log and nothing is written.
    """
    priority = 'LOW'

    def __init__(self):
        self._handle = None
        self._tokens = 0
        self._done = False

    def before_train_iter(self, runner, batch_idx: int,
                          data_batch=None) -> None:
        if self._done:
            return
        model = runner.model.module if is_model_wrapper(
            runner.model) else runner.model
        layers = getattr(getattr(model, 'backbone', None), 'layers', None)
        if not layers:
            runner.logger.warning(
                'EncoderTokensHook: the backbone has no `layers` to count '
                'tokens at; encoder_tokens.json is not written')
            self._done = True
            return
        self._tokens = 0

        def count(module, args, kwargs):
            x = args[0] if args else kwargs['x']
            self._tokens += x.shape[0] * x.shape[1]  # (B', N, C)

        self._handle = layers[0].register_forward_pre_hook(count,
                                                           with_kwargs=True)

    def after_train_iter(self, runner, batch_idx: int, data_batch=None,
                         outputs=None) -> None:
        if self._handle is None:
            return
        self._handle.remove()
        self._handle, self._done = None, True
        images = len(data_batch['data_samples'])
        result = dict(tokens_per_image=self._tokens / images, images=images,
                      iter=runner.iter)
        write_atomically(json.dumps(result, indent=2).encode(),
                         osp.join(runner.work_dir, TOKENS_FILE))
        runner.logger.info('EncoderTokensHook: '
                           f'{result["tokens_per_image"]:.1f} encoder tokens '
                           'per image')
