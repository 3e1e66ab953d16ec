"""mmpos.guardrails.config_check: misspelled keys and arguments before
anything is built, one line for what a constructor rejects."""
import pytest
from mmengine.config import Config
from mmengine.registry import Registry

from conftest import REPO
from mmpos.errors import BadInputError, LaunchError
from mmpos.guardrails.config_check import blame_config, config_dicts
from mmpos.guardrails.launch import load_config

SEG_CONFIG = 'configs/demo/upernet_vit-tiny-rope-mixed_mini-ade.py'


def test_misspelled_config_keys(tmp_path):
    config = tmp_path / 'typo.py'
    config.write_text(f"_base_ = ['{REPO / SEG_CONFIG}']\n"
                      'trian_dataloader = dict(batch_size=2)\n'
                      'model = dict(backbone=dict(drop_path_rat=0.1))\n')
    with pytest.raises(LaunchError) as info:
        load_config(str(config))
    assert str(info.value) == (
        f"{config}: unknown top-level key 'trian_dataloader' (did you mean "
        "'train_dataloader'?); model.backbone.drop_path_rat: "
        "RoPEVisionTransformer takes no argument 'drop_path_rat' (did you "
        "mean 'drop_path_rate'?)")
    with pytest.raises(LaunchError, match="unknown top-level key 'trian_cfg'"
                       r" \(did you mean 'train_cfg'\?\)"):
        load_config(SEG_CONFIG, {'trian_cfg.max_iters': 2})
    # New keys that the class takes, and helper variables, are fine.
    cfg = load_config(SEG_CONFIG, {'model.backbone.frozen_stages': 1})
    assert cfg.model.backbone.frozen_stages == 1 and 'train_pipeline' in cfg


def test_options_are_checked_inside_the_dicts_they_give_or_retype():
    """A dict value of --cfg-options (``model.backbone.rope=dict(...)``),
    a new ``type`` (every key against the new class) and a new key of a
    nested typed dict are checked; keys the class takes pass."""
    for options, problem in [
        ({'model.backbone.rope': dict(type='axial', thetaa=10.)},
         "model.backbone.rope.thetaa: AxialRoPE takes no argument 'thetaa' "
         "(did you mean 'theta'?)"),
        ({'model.backbone.rope.type': 'axial',
          'model.backbone.rope.rotate_init': False},
         "model.backbone.rope.rotate_init: AxialRoPE takes no argument "
         "'rotate_init'"),
        ({'model.backbone.rope.thetaa': 10.},
         "model.backbone.rope.thetaa: MixedRoPE takes no argument 'thetaa' "
         "(did you mean 'theta'?)"),
        ({'train_dataloader.dataset.pipeline.1.reduce_zero_labels': True},
         'train_dataloader.dataset.pipeline.1.reduce_zero_labels: '
         "LoadAnnotations takes no argument 'reduce_zero_labels' (did you "
         "mean 'reduce_zero_label'?)"),
    ]:
        with pytest.raises(LaunchError) as info:
            load_config(SEG_CONFIG, options)
        assert str(info.value) == f'{SEG_CONFIG}: {problem}'
    cfg = load_config(SEG_CONFIG, {
        'model.backbone.rope': dict(type='axial', theta=10.),
        'train_pipeline': []})  # an existing helper variable
    assert cfg.model.backbone.rope == dict(type='axial', theta=10.)


def test_config_dicts_walks_every_nested_dict_once():
    cfg = dict(model=dict(type='A', heads=[dict(type='B'), 3,
                                           (dict(c=dict(type='C')), )]),
               lr=0.1)
    assert [(where, node.get('type')) for where, node in config_dicts(cfg)
            ] == [('', None), ('model', 'A'), ('model.heads.0', 'B'),
                  ('model.heads.2.0', None), ('model.heads.2.0.c', 'C')]
    assert [w for w, _ in config_dicts([dict(x=1)], 'hooks')] == ['hooks.0']
    assert list(config_dicts(3)) == []


def test_blame_config_names_the_class_and_the_error_without_guessing():
    """A value that a registry-built class rejects: one line naming that
    class (the innermost build) and its error; a type no registry holds:
    its config key and the closest name; anything else keeps its type and
    traceback."""
    registry = Registry('guardrails_blame')

    @registry.register_module()
    class Part:

        def __init__(self, size=4, mode='a'):
            if mode not in ('a', 'b'):
                raise ValueError(f'mode must be a or b, got {mode!r}')
            if size == 5:
                raise RuntimeError('a bug, not the value')

    @registry.register_module()
    class Whole:

        def __init__(self, part):
            self.part = registry.build(part)

    def build(**part):
        cfg = Config(dict(model=dict(type='Whole',
                                     part={'type': 'Part', **part})))
        with blame_config(cfg):
            registry.build(cfg.model)

    with pytest.raises(BadInputError,
                       match=r"^Part rejected its config arguments: "
                       r"ValueError: mode must be a or b, got 'c'$"):
        build(mode='c')
    with pytest.raises(BadInputError) as info:
        build(type='Prat')
    assert str(info.value).startswith(
        f"model.part.type='Prat' is not registered in {registry.scope}::"
        'guardrails_blame; if a module defines it, the config must import')
    with pytest.raises(RuntimeError, match='a bug'):  # not a rejection
        build(size=5)
    with pytest.raises(ValueError, match='^not built') as info:
        with blame_config(Config(dict())):  # raised outside any build
            raise ValueError('not built by a registry')
    assert not isinstance(info.value, BadInputError)
    build(size=4)


