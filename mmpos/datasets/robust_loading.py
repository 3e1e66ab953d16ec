"""Image loading with a policy for missing or corrupt files.

mmcv's ``LoadImageFromFile`` raises whatever the file backend or decoder
raised (``FileNotFoundError``; an ``AssertionError`` for undecodable bytes,
after a long traceback) or, with ``ignore_empty=True``, silently returns
``None``. A transform returning
``None`` makes mmengine's ``BaseDataset`` draw another index in training
(up to ``max_refetch`` times); test-mode datasets cannot skip and raise.
``tools/train.py`` and ``tools/test.py`` put :class:`SafeLoadImageFromFile`
in place of every ``LoadImageFromFile`` of a config
(:func:`mmpos.guardrails.launch.use_safe_image_loading`).
"""
import logging

from mmcv.transforms import LoadImageFromFile
from mmengine.logging import print_log

from mmpos.registry import TRANSFORMS
from mmpos.errors import ImageLoadError

ON_ERROR = ('raise', 'skip')


def _reason(err: Exception) -> str:
    if isinstance(err, OSError) and err.strerror:
        return err.strerror  # e.g. 'No such file or directory'
    if isinstance(err, AssertionError):  # mmcv: the decoder returned None
        return 'not a decodable image'
    return f'{type(err).__name__}: {err}'


@TRANSFORMS.register_module()
class SafeLoadImageFromFile(LoadImageFromFile):
    """mmcv's ``LoadImageFromFile`` that names the file it cannot read.

    mmdet and mmseg configs use it as
    ``dict(type='mmpretrain.SafeLoadImageFromFile', on_error='skip')``.

    Args:
        on_error: ``'raise'``: :class:`ImageLoadError` naming the file and
            the reason. ``'skip'``: log a warning naming the file and return
            ``None``, so that a training dataset draws another sample
            (test-mode datasets cannot skip: use ``'raise'`` there).
        **kwargs: the arguments of ``LoadImageFromFile`` except
            ``ignore_empty``, which ``on_error`` replaces.
    """

    def __init__(self, on_error: str = 'raise', **kwargs):
        if on_error not in ON_ERROR:
            raise ValueError(f'on_error must be one of {ON_ERROR}, got '
                             f'{on_error!r}')
        if 'ignore_empty' in kwargs:
            raise ValueError('SafeLoadImageFromFile takes on_error=\'skip\' '
                             'instead of ignore_empty')
        super().__init__(**kwargs)
        self.on_error = on_error

    def transform(self, results: dict):
        try:
            return super().transform(results)
        except Exception as err:  # what LoadImageFromFile(ignore_empty) skips
            reason = _reason(err)
            filename = results.get('img_path')
            if self.on_error == 'raise':
                raise ImageLoadError(
                    f'cannot read image {filename}: {reason}') from err
            print_log(f'skipping image {filename}: {reason}',
                      logger='current', level=logging.WARNING)
            return None

    def __repr__(self):
        return f'{super().__repr__()[:-1]}, on_error={self.on_error!r})'


__all__ = ['ImageLoadError', 'SafeLoadImageFromFile']
