from . import backbones, heads, layers, losses, necks, selfsup  # noqa: F401
