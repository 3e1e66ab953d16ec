"""A pretraining checkpoint loads into the downstream models built from the
transfer configs (scaled down by cfg changes), the log reports what matched,
and every way of silently ending up with a random backbone is an error."""
import copy
import functools
import logging

import pytest
import torch
from mmengine.config import Config
from mmengine.logging import MessageHub, MMLogger
from mmengine.registry import init_default_scope

import mmpos  # noqa: F401  (registers the backbone, the checkpoint loader)
from mmpos.models.backbones.rope_vit import RoPEVisionTransformer
from mmpos.errors import CheckpointMismatchError
from mmpos.models.utils.pretrained import load_pretrained

from conftest import REPO

DET = 'configs/transfer/mmdet/mask-rcnn_vit-base-p16-rope-mixed_mln-fpn_8xb2-1x_coco.py'  # noqa: E501
SEG = 'configs/transfer/mmseg/upernet_vit-base-p16-ape_mln_4xb4-160k_ade20k-512x512.py'  # noqa: E501
# The ViT of the tests: 4 blocks (the necks read blocks 0-3), 32 wide.
ARCH = dict(embed_dims=32, num_layers=4, num_heads=2, feedforward_channels=64)
SMALL_NECK = dict(
    model=dict(backbone=dict(
        arch=dict(_delete_=True, **ARCH), out_indices=(0, 1, 2, 3))))


@pytest.fixture
def log():
    """Messages of mmengine's current logger during the test."""
    records = []
    handler = logging.Handler()
    handler.emit = records.append
    logger = MMLogger.get_current_instance()
    # An earlier test may have left the shared logger at WARNING, which would
    # drop the INFO lines these tests read.
    level = logger.level
    logger.setLevel(logging.INFO)
    logger.addHandler(handler)
    yield records
    logger.removeHandler(handler)
    logger.setLevel(level)


def messages(records, level=logging.INFO):
    return '\n'.join(r.getMessage() for r in records if r.levelno >= level)


def pretraining_backbone(seed=0, **kwargs):
    """The backbone of a (fake) pretraining run: final norm, class token."""
    torch.manual_seed(seed)
    cfg = dict(arch=ARCH, rope=dict(type='mixed'), out_type='raw')
    backbone = RoPEVisionTransformer(**{**cfg, **kwargs})
    backbone.init_weights()
    return backbone


def save_pretraining_checkpoint(path, backbone, wrapper='state_dict',
                                prefix='backbone.', message_hub=False):
    """Save ``backbone`` as a pretraining run would: under ``prefix`` next
    to a head and a momentum teacher, wrapped like an mmengine checkpoint."""
    state = {prefix + k: v for k, v in backbone.state_dict().items()}
    state['head.fc.weight'] = torch.randn(8, 32)
    state['teacher.backbone.ln1.weight'] = torch.ones(32)
    ckpt = {wrapper: state, 'meta': {'epoch': 1}} if wrapper else state
    if message_hub:
        hub = MessageHub.get_instance('test_pretrained_loading')
        hub.update_scalar('train/loss', 1.0)
        ckpt['message_hub'] = hub.state_dict()
    torch.save(ckpt, path)
    return str(path)


@functools.lru_cache(maxsize=None)
def load_config(config):
    return Config.fromfile(str(REPO / config))


def build(config, scope, checkpoint, **options):
    """The downstream model of ``config`` at the test ViT's size."""
    cfg = copy.deepcopy(load_config(config))
    cfg.merge_from_dict(copy.deepcopy(SMALL_NECK))  # it pops _delete_
    width = {'mmdet': 'model.neck.0.in_channels',
             'mmseg': 'model.neck.in_channels'}[scope]
    heads = {'mmdet': {'model.neck.1.in_channels': [32] * 4},
             'mmseg': {'model.decode_head.in_channels': [32] * 4,
                       'model.auxiliary_head.in_channels': 32}}[scope]
    cfg.merge_from_dict({width: 32, **heads, **options,
                         'model.backbone.init_cfg.checkpoint': checkpoint},
                        allow_list_keys=True)
    init_default_scope(scope)
    if scope == 'mmdet':
        from mmdet.registry import MODELS
    else:
        from mmseg.registry import MODELS
    return MODELS.build(cfg.model)


