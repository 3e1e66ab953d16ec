"""Errors caused by what the user gave mmpos: data, configs, checkpoints.

``tools/train.py`` and ``tools/test.py`` print these as one line,
``<tool>: error: <message>``, and exit with status 1 (set ``MMPOS_DEBUG=1``
for the traceback). Every message names the file, key or value at fault.
"""


class BadInputError(ValueError):
    """Bad data, config or checkpoint (a ``ValueError``)."""


class CheckpointMismatchError(BadInputError, RuntimeError):
    """A checkpoint that does not fit the model it is loaded into (also a
    ``RuntimeError``, what mmengine raises for strict loading)."""


__all__ = ['BadInputError', 'CheckpointMismatchError']
