#!/usr/bin/env bash
# Usage: bash tools/dist_train.sh CONFIG NUM_PROCS [train.py options]
# Multi-node: set NNODES, NODE_RANK, MASTER_ADDR, PORT on every node.
# Without CUDA the processes talk over gloo (see mmpos/utils/launch.py).
set -euo pipefail
CONFIG=$1
NPROC=$2
NNODES=${NNODES:-1}
NODE_RANK=${NODE_RANK:-0}
PORT=${PORT:-29500}
MASTER_ADDR=${MASTER_ADDR:-127.0.0.1}
PYTHON=${PYTHON:-python}

PYTHONPATH="$(dirname "$0")/..${PYTHONPATH:+:$PYTHONPATH}" \
"$PYTHON" -m torch.distributed.run \
    --nnodes="$NNODES" \
    --node_rank="$NODE_RANK" \
    --master_addr="$MASTER_ADDR" \
    --master_port="$PORT" \
    --nproc_per_node="$NPROC" \
    "$(dirname "$0")/train.py" "$CONFIG" --launcher pytorch "${@:3}"
