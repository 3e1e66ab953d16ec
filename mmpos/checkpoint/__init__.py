"""Everything mmpos does with checkpoint files, in one place.

* :mod:`.read` -- one safe reader: ``weights_only=True`` where the format
  allows, truncation and other damage found before unpickling;
* :mod:`.match` -- one matcher: a :class:`KeyReport` (matched / missing /
  unexpected / another shape) and a ``strict``, ``lenient`` or ``partial``
  policy;
* :mod:`.load` -- reading + matching into a module (``init_cfg``
  Pretrained, whole models);
* :mod:`.write` -- one atomic writer (with the user's umask);
* :mod:`.safe_io` -- :func:`use_safe_io`, which mmpos' own tools call to
  make mmengine's Runner read and write through the above (importing mmpos
  changes nothing of mmengine);
* the errors each failure raises are in :mod:`mmpos.errors`.
"""
from .load import (load_checkpoint_into, load_pretrained, strip_prefix,
                   without_ddp_prefix)
from .match import KeyReport, compare, load_state
from .read import (check_checkpoint_file, checkpoint_problem, read_checkpoint,
                   read_state_dict, state_dict_of)
from .safe_io import use_safe_io
from .write import (AtomicLocalBackend, atomic_open, atomic_path,
                    save_state_dict, write_atomically)

__all__ = [
    'AtomicLocalBackend', 'KeyReport', 'atomic_open', 'atomic_path',
    'check_checkpoint_file', 'checkpoint_problem', 'compare',
    'load_checkpoint_into', 'load_pretrained', 'load_state',
    'read_checkpoint', 'read_state_dict', 'save_state_dict', 'state_dict_of',
    'strip_prefix', 'use_safe_io', 'without_ddp_prefix', 'write_atomically'
]
