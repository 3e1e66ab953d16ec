"""Torch's fused attention (SDPA) against naive attention on the same input.

Both compute ``softmax(q k^T / sqrt(D)) v`` (RoPE-ViT Eq. 4) for queries,
keys and values of shape ``(B, heads, N, D)`` in the ViT-B head layout
(12 heads of 64 channels), forward + backward of the output's sum:

* ``naive``: the explicit matmul -> softmax -> matmul, which materialises
  the ``(B, heads, N, N)`` attention matrix (and keeps it for backward);
* ``SDPA``: ``F.scaled_dot_product_attention``, the call every attention of
  the suite uses (``RoPEAttention``, the CR2PQ cross-attention, Mobile-Former
  bridges); torch picks the kernel (flash / memory-efficient on CUDA, its
  fused kernel on CPU).

Token counts are those of a /16 ViT at 224, 448, 896 and 1024 px (196, 784,
3136, 4096), with the batch shrunk as ``N`` grows (``B = max(1, 4 * 196 /
N)``); ``--quick``: 196 and 784 tokens. Time and peak memory (see
``_timing.py``; autocast bf16/fp16 on CUDA) of both, measured interleaved
in this process, with the ratios SDPA / naive. Nothing is asserted.

    python benchmarks/sdpa_attention.py [--quick] [--iters N] [--warmup N]
        [--threads N] [--device auto|cpu|cuda] [--amp auto|off|bf16|fp16]
"""

import _timing
import torch
import torch.nn.functional as F

HEADS, HEAD_DIM = 12, 64
TOKENS = (196, 784, 3136, 4096)
# How main() prints one summary row (``summarize``).
ROW = ('{benchmark:<30} naive {baseline_ms:8.1f} ms {baseline_peak_mib:8.1f} '
       'MiB | SDPA {ours_ms:8.1f} ms {ours_peak_mib:8.1f} MiB | '
       'SDPA / naive: time {time}x, memory {mem_ratio:.3f}x')


def naive_attention(q, k, v):
    """``softmax(q k^T / sqrt(D)) v`` with the attention matrix explicit."""
    attn = (q * q.shape[-1]**-0.5) @ k.transpose(-2, -1)
    return attn.softmax(dim=-1) @ v


def run(quick: bool = False, iters: int = None, warmup: int = None,
        threads: int = None, device: str = 'auto', amp: str = 'auto',
        tokens=None) -> dict:
    """Returns ``{'settings': ..., 'N=<tokens>': {'naive': {step_ms,
    peak_mib, time_ratio, mem_ratio}, 'SDPA': {...}}, ...}`` with ratios
    against ``naive``."""
    device, amp = _timing.setup(device, amp, threads)
    iters = iters or (3 if quick else 10)
    warmup = warmup if warmup is not None else (1 if quick else 2)
    tokens = tokens or (TOKENS[:2] if quick else TOKENS)
    result = dict(settings=_timing.settings(
        device, amp, quick=quick, iters=iters, warmup=warmup, heads=HEADS,
        head_dim=HEAD_DIM, tokens=list(tokens)))
    for n in tokens:
        batch = max(1, 4 * 196 // n)
        torch.manual_seed(0)
        qkv = [torch.randn(batch, HEADS, n, HEAD_DIM, device=device,
                           requires_grad=True) for _ in range(3)]
        steps = {}
        for name, fn in (('naive', naive_attention),
                         ('SDPA', F.scaled_dot_product_attention)):

            def step(fn=fn):
                with _timing.autocast(device, amp):
                    out = fn(*qkv)
                out.float().sum().backward()

            steps[name] = step
        stats = _timing.measure(steps, device, warmup, iters, batch)
        _timing.add_ratios(stats, 'naive')
        result[f'N={n}'] = dict(stats, batch=batch)
    return result


def summarize(result: dict) -> list:
    """Summary rows (``_timing.comparison``) of :func:`run`'s result."""
    return [
        _timing.comparison(f'sdpa_attention {key} (B={stats["batch"]})',
                           'torch SDPA', stats['SDPA'], 'naive attention',
                           stats['naive'])
        for key, stats in result.items() if key.startswith('N=')
    ]


def main():
    result = _timing.run_cli(__doc__, run)
    for row in summarize(result):
        print(ROW.format(time=_timing.format_ratio(row), **row))


if __name__ == '__main__':
    main()
