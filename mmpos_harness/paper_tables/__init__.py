"""The papers' tables: their manifest, the commands that launch its missing
runs and the generated tables (run results: :mod:`mmpos_harness.results`)."""
from ..results import RunResult, last_checkpoint, read_run
from .manifest import (Manifest, ManifestError, effective_epochs,
                       load_manifest)
from .tables import generate

__all__ = [
    'Manifest', 'ManifestError', 'effective_epochs', 'load_manifest',
    'RunResult', 'last_checkpoint', 'read_run', 'generate'
]
