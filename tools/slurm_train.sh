#!/usr/bin/env bash
# Usage: [GPUS=16 GPUS_PER_NODE=8] bash tools/slurm_train.sh PARTITION JOB CONFIG WORK_DIR [train.py options]
set -euo pipefail
PARTITION=$1
JOB_NAME=$2
CONFIG=$3
WORK_DIR=$4
GPUS=${GPUS:-8}
GPUS_PER_NODE=${GPUS_PER_NODE:-8}
CPUS_PER_TASK=${CPUS_PER_TASK:-5}
SRUN_ARGS=${SRUN_ARGS:-""}
# The repository's virtual environment (what `make` creates) unless PYTHON
# names another interpreter; then the `python` on the PATH.
REPO="$(cd "$(dirname "$0")/.." && pwd)"
if [ -z "${PYTHON:-}" ]; then
    if [ -x "$REPO/.venv/bin/python" ]; then PYTHON="$REPO/.venv/bin/python"; else PYTHON=python; fi
fi

# shellcheck disable=SC2086
PYTHONPATH="$REPO${PYTHONPATH:+:$PYTHONPATH}" \
srun -p "$PARTITION" \
    --job-name="$JOB_NAME" \
    --gres=gpu:"$GPUS_PER_NODE" \
    --ntasks="$GPUS" \
    --ntasks-per-node="$GPUS_PER_NODE" \
    --cpus-per-task="$CPUS_PER_TASK" \
    --kill-on-bad-exit=1 \
    $SRUN_ARGS \
    "$PYTHON" -u "$(dirname "$0")/train.py" "$CONFIG" --work-dir="$WORK_DIR" --launcher=slurm "${@:5}"
