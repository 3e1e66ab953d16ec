"""Plan a config's training run before it is launched: one real training
step of the config's real model (nothing shrunk) under fake tensors
(``torch._subclasses.FakeTensorMode``: shapes, no memory), with torch's
own counters: ``torch.utils.flop_counter.FlopCounterMode`` for the FLOPs
and ``torch.distributed._tools.MemTracker`` for the memory by kind, as
torchtitan's ``scripts/estimate/estimation.py`` uses them.

The step is the one mmengine's Runner takes: a batch of the config's own
train pipeline (on a synthetic image of ``image_size``, repeated to the
batch), its data preprocessor (run for real: it draws batch augments),
the model's ``loss``, ``backward`` and the config's optimizer wrapper's
step (AMP as autocast in the wrapper's dtype), twice, so that the second
step holds the optimizer's state as every later step does. The peak is
that of the second step.

Fake tensors have no values. Where a step reads one (``.item()``,
``bool(t)``: a loss's guard, an EMA step counter, a masking loop's exit
test, a DropPos sigma) or asks for a data-dependent shape (``nonzero``,
``unique``), :func:`_stand_ins` answers: a read gives ``1`` / ``1.`` /
``False``, a data-dependent size its upper bound (every element). The plan
counts those answers in its notes; tests/analysis/test_plan.py checks a
self-supervised step planned this way against its measured peak. A step
that still cannot run raises ``NotImplementedError`` naming the config.

What it does not model (said by :func:`plan`'s ``notes``): CUDA's caching
allocator (fragmentation) and the CUDA context, for which
:data:`RESERVED_GIB` of a GPU is kept free; FSDP sharding (parameters,
gradients and optimizer state are per GPU as in DDP); communication.
"""
import contextlib
import copy
import dataclasses
import math
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
KINDS = ('PARAM', 'BUFFER', 'GRAD', 'OPT', 'ACT', 'TEMP', 'OTH')


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


def _stand_ins():
    """A dispatch mode, entered inside the fake mode, that runs an op whose
    tensors are all real (the data samples' crop boxes, labels, instances)
    for real, and answers what fake tensors cannot (module docstring): ``aten._local_scalar_dense`` (every
    ``.item()``, ``int(t)``, ``bool(t)``) gives ``False`` / ``1`` / ``1.``
    (not 0: an optimizer divides by its bias correction at step 1);
    ``nonzero`` (also a boolean mask's indexing) gives one index per
    element, ``_unique2`` every element as its own value (their largest
    outputs). ``reads`` counts the answers."""
    from torch._subclasses.fake_tensor import (FakeTensor,
                                               unset_fake_temporarily)
    from torch.utils import _pytree as pytree
    from torch.utils._python_dispatch import TorchDispatchMode
    aten = torch.ops.aten

    class StandIns(TorchDispatchMode):
        reads = 0

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            tensors = [t for t in pytree.tree_leaves((args, kwargs))
                       if isinstance(t, torch.Tensor)]
            if tensors and not any(isinstance(t, FakeTensor)
                                   for t in tensors):
                # real in, real out: the host's work on the data samples
                with unset_fake_temporarily():
                    return func(*args, **kwargs)
            if func is aten._local_scalar_dense.default:
                self.reads += 1
                dtype = args[0].dtype
                return (False if dtype is torch.bool else
                        1. if dtype.is_floating_point else 1)
            if func is aten.nonzero.default:
                self.reads += 1
                x = args[0]
                return x.new_empty((x.numel(), x.dim()), dtype=torch.long)
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
                x = args[0]
                flat = x.reshape(-1).clone()
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


def _build(model_cfg, mode):
    """The model of ``model_cfg`` with fake parameters: built in ``mode``,
    or, where its initialisation reads values (DINO's weight-normalised
    head), built for real and copied into ``mode``."""
    from mmengine.registry import MODELS
    from torch._subclasses.fake_tensor import (DataDependentOutputException,
                                               FakeCopyMode)
    try:
        with mode:
            model = MODELS.build(copy.deepcopy(model_cfg))
        _rehome(model, mode)
        return model
    except DataDependentOutputException:
        model = MODELS.build(copy.deepcopy(model_cfg))
        with FakeCopyMode(mode):
            return copy.deepcopy(model)


def _image(size) -> str:
    """A synthetic RGB PNG of ``size = (h, w)`` for the pipeline."""
    import os
    import tempfile

    from PIL import Image
    h, w = size
    y, x = np.mgrid[0:h, 0:w]
    pixels = np.stack([x % 256, y % 256, (x + y) % 256], -1)
    path = os.path.join(tempfile.mkdtemp(prefix='mmpos_plan_'), 'image.png')
    Image.fromarray(pixels.astype(np.uint8)).save(path)
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


def _pipeline_item(cfg, image_size):
    """One sample of ``cfg``'s train pipeline on a synthetic image."""
    from mmengine.dataset import Compose
    pipeline = Compose(copy.deepcopy(cfg.train_dataloader.dataset.pipeline))
    return pipeline(dict(img_path=_image(image_size), gt_label=0))


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
    dataset = cfg.train_dataloader.dataset
    while 'dataset' in dataset:
        dataset = dataset.dataset
    return dict(max_iters=train.get('max_iters'),
                epochs=train.get('max_epochs'),
                epoch_images=EPOCH_IMAGES.get(dataset.get('type')))