def assert_same_weights(model, backbone, skip=()):
    """The model's backbone holds ``backbone``'s values (shared keys)."""
    own, source = model.backbone.state_dict(), backbone.state_dict()
    for key, value in own.items():
        if key not in skip and key in source:
            assert torch.equal(value, source[key]), key


def test_mmdet_model_loads_the_backbone_of_a_pretraining_run(tmp_path, log):
    source = pretraining_backbone()
    path = save_pretraining_checkpoint(tmp_path / 'epoch_1.pth', source)
    model = build(DET, 'mmdet', path)
    model.init_weights()
    assert_same_weights(model, source)
    own = model.backbone.state_dict()
    shared = set(own) & set(source.state_dict())
    # Everything but the final norm (the detector reads blocks 1-4 unnormed).
    assert shared == set(own), set(own) - shared
    text = messages(log)
    assert 'torch.load(weights_only=True)' in text
    assert f'loaded {len(own)} of its {len(own)} tensors' in text
    assert '2 unexpected keys (ignored): ln1.bias, ln1.weight' in text
    assert '0 missing keys' in text


def test_mmseg_ape_model_loads_and_resizes_the_position_table(tmp_path, log):
    # Pretrained at 112 px (7x7 APE grid), fine-tuned at 224 (14x14).
    source = pretraining_backbone(use_ape=True, rope=None,
                                  img_size=112)
    path = save_pretraining_checkpoint(tmp_path / 'p.pth', source,
                                       message_hub=True)
    model = build(SEG, 'mmseg', path)
    model.init_weights()
    assert model.backbone.pos_embed.shape == (1, 1 + 14 * 14, 32)
    assert_same_weights(model, source, skip={'pos_embed'})
    # The class-token entry is kept, the grid is interpolated from 7x7.
    assert torch.equal(model.backbone.pos_embed[:, 0],
                       source.pos_embed[:, 0])
    text = messages(log)
    assert 'mmengine training checkpoint' in text  # read with the hub
    assert '0 missing keys' in text


@pytest.mark.parametrize('wrapper,prefix', [(None, ''), ('model', ''),
                                            ('state_dict', 'backbone.')])
def test_bare_and_wrapped_state_dicts(tmp_path, wrapper, prefix):
    source = pretraining_backbone()
    path = save_pretraining_checkpoint(tmp_path / 'b.pth', source,
                                       wrapper=wrapper, prefix=prefix)
    model = build(DET, 'mmdet', path)
    model.backbone.init_weights()
    assert_same_weights(model, source)


def test_checkpoint_none_is_a_logged_random_init(log):
    model = build(DET, 'mmdet', None)
    model.backbone.init_weights()
    assert 'RANDOMLY initialised' in messages(log, logging.WARNING)


def test_checkpoint_of_another_model_is_refused(tmp_path):
    from mmpretrain.models import ResNet
    resnet = ResNet(depth=18)
    path = tmp_path / 'resnet.pth'
    torch.save({'state_dict': {'backbone.' + k: v for k, v in
                               resnet.state_dict().items()}}, path)
    model = build(DET, 'mmdet', str(path))
    with pytest.raises(RuntimeError, match='none of its .* tensors matches'):
        model.backbone.init_weights()


@pytest.mark.parametrize('layout', ['timm', 'timm-same-width', 'timm-mixed',
                                    'authors', 'dinov3', 'dinov3-wrapped'])
def test_checkpoint_of_another_project_names_its_converter(tmp_path, layout):
    """An unconverted checkpoint (timm's own model as the peer; the authors'
    and DINOv3's layouts by their distinguishing keys) is refused with the
    converter that reads it, not with the keys that happen to clash."""
    import timm
    name = 'vit_small_patch16_rope_mixed_224' if layout == 'timm-mixed' \
        else 'vit_small_patch16_224'
    # another width: cls_token clashes; the same width: it alone would load
    width = ARCH['embed_dims'] if layout == 'timm-same-width' else 48
    state = timm.create_model(name, pretrained=False, depth=1,
                              embed_dim=width, num_heads=2).state_dict()
    tool = 'timm2mmpos.py'
    if layout == 'authors':
        state['freqs'] = torch.zeros(2, 1, 24)
        tool = 'rope_vit_official2mmpos.py'
    elif layout.startswith('dinov3'):
        state['rope_embed.periods'] = torch.ones(6)
        tool = 'dinov3_official2mmpos.py'
        if layout == 'dinov3-wrapped':
            state = {'model.' + k: v for k, v in state.items()}
    path = tmp_path / f'{layout}.pth'
    torch.save(state, path)
    model = build(SEG, 'mmseg', str(path))
    with pytest.raises(ValueError, match=f'tools/model_converters/{tool}'):
        model.backbone.init_weights()


