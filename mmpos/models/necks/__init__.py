from .vit_pyramids import MultiLevelNeck, SimpleFeaturePyramid

__all__ = ['MultiLevelNeck', 'SimpleFeaturePyramid']
