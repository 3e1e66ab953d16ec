# FSDP through mmengine's FlexibleRunner (mmpos/engine/fsdp.py):
# parameters, gradients and AdamW state sharded across processes. Each
# transformer block and DINO head is its own FSDP unit (gathered one at a
# time); patch embedding, tokens, norms and the other heads stay in the root
# unit (mmpos models call them outside their forward, see the policy's
# docstring). EMA teachers are sharded like their students and updated
# shard by shard after each optimizer step (mmpos/models/utils/ema.py).
# Checkpoints hold the full, unsharded state dict (rank 0), so resuming and
# tools/model_converters/mmpos2backbone.py work as with DDP. On CPU (gloo;
# the tests) add model_wrapper.device_id='cpu'.
runner_type = 'FlexibleRunner'
strategy = dict(
    type='MMPosFSDPStrategy',
    state_dict_cfg='full',
    model_wrapper=dict(
        auto_wrap_policy=dict(type='mmpos.engine.fsdp.block_wrap_policy')))
