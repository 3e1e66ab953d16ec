"""Plan a config's training run before it is launched: one real training
step of the config's real model (nothing shrunk) under fake tensors
(``torch._subclasses.FakeTensorMode``: shapes, no memory), with torch's
own counters: ``torch.utils.flop_counter.FlopCounterMode`` for the FLOPs
and ``torch.distributed._tools.MemTracker`` for the memory by kind, as
torchtitan's ``scripts/estimate/estimation.py`` uses them.

The step (:func:`real_step`, which runs for real as well: the
measurements that check the plan use it) is the one mmengine's Runner
takes: a batch of the config's own train pipeline (on a synthetic image
of ``image_size``, repeated to the batch; a COCO or ADE20K config's own
dataset on the rehearsal's synthetic sample: a 1024x768 image with 3
instances, a 683x512 image and label map, so that LSJ 1024 crops and
512x512 crops come out at their real size), its data preprocessor (run
for real: it draws batch augments), the model's ``loss``, ``backward``
and the config's optimizer wrapper's step (AMP as autocast in the
wrapper's dtype), twice, so that the second step holds the optimizer's
state as every later step does. The peak is that of the second step.

Fake tensors have no values. Where a step reads one (``.item()``,
``bool(t)``: a loss's guard, an EMA step counter, a masking loop's exit
test, a DropPos sigma) or asks for a data-dependent shape (``nonzero``,
``unique``), :func:`_stand_ins` answers: a read gives ``1`` / ``1.`` /
``False``, a data-dependent size its upper bound (every element: a
detector's anchors, its proposals after NMS, the RoI sampler's most
positives), host copies (``.numpy()``) arrays of ones. The plan counts
those answers in its notes; tests/analysis/test_plan.py checks a
self-supervised step and a Mask R-CNN step planned this way against
their measured peaks. mmcv's RoIAlign and NMS kernels read memory: a
detector's step runs torchvision's (:func:`_for_fake`). A step that still
cannot run raises ``NotImplementedError`` naming the config.

A config that trains with FSDP (``configs/_base_/fsdp.py``) is planned
per GPU of the run's GPUs (``world_size``): its model is sharded as the
config's ``auto_wrap_policy`` makes units (:func:`fully_shard`, FULL_SHARD)
by FSDP2's ``fully_shard`` on torch's fake process group of that size
(:func:`fake_world`), and ``torch.distributed._tools.FSDPMemTracker``
tracks the step, as torchtitan's estimation does: each GPU holds
``1/world_size`` of the parameters, gradients and optimizer state
(a frozen teacher's parameters too, sharded like the rest), the gathered
parameters of the root unit and of the units that run (the next one
prefetched), the collectives' buffers, and the activations of its own
batch. The configs wrap with FSDP1 (mmengine's ``FlexibleRunner``), which
gathers and frees the same units: its flat parameters' padding and its
prefetch order are FSDP2's here.

What it does not model (said by :func:`plan`'s ``notes``): CUDA's caching
allocator (fragmentation) and the CUDA context, for which
:data:`RESERVED_GIB` of a GPU is kept free; communication (its time and
NCCL's buffers).
"""
import contextlib
import copy
import dataclasses
import math
import os.path as osp
from typing import Dict, List, Optional

import numpy as np
import torch

#: GPUs a plan can name: memory (GiB, as ``torch.cuda`` reports it), dense
#: bf16 / fp16 and fp32 peaks (TFLOP/s, the vendors' data sheets; fp32
#: without TF32, PyTorch's default for matrix products)
GPUS = {
    'a100-40gb': (40.0, 312.0, 19.5), 'a100-80gb': (80.0, 312.0, 19.5),
    'h100-80gb': (79.6, 989.0, 67.0), 'h200': (139.8, 989.0, 67.0),
    'l40s': (44.5, 362.0, 91.6),
}
#: what a GPU's plan keeps free for the CUDA context and the caching
#: allocator's fragmentation
RESERVED_GIB = 2.0
#: model FLOP utilisation assumed where no GPU measurement exists, and
#: the range printed beside it
MFU, MFU_RANGE = 0.4, (0.3, 0.5)
#: images per epoch of the datasets the paper configs name
EPOCH_IMAGES = {'ImageNet': 1281167, 'CocoDataset': 118287,
                'ADE20KDataset': 20210}
#: datasets whose samples need annotations: the planner feeds the config's
#: own dataset on the rehearsal's synthetic data (``_annotated_item``)
ANNOTATED = ('CocoDataset', 'ADE20KDataset')
KINDS = ('PARAM', 'BUFFER', 'GRAD', 'OPT', 'ACT', 'TEMP', 'OTH')
#: an FSDP plan's kinds (``FSDPMemTracker``'s) by the names of
#: :data:`KINDS` where they mean the same per GPU: this GPU's shards
SHARDED = {'SHARDED_PARAM': 'PARAM', 'SHARDED_GRAD': 'GRAD'}