def test_checkpoint_of_another_width_names_key_and_shapes(tmp_path):
    wider = RoPEVisionTransformer(arch=dict(ARCH, embed_dims=48))
    path = save_pretraining_checkpoint(tmp_path / 'w.pth', wider)
    model = build(SEG, 'mmseg', path)
    with pytest.raises(ValueError,
                       match=r'cls_token: checkpoint \(1, 1, 48\) vs model '
                       r'\(1, 1, 32\)'):
        model.backbone.init_weights()


def test_missing_file_is_an_error(tmp_path):
    model = build(SEG, 'mmseg', str(tmp_path / 'nowhere.pth'))
    with pytest.raises(FileNotFoundError, match='nowhere.pth'):
        model.backbone.init_weights()


def test_loaded_weights_survive_the_random_init_of_other_keys(tmp_path):
    """Keys the checkpoint lacks get the random init, the others keep the
    checkpoint's values (the random init runs first)."""
    source = pretraining_backbone()
    state = source.state_dict()
    del state['cls_token']
    torch.save(state, tmp_path / 'partial.pth')
    target = RoPEVisionTransformer(
        arch=ARCH, init_cfg=dict(type='Pretrained',
                                 checkpoint=str(tmp_path / 'partial.pth')))
    target.init_weights()
    assert torch.equal(target.layers[0].attn.qkv.weight,
                       source.layers[0].attn.qkv.weight)
    assert target.cls_token.abs().sum() > 0  # truncated normal, not zeros
    assert not torch.equal(target.cls_token, source.cls_token)


def test_bad_init_cfg_keys_are_named():
    with pytest.raises(ValueError, match=r"\['map_location_typo'\]"):
        RoPEVisionTransformer(arch=ARCH, init_cfg=dict(
            type='Pretrained', checkpoint=None, map_location_typo='cpu'))


def test_load_pretrained_returns_the_key_lists(tmp_path):
    source = pretraining_backbone()
    path = save_pretraining_checkpoint(tmp_path / 'r.pth', source)
    target = RoPEVisionTransformer(arch=ARCH, use_ape=True)
    report = load_pretrained(target, path)
    assert report['missing'] == ['pos_embed']
    assert report['unexpected'] == []
    assert len(report['matched']) == len(source.state_dict())


MIXED, AXIAL = dict(rope=dict(type='mixed')), dict(rope=dict(type='axial'))
APE = dict(rope=None, use_ape=True)


@pytest.mark.parametrize('source,target,theirs,own,fates', [
    (APE, MIXED, 'APE (pos_embed) and no RoPE tensors', "RoPE 'mixed'",
     ['4 re-initialised (rope.freqs.0, rope.freqs.1, rope.freqs.2 (+1 more))',
      '1 dropped (pos_embed)']),
    (MIXED, APE, "RoPE 'mixed'", 'APE (pos_embed)',
     ['1 re-initialised (pos_embed)', '4 dropped (rope.freqs.0']),
    (AXIAL, MIXED, 'no position tensors (no position encoding, or a RoPE '
     'that saves none: axial/dinov3/spiral/lookhere/golden_gate)', "RoPE 'mixed'",
     ['4 re-initialised (rope.freqs.0']),
    (MIXED, AXIAL, "RoPE 'mixed'", "RoPE 'axial'", ['4 dropped (rope.freqs']),
    (dict(MIXED, use_ape=True), MIXED, "RoPE 'mixed' + APE (pos_embed)",
     "RoPE 'mixed'", ['1 dropped (pos_embed)']),
])
def test_position_mismatch_is_one_warning_or_refused_when_strict(
        tmp_path, log, source, target, theirs, own, fates):
    """#58: a checkpoint of another position scheme is one WARNING line
    naming both schemes and what keeps its initialisation or is dropped;
    init_cfg strict=True refuses it in one line."""
    path = save_pretraining_checkpoint(tmp_path / 'p.pth',
                                       pretraining_backbone(**source))
    RoPEVisionTransformer(arch=ARCH, out_type='raw', **target, init_cfg=dict(
        type='Pretrained', checkpoint=path)).init_weights()
    named = [r.getMessage() for r in log if r.levelno >= logging.WARNING]
    assert len(named) == 1, named  # the key report's lines leave them to it
    assert theirs in named[0] and own in named[0], named[0]
    assert f'POSITION MISMATCH: pretrained checkpoint {path} holds {theirs}, ' \
        f'the config builds {own}; ' in named[0]
    assert all(fate in named[0] for fate in fates), named[0]
    strict = RoPEVisionTransformer(arch=ARCH, out_type='raw', **target,
                                   init_cfg=dict(type='Pretrained',
                                                 checkpoint=path, strict=True))
    with pytest.raises(CheckpointMismatchError) as err:
        strict.init_weights()
    assert f'holds {theirs}, the config builds {own}' in str(err.value)
    assert str(err.value).endswith('refused (init_cfg strict=True)')
    assert '\n' not in str(err.value)


