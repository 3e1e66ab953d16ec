"""Spectrum of QB-Heat's learned linear models (QB-Heat Fig. 7, Tab. 3, Eq. 7).

For every scale of a QB-Heat checkpoint (corner ``A^{1/2}, B^{1/2}`` and
centre ``A^{1/4}, B^{1/4}``) this prints the spectrum energies
``E(A) = sum_k |lambda_k|``, ``E(B) = sum_k |pi_k|`` and their ratio
``E(A) / E(B)`` (Tab. 3), and plots (Fig. 7) the sorted eigenvalue
magnitudes (left) and, when both scales exist, the sorted magnitudes
normalised by their sum of one scale against the other (right; aligned
along the diagonal in the paper).

``A`` and ``B`` are the explicit right/down generators of Eq. 5 (with 4 or
8 explicit models, still the right and down ones).

Usage::

    python tools/analysis_tools/qbheat_spectrum.py CKPT --out spectrum.png \
        [--json spectrum.json] [--prefix neck.]
"""
import argparse
import json
import sys
from typing import Dict

import torch

from mmpos.analysis.pictures import save_figure
from mmpos.checkpoint import read_state_dict, write_atomically
from mmpos.guardrails.cli import cli_main


def load_models(state: Dict[str, torch.Tensor], num_explicit=None,
                positions=('corner', 'center'), prefix='neck.'):
    """``{position: (A, B)}`` from a QB-Heat state dict.

    The predictor stores ``weight`` (S, K, C, C), K = 2, 4 or 8 explicit
    models; right is index 0 and down index ``{2: 1, 4: 2, 8: 2}[K]``.
    ``positions`` lists the scales in the predictor's order (its config's
    ``positions``; the default matches the QB-Heat configs).
    """
    key = prefix + 'weight'
    if key not in state:
        raise KeyError(f'qbheat_spectrum: no {key!r} in the checkpoint '
                       f'(is it a QB-Heat checkpoint? try --prefix)')
    w = state[key].float()
    if w.dim() != 4 or w.shape[1] not in (2, 4, 8):
        raise ValueError(f'qbheat_spectrum: {key} has shape '
                         f'{tuple(w.shape)}, expected (S, 2|4|8, C, C)')
    if len(positions) != w.shape[0]:
        raise ValueError(f'qbheat_spectrum: {key} holds {w.shape[0]} '
                         f'scales but positions={positions}')
    down = {2: 1, 4: 2, 8: 2}[w.shape[1]]
    return {p: (w[i, 0], w[i, down]) for i, p in enumerate(positions)}


def spectrum(models) -> Dict[str, dict]:
    """Per position: sorted (descending) |eigenvalues| of A and B, their
    energies (Eq. 7) and the ratio E(A) / E(B) (Tab. 3)."""
    out = {}
    for pos, (a, b) in models.items():
        ea = torch.linalg.eigvals(a.double()).abs().sort(descending=True)[0]
        eb = torch.linalg.eigvals(b.double()).abs().sort(descending=True)[0]
        energy_a, energy_b = ea.sum().item(), eb.sum().item()
        out[pos] = dict(
            eig_abs_a=ea.tolist(), eig_abs_b=eb.tolist(),
            energy_a=energy_a, energy_b=energy_b,
            ratio=energy_a / energy_b if energy_b > 0 else float('nan'))
    return out


def format_table(spec: Dict[str, dict]) -> str:
    offsets = {'corner': 'dx=dy=W/2', 'center': 'dx=dy=W/4'}
    lines = [f'{"scale":<22}{"E(A)":>12}{"E(B)":>12}{"E(A)/E(B)":>12}']
    for pos, s in spec.items():
        lines.append(f'{pos + " (" + offsets[pos] + ")":<22}'
                     f'{s["energy_a"]:>12.4f}{s["energy_b"]:>12.4f}'
                     f'{s["ratio"]:>12.4f}')
    return '\n'.join(lines)


def plot(spec: Dict[str, dict], path: str):
    import matplotlib
    matplotlib.use('Agg')
    import matplotlib.pyplot as plt
    both = len(spec) == 2
    fig, axes = plt.subplots(2, 2 if both else 1, figsize=(9, 7),
                             squeeze=False)
    for row, mat in enumerate(('a', 'b')):
        ax = axes[row, 0]
        for pos, s in spec.items():
            ax.plot(s[f'eig_abs_{mat}'], label=pos)
        ax.set_title(f'|eigenvalues| of {mat.upper()} (sorted)')
        ax.set_xlabel('k')
        ax.legend()
        if both:
            ax = axes[row, 1]
            c, m = (torch.tensor(spec[p][f'eig_abs_{mat}'])
                    for p in ('corner', 'center'))
            c, m = c / c.sum(), m / m.sum()
            ax.scatter(m.numpy(), c.numpy(), s=4)
            top = max(c.max(), m.max()).item()
            ax.plot([0, top], [0, top], 'r-', lw=1)
            ax.set_xlabel(f'{mat.upper()}^(1/4), normalised')
            ax.set_ylabel(f'{mat.upper()}^(1/2), normalised')
    fig.tight_layout()
    save_figure(fig, path, dpi=100)


@cli_main('qbheat_spectrum.py')
def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('checkpoint', help='QB-Heat checkpoint (.pth)')
    parser.add_argument('--out', default='qbheat_spectrum.png',
                        help='PNG plot path')
    parser.add_argument('--json', help='also write the numbers as JSON')
    parser.add_argument('--prefix', default='neck.',
                        help='state-dict prefix of the QBHeatPredictor')
    parser.add_argument('--positions', nargs='+',
                        default=['corner', 'center'],
                        choices=['corner', 'center'],
                        help="the predictor's `positions`, in order")
    args = parser.parse_args(argv)
    state = read_state_dict(args.checkpoint)
    try:
        spec = spectrum(load_models(state, positions=tuple(args.positions),
                                    prefix=args.prefix))
    except (KeyError, ValueError) as e:
        parser.error(str(e.args[0]))
    print(format_table(spec))
    plot(spec, args.out)
    print(f'plot: {args.out}')
    if args.json:
        write_atomically(json.dumps(spec).encode(), args.json)
    return spec


if __name__ == '__main__':
    sys.exit(main() and 0)