@dataclasses.dataclass
class Plan:
    """One training step of a config at ``batch`` images per GPU.

    Attributes:
        params: parameters of the model.
        flops_fwd, flops_train: FLOPs per image of the forward and of
            forward plus backward (a multiply-add is 2 FLOPs, torch's
            convention).
        peak: peak bytes per GPU by kind (:data:`KINDS`) and ``Total``.
        max_iters: the schedule's iterations, where it counts iterations.
        epochs, epoch_images: its epochs and the images of one, where it
            counts epochs of a dataset of :data:`EPOCH_IMAGES`.
        amp: the autocast dtype of the step (None: fp32).
        notes: what the plan assumed.
        world_size: the GPUs an FSDP plan's model is sharded on (1: not
            sharded, every GPU holds the whole model as under DDP).
    """
    config: str
    batch: int
    params: int
    flops_fwd: float
    flops_train: float
    peak: Dict[str, float]
    max_iters: Optional[int]
    epochs: Optional[int]
    epoch_images: Optional[int]
    amp: Optional[torch.dtype]
    notes: List[str]
    world_size: int = 1

    def fits(self, gpu: str) -> bool:
        """Whether the peak fits ``gpu`` with :data:`RESERVED_GIB` free."""
        return self.peak['Total'] / 2**30 <= GPUS[gpu][0] - RESERVED_GIB

    def peak_tflops(self, gpu: str) -> float:
        """``gpu``'s peak in the step's precision."""
        return GPUS[gpu][1 if self.amp is not None else 2]

    def step_seconds(self, gpu: str, mfu: float = MFU) -> float:
        """One step's time on ``gpu`` at model FLOP utilisation ``mfu`` of
        the peak in the step's precision."""
        return self.flops_train * self.batch / (
            self.peak_tflops(gpu) * 1e12 * mfu)

    def iterations(self, gpus: int) -> Optional[int]:
        """The schedule's iterations at :attr:`batch` images on each of
        ``gpus`` GPUs (None: unknown)."""
        if self.max_iters:
            return self.max_iters
        if self.epochs and self.epoch_images:
            return math.ceil(self.epoch_images /
                             (self.batch * gpus)) * self.epochs
        return None

    def gpu_hours(self, gpu: str, gpus: int, mfu: float = MFU
                  ) -> Optional[float]:
        """GPU-hours of the schedule on ``gpus`` GPUs of ``gpu``."""
        iters = self.iterations(gpus)
        if iters is None:
            return None
        return self.step_seconds(gpu, mfu) * iters * gpus / 3600


def _sdpa(query, key, value, *args, out_shape=None, **kwargs) -> int:
    from torch.utils.flop_counter import sdpa_flop_count
    return sdpa_flop_count(query, key, value)


def _sdpa_backward(grad_out, query, key, value, *args, out_shape=None,
                   **kwargs) -> int:
    from torch.utils.flop_counter import sdpa_backward_flop_count
    return sdpa_backward_flop_count(grad_out, query, key, value)


# FlopCounterMode counts the CUDA kernels of scaled_dot_product_attention;
# the fake step dispatches to the CPU one, which it does not know: the same
# formulas (the attention's two products)
_CPU_SDPA = {
    torch.ops.aten._scaled_dot_product_flash_attention_for_cpu: _sdpa,
    torch.ops.aten._scaled_dot_product_flash_attention_for_cpu_backward:
    _sdpa_backward,
}


@contextlib.contextmanager
def _one_line(config: str):
    """A training step that reads a tensor's value in a way
    :func:`_stand_ins` does not answer cannot run on fake tensors: one line
    saying so."""
    from torch._subclasses.fake_tensor import (DataDependentOutputException,
                                               DynamicOutputShapeException)
    try:
        yield
    except (DataDependentOutputException,
            DynamicOutputShapeException) as err:
        raise NotImplementedError(
            f'{config}: its training step reads tensor values ({err.func}),'
            ' which fake tensors do not have; it cannot be planned yet') \
            from None


def _read_site():
    """``(file, line)`` of the code outside torch and this module that
    reads a tensor's value now."""
    import sys
    frame = sys._getframe(1)
    while frame is not None and (
            frame.f_code.co_filename == __file__
            or f'{osp.sep}torch{osp.sep}' in frame.f_code.co_filename):
        frame = frame.f_back
    return (frame.f_code.co_filename, frame.f_lineno) if frame else None


