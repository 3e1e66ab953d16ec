"""The key report and its three policies, on real modules."""
import logging

import pytest
import torch
import torch.nn as nn

from mmpos.checkpoint import KeyReport, compare, load_checkpoint_into, load_state
from mmpos.errors import CheckpointMismatchError


class Net(nn.Module):

    def __init__(self, width=4, head=True):
        super().__init__()
        self.backbone = nn.Linear(width, width)
        if head:
            self.head = nn.Linear(width, 2)


def test_report_sorts_every_key():
    state = Net().state_dict()
    state['backbone.weight'] = torch.zeros(5, 5)
    del state['head.bias']
    state['extra'] = torch.ones(1)
    report = compare(state, Net())
    assert report == KeyReport(matched=['backbone.bias', 'head.weight'],
                               missing=['head.bias'],
                               unexpected=['extra'],
                               mismatched=[('backbone.weight', (5, 5), (4, 4))
                                           ])
    assert report['missing'] == report.missing == ['head.bias']
    assert str(report) == (
        '2 matched key(s)\n1 missing key(s): head.bias\n'
        '1 unexpected key(s): extra\n1 of another shape key(s): '
        'backbone.weight: checkpoint (5, 5) vs model (4, 4)')
    assert compare(state, Net(), resizable=['backbone.weight']).matched == [
        'backbone.bias', 'backbone.weight', 'head.weight'
    ]


def test_policies():
    full = Net().state_dict()
    for policy in ('strict', 'lenient', 'partial'):
        assert compare(full, Net()).problems(policy) == []
    partial = {k: v for k, v in full.items() if k != 'head.bias'}
    partial['extra'] = torch.ones(1)
    report = compare(partial, Net())
    assert report.problems('strict') == [
        '1 model tensors missing (head.bias)', '1 unexpected (extra)'
    ]
    assert report.problems('lenient') == []
    wider = Net(width=5, head=False).state_dict()
    report = compare(wider, Net())
    assert report.problems('partial') == [
        "none of its 2 tensors matches the model's 4 by name and shape "
        '(checkpoint keys: backbone.bias: checkpoint (5,) vs model (4,), '
        'backbone.weight: checkpoint (5, 5) vs model (4, 4); model keys: '
        'head.bias, head.weight)'
    ]
    assert report.problems('lenient') == [
        '2 of another shape (backbone.bias: checkpoint (5,) vs model (4,), '
        'backbone.weight: checkpoint (5, 5) vs model (4, 4))'
    ]
    head_resized = dict(
        full, **{
            'head.weight': torch.ones(3, 4),
            'head.bias': torch.ones(3)
        })
    report = compare(head_resized, Net())  # fine-tuning with a new head
    assert report.problems('partial') == []
    assert len(report.problems('lenient')) == 1
    with pytest.raises(CheckpointMismatchError,
                       match='^w.pth does not fit Net: none of its 1 tensors '
                       "matches the model's 4 by name"):
        compare({
            'other': torch.ones(1)
        }, Net()).enforce('lenient', 'w.pth', 'Net')
    with pytest.raises(ValueError, match='policy must be one of'):
        report.problems('loose')


def test_load_state_copies_only_what_fits(caplog):
    source, target = Net(), Net()
    state = {k: v for k, v in source.state_dict().items() if k != 'head.bias'}
    before = target.head.bias.clone()
    report = load_state(target, state, 'lenient', 'src')
    assert report.missing == ['head.bias']
    assert torch.equal(target.backbone.weight, source.backbone.weight)
    assert torch.equal(target.head.bias, before)
    with pytest.raises(CheckpointMismatchError):
        load_state(Net(), state, 'strict', 'src')


def test_backbone_only_checkpoint_for_a_whole_model_names_the_fix(
        tmp_path, caplog):
    """issue 27: a backbone-only file with a full-model config."""
    path = tmp_path / 'backbone.pth'
    torch.save(
        {
            'state_dict': {
                k: v
                for k, v in Net().state_dict().items()
                if k.startswith('backbone.')
            }
        }, path)
    model = Net()
    head = model.head.weight.clone()
    with pytest.raises(CheckpointMismatchError) as err:
        load_checkpoint_into(model, str(path))
    message = str(err.value)
    assert message.startswith(f'checkpoint {path} does not fit Net: 2 model '
                              'tensors missing (head.bias, head.weight)')
    assert "init_cfg=dict(type='Pretrained'" in message
    assert '\n' not in message
    assert torch.equal(model.head.weight, head)  # nothing was copied
    # the whole model's checkpoint loads, with DDP's prefix stripped
    whole = Net()
    torch.save(
        {
            'state_dict': {
                'module.' + k: v
                for k, v in whole.state_dict().items()
            }
        }, path)
    with caplog.at_level(logging.WARNING):
        report = load_checkpoint_into(model, str(path))
    assert len(report.matched) == 4 and not report.missing
    assert torch.equal(model.head.weight, whole.head.weight)
