from .nonfinite_loss import NonFiniteLossError, NonFiniteLossHook

__all__ = ['NonFiniteLossError', 'NonFiniteLossHook']