def _stand_ins(turned=frozenset()):
    """A dispatch mode, entered inside the fake mode, that runs an op whose
    tensors are all real (the data samples' crop boxes, labels, instances)
    for real, and answers what fake tensors cannot (module docstring):
    ``aten._local_scalar_dense`` (every ``.item()``, ``int(t)``,
    ``bool(t)``) gives ``1`` / ``1.`` (not 0: an optimizer divides by its
    bias correction at step 1) and ``False`` for a boolean; ``nonzero``
    (also a boolean mask's indexing) gives one index per element,
    ``_unique2`` every element as its own value, torchvision's ``nms``
    every box (their largest outputs); ``Tensor.numpy`` (a torch-function
    mode entered with it: a detector's mask targets and matching on the
    host) an array of ones of the tensor's shape and dtype; a real tensor's
    deepcopy and a fake tensor's ``torch._shape_as_tensor`` (its known
    shape) are real. At a ``(file, line)`` of ``turned`` (:func:`plan`
    names the lines where these answers stopped the step), a boolean read
    gives ``True`` and ``_unique2`` one value instead. ``reads`` counts the
    answers, ``last_site`` is the line of the last boolean or unique
    answer."""
    from torch._subclasses.fake_tensor import (FakeTensor,
                                               unset_fake_temporarily)
    from torch.overrides import TorchFunctionMode
    from torch.utils import _pytree as pytree
    from torch.utils._python_dispatch import (TorchDispatchMode,
                                              is_traceable_wrapper_subclass)
    aten = torch.ops.aten

    class HostOps(TorchFunctionMode):

        def __init__(self, owner):
            super().__init__()
            self.owner = owner

        def __torch_function__(self, func, types, args=(), kwargs=None):
            if func in (torch.Tensor.numpy, torch.Tensor.__array__) and \
                    isinstance(args[0], FakeTensor):
                # ``__array__``: NumPy's view (scipy's matching of a cost)
                self.owner.reads += 1
                with unset_fake_temporarily():
                    return torch.ones(args[0].shape,
                                      dtype=args[0].dtype).numpy()
            if func is torch._shape_as_tensor and isinstance(args[0],
                                                             FakeTensor):
                # the shape is known: a real tensor (Deformable DETR's
                # spatial shapes, used to split and index on the host)
                with unset_fake_temporarily():
                    return torch.tensor(args[0].shape)
            if func is torch.Tensor.__deepcopy__ and not isinstance(
                    args[0], FakeTensor):
                # a real tensor's copy (a detector copies its data samples)
                with unset_fake_temporarily():
                    return func(*args, **(kwargs or {}))
            return func(*args, **(kwargs or {}))

    class StandIns(TorchDispatchMode):
        reads = 0
        last_site = None

        def __enter__(self):
            self.host_ops = HostOps(self).__enter__()
            return super().__enter__()

        def __exit__(self, *exc):
            try:
                return super().__exit__(*exc)
            finally:
                self.host_ops.__exit__(*exc)

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            tensors = [t for t in pytree.tree_leaves((args, kwargs))
                       if isinstance(t, torch.Tensor)]
            if tensors and not any(isinstance(t, FakeTensor) or
                                   is_traceable_wrapper_subclass(t)
                                   for t in tensors):
                # real in, real out: the host's work on the data samples
                # (a DTensor of an FSDP plan holds a fake shard)
                with unset_fake_temporarily():
                    return func(*args, **kwargs)
            if func is aten._local_scalar_dense.default:
                self.reads += 1
                dtype = args[0].dtype
                if dtype is torch.bool:
                    self.last_site = _read_site()
                    return self.last_site in turned
                return 1. if dtype.is_floating_point else 1
            if func is aten.nonzero.default:
                self.reads += 1
                x = args[0]
                return x.new_empty((x.numel(), x.dim()), dtype=torch.long)
            if func._schema.name == 'torchvision::nms':
                self.reads += 1
                return args[0].new_empty((len(args[0]), ), dtype=torch.long)
            if func in (aten.index.Tensor, aten.index_put_.default,
                        aten.index_put.default) and any(
                            i is not None and i.dtype is torch.bool
                            for i in args[1]):
                # a boolean mask selects its nonzero stand-in's elements
                self.reads += 1
                indices = []
                for index in args[1]:
                    if index is None or index.dtype is not torch.bool:
                        indices.append(index)
                        continue
                    indices += [index.new_empty((index.numel(), ),
                                                dtype=torch.long)
                                ] * index.dim()
                return func(args[0], indices, *args[2:], **kwargs)
            if func is aten._unique2.default:
                self.reads += 1
                self.last_site = _read_site()
                x = args[0]
                # every element its own value, or one value at a turned site
                flat = x.reshape(-1)[:1 if self.last_site in turned else
                                     None].clone()
                inverse = (x.new_empty(x.shape, dtype=torch.long)
                           if kwargs.get('return_inverse', args[3:4] and
                                         args[3]) else
                           x.new_empty((0, ), dtype=torch.long))
                counts = (x.new_empty(flat.shape, dtype=torch.long)
                          if kwargs.get('return_counts', args[4:5] and
                                        args[4]) else
                          x.new_empty((0, ), dtype=torch.long))
                return flat, inverse, counts
            return func(*args, **kwargs)

    return StandIns()


def _rehome(model, mode):
    """Tensors of ``model`` that a deepcopy made under ``mode`` left in a
    fake mode of their own (an EMA teacher copying its fake student) are
    replaced by ``mode``'s tensors of the same shape: fake values do not
    matter, one step must not mix modes."""
    from torch._subclasses.fake_tensor import FakeTensor
    for module in model.modules():
        for store in (module._parameters, module._buffers):
            for name, tensor in store.items():
                if isinstance(tensor, FakeTensor) and \
                        tensor.fake_mode is not mode:
                    with mode:
                        new = torch.empty_strided(tensor.shape,
                                                  tensor.stride(),
                                                  dtype=tensor.dtype)
                    store[name] = (torch.nn.Parameter(
                        new, tensor.requires_grad) if isinstance(
                            tensor, torch.nn.Parameter) else new)


