"""Errors caused by what the user gave mmpos: data, configs, checkpoints.

Every tool prints these as one line, ``<tool>: error: <message>``, and exits
with status 1 (set ``MMPOS_DEBUG=1`` for the traceback; see
:func:`mmpos.utils.cli.cli_main`). Every message names the file, key or
value at fault.
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


__all__ = [
    'BadInputError', 'CheckpointMismatchError', 'CheckpointReadError',
    'UnsupportedModelError'
]
