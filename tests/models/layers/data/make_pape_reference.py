"""Writes ``pape_reference.pt``: the outputs of the PaPE authors' own
attention layer (DTU-PAS/parabolic-position-encoding, commit
21cb390eafb9398e78c7c786d20505f557c973ec: ``pape/nn/encoder.py``'s
``Attention`` with ``pape/nn/positions/pape.py`` / ``pape_ri.py``) on fixed
random weights and inputs, for ``tests/models/layers/test_pape.py``.

Not run by the tests (they must not download): run once with a checkout
of the authors' repository at that commit on ``PYTHONPATH``::

    git clone https://github.com/DTU-PAS/parabolic-position-encoding /tmp/pape_ref
    git -C /tmp/pape_ref checkout 21cb390eafb9398e78c7c786d20505f557c973ec
    PYTHONPATH=/tmp/pape_ref python tests/models/layers/data/make_pape_reference.py

Their ``pape.configs`` needs ``tyro`` and ``dataclasses_json``; the layer
reads only a few config fields, so a stand-in module gives them.
"""
import enum
import os.path as osp
import sys
import types

import torch

HIDDEN, HEADS, HEAD_SIZE, PARABOLAS = 32, 2, 16, 8
ROWS, COLS, BATCH = 3, 4, 2


class Positional(enum.StrEnum):
    absolute = 'absolute'
    alibi = 'alibi'
    lookhere = 'lookhere'
    nope = 'nope'
    rope = 'rope'
    rope_mixed = 'rope_mixed'
    pape = 'pape'
    pape_ri = 'pape_ri'


def stand_in_configs():
    module = types.ModuleType('pape.configs')
    module.Config, module.Positional = object, Positional
    sys.modules['pape.configs'] = module


def config(positional):
    ns = types.SimpleNamespace
    return ns(model=ns(hidden_size=HIDDEN, num_heads=HEADS,
                       head_size=HEAD_SIZE, dropout=0., drop_path=0.),
              pape=ns(parabolas=PARABOLAS), num_positions=2,
              positional=positional)


def positions():
    """The authors' image positions (``ImageClassifier``): ``(col, row)``
    from 1, row-major, without the class token: ``(1, ROWS COLS, 2)``."""
    rows = torch.arange(1, ROWS + 1).unsqueeze(1).repeat(1, COLS).view(-1)
    cols = torch.arange(1, COLS + 1).unsqueeze(0).repeat(ROWS, 1).view(-1)
    return torch.stack((cols, rows), -1).unsqueeze(0).float()


def main():
    stand_in_configs()
    from pape.nn.encoder import Attention
    out = {}
    for seed, name in enumerate(('pape', 'pape_ri')):
        torch.manual_seed(seed)
        layer = Attention(config(Positional(name))).eval()
        x = torch.randn(BATCH, ROWS * COLS, HIDDEN)
        pos = positions()
        with torch.no_grad():
            y = layer(x, layer.position_encoder.prepare_positions(pos))
        out[name] = dict(x=x, positions=pos[0], output=y,
                         state={k: v.clone() for k, v in
                                layer.state_dict().items()})
    out['commit'] = '21cb390eafb9398e78c7c786d20505f557c973ec'
    torch.save(out, osp.join(osp.dirname(osp.abspath(__file__)),
                             'pape_reference.pt'))


if __name__ == '__main__':
    main()
