#!/usr/bin/env bash
# Usage: [GPUS=16 GPUS_PER_NODE=8] bash tools/slurm_train.sh PARTITION JOB CONFIG WORK_DIR [train.py options]
#
# Preemption: srun sends SIGTERM SIGNAL_LEAD seconds (default 120) before the
# time limit, and Slurm sends it when it preempts the job; train.py then
# saves an intact checkpoint after the iteration in progress and exits with
# status 75. On that status this script
#   * inside a batch job (sbatch sets SLURM_JOB_ID): requeues the job
#     (`scontrol requeue`); the requeued script sees SLURM_RESTART_COUNT > 0
#     and resumes;
#   * otherwise (srun makes its own allocation): runs srun again, resuming,
#     at most MAX_REQUEUES (default 100) times.
# A resumed run passes --auto-resume: the newest checkpoint of WORK_DIR.
# A task that fails makes srun end the others (--kill-on-bad-exit=1).
set -euo pipefail
PARTITION=$1
JOB_NAME=$2
CONFIG=$3
WORK_DIR=$4
GPUS=${GPUS:-8}
GPUS_PER_NODE=${GPUS_PER_NODE:-8}
CPUS_PER_TASK=${CPUS_PER_TASK:-5}
SRUN_ARGS=${SRUN_ARGS:-""}
SIGNAL_LEAD=${SIGNAL_LEAD:-120}
MAX_REQUEUES=${MAX_REQUEUES:-100}
PREEMPTED=75  # mmpos.engine.hooks.PREEMPTED_EXIT_CODE
# The repository's virtual environment (what `make` creates) unless PYTHON
# names another interpreter; then the `python` on the PATH.
REPO="$(cd "$(dirname "$0")/.." && pwd)"
if [ -z "${PYTHON:-}" ]; then
    if [ -x "$REPO/.venv/bin/python" ]; then PYTHON="$REPO/.venv/bin/python"; else PYTHON=python; fi
fi

resume=()
if [ "${SLURM_RESTART_COUNT:-0}" -gt 0 ]; then resume=(--auto-resume); fi
for ((attempt = 0; ; attempt++)); do
    status=0
    # shellcheck disable=SC2086
    srun -p "$PARTITION" \
        --job-name="$JOB_NAME" \
        --gres=gpu:"$GPUS_PER_NODE" \
        --ntasks="$GPUS" \
        --ntasks-per-node="$GPUS_PER_NODE" \
        --cpus-per-task="$CPUS_PER_TASK" \
        --kill-on-bad-exit=1 \
        --signal=TERM@"$SIGNAL_LEAD" \
        $SRUN_ARGS \
        "$PYTHON" -u "$(dirname "$0")/train.py" "$CONFIG" --work-dir="$WORK_DIR" \
        --launcher=slurm "${@:5}" "${resume[@]}" || status=$?
    if [ "$status" -ne "$PREEMPTED" ]; then exit "$status"; fi
    if [ -n "${SLURM_JOB_ID:-}" ]; then
        echo "slurm_train.sh: preempted; requeueing job $SLURM_JOB_ID" >&2
        exec scontrol requeue "$SLURM_JOB_ID"
    fi
    if [ "$attempt" -ge "$MAX_REQUEUES" ]; then
        echo "slurm_train.sh: preempted $((attempt + 1)) times; stopping (MAX_REQUEUES=$MAX_REQUEUES)" >&2
        exit "$status"
    fi
    echo "slurm_train.sh: preempted; resuming from $WORK_DIR" >&2
    resume=(--auto-resume)
done
