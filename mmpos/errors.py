"""Every error mmpos raises for what the user gave it: data, configs,
checkpoints.

Every tool prints a :class:`BadInputError` as one line,
``<tool>: error: <message>``, and exits with status 1 (set
``MMPOS_DEBUG=1`` for the traceback; see :func:`mmpos.guardrails.cli.cli_main`).
Every message names the file, key or value at fault.

How a checkpoint can fail, and the error each failure raises:

=========================  ==================================================
failure                    error
=========================  ==================================================
no file at the path        ``FileNotFoundError`` (``checkpoint not found: P``)
the path is a directory    ``IsADirectoryError`` (``checkpoint P is a
                           directory, not a file``)
not a complete checkpoint  :class:`CheckpointReadError` (truncated, empty,
                           another format, damaged)
pickles arbitrary objects  :class:`UnsafeCheckpointError`
does not fit the model     :class:`CheckpointMismatchError` (no key matches,
                           a shape differs, keys missing under the strict
                           policy, a backbone-only file for a whole model)
cannot be converted        :class:`ConversionError` (another architecture,
                           a layout a converter does not know)
=========================  ==================================================
"""



class BadInputError(ValueError):
    """Bad data, config or checkpoint (a ``ValueError``)."""


class CheckpointMismatchError(BadInputError, RuntimeError):
    """A checkpoint that does not fit the model it is loaded into (also a
    ``RuntimeError``, what mmengine raises for strict loading)."""


class UnsupportedModelError(BadInputError, TypeError):
    """A model or backbone that the asked-for tool or option does not
    support (also a ``TypeError``)."""


class CheckpointReadError(BadInputError):
    """A file that is not a complete PyTorch checkpoint (truncated by an
    interrupted write or a full disk, empty, or another format)."""


class UnsafeCheckpointError(BadInputError, RuntimeError):
    """A checkpoint that needs arbitrary Python objects to be unpickled."""


class ConversionError(BadInputError):
    """A state dict that a converter cannot map as asked."""


class CropBoxError(BadInputError):
    """A crop box outside its image, degenerate or not finite."""


class ImageLoadError(BadInputError):
    """An image file that is missing or cannot be decoded."""


class DatasetFormatError(BadInputError):
    """An annotation file or label map that a dataset cannot use."""


class LaunchError(BadInputError):
    """A problem with the user's command line or config, reported in one line."""


__all__ = [
    'BadInputError', 'CheckpointMismatchError', 'CheckpointReadError',
    'ConversionError', 'CropBoxError', 'DatasetFormatError',
    'ImageLoadError', 'LaunchError', 'UnsafeCheckpointError',
    'UnsupportedModelError'
]
