"""CR2PQ configs against the paper: the pretrained-teacher configs of
Table 4's "DINO (Res-50)" row (= Table 1's 47.4 / 41.8; a frozen ResNet-50,
7 x 7 x 2048 targets at 224, §4.2), their one checkpoint variable and its
error, the EMA configs tied to Table 4's EMA row, and Table 5's "share
weights" projector switch."""
import pytest
import torch
import yaml
from mmengine.config import Config
from mmengine.logging import MessageHub
from mmpretrain.registry import MODELS

import mmpos  # noqa: F401
from mmpos.models.selfsup.cr2pq import CR2PQ, CR2PQNeck
from mmpos.errors import BadInputError

from conftest import REPO

TEACHER = {
    'cr2pq_vit-s_100e': 'cr2pq_vit-small-p16_dino-r50-teacher_32xb64-100e',
    'cr2pq_vit-s_200e': 'cr2pq_vit-small-p16_dino-r50-teacher_32xb64-200e',
    'cr2pq_vit-s_300e': 'cr2pq_vit-small-p16_dino-r50-teacher_32xb64-300e',
    'cr2pq_vit-b_300e': 'cr2pq_vit-base-p16_dino-r50-teacher_32xb64-300e',
}
ARCH = dict(embed_dims=64, num_layers=2, num_heads=2, feedforward_channels=128)


@pytest.fixture(autouse=True)
def max_iters():
    MessageHub.get_current_instance().update_info('max_iters', 8)


def test_teacher_config_is_a_frozen_resnet50_with_7x7x2048_targets():
    cfg = Config.fromfile(
        'configs/cr2pq/cr2pq_vit-small-p16_dino-r50-teacher_32xb64-300e_'
        'in1k.py')
    assert cfg.model.target == dict(type='ResNet', depth=50,
                                    out_indices=(3, ))
    assert cfg.model.neck.out_channels == 2048  # D_tea
    assert cfg.model.teacher_checkpoint  # the one variable
    # everything else is the EMA config's recipe
    ema = Config.fromfile('configs/cr2pq/cr2pq_vit-small-p16_32xb64-300e_'
                          'in1k.py')
    assert cfg.optim_wrapper == ema.optim_wrapper
    assert cfg.model.backbone == ema.model.backbone
    teacher = MODELS.build(cfg.model.target)
    teacher.eval()
    with torch.no_grad():
        feat = teacher(torch.randn(1, 3, 224, 224))[-1]
    assert feat.shape == (1, 2048, 7, 7)  # K_B = 7, D_tea = 2048


def _tiny(**kwargs):
    torch.manual_seed(0)
    return CR2PQ(
        backbone=dict(type='RoPEVisionTransformer', arch=ARCH, img_size=32,
                      patch_size=8, rope=dict(type='axial'),
                      out_type='featmap'),
        neck=dict(type='CR2PQNeck', embed_dims=64, num_heads=2,
                  out_channels=512, hidden_channels=64),
        target=dict(type='ResNet', depth=18, out_indices=(3, )),
        loss=dict(type='CR2PQLoss', norm='layernorm'), **kwargs)


def test_teacher_checkpoint_loads_every_teacher_weight(tmp_path):
    """The teacher is frozen (no gradient; eval mode: see
    tests/models/selfsup/cr2pq/test_cr2pq.py) and takes every weight from
    the checkpoint."""
    torch.manual_seed(3)
    resnet = MODELS.build(dict(type='ResNet', depth=18, out_indices=(3, )))
    state = {f'backbone.{k}': v for k, v in resnet.state_dict().items()}
    state['head.fc.weight'] = torch.zeros(2, 2)  # not the teacher's
    torch.save(state, tmp_path / 'r18.pth')
    model = _tiny(teacher_checkpoint=str(tmp_path / 'r18.pth'))
    model.init_weights()
    for k, v in resnet.state_dict().items():
        assert torch.equal(model.target_generator.state_dict()[k], v), k
    teacher = model.target_generator
    assert not any(p.requires_grad for p in teacher.parameters())
    # a checkpoint that covers only part of the teacher is refused
    partial = {k: v for k, v in state.items() if 'layer4' not in k}
    torch.save(partial, tmp_path / 'part.pth')
    with pytest.raises(BadInputError, match='lacks'):
        _tiny(teacher_checkpoint=str(tmp_path / 'part.pth')).init_weights()
    # a missing file: one line naming the variable and the path
    with pytest.raises(BadInputError, match=r'^CR2PQ: model\.teacher_'
                       r'checkpoint=.*none\.pth.* does not exist'):
        _tiny(teacher_checkpoint=str(tmp_path / 'none.pth')).init_weights()
    with pytest.raises(BadInputError, match='not a teacher'):
        CR2PQ(backbone=dict(type='RoPEVisionTransformer', arch=ARCH,
                            img_size=32, patch_size=8, out_type='featmap'),
              neck=dict(type='CR2PQNeck', embed_dims=64, num_heads=2,
                        out_channels=64),
              teacher_checkpoint=str(tmp_path / 'r18.pth'))