def _tracker():
    """torch's ``MemTracker``, except that a module with a frozen parameter
    (an EMA teacher, a fixed embedding) gets no gradient hooks: torch's
    registers one on every parameter and fails on those that need no
    gradient. Their trainable parameters' gradients are still counted
    (as gradients through the hooks of the modules that hold them, or
    else as temporaries), so the total is unchanged."""
    from torch.distributed._tools.mem_tracker import MemTracker

    class Tracker(MemTracker):

        def _track_module_params_and_buffers(self, module,
                                             install_grad_hooks=True):
            frozen = any(not p.requires_grad for p in module.parameters())
            return super()._track_module_params_and_buffers(
                module, install_grad_hooks and not frozen)

    return Tracker()


def _nms(boxes, scores, iou_threshold, offset=0, score_threshold=0,
         max_num=-1):
    """``mmcv.ops.nms`` (``(dets, kept indices)``) through torchvision's
    NMS, which has a fake-tensor kernel (mmcv's reads the tensors'
    memory); the configs' NMS (offset 0, no score threshold) only."""
    from torchvision.ops import nms
    if offset or score_threshold:
        raise NotImplementedError(
            f'the planner runs NMS through torchvision, without offset '
            f'({offset}) or score_threshold ({score_threshold})')
    keep = nms(boxes, scores, iou_threshold)
    if max_num > 0:
        keep = keep[:max_num]
    return torch.cat([boxes[keep], scores[keep, None]], 1), keep


def _for_fake(node):
    """``node`` (a model config) as its step runs on fake tensors: mmcv's
    ``RoIAlign`` through torchvision's (its ``use_torchvision`` option,
    same output) and NMS through :func:`_nms` (a function as
    ``batched_nms``' ``nms_cfg.type``), the ops of a detector's step whose
    mmcv kernels read memory, which fake tensors do not have; an anchor
    head's ``allowed_border`` -1 (mmdet's option to skip its test that
    some anchor lies inside the image, a read a stand-in answers
    ``False``; the stand-ins select every anchor either way)."""
    if isinstance(node, dict):
        node = type(node)({k: _for_fake(v) for k, v in node.items()})
        if node.get('type') == 'RoIAlign':
            node['use_torchvision'] = True
        if node.get('type') == 'nms':
            node['type'] = _nms
        if 'allowed_border' in node:
            node['allowed_border'] = -1
        return node
    if isinstance(node, (list, tuple)):
        return type(node)(_for_fake(v) for v in node)
    return node


def _build(model_cfg, mode):
    """The model of ``model_cfg`` with fake parameters, built in ``mode``;
    the values its initialisation reads (the truncated normal of DINO's
    heads: torch's rejection loop) answered by :func:`_stand_ins`, so that
    nothing of it is allocated (a 7B teacher)."""
    from mmengine.registry import MODELS
    with mode, _stand_ins():
        model = MODELS.build(copy.deepcopy(model_cfg))
    _rehome(model, mode)
    return model


def _image(size) -> str:
    """A synthetic image of ``size = (h, w)`` for the pipeline
    (:func:`mmpos.datasets.synthetic.write_image`, seed 0)."""
    import os
    import tempfile

    from mmpos.datasets.synthetic import write_image
    path = os.path.join(tempfile.mkdtemp(prefix='mmpos_plan_'), 'image.jpg')
    write_image(path, size[::-1], seed=0)
    return path


def _fake(node, mode):
    """``node`` (tensors in dicts, lists and data elements) as fake tensors
    of ``mode``."""
    from mmengine.structures import BaseDataElement
    if isinstance(node, torch.Tensor):
        return mode.from_tensor(node)
    if isinstance(node, dict):
        return {k: _fake(v, mode) for k, v in node.items()}
    if isinstance(node, (list, tuple)):
        return type(node)(_fake(v, mode) for v in node)
    if isinstance(node, BaseDataElement):
        out = node.new()
        for key, value in node.items():
            out.set_field(_fake(value, mode), key)
        return out
    return node


def _train_dataset(cfg) -> dict:
    """The dataset config of ``cfg``'s train dataloader (inside its
    wrappers)."""
    dataset = cfg.train_dataloader.dataset
    while 'dataset' in dataset:
        dataset = dataset.dataset
    return dataset


def _pipeline_item(cfg, image_size, fake=False):
    """One sample of ``cfg``'s train pipeline: on a synthetic
    ``image_size`` image with label 0, or, for a dataset with annotations
    (:data:`ANNOTATED`), the first sample of the config's own train
    dataset on the rehearsal's synthetic data (:func:`_annotated_item`; for
    a ``fake`` step)."""
    if _train_dataset(cfg).get('type') in ANNOTATED:
        return _annotated_item(cfg, fake)
    from mmengine.dataset import Compose
    pipeline = Compose(copy.deepcopy(cfg.train_dataloader.dataset.pipeline))
    return pipeline(dict(img_path=_image(image_size), gt_label=0))


