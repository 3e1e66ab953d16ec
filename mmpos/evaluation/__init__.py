"""Frozen-backbone evaluation: probes and their metrics (the statistics of
the tables that compare runs are :mod:`mmpos_stats`). Importing it
registers the probe models and metrics that configs name (depth probe,
linear segmentation probe)."""
from . import depth_probe, seg_probe  # noqa: F401  (registration)
