#!/usr/bin/env bash
# Shared torchrun launcher behind dist_train.sh and dist_test.sh:
#   bash tools/dist_run.sh SCRIPT.py NUM_PROCS [script arguments]
# Multi-node: set NNODES, NODE_RANK, MASTER_ADDR, PORT on every node.
# Without CUDA the processes talk over gloo (see mmpos/guardrails/launch.py).
set -euo pipefail
SCRIPT=$1
NPROC=$2
# The repository's virtual environment (what `make` creates) unless PYTHON
# names another interpreter; then the `python` on the PATH.
REPO="$(cd "$(dirname "$0")/.." && pwd)"
if [ -z "${PYTHON:-}" ]; then
    if [ -x "$REPO/.venv/bin/python" ]; then PYTHON="$REPO/.venv/bin/python"; else PYTHON=python; fi
fi

"$PYTHON" -m torch.distributed.run \
    --nnodes="${NNODES:-1}" \
    --node_rank="${NODE_RANK:-0}" \
    --master_addr="${MASTER_ADDR:-127.0.0.1}" \
    --master_port="${PORT:-29500}" \
    --nproc_per_node="$NPROC" \
    "$(dirname "$0")/$SCRIPT" "${@:3}" --launcher pytorch
