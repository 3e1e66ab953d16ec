"""High-level API: frozen features of a backbone from a config and a
checkpoint (see :mod:`mmpos.apis.features`)."""
from .features import (build_backbone, checkpoint_config, extract_features,
                       image_features, init_backbone, load_backbone,
                       load_config, preprocess, read_images)

__all__ = ['build_backbone', 'checkpoint_config', 'extract_features',
           'image_features', 'init_backbone', 'load_backbone', 'load_config',
           'preprocess', 'read_images']
