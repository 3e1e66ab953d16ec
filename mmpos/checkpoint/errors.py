"""One error type per way a checkpoint can fail.

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

All but the ``OSError``\\ s are :class:`~mmpos.utils.errors.BadInputError`\\ s,
which the tools print as one line (:func:`mmpos.utils.cli.cli_main`).
"""
from mmpos.utils.errors import (BadInputError, CheckpointMismatchError,
                                CheckpointReadError)


class UnsafeCheckpointError(BadInputError, RuntimeError):
    """A checkpoint that needs arbitrary Python objects to be unpickled."""


class ConversionError(BadInputError):
    """A state dict that a converter cannot map as asked."""


__all__ = [
    'CheckpointMismatchError', 'CheckpointReadError', 'ConversionError',
    'UnsafeCheckpointError'
]
