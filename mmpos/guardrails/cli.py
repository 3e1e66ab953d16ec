"""One line for bad input, a traceback for bugs: the entry point of every
tool.

A tool adopts it with one line above its ``main``::

    from mmpos.guardrails.cli import cli_main

    @cli_main('my_tool.py')
    def main(argv=None):
        ...

    if __name__ == '__main__':
        main()

Then, while ``main`` runs,

* the errors that come from what the user gave (:data:`USER_ERRORS`: every
  :class:`~mmpos.errors.BadInputError` -- bad data, config values,
  unreadable or unfitting checkpoints, launch problems -- and ``OSError``\\ s
  about a path: missing, existing, a directory, no permission, a
  read-only file system, a full disk or quota) end the
  process with status 1 and one line ``my_tool.py: error: <message>`` on
  stderr; the message names the file, key or value;
* ``sys.exit('message')`` / ``raise SystemExit('message')`` inside the tool
  comes out as ``my_tool.py: error: message`` (unless the message already
  starts with ``my_tool.py:`` or ``my_tool:``);
* any other exception is a bug and keeps its traceback;
* ``MMPOS_DEBUG=1`` shows the traceback of bad input too.

``cli_main('tool.py', errors=(SomeError, ))`` adds a tool's own error types.
Tests call ``main([...])`` in-process and catch ``SystemExit``.
"""
import contextlib
import errno
import functools
import os
import os.path as osp
import re
import sys

from mmpos.errors import BadInputError

# Errors that the tools print as one line (MMPOS_DEBUG=1: traceback).
USER_ERRORS = (BadInputError, FileNotFoundError, FileExistsError,
               IsADirectoryError, NotADirectoryError, PermissionError)
# Other OSErrors about where the user asked to write: a read-only file
# system, a full disk or quota.
USER_ERRNOS = frozenset({errno.EROFS, errno.ENOSPC, errno.EDQUOT})


def one_line(err: BaseException) -> str:
    """The message of ``err`` on one line.

    An exception raised in a DataLoader worker comes back as ``Caught X in
    DataLoader worker process 0. Original Traceback ... X: message``; only
    the original message is kept.
    """
    text = str(err).strip()
    if 'Original Traceback' in text:  # last line: 'pkg.mod.Error: message'
        text = re.sub(r'^[A-Za-z_][\w.]*: ', '', text.splitlines()[-1])
    return ' '.join(text.split())


@contextlib.contextmanager
def exit_on_bad_input(prog: str, errors=()):
    """Turn :data:`USER_ERRORS` (and ``errors``) into ``sys.exit`` with the
    one-line message ``<prog>: error: <message>``, unless ``MMPOS_DEBUG``
    is set (then the traceback is shown); a ``SystemExit`` with a message
    gets the same prefix."""
    try:
        yield
    except USER_ERRORS + tuple(errors) as err:
        if os.environ.get('MMPOS_DEBUG'):
            raise
        sys.exit(f'{prog}: error: {one_line(err)}')
    except OSError as err:
        if err.errno not in USER_ERRNOS or os.environ.get('MMPOS_DEBUG'):
            raise
        where = f'{err.filename}: ' if err.filename else ''
        sys.exit(f'{prog}: error: {where}{err.strerror}')
    except SystemExit as exit_:
        code = exit_.code
        stem = prog[:-3] if prog.endswith('.py') else prog
        if isinstance(code, str) and not code.startswith(
                (f'{stem}:', f'{prog}:')):
            raise SystemExit(f'{prog}: error: {one_line(exit_)}') from None
        raise


def cli_main(prog: str, errors=()):
    """Decorator of a tool's ``main``: runs it under
    :func:`exit_on_bad_input` (see the module docstring)."""

    def decorate(main):

        @functools.wraps(main)
        def wrapper(*args, **kwargs):
            with exit_on_bad_input(prog, errors):
                return main(*args, **kwargs)

        return wrapper

    return decorate


def distinct_stems(paths) -> dict:
    """``{path: stem}`` for naming a tool's outputs after its input files:
    the file name without extension, or, for names that several inputs
    share, the path below their common folder with ``_`` for ``/``
    (``a/x.jpg b/x.jpg`` -> ``a_x``, ``b_x``), so that no output
    overwrites another.

    Raises:
        BadInputError: when a file is given twice.
    """
    stems = [osp.splitext(osp.basename(p))[0] for p in paths]
    full = [osp.abspath(p) for p in paths]
    if len(set(full)) < len(full):
        raise BadInputError(f'an input file is given twice: {" ".join(paths)}')
    root = osp.commonpath(full) if len(full) > 1 else ''
    return {
        path: (osp.splitext(osp.relpath(f, root))[0].replace(os.sep, '_')
               if stems.count(stem) > 1 else stem)
        for path, f, stem in zip(paths, full, stems)
    }


__all__ = [
    'USER_ERRORS', 'cli_main', 'distinct_stems', 'exit_on_bad_input',
    'one_line'
]
