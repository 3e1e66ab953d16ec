#!/usr/bin/env bash
# Run the test suite in the project venv, one pytest-xdist worker per core
# (at most 4), each test file on one worker (its module fixtures built once)
# and one thread per worker: most tests are single-threaded end-to-end runs,
# so processes, not threads, fill the cores. Extra arguments go to pytest
# (`-n 0` runs in this process). pytest's exit 5 ("no tests collected") is a
# failure here, never a pass.
set -uo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
export OMP_NUM_THREADS="${OMP_NUM_THREADS:-1}"
"${PYTHON:-$ROOT/.venv/bin/python}" -m pytest tests -q -ra --durations=30 \
    -n auto --maxprocesses 4 --dist loadfile "$@"
rc=$?
if [[ $rc -eq 5 ]]; then
    echo "run_tests: pytest collected no tests; treating as failure" >&2
    exit 1
fi
exit $rc
