from . import naflex, robust_loading, transforms  # noqa: F401
