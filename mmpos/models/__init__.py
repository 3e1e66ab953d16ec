from . import backbones, heads, layers, losses, necks, selfsup, utils  # noqa: F401
