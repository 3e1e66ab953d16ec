#!/usr/bin/env bash
# Run the test suite in the project venv. pytest's exit 5 ("no tests
# collected") is a failure here, never a pass.
set -uo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
"${PYTHON:-$ROOT/.venv/bin/python}" -m pytest tests -q -ra --durations=30 "$@"
rc=$?
if [[ $rc -eq 5 ]]; then
    echo "run_tests: pytest collected no tests; treating as failure" >&2
    exit 1
fi
exit $rc
