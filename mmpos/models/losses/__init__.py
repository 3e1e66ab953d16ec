from .cr2pq_loss import CR2PQLoss
from .dino_losses import (DINOLoss, KoLeoLoss, TeacherCentering,
                          iBOTPatchLoss, sinkhorn_knopp)

__all__ = [
    'CR2PQLoss', 'DINOLoss', 'KoLeoLoss', 'TeacherCentering',
    'iBOTPatchLoss', 'sinkhorn_knopp'
]
