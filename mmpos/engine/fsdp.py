"""FSDP for mmengine's FlexibleRunner (issue 17): the strategy and the
wrapping policy of ``configs/_base_/fsdp.py``.

Wrapping policy:

mmpos models call parts of their backbone and heads outside those modules'
``forward`` (``embed``, ``forward_tokens``, ``pos_embed`` read by DropPos,
head losses), so only modules whose ``forward`` alone uses their parameters
may become FSDP units: the transformer blocks and the DINO heads of DINOv2 /
ICPF. Everything else stays in the root unit, whose parameters are gathered
for the whole step. An EMA teacher inside the model (DINOv2 / ICPF
``teacher``, CR2PQ ``target_generator``) is wrapped by the same policy, unit
for unit like its student, and updated shard by shard
(:mod:`mmpos.models.utils.ema`).
"""
from functools import partial
from typing import Sequence

import torch.nn as nn
from mmengine._strategy import FSDPStrategy
from mmengine.optim import OptimWrapperDict
from mmengine.registry import STRATEGIES
from torch.distributed.fsdp import FullyShardedDataParallel as FSDP
from torch.nn.utils import clip_grad_norm_

BLOCK_TYPES = ('RoPETransformerEncoderLayer', 'TransformerEncoderLayer',
               'MobileFormerBlock', 'DINOProjectionHead')


def block_wrap_policy(module: nn.Module, recurse: bool,
                      nonwrapped_numel: int,
                      block_types: Sequence[str] = BLOCK_TYPES) -> bool:
    """``auto_wrap_policy`` of ``FullyShardedDataParallel``: descend into
    every module (``recurse``) and wrap those whose class name is in
    ``block_types`` (names, so that configs can list them).
    ``nonwrapped_numel`` is part of torch's policy signature, unused."""
    if recurse:
        return True
    return type(module).__name__ in block_types


def _clip_grad_norm(model: FSDP, params, max_norm: float,
                    norm_type: float = 2.0):
    """``clip_grad_norm_(params, max_norm, norm_type)`` of an optimizer
    wrapper, with the norm of every gradient shard of ``model`` reduced
    across processes (``params``: this process's shards, all in
    ``model``)."""
    return model.clip_grad_norm_(max_norm, norm_type)


@STRATEGIES.register_module()
class MMPosFSDPStrategy(FSDPStrategy):
    """mmengine's ``FSDPStrategy`` with these fixes.

    * Resume loads the optimizer state: mmengine 0.10.7 calls
      ``FSDP.optim_state_dict_to_load(state_dict, model, optimizer)``, the
      argument order of torch < 2.1; torch >= 2.1 takes ``(model, optim,
      optim_state_dict)`` and the resume fails (``TypeError: unhashable
      type: 'dict'``).
    * Gradient-norm clipping (``clip_grad=dict(max_norm=...)``) clips by
      the norm of the whole model's gradient: mmengine calls
      ``torch.nn.utils.clip_grad_norm_`` on each process's shards, i.e.
      with a different, local norm on every process; FSDP's
      ``clip_grad_norm_`` reduces the norm across processes (what DDP
      computes). ``PerTensorClipOptimWrapper`` still clips each shard.
    * The optimizer's ``paramwise_cfg`` sees whole tensors: mmengine builds
      the optimizer on the wrapped model, whose parameters are then 1-D
      shards (``use_orig_params=True``), so ``flat_decay_mult`` (1-D
      tensors, e.g. DINOv2 / ICPF's no decay on biases and norms only)
      would hit every parameter. The optimizer is built while the
      parameters are gathered; it keeps the same parameter objects, which
      are shards again afterwards.

    Everything else is mmengine's.
    """

    def build_optim_wrapper(self, optim_wrapper, model=None):
        """mmengine's, with the parameters of ``model`` (the wrapped model)
        unsharded while a config dict is turned into parameter groups, and
        norm clipping over all shards."""
        if isinstance(model, FSDP) and isinstance(optim_wrapper, dict):
            with FSDP.summon_full_params(model, writeback=False):
                built = super().build_optim_wrapper(optim_wrapper, model)
        else:
            built = super().build_optim_wrapper(optim_wrapper, model)
        wrappers = built.values() if isinstance(built, OptimWrapperDict) \
            else [built]
        for wrapper in wrappers:
            if isinstance(model, FSDP) and getattr(
                    wrapper, 'clip_func', None) is clip_grad_norm_:
                wrapper.clip_func = partial(_clip_grad_norm, model)
        return built

    def load_optim_state_dict(self, state_dict: dict) -> None:
        """Load a full optimizer state dict (as saved by
        :meth:`optim_state_dict`) into this process's shards."""
        self.optim_wrapper.load_state_dict(
            FSDP.optim_state_dict_to_load(
                model=self.model,
                optim=self.optim_wrapper.optimizer,
                optim_state_dict=state_dict))
