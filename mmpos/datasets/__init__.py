from . import robust_loading, transforms  # noqa: F401
