"""What stands between a user's command and a run that fails late.

``tools/train.py`` and ``tools/test.py`` call :func:`prepare` once
(:mod:`.run`); it uses the parts: one line for bad input (:mod:`.cli`),
config keys, constructor arguments and types checked before anything is
built (:mod:`.config_check`), datasets checked against their annotations
(:mod:`.data_check`), and the launch itself: work dir, resume, checkpoints
named by the config, CPU process groups (:mod:`.launch`). Nothing else in
:mod:`mmpos` imports this package.
"""
import warnings

# mmengine's Config.fromfile reloads pkg_resources (is_installed, for every
# ``mmdet::`` / ``mmseg::`` base), which warns each time that it is
# deprecated: the tools, which all import this package, drop that warning
# only.
warnings.filterwarnings('ignore', 'pkg_resources is deprecated as an API',
                        UserWarning)

from .launch import add_launch_arguments  # noqa: E402
from .run import prepare  # noqa: E402

__all__ = ['add_launch_arguments', 'prepare']
