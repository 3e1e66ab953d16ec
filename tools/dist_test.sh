#!/usr/bin/env bash
# Usage: bash tools/dist_test.sh CONFIG CHECKPOINT NUM_PROCS [test.py options]
set -euo pipefail
exec bash "$(dirname "$0")/dist_run.sh" test.py "$3" "$1" "$2" "${@:4}"
