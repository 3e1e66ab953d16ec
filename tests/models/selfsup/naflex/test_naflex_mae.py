"""MAE on NaFlex batches: the mini config's pipeline gives mixed aspect
ratios, the loss reads only removed real patches, and training on the
config's batches lowers it (its masking, ``naflex_masking``: in
tests/models/layers/test_masking.py)."""
import torch
from mmengine.runner import Runner

from conftest import config_model, runner_steps

CONFIG = 'configs/naflex/mae_vit-tiny-naflex_mini.py'


def build(mini_data):
    return config_model(CONFIG, dict(train=f'{mini_data}/unlabeled/'))


def test_pipeline_gives_mixed_aspect_ratios_within_the_budget(mini_data):
    cfg, _ = build(mini_data)
    torch.manual_seed(0)
    batch = next(iter(Runner.build_dataloader(cfg.train_dataloader, seed=0)))
    grids = {s.patch_hw for s in batch['data_samples']}
    assert len(grids) > 3 and all(h * w <= 32 for h, w in grids)
    assert any(h > w for h, w in grids) and any(w > h for h, w in grids)
    valid = batch['inputs']['patch_valid']
    assert valid.sum(1).tolist() == [h * w for h, w in (
        s.patch_hw for s in batch['data_samples'])]


def test_loss_ignores_the_padding_and_falls(mini_data):
    cfg, model = build(mini_data)
    batch = next(iter(Runner.build_dataloader(cfg.train_dataloader, seed=0)))
    data = model.data_preprocessor(batch, True)
    inputs = data['inputs']
    torch.manual_seed(1)
    loss = model.loss(inputs, data['data_samples'])['loss']
    garbage = dict(inputs, patches=inputs['patches'].masked_fill(
        ~inputs['patch_valid'][..., None], 1e3))
    torch.manual_seed(1)
    torch.testing.assert_close(
        model.loss(garbage, data['data_samples'])['loss'], loss)
    losses = runner_steps(cfg, model, steps=8, batches=1)
    assert all(torch.isfinite(torch.tensor(losses)))
    assert losses[-1] < 0.9 * losses[0], losses