def _manifest():
    with open(REPO / 'tools/paper_tables/manifest.yaml') as f:
        return yaml.safe_load(f)


def test_paper_tables_use_the_teacher_configs_and_table4_the_ema_ones():
    manifest = _manifest()
    runs = manifest['runs']
    for run, name in TEACHER.items():
        assert runs[f'{run}_dino-r50']['config'] == \
            f'configs/cr2pq/{name}_in1k.py'
    tables = {t['id']: t for t in manifest['tables']}
    # Table 1's 300-epoch Mask R-CNN row = Table 4's DINO (Res-50) row
    row = [r for r in tables['cr2pq_t1']['rows']
           if r.get('epochs') == 300 and r.get('framework') == 'Mask R-CNN'
           and r['method'] == 'CR2PQ'][0]
    assert row['paper'][0] == 47.4 and row['paper'][3] == 41.8
    det = runs[row['runs']['det']]
    assert det['init_from'] == 'cr2pq_vit-s_300e_dino-r50'
    t4 = {r['teacher']: r for r in tables['cr2pq_t4']['rows']}
    assert t4['DINO (Res-50)']['paper'] == [47.4, 41.8]
    assert t4['DINO (Res-50)']['runs']['det'] == row['runs']['det']
    ema = runs[t4['EMA update (Contrastive)']['runs']['det']]
    assert t4['EMA update (Contrastive)']['paper'] == [44.1, 39.8]
    assert runs[ema['init_from']]['config'] == \
        'configs/cr2pq/cr2pq_vit-small-p16_32xb64-300e_in1k.py'
    # every CR2PQ row of Tables 1-3 comes from a teacher config
    for tid in ('cr2pq_t1', 'cr2pq_t2', 'cr2pq_t3'):
        for r in tables[tid]['rows']:
            if r['method'] != 'CR2PQ':
                continue
            for run in r['runs'].values():
                assert runs[run]['init_from'].endswith('_dino-r50'), run


def test_metafile_pairs_table1_numbers_with_the_teacher_config():
    with open(REPO / 'configs/cr2pq/metafile.yml') as f:
        models = yaml.safe_load(f)['Models']
    for m in models:
        box = [x['Metrics'].get('box AP') for x in m.get('Results') or []
               if 'box AP' in x.get('Metrics', {})]
        if box and box[0] in (47.4, 45.0):
            assert 'dino-r50-teacher' in m['Metadata']['Pretrained From'], \
                m['Name']
        if box and box[0] == 44.1:
            assert 'dino-r50' not in m['Metadata']['Pretrained From']


def test_share_weights_projector_table5():
    torch.manual_seed(0)
    neck = CR2PQNeck(64, 2, out_channels=32, local_projector='mlp',
                     hidden_channels=48, share_weights=True)
    assert neck.global_projector is neck.local_head
    separate = CR2PQNeck(64, 2, out_channels=32, local_projector='mlp',
                         hidden_channels=48)
    n_shared = sum(p.numel() for p in neck.parameters())
    n_sep = sum(p.numel() for p in separate.parameters())
    assert n_sep - n_shared == sum(
        p.numel() for p in separate.global_projector.parameters())
    tokens = torch.randn(2, 16, 64)
    coords = torch.rand(2, 9, 2) * 4
    z, g = neck(tokens, (4, 4), coords)
    # one MLP: the global output is the shared projector on the mean of h
    seen = {}
    neck.global_projector.register_forward_hook(
        lambda m, args, out: seen.setdefault('inputs', []).append(args[0]))
    z, g = neck(tokens, (4, 4), coords)
    torch.testing.assert_close(g, neck.local_head(seen['inputs'][1]))
    torch.testing.assert_close(seen['inputs'][1], seen['inputs'][0].mean(1))
    with pytest.raises(ValueError, match='share_weights'):
        CR2PQNeck(64, 2, out_channels=32, share_weights=True)  # transformer
    with pytest.raises(ValueError, match='share_weights'):
        CR2PQNeck(64, 2, out_channels=32, local_projector='mlp',
                  local_depth=3, share_weights=True)
