"""EncoderTokensHook: the student encoder's tokens per image, counted at
the backbone's first block in the first training iteration."""
import json
import logging
from types import SimpleNamespace

import torch
import torch.nn as nn

from mmpos.engine.hooks import EncoderTokensHook
from mmpos.models.backbones import RoPEVisionTransformer

TINY = dict(embed_dims=32, num_layers=2, num_heads=2, feedforward_channels=64)


class TwoViews(nn.Module):
    """A student that encodes a 64 px and a 32 px view (8 px patches, class
    token: 65 and 17 tokens) and an EMA-style teacher copy that must not
    be counted."""

    def __init__(self):
        super().__init__()
        self.backbone = RoPEVisionTransformer(arch=TINY, patch_size=8,
                                              rope=dict(type='axial'))
        self.teacher = RoPEVisionTransformer(arch=TINY, patch_size=8,
                                             rope=dict(type='axial'))

    def forward(self, images):
        self.teacher(images)
        return (self.backbone(images),
                self.backbone(images[..., ::2, ::2]))


def runner_for(model, tmp_path):
    return SimpleNamespace(model=model, work_dir=str(tmp_path), iter=0,
                           logger=logging.getLogger('test_encoder_tokens'))


def test_counts_every_view_of_the_student_once(tmp_path):
    model, hook = TwoViews(), EncoderTokensHook()
    runner = runner_for(model, tmp_path)
    batch = dict(data_samples=[None] * 3)
    for it in range(2):  # only the first iteration is counted
        runner.iter = it
        hook.before_train_iter(runner, it, batch)
        model(torch.randn(3, 3, 64, 64))
        hook.after_train_iter(runner, it, batch)
    result = json.loads((tmp_path / 'encoder_tokens.json').read_text())
    assert result == dict(tokens_per_image=65. + 17., images=3, iter=0)
    assert not model.backbone.layers[0]._forward_pre_hooks  # removed


def test_backbone_without_layers_writes_nothing(tmp_path, caplog):
    model = nn.Module()
    model.backbone = nn.Conv2d(3, 4, 3)
    hook, runner = EncoderTokensHook(), runner_for(model, tmp_path)
    with caplog.at_level(logging.WARNING):
        hook.before_train_iter(runner, 0, dict(data_samples=[None]))
        hook.after_train_iter(runner, 0, dict(data_samples=[None]))
    assert 'no `layers`' in caplog.text
    assert not (tmp_path / 'encoder_tokens.json').exists()
