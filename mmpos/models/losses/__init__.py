from .dino_losses import (DINOLoss, KoLeoLoss, TeacherCentering,
                          iBOTPatchLoss, sinkhorn_knopp)

__all__ = [
    'DINOLoss', 'KoLeoLoss', 'TeacherCentering', 'iBOTPatchLoss',
    'sinkhorn_knopp'
]