def test_an_option_into_a_value_that_is_not_a_dict_names_the_way_out():
    """On an APE config (``rope=None``) ``rope.type=axial`` cannot merge;
    mmengine raises a TypeError from deep inside its merge. The launch
    stops with one line naming the option and the options that replace
    the value as a whole, and those options build the scheme."""
    ape = 'configs/droppos/droppos_vit-tiny_mini.py'
    with pytest.raises(LaunchError) as info:
        load_config(ape, {'model.backbone.rope.type': 'axial',
                          'model.backbone.rope.theta': 10.})
    assert str(info.value) == (
        f'{ape}: --cfg-options model.backbone.rope.type=axial: '
        'model.backbone.rope is None in this config, not a dict, so its keys '
        'cannot be set one by one; replace it as a whole: --cfg-options '
        'model.backbone.rope._delete_=True model.backbone.rope.type=axial '
        'model.backbone.rope.theta=10.0')
    cfg = load_config(ape, {'model.backbone.rope._delete_': True,
                            'model.backbone.rope.type': 'axial',
                            'model.backbone.rope.theta': 10.})
    assert cfg.model.backbone.rope == dict(type='axial', theta=10.)


DROPPOS_MINI = 'configs/droppos/droppos_vit-tiny_mini.py'


@pytest.mark.parametrize('options, problem', [
    ({'train_dataloader.dataset.data_rot': 'data/x'},
     "train_dataloader.dataset.data_rot: CustomDataset takes no argument "
     "'data_rot' (did you mean 'data_root'?)"),
    ({'train_dataloader.batchsize': 8},
     "train_dataloader.batchsize: a dataloader takes no argument 'batchsize' "
     "(did you mean 'batch_size'?)"),
    ({'train_dataloader.sampler.shufle': False},
     "train_dataloader.sampler.shufle: InfiniteSampler takes no argument "
     "'shufle' (did you mean 'shuffle'?)"),
    ({'train_dataloader.dataset.pipeline.1.interpolaton': 'bicubic'},
     "train_dataloader.dataset.pipeline.1.interpolaton: Resize takes no "
     "argument 'interpolaton' (did you mean 'interpolation'?)"),
    ({'default_hooks.logger.intervall': 1},
     "default_hooks.logger.intervall: LoggerHook takes no argument "
     "'intervall' (did you mean 'interval'?)"),
    ({'param_scheduler.0.end_factorr': 1.},
     "param_scheduler.0.end_factorr: LinearLR takes no argument "
     "'end_factorr' (did you mean 'end_factor'?)"),
    ({'max_iter': 4},
     "unknown top-level key 'max_iter' (did you mean 'train_cfg.max_iters'?)"),
    ({'model.backbone.img_size': 36},
     'model.backbone.img_size=36 is not a multiple of patch_size=8: DropPos '
     "predicts each patch's position on a grid of whole patches "
     '(model.head.num_patches); use img_size=32 or 40'),
    ({'model.head.num_patches': 25},
     'model.head.num_patches=25 is not the 4x4 patch grid of '
     'model.backbone.img_size=32, patch_size=8; use num_patches=16'),
])
def test_a_typo_at_any_depth_is_one_line_with_the_closest_key(
        options, problem):
    """#58: datasets, dataloaders, samplers, transforms, hooks, schedulers,
    top-level keys and DropPos' patch grid, before anything is built."""
    with pytest.raises(LaunchError) as info:
        load_config(DROPPOS_MINI, options)
    assert str(info.value) == f'{DROPPOS_MINI}: {problem}'


def test_a_users_config_is_checked_at_every_depth(tmp_path):
    """own_images.md's situation: a typo in one's own config (no
    --cfg-options), and a position scheme's ``type`` typo."""
    config = tmp_path / 'mine.py'
    config.write_text(
        f"_base_ = ['{REPO / DROPPOS_MINI}']\n"
        "train_dataloader = dict(dataset=dict(data_roott='data/mine'))\n")
    with pytest.raises(LaunchError) as info:
        load_config(str(config))
    assert str(info.value) == (
        f'{config}: train_dataloader.dataset.data_roott: CustomDataset takes '
        "no argument 'data_roott' (did you mean 'data_root'?)")
    cls_config = REPO / 'configs/rope_vit/vit-mini_rope-mixed_mini-cls.py'
    config.write_text(
        f"_base_ = ['{cls_config}']\n"
        "model = dict(backbone=dict(rope=dict(type='mixd')))\n")
    with pytest.raises(LaunchError) as info:
        load_config(str(config))
    assert str(info.value) == (
        f"{config}: model.backbone.rope.type='mixd' is not registered in "
        "position encoding (did you mean 'mixed'?); if a module defines it, "
        'the config must import that module (custom_imports)')


def test_kwargs_are_followed_only_where_they_go_to_the_base_class():
    """CustomDataset hands its ``**kwargs`` to BaseDataset (checked);
    OnlineDepthProbeHook keeps its own (not checked)."""
    from mmengine.dataset import BaseDataset
    from mmpretrain.datasets import CustomDataset

    from mmpos.engine.hooks.dense_probes import OnlineDepthProbeHook
    from mmpos.guardrails.config_check import (accepted_arguments,
                                               forwards_kwargs)
    assert forwards_kwargs(CustomDataset.__init__)
    assert set(accepted_arguments(CustomDataset)) >= {
        'data_root', 'extensions', 'pipeline', 'serialize_data'}
    assert set(accepted_arguments(BaseDataset)) < set(
        accepted_arguments(CustomDataset))
    assert not forwards_kwargs(OnlineDepthProbeHook.__init__)
    assert accepted_arguments(OnlineDepthProbeHook) is None
