"""DINOv2 on NaFlex views: on views of one size and the same masks its
losses are DINOv2's; in a padded batch of mixed sizes each image gets the
student tokens (content-masked) and teacher tokens it gets alone; the iBOT
masks are drawn on each image's own grid and never cover padding; padding
never changes the losses; the mini config's views have mixed grids and
training on them lowers the loss."""
import torch
from mmengine.runner import Runner

from conftest import (build_dino, config_model, dino_batch, runner_steps,
                      start_ema_teachers)
from mmpos.datasets.naflex import naflex_batch
from mmpos.models.selfsup.dinov2 import DINOv2, NaFlexDINOv2

CONFIG = 'configs/naflex/dinov2_vit-tiny-naflex_mini.py'
SIZES = [(32, 48), (48, 16), (16, 24), (40, 40)]  # pixels, patch 8
LOCAL_SIZES = [(16, 24), (24, 8), (8, 16), (16, 16)]


def naflex(imgs, pad_to=None) -> dict:
    return naflex_batch([img.permute(1, 2, 0).numpy() for img in imgs], 8,
                        pad_to)


def mixed_views(pad_to=None):
    g = torch.Generator().manual_seed(0)
    globals_ = [[torch.randn(3, h, w, generator=g) for h, w in SIZES]
                for _ in range(2)]
    locals_ = [[torch.randn(3, h, w, generator=g) for h, w in LOCAL_SIZES]
               for _ in range(2)]
    return [naflex(v, pad_to) for v in globals_ + locals_], globals_


def test_views_of_one_size_give_dinov2s_losses():
    ref = build_dino(DINOv2).eval()  # eval: no drop path
    ours = build_dino(NaFlexDINOv2).eval()
    ours.load_state_dict(ref.state_dict())
    inputs, _ = dino_batch()
    torch.manual_seed(3)
    masks = ref._sample_masks(8, (4, 4), 'cpu')
    expected = ref.student_losses(inputs, None, masks, ref.teacher_targets(
        torch.cat(inputs[:2]), (4, 4), None, masks))
    views = [naflex(list(v)) for v in inputs]
    globals_ = ours._split_views(views)[0]
    got = ours.student_losses(views, None, masks, ours.teacher_targets(
        globals_, globals_, None, masks))
    assert set(got) == set(expected)
    for key in expected:
        torch.testing.assert_close(got[key], expected[key], rtol=1e-5,
                                   atol=1e-6)


def test_mixed_batch_gives_each_image_its_tokens_and_own_grid_masks():
    model = build_dino(NaFlexDINOv2).eval()
    views, images = mixed_views()
    view = views[0]
    valid = view['patch_valid']
    assert len(set(valid.sum(1).tolist())) == 4
    for seed in range(20):  # padding sits at (0, 0), which boxes cover
        torch.manual_seed(seed)
        mask = model._sample_masks(4, view, 'cpu')['content']
        assert not (mask & ~valid).any()
        masked = mask.any(1)
        assert masked.sum() == 2  # mask_sample_prob = 0.5 of the images
        share = mask.sum(1)[masked] / valid.sum(1)[masked]
        assert ((share > 0.05) & (share < 0.56)).all()  # (0.1, 0.5)
    teacher = model.teacher_network()
    student_tokens = model._encode(model, view,
                                   model._positions(model, view, None, None),
                                   mask, model.mask_token)
    teacher_tokens = model._encode(
        teacher, view, model._positions(teacher, view, None, None))
    for b, img in enumerate(images[0]):
        one = naflex([img])
        n = int(valid[b].sum())
        for net, tokens, m in ((model, student_tokens, mask[b:b + 1, :n]),
                               (teacher, teacher_tokens, None)):
            alone = model._encode(net, one,
                                  model._positions(net, one, None, None), m,
                                  model.mask_token)
            torch.testing.assert_close(tokens[b, :1 + n], alone[0],
                                       rtol=1e-5, atol=1e-5)


def test_padding_never_changes_the_losses():
    model = build_dino(NaFlexDINOv2).eval()
    views, _ = mixed_views()
    torch.manual_seed(2)
    losses = model.loss(views, None)
    more, _ = mixed_views(pad_to=48)
    for view in more:
        view['patches'] = view['patches'].masked_fill(
            ~view['patch_valid'][..., None], 1e3)
    torch.manual_seed(2)
    again = model.loss(more, None)
    for key in losses:
        torch.testing.assert_close(again[key], losses[key], rtol=1e-5,
                                   atol=1e-6)


def test_mini_config_mixed_views_and_the_loss_falls(mini_data):
    cfg, model = config_model(CONFIG, dict(train=f'{mini_data}/unlabeled/'))
    start_ema_teachers(model)
    batch = next(iter(Runner.build_dataloader(cfg.train_dataloader, seed=0)))
    grids = [{s.patch_hw[v] for s in batch['data_samples']}
             for v in range(4)]
    assert all(len(g) > 2 for g in grids)
    assert all(h * w <= 64 for g in grids[:2] for h, w in g)
    assert all(h * w <= 16 for g in grids[2:] for h, w in g)
    losses = runner_steps(cfg, model, steps=12, batches=1)
    assert all(torch.isfinite(torch.tensor(losses)))
    assert sum(losses[-3:]) < sum(losses[:3]), losses
