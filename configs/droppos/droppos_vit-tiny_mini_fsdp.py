# The DropPos mini config under FSDP (../_base_/fsdp.py: mmengine's
# FlexibleRunner, one FSDP unit per transformer block), on CPU processes
# talking over gloo:
#   bash tools/dist_train.sh configs/droppos/droppos_vit-tiny_mini_fsdp.py 2
# torch's FSDP needs device_id='cpu' for CPU modules; on GPUs leave the
# strategy line out.
_base_ = ['./droppos_vit-tiny_mini.py', '../_base_/fsdp.py']

strategy = dict(model_wrapper=dict(device_id='cpu'))
