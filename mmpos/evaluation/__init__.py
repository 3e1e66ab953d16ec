"""Frozen-backbone evaluation: probes, their metrics and the statistics of
every table that compares runs (:mod:`.stats`). Importing it registers the
probe models and metrics that configs name (depth probe, linear
segmentation probe)."""
from . import depth_probe, seg_probe  # noqa: F401  (registration)