def _annotated_item(cfg, fake: bool):
    """The first sample of ``cfg``'s train dataset built on the synthetic
    data of :func:`mmpos.datasets.synthetic.synthesize` (COCO: a 1024x768
    image with ``synthetic.INSTANCES`` (3) boxes and polygon masks; ADE20K: a 683x512
    image and its label map), through the dataset's own loading and
    pipeline, with Python's and NumPy's generators seeded 0 (restored
    after), so that a plan's random resize and crop repeat. For a
    ``fake`` step, instance masks stay polygons (``LoadAnnotations``'
    ``poly2mask=False``): a bitmap's mask targets go through mmcv's
    RoIAlign kernel, which reads memory; a polygon's are cut on the host,
    of the same shape."""
    import random
    import tempfile

    from mmengine.config import Config
    from mmengine.registry import DATASETS

    from mmpos.datasets.synthetic import synthesize
    loader = Config(dict(train_dataloader=copy.deepcopy(
        cfg.train_dataloader.to_dict())))
    if fake:
        for transform in _train_dataset(loader)['pipeline']:
            if transform.get('with_mask'):
                transform['poly2mask'] = False
    synthesize(loader, tempfile.mkdtemp(prefix='mmpos_plan_'), procs=1)
    dataset = DATASETS.build(loader.train_dataloader.dataset)
    states = random.getstate(), np.random.get_state()
    random.seed(0)
    np.random.seed(0)
    try:
        return dataset[0]
    finally:
        random.setstate(states[0])
        np.random.set_state(states[1])


def collate_fn(cfg):
    """The collate function of ``cfg``'s train dataloader (mmengine's
    default: ``pseudo_collate``)."""
    from mmengine.registry import FUNCTIONS
    collate = copy.deepcopy(cfg.train_dataloader.get(
        'collate_fn', dict(type='pseudo_collate')))
    return FUNCTIONS.get(collate.pop('type'))


def _collate(cfg, item, batch: int):
    """``batch`` copies of ``item`` collated by ``cfg``'s dataloader."""
    return collate_fn(cfg)([copy.deepcopy(item) for _ in range(batch)])


def plain_optim_wrapper(cfg):
    """``(wrapper config, AMP dtype)``: ``cfg.optim_wrapper`` as a plain
    ``OptimWrapper`` config (no loss scaling: a CPU step) and the autocast
    dtype an ``AmpOptimWrapper`` named (None: fp32)."""
    wrapper = copy.deepcopy(cfg.optim_wrapper)
    if wrapper.get('type') != 'AmpOptimWrapper':
        return wrapper, None
    dtype = getattr(torch, str(wrapper.pop('dtype', 'float16')))
    wrapper.pop('loss_scale', None)
    wrapper.type = 'OptimWrapper'
    return wrapper, dtype


def schedule(cfg) -> dict:
    """``max_iters``, or ``epochs`` and ``epoch_images`` (a dataset of
    :data:`EPOCH_IMAGES`), of the config's train loop (None: unknown)."""
    train = cfg.get('train_cfg') or {}
    dataset = _train_dataset(cfg)
    return dict(max_iters=train.get('max_iters'),
                epochs=train.get('max_epochs'),
                epoch_images=EPOCH_IMAGES.get(dataset.get('type')))


def trains_fsdp(cfg) -> bool:
    """Whether ``cfg`` trains with FSDP: its runner's ``strategy`` is an
    FSDP strategy (``configs/_base_/fsdp.py``)."""
    return 'FSDP' in str((cfg.get('strategy') or {}).get('type', ''))


#: keys of a config's ``strategy.model_wrapper`` that :func:`fully_shard`
#: follows; others change what FSDP holds and are refused
FSDP_KEYS = ('type', 'auto_wrap_policy', 'sharding_strategy', 'device_id',
             'use_orig_params')


def fully_shard(model, cfg, mesh) -> None:
    """Shard ``model`` on ``mesh`` as ``cfg``'s FSDP strategy wraps it, in
    the terms of FSDP2's ``torch.distributed.fsdp.fully_shard`` (which
    ``FSDPMemTracker`` tracks; the configs run FSDP1 through mmengine):
    every module that the config's ``auto_wrap_policy`` makes a unit
    (FSDP1's recursion: the policy asked with ``recurse=True`` before
    descending, with ``recurse=False`` and the parameters not yet in a
    unit below to wrap) is sharded on its own, inner units first, then the
    root unit with the rest. FULL_SHARD, FSDP1's default: a unit's
    parameters are gathered for its forward and again for its backward,
    and freed after each.

    Raises:
        NotImplementedError: the wrapper asks for another sharding
            strategy or options the plan does not follow (one line).
    """
    from functools import partial

    from mmengine.registry import FUNCTIONS
    from torch.distributed.fsdp import fully_shard as shard
    wrapper = dict(copy.deepcopy((cfg.get('strategy') or {}).get(
        'model_wrapper') or {}))
    sharding = str(wrapper.get('sharding_strategy', 'FULL_SHARD'))
    others = sorted(set(wrapper) - set(FSDP_KEYS))
    if others or sharding.rpartition('.')[2] != 'FULL_SHARD':
        raise NotImplementedError(
            f'{cfg.filename}: strategy.model_wrapper '
            f'{others or "sharding_strategy=" + sharding} is not planned; '
            'the planner follows FULL_SHARD with an auto_wrap_policy')
    policy = wrapper.get('auto_wrap_policy')
    if policy is not None:
        policy = dict(type=policy) if isinstance(policy, str) else policy
        kwargs = dict(policy)
        with FUNCTIONS.switch_scope_and_registry(None):
            function = kwargs.pop('type')
            function = FUNCTIONS.get(function) if isinstance(
                function, str) else function
        policy = partial(function, **kwargs)
    units = []

    def wrapped(module) -> int:
        """Parameters of ``module`` in units, after wrapping it."""
        total = sum(p.numel() for p in module.parameters())
        if policy is None or not policy(module=module, recurse=True,
                                        nonwrapped_numel=total):
            return 0
        inner = sum(wrapped(child) for child in module.children())
        if module is not model and policy(module=module, recurse=False,
                                          nonwrapped_numel=total - inner):
            units.append(module)
            return total
        return inner

    wrapped(model)
    for unit in units:  # inner units first (post-order)
        shard(unit, mesh=mesh)
    shard(model, mesh=mesh)