def test_other_keys_keep_their_warning_beside_the_position_mismatch(
        tmp_path, log):
    """The key report's warnings leave out only the position keys: an
    unexpected key that is no position tensor keeps its line (and its
    count), the position keys are named by the mismatch line and logged
    at DEBUG."""
    path = save_pretraining_checkpoint(tmp_path / 'p.pth',
                                       pretraining_backbone(**APE))
    state = torch.load(path)
    state['state_dict']['backbone.extra_token'] = torch.zeros(1, 1, 32)
    torch.save(state, path)
    MMLogger.get_current_instance().setLevel(logging.DEBUG)
    RoPEVisionTransformer(arch=ARCH, out_type='raw', **MIXED, init_cfg=dict(
        type='Pretrained', checkpoint=path)).init_weights()
    warnings = [r.getMessage() for r in log if r.levelno == logging.WARNING]
    assert warnings[0] == ('RoPEVisionTransformer: 1 unexpected keys '
                           '(ignored): extra_token')
    assert len(warnings) == 2 and 'POSITION MISMATCH' in warnings[1]
    assert 'RoPEVisionTransformer: 4 missing keys (left as initialised): ' \
        'rope.freqs.0, rope.freqs.1, rope.freqs.2, rope.freqs.3' in [
            r.getMessage() for r in log if r.levelno == logging.DEBUG]


def test_same_position_scheme_loads_without_a_warning_also_strictly(
        tmp_path, log):
    path = save_pretraining_checkpoint(tmp_path / 'p.pth',
                                       pretraining_backbone(**MIXED))
    RoPEVisionTransformer(arch=ARCH, out_type='raw', **MIXED, init_cfg=dict(
        type='Pretrained', checkpoint=path, strict=True)).init_weights()
    assert not messages(log, logging.WARNING)
    with pytest.raises(ValueError, match="strict must be True or False, "
                       "got 'yes'"):
        RoPEVisionTransformer(arch=ARCH, init_cfg=dict(
            type='Pretrained', checkpoint=path, strict='yes'))


def test_raw_icpf_checkpoint_is_refused_for_an_ape_backbone(tmp_path):
    """An unconverted ICPF checkpoint would load its never-trained backbone
    pos_embed into an APE backbone; the loader refuses and names the
    converter. The converted file (no field) loads."""
    backbone = RoPEVisionTransformer(arch=ARCH, img_size=32, patch_size=8,
                                     rope=None, use_ape=True)
    state = {f'backbone.{k}': v for k, v in backbone.state_dict().items()}
    state['pos_field.field'] = torch.zeros(1, 32, 5, 5)
    raw = tmp_path / 'icpf.pth'
    torch.save(dict(state_dict=state), raw)
    with pytest.raises(RuntimeError, match='ICPF.*mmpos2backbone'):
        load_pretrained(backbone, str(raw))
    del state['pos_field.field']
    converted = tmp_path / 'backbone.pth'
    torch.save(dict(state_dict=state), converted)
    assert not load_pretrained(backbone, str(converted))['missing']
