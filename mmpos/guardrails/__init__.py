"""What stands between a user's command and a run that fails late.

``tools/train.py`` and ``tools/test.py`` call :func:`prepare` once
(:mod:`.run`); it uses the parts: one line for bad input (:mod:`.cli`),
config keys, constructor arguments and types checked before anything is
built (:mod:`.config_check`), datasets checked against their annotations
(:mod:`.data_check`), and the launch itself: work dir, resume, checkpoints
named by the config, CPU process groups (:mod:`.launch`). Nothing else in
:mod:`mmpos` imports this package.
"""
from .launch import add_launch_arguments
from .run import prepare

__all__ = ['add_launch_arguments', 'prepare']
