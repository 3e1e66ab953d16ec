"""Frozen evaluation on NaFlex batches: the linear probe of the mini config
trains its head on a frozen backbone and is scored by mmpretrain's
Accuracy; DINO's weighted kNN on features of mixed-size batches (the
training pipeline's random crops at random aspect ratios; the mini images
are square) scores as on each image's features alone."""
import torch
from mmengine.runner import Runner

from conftest import config_model, first_val_metrics, runner_steps
from mmpos.evaluation.knn import knn_scores

CONFIG = 'configs/naflex/linear-probe_vit-tiny-naflex_mini-cls.py'


def build(mini_data):
    return config_model(CONFIG, {split: f'{mini_data}/cls/'
                                 for split in ('train', 'val')})


def test_linear_probe_trains_the_head_only(mini_data):
    cfg, model = build(mini_data)
    backbone = {k: v.clone() for k, v in model.backbone.state_dict().items()}
    losses = runner_steps(cfg, model, steps=8, batches=1)
    assert losses[-1] < 0.8 * losses[0], losses
    assert all(torch.equal(v, model.backbone.state_dict()[k])
               for k, v in backbone.items())
    metrics = first_val_metrics(cfg, model)
    assert 0 <= metrics['accuracy/top1'] <= 100


def test_knn_on_mixed_batches_is_knn_on_each_image(mini_data):
    cfg, model = build(mini_data)
    model.eval()
    feats, labels, alone = [], [], []
    with torch.no_grad():
        for split in ('train', 'val'):  # random crops: mixed sizes
            cfg.train_dataloader.dataset.data_prefix = split
            loader = Runner.build_dataloader(cfg.train_dataloader, seed=0)
            batch = model.data_preprocessor(next(iter(loader)))
            inputs = batch['inputs']
            feats.append(model.extract_feat(inputs)[0])
            labels.append(torch.cat([s.gt_label for s in
                                     batch['data_samples']]))
            valid = inputs['patch_valid']
            assert valid.float().mean() < 1  # mixed sizes, padded
            alone.append(torch.cat([model.extract_feat({
                k: v[i:i + 1, :int(valid[i].sum())]
                for k, v in inputs.items()})[0] for i in range(len(valid))]))
    mixed = knn_scores(feats[0], labels[0], feats[1], num_classes=3)
    single = knn_scores(alone[0], labels[0], alone[1], num_classes=3)
    torch.testing.assert_close(mixed, single, rtol=1e-4, atol=1e-5)
