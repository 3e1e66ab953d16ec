"""One-line model loading from a local checkpoint: mmpos.apis.load_backbone
and hubconf.py's ``backbone`` read the config the checkpoint records (a
training checkpoint's meta.cfg, an mmpos2backbone.py output's
meta.backbone_cfg) and give the trained weights."""
import importlib.util

import pytest
import torch
from mmengine.config import Config

from conftest import REPO
from mmpos.apis import build_backbone, extract_features, load_backbone
from mmpos.errors import BadInputError

CONFIG = 'configs/demo/droppos_vit-tiny-rope-mixed_mini.py'


@pytest.fixture(scope='module')
def trained(tmp_path_factory):
    """A training checkpoint as mmengine's Runner writes one (the model's
    state dict and the config text in meta.cfg) of random weights."""
    torch.manual_seed(0)
    backbone = build_backbone(REPO / CONFIG)
    path = tmp_path_factory.mktemp('ckpt') / 'iter_3.pth'
    torch.save(dict(
        state_dict={f'backbone.{k}': v
                    for k, v in backbone.state_dict().items()},
        meta=dict(cfg=Config.fromfile(REPO / CONFIG).pretty_text)), path)
    return path, backbone.eval()


def converter():
    """tools/model_converters/mmpos2backbone.py as a module (its command
    line's exit codes and errors are tested in tests/tools/)."""
    spec = importlib.util.spec_from_file_location(
        'mmpos2backbone', REPO / 'tools/model_converters/mmpos2backbone.py')
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def tokens(backbone):
    images = torch.linspace(-1, 1, 2 * 3 * 32 * 32).reshape(2, 3, 32, 32)
    return extract_features(backbone, images)['patch_tokens']


def test_training_checkpoint_and_backbone_file_load_in_one_line(
        trained, tmp_path):
    path, reference = trained
    assert torch.equal(tokens(load_backbone(str(path))), tokens(reference))
    bare = tmp_path / 'backbone.pth'
    converter().main([str(path), str(bare)])  # in this process
    assert torch.equal(tokens(load_backbone(str(bare))), tokens(reference))


def test_torch_hub_loads_from_the_checkout(trained):
    path, reference = trained
    backbone = torch.hub.load(str(REPO), 'backbone', str(path),
                              source='local', trust_repo=True)
    assert torch.equal(tokens(backbone), tokens(reference))


def test_a_checkpoint_without_config_asks_for_one(tmp_path):
    path = tmp_path / 'weights.pth'
    torch.save(dict(state_dict={}), path)
    with pytest.raises(BadInputError, match='records no config.*pass the '
                       'config it was trained with'):
        load_backbone(str(path))
