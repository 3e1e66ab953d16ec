"""A NaN loss stops training with a message naming the iteration."""
import pytest
import torch
import torch.nn as nn
from mmengine.model import BaseModel
from mmengine.runner import Runner

from mmpos.engine.hooks import NonFiniteLossError, NonFiniteLossHook


class ToyModel(BaseModel):
    """Loss = w^2 until ``nan_from`` calls, NaN afterwards."""

    def __init__(self, nan_from):
        super().__init__()
        self.w = nn.Parameter(torch.ones(1))
        self.calls = 0
        self.nan_from = nan_from

    def forward(self, inputs, data_samples=None, mode='loss'):
        self.calls += 1
        loss = (self.w**2).sum()
        if self.calls >= self.nan_from:
            loss = loss * float('nan')
        return dict(loss=loss)


def make_runner(tmp_path, action):
    return Runner(
        model=ToyModel(nan_from=3),
        work_dir=str(tmp_path),
        train_dataloader=dict(
            dataset=[dict(inputs=torch.zeros(1))] * 8,
            sampler=dict(type='DefaultSampler', shuffle=False),
            batch_size=1,
            collate_fn=dict(type='default_collate')),
        optim_wrapper=dict(optimizer=dict(type='SGD', lr=0.1)),
        train_cfg=dict(by_epoch=False, max_iters=5),
        custom_hooks=[NonFiniteLossHook(action=action)],
        default_hooks=dict(checkpoint=None, logger=dict(
            type='LoggerHook', interval=1)))


def test_raise_names_the_iteration(tmp_path):
    runner = make_runner(tmp_path, 'raise')
    with pytest.raises(NonFiniteLossError,
                       match=r'non-finite loss at iteration 3: loss=nan'):
        runner.train()


def test_warn_keeps_training(tmp_path):
    runner = make_runner(tmp_path, 'warn')
    runner.train()
    assert runner.iter == 5


def test_bad_action():
    with pytest.raises(ValueError, match="'raise' or 'warn'"):
        NonFiniteLossHook(action='ignore')
