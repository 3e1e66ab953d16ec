"""2-D Fourier reconstruction with RoPE frequencies (RoPE-ViT Sec. 3.3,
Fig. 1).

RoPE gives a head ``D/2`` 2-D frequencies ``(theta_x, theta_y)`` (rad per
patch unit). A signal on an ``n x n`` grid of positions (``scale`` grid
samples per patch unit) is transformed with the FFT, every coefficient whose
bin is not one of the RoPE frequencies (or its conjugate, or the constant
term) is zeroed, and the inverse FFT is the reconstruction. Frequency
``theta`` falls into bin ``round(theta * n / (2 pi scale)) mod n`` per axis.
Axial frequencies only fill the two axes of the spectrum, so a point
reconstructs as a cross; mixed frequencies also reach diagonal bins.
"""
import math

import numpy as np
import torch


def frequency_mask(freqs: torch.Tensor, n: int, scale: float = 1.0):
    """Boolean ``(n, n)`` FFT mask (``[ky, kx]``) of the frequencies
    ``freqs`` ``(2, K)`` (row 0 theta_x, row 1 theta_y), their conjugates
    and the DC term."""
    f = freqs.detach().double().cpu().numpy().reshape(2, -1)
    kx = np.rint(f[0] * n / (2 * math.pi * scale)).astype(int) % n
    ky = np.rint(f[1] * n / (2 * math.pi * scale)).astype(int) % n
    mask = np.zeros((n, n), dtype=bool)
    mask[ky, kx] = True
    mask[(-ky) % n, (-kx) % n] = True
    mask[0, 0] = True
    return mask


def point_target(n: int, position=None) -> np.ndarray:
    """A single bright point (default: the grid centre), the 'location'
    that position embeddings should represent sharply."""
    target = np.zeros((n, n))
    y, x = position if position is not None else (n // 2, n // 2)
    target[y, x] = 1.0
    return target


def reconstruct(target: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """Inverse FFT of the target's spectrum restricted to ``mask``."""
    return np.real(np.fft.ifft2(np.fft.fft2(target) * mask))


def reconstruction_error(target: np.ndarray, recon: np.ndarray) -> float:
    """Relative L2 error ``||recon - target|| / ||target||``."""
    return float(np.linalg.norm(recon - target) / np.linalg.norm(target))