def plan(cfg, batch: Optional[int] = None, image_size=(224, 224)) -> Plan:
    """The :class:`Plan` of the config ``cfg`` (an mmengine ``Config``,
    e.g. ``mmpos.guardrails.launch.load_config``'s) at ``batch`` images per
    GPU (default: its ``train_dataloader.batch_size``), its pipeline fed a
    synthetic ``image_size`` image (module docstring)."""
    from mmengine.optim import build_optim_wrapper
    from mmengine.registry import init_default_scope
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.utils.flop_counter import FlopCounterMode

    from mmpos.models.utils import update_ema

    init_default_scope(cfg.get('default_scope', 'mmpretrain'))
    batch = batch or cfg.train_dataloader.batch_size
    notes = []
    samples = _collate(cfg, _pipeline_item(cfg, image_size), batch)
    model_cfg = copy.deepcopy(cfg.model)
    if cfg.get('data_preprocessor'):
        model_cfg.setdefault('data_preprocessor', cfg.data_preprocessor)
    # the data samples' own tensors (labels, crop boxes, instances) stay
    # real: steps read them on the host; the fake mode converts them
    mode = FakeTensorMode(allow_non_fake_inputs=True)
    model = _build(model_cfg, mode)
    pre_cfg = {k: v for k, v in (model_cfg.get('data_preprocessor')
                                 or {}).items()
               if k not in ('type', '_scope_')}
    augments = (model_cfg.get('train_cfg') or {}).get('augments')
    if augments:  # mixup / cutmix, handed over as ImageClassifier does
        pre_cfg['batch_augments'] = model_cfg.train_cfg
    data = type(model.data_preprocessor)(**pre_cfg)(samples, True)
    wrapper_cfg, dtype = plain_optim_wrapper(cfg)
    if dtype is not None:
        notes.append(f'AMP: autocast {dtype}'.replace('torch.', ''))
    params = sum(p.numel() for p in model.parameters())
    stand_ins = _stand_ins()
    validate = torch.distributions.Distribution._validate_args
    # a distribution's argument check reads values (stand-ins: False)
    torch.distributions.Distribution.set_default_validate_args(False)
    try:
        with mode, _one_line(cfg.filename), stand_ins:
            wrapper = build_optim_wrapper(model, wrapper_cfg)
            data['inputs'] = _fake(data['inputs'], mode)
            # EMA teachers start as a copy of the student (what the configs'
            # EMATeacherHook does before training)
            for ema, source in getattr(model, 'ema_teachers', list)():
                update_ema(ema, source, model)
            tracker = _tracker()
            tracker.track_external(model, wrapper.optimizer)
            flops = []
            with tracker:
                for _ in range(2):
                    with FlopCounterMode(display=False,
                                         custom_mapping=_CPU_SDPA) as count:
                        with torch.autocast('cpu', dtype=dtype,
                                            enabled=dtype is not None):
                            losses = model(**data, mode='loss')
                            loss = model.parse_losses(losses)[0]
                        fwd = count.get_total_flops()
                        loss.backward()
                    flops.append((fwd, count.get_total_flops()))
                    wrapper.step()
                    wrapper.zero_grad()
                    tracker.reset_mod_stats()  # MemTracker: one a step
            peak = tracker.get_tracker_snapshot('peak')
    finally:
        torch.distributions.Distribution.set_default_validate_args(validate)
    if stand_ins.reads:
        notes.append(f'{stand_ins.reads} reads of tensor values answered by '
                     'stand-ins (1 / False; data-dependent sizes: all '
                     'elements)')
    by_kind = {str(k).rpartition('.')[2]: float(v)
               for device in peak.values() for k, v in device.items()}
    notes.append(f'the pipeline on a synthetic {image_size[0]}x'
                 f'{image_size[1]} image; no FSDP sharding, no '
                 f'communication; {RESERVED_GIB:g} GiB of a GPU kept free '
                 'for the CUDA context and the caching allocator')
    return Plan(config=cfg.filename, batch=batch, params=params,
                flops_fwd=flops[-1][0] / batch,
                flops_train=flops[-1][1] / batch, peak=by_kind,
                **schedule(cfg), amp=dtype, notes=notes)


#: kinds that do not grow with the batch
FIXED_KINDS = ('PARAM', 'BUFFER', 'GRAD', 'OPT')


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


def largest_batch(cfg, gpu: str, start: int, image_size=(224, 224)) -> int:
    """The largest batch per GPU whose peak fits ``gpu``: the peak is
    ``fixed + per_image * batch`` (parameters, gradients and optimizer
    state do not grow with the batch; activations do), fitted from the
    plans at ``start`` and ``2 * start`` images."""
    low, high = (plan(cfg, b, image_size).peak['Total']
                 for b in (start, 2 * start))
    per_image = (high - low) / start
    fixed = low - per_image * start
    free = (GPUS[gpu][0] - RESERVED_GIB) * 2**30
    return max(0, int((free - fixed) // per_image)) if per_image > 0 else 0
