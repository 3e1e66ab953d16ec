from . import fsdp, hooks, optimizers  # noqa: F401
