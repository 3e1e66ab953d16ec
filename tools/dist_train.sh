#!/usr/bin/env bash
# Usage: bash tools/dist_train.sh CONFIG NUM_PROCS [train.py options]
set -euo pipefail
exec bash "$(dirname "$0")/dist_run.sh" train.py "$2" "$1" "${@:3}"
