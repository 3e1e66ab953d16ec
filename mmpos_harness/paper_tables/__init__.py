"""Benchmark manifest, work-dir results and paper-table generation."""
from .manifest import (Manifest, ManifestError, effective_epochs,
                       load_manifest)
from .results import RunResult, last_checkpoint, read_run
from .tables import generate, model_zoo_markdown

__all__ = [
    'Manifest', 'ManifestError', 'effective_epochs', 'load_manifest',
    'RunResult', 'last_checkpoint', 'read_run', 'generate',
    'model_zoo_markdown'
]
