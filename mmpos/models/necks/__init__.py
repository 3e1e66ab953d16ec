from .vit_pyramids import DeconvMultiLevelNeck, SimpleFeaturePyramid

__all__ = ['DeconvMultiLevelNeck', 'SimpleFeaturePyramid']