@contextlib.contextmanager
def fake_world(size: int):
    """A device mesh of ``size`` CPU ranks on torch's fake process group
    (``FakeStore``: collectives move nothing), this process rank 0; the
    group is destroyed after."""
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh
    from torch.testing._internal.distributed.fake_pg import FakeStore
    if dist.is_initialized():
        raise RuntimeError('an FSDP plan runs on a fake process group of its '
                           'own; this process has one initialised')
    dist.init_process_group('fake', store=FakeStore(), rank=0,
                            world_size=size)
    try:
        yield init_device_mesh('cpu', (size, ))
    finally:
        dist.destroy_process_group()


@dataclasses.dataclass
class TrainingStep:
    """One training step of a config, ready to run (:func:`real_step`):
    the model's loss on ``data`` (``batch`` images) under autocast in
    ``dtype`` (None: fp32) on ``device``, its backward and the optimizer
    wrapper's step.

    Calling it runs the whole step; :func:`plan` runs :meth:`loss`,
    ``backward`` and :meth:`update` apart to count the forward's FLOPs.
    """
    model: torch.nn.Module
    wrapper: object
    data: dict
    dtype: Optional[torch.dtype]
    device: torch.device
    batch: int

    def loss(self) -> torch.Tensor:
        """The summed loss of the model's forward in ``mode='loss'``."""
        with torch.autocast(self.device.type, dtype=self.dtype,
                            enabled=self.dtype is not None):
            losses = self.model(**self.data, mode='loss')
            return self.model.parse_losses(losses)[0]

    def update(self) -> None:
        """The optimizer's step and the gradients zeroed."""
        self.wrapper.step()
        self.wrapper.zero_grad()

    def __call__(self) -> None:
        self.loss().backward()
        self.update()

    def state_bytes(self) -> int:
        """Bytes of the parameters, buffers and optimizer state (after a
        first step: the state a later step starts from)."""
        state = self.wrapper.optimizer.state.values()
        return sum(t.numel() * t.element_size() for t in [
            *self.model.parameters(), *self.model.buffers(),
            *(v for s in state for v in s.values()
              if isinstance(v, torch.Tensor))])


def real_step(cfg, batch: Optional[int] = None, image_size=(224, 224),
              device='cpu', mode=None, stand_ins=None,
              mesh=None) -> TrainingStep:
    """The training step of ``cfg`` that the planner plans, with real
    tensors on ``device`` or, given a ``FakeTensorMode`` ``mode``, with fake
    ones (module docstring): a batch of ``batch`` copies (default: the
    config's ``train_dataloader.batch_size``) of one sample of its train
    pipeline on a synthetic ``image_size`` image, collated by its
    dataloader and run through its data preprocessor (for real, with the
    model's batch augments: mixup / cutmix as ``ImageClassifier`` hands
    them over), the model built from ``cfg.model``, the optimizer wrapper
    of :func:`plain_optim_wrapper` and the EMA teachers set from their
    students (what the configs' ``EMATeacherHook`` does before training).

    With ``mode``, the optimizer, the inputs and the EMA teachers are made
    inside ``mode`` and the dispatch mode ``stand_ins`` (:func:`_stand_ins`)
    as the step that follows must run. With a device ``mesh``, the model
    is sharded on it (:func:`fully_shard`) after its EMA teachers are set
    and before the optimizer is built, as the FSDP strategy wraps it."""
    from mmengine.optim import build_optim_wrapper
    from mmengine.registry import MODELS, init_default_scope

    from mmpos.models.utils import update_ema
    init_default_scope(cfg.get('default_scope', 'mmpretrain'))
    device = torch.device(device)
    batch = batch or cfg.train_dataloader.batch_size
    samples = _collate(cfg, _pipeline_item(cfg, image_size, bool(mode)),
                       batch)
    model_cfg = copy.deepcopy(cfg.model)
    if cfg.get('data_preprocessor'):
        model_cfg.setdefault('data_preprocessor', cfg.data_preprocessor)
    model = (_build(_for_fake(model_cfg), mode) if mode else
             MODELS.build(model_cfg).to(device))
    pre_cfg = {k: v for k, v in (model_cfg.get('data_preprocessor')
                                 or {}).items()
               if k not in ('type', '_scope_')}
    if (model_cfg.get('train_cfg') or {}).get('augments'):
        pre_cfg['batch_augments'] = model_cfg.train_cfg
    data = type(model.data_preprocessor)(**pre_cfg).to(device)(samples,
                                                                True)
    wrapper_cfg, dtype = plain_optim_wrapper(cfg)
    with mode or contextlib.nullcontext(), \
            stand_ins or contextlib.nullcontext():
        for ema, source in getattr(model, 'ema_teachers', list)():
            update_ema(ema, source, model)
        if mesh is not None:
            fully_shard(model, cfg, mesh)
        wrapper = build_optim_wrapper(model, wrapper_cfg)
        if mode:
            data['inputs'] = _fake(data['inputs'], mode)
    return TrainingStep(model, wrapper, data, dtype, device, batch)


#: the most lines whose stand-in answers :func:`plan` turns before it gives
#: up
MAX_TURNED = 4


def plan(cfg, batch: Optional[int] = None, image_size=(224, 224),
         world_size: int = 1) -> Plan:
    """The :class:`Plan` of the config ``cfg`` (an mmengine ``Config``,
    e.g. ``mmpos.guardrails.launch.load_config``'s) at ``batch`` images per
    GPU (default: its ``train_dataloader.batch_size``): :func:`real_step`
    on fake tensors, run twice (module docstring).

    A config that trains with FSDP (:func:`trains_fsdp`) is planned per
    GPU of ``world_size`` GPUs: its model sharded by :func:`fully_shard`
    on a fake process group of that size (:func:`fake_world`) and its
    memory tracked by torch's ``FSDPMemTracker`` (module docstring). At
    ``world_size`` 1 it is planned as under DDP: FSDP1 on one process
    shards nothing (it switches to ``NO_SHARD``).

    Where the step fails after a boolean read answered ``False`` (mmdet's
    anchor head raises when no anchor lies inside the image) or a
    ``unique`` answered with every element (a cascade head asserts at
    most one image id per image), the steps run again with the answers at
    that line turned (``True``; one value), at most :data:`MAX_TURNED`
    lines; the notes name them."""
    sharded = world_size > 1 and trains_fsdp(cfg)
    with fake_world(world_size) if sharded else \
            contextlib.nullcontext() as mesh:
        step, flops, peak, notes = _fake_steps(cfg, batch, image_size, mesh)
    by_kind = {str(k).rpartition('.')[2]: float(v)
               for device in peak.values() for k, v in device.items()}
    if sharded:
        by_kind = {SHARDED.get(k, k): v for k, v in by_kind.items()}
        notes.append(
            f'{_inputs_note(cfg, step, image_size)}; FSDP FULL_SHARD on '
            f'{world_size} GPUs as FSDP2 shards it (torch\'s FSDPMemTracker '
            'on a fake process group): parameters, gradients and optimizer '
            'state per GPU are shards, a unit\'s parameters are gathered '
            'while it runs; no communication time; '
            f'{RESERVED_GIB:g} GiB of a GPU kept free for the CUDA context '
            'and the caching allocator')
    else:
        notes.append(f'{_inputs_note(cfg, step, image_size)}; no FSDP '
                     f'sharding, no communication; {RESERVED_GIB:g} GiB of '
                     'a GPU kept free for the CUDA context and the caching '
                     'allocator')
    return Plan(config=cfg.filename, batch=step.batch,
                params=sum(p.numel() for p in step.model.parameters()),
                flops_fwd=flops[0] / step.batch,
                flops_train=flops[1] / step.batch, peak=by_kind,
                **schedule(cfg), amp=step.dtype, notes=notes,
                world_size=world_size if sharded else 1)


def _fake_steps(cfg, batch, image_size, mesh):
    """``(step, FLOPs, peak snapshot, notes)`` of :func:`plan`: the step
    built on fake tensors (sharded on ``mesh``, if given) and run by
    :func:`_two_steps`, with the stand-ins' lines turned as needed."""
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.utils.flop_counter import FlopCounterMode

    notes = []
    # the data samples' own tensors (labels, crop boxes, instances) stay
    # real: steps read them on the host; the fake mode converts them
    mode = FakeTensorMode(allow_non_fake_inputs=True)
    turned = {}
    stand_ins = _stand_ins(turned)
    validate = torch.distributions.Distribution._validate_args
    # a distribution's argument check reads values (stand-ins: False)
    torch.distributions.Distribution.set_default_validate_args(False)
    try:
        with _one_line(cfg.filename):
            step = real_step(cfg, batch, image_size, mode=mode,
                             stand_ins=stand_ins, mesh=mesh)
        setup_reads = stand_ins.reads
        while True:
            stand_ins.reads, stand_ins.last_site = setup_reads, None
            try:
                with mode, _one_line(cfg.filename), stand_ins:
                    flops, peak = _two_steps(step, FlopCounterMode,
                                             mesh is not None)
                break
            except (ValueError, AssertionError, RuntimeError) as err:
                site = stand_ins.last_site
                if site is None or site in turned or \
                        len(turned) >= MAX_TURNED:
                    raise
                turned[site] = f'{type(err).__name__}: {str(err)[:80]}'
                step.wrapper.zero_grad()
    finally:
        torch.distributions.Distribution.set_default_validate_args(validate)
    if step.dtype is not None:
        notes.append(f'AMP: autocast {step.dtype}'.replace('torch.', ''))
    if stand_ins.reads:
        notes.append(f'{stand_ins.reads} reads of tensor values answered by '
                     'stand-ins (1 / False; data-dependent sizes: all '
                     'elements)')
    notes += [f'stand-ins at {osp.relpath(path)}:{line} turned (True; one '
              f'value): the first answer stopped the step ({err})'
              for (path, line), err in turned.items()]
    return step, flops, peak, notes


def _two_steps(step, counter, sharded=False):
    """Two runs of ``step``: the first's FLOPs (forward; forward and
    backward) counted by ``counter`` (``FlopCounterMode``), the second's
    peak snapshot by torch's ``MemTracker`` (``FSDPMemTracker`` for a
    ``sharded`` model), which tracks the parameters and the optimizer
    state the first step made. Not both in one step:
    ``FlopCounterMode``'s module hooks keep the activations of a
    checkpointed block (``with_cp``) alive, +25 % on ViT-S/16 at batch 2."""
    from torch.distributed._tools.fsdp2_mem_tracker import FSDPMemTracker
    with counter(display=False, custom_mapping=_CPU_SDPA) as count:
        loss = step.loss()
        fwd = count.get_total_flops()
        loss.backward()
    flops = fwd, count.get_total_flops()
    try:
        step.update()
    except (AssertionError, RuntimeError, TypeError) as err:
        if not sharded:
            raise
        raise NotImplementedError(
            f'{type(step.wrapper.optimizer).__name__} cannot step sharded '
            f'(DTensor) parameters ({type(err).__name__}: '
            f'{" ".join(str(err).split())}); an FSDP '
            'plan needs an optimizer written for them, e.g. torch\'s AdamW '
            'or SGD') from None
    if sharded:
        tracker = FSDPMemTracker(step.model, step.wrapper.optimizer)
    else:
        tracker = _tracker()
        tracker.track_external(step.model, step.wrapper.optimizer)
    with tracker:
        step()
    return flops, tracker.get_tracker_snapshot('peak')


def _inputs_note(cfg, step, image_size) -> str:
    """What the step was fed: the synthetic data and the input batch."""
    inputs = step.data['inputs']
    shape = 'x'.join(map(str, inputs.shape)) if isinstance(
        inputs, torch.Tensor) else f'{len(inputs)} tensors'
    dataset = _train_dataset(cfg).get('type')
    if dataset not in ANNOTATED:
        return (f'the pipeline on a synthetic {image_size[0]}x'
                f'{image_size[1]} image; inputs {shape}')
    sample = step.data['data_samples'][0]
    counts = (f', {len(sample.gt_instances)} ground-truth instances per '
              'image' if 'gt_instances' in sample else '')
    return (f'the {dataset} pipeline on the rehearsal\'s synthetic '
            f'{dataset} sample; inputs {shape}{counts}')


#: kinds that do not grow with the batch (under FSDP also the gathered
#: units' parameters and gradients and the collectives' buffers)
FIXED_KINDS = ('PARAM', 'BUFFER', 'GRAD', 'OPT', 'UNSHARDED_PARAM',
               'UNSHARDED_GRAD', 'ALL_GATHER', 'REDUCE_SCATTER')


def at_batch(p: Plan, batch: int) -> Plan:
    """``p`` at ``batch`` images per GPU, its peak scaled as
    ``fixed + per_image * batch``: parameters, buffers, gradients and
    optimizer state (:data:`FIXED_KINDS`) stay, the other kinds scale with
    the batch (one plan's estimate; :func:`largest_batch` fits two)."""
    scale = batch / p.batch
    peak = {k: v if k in FIXED_KINDS else v * scale
            for k, v in p.peak.items() if k != 'Total'}
    peak['Total'] = sum(peak.values())
    return dataclasses.replace(p, batch=batch, peak=peak)


def largest_batch(cfg, gpu: str, start: int, image_size=(224, 224),
                  world_size: int = 1) -> int:
    """The largest batch per GPU whose peak fits ``gpu``: the peak is
    ``fixed + per_image * batch`` (parameters, gradients and optimizer
    state do not grow with the batch; activations do), fitted from the
    plans at ``start`` and ``2 * start`` images (on ``world_size`` GPUs:
    :func:`plan`)."""
    low, high = (plan(cfg, b, image_size, world_size).peak['Total']
                 for b in (start, 2 * start))
    per_image = (high - low) / start
    fixed = low - per_image * start
    free = (GPUS[gpu][0] - RESERVED_GIB) * 2**30
    return max(0, int((free - fixed) // per_image)) if per_image > 0 else 0
