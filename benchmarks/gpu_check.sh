#!/usr/bin/env bash
# The GPU check of #59 item 5, for a GPU machine with Python and a CUDA
# torch but no network and no OpenMMLab stack, in under 8 minutes:
#
#   WHEELS=/path/to/wheels bash benchmarks/gpu_check.sh [OUT_DIR] [gpu_check.py options]
#
# 1. Every wheel in $WHEELS whose distribution is not installed here is
#    installed with `pip install --no-index --no-deps --target $MMPOS_SITE`
#    (default /tmp/mmpos_site; put on PYTHONPATH with the repository), so a
#    second run installs nothing.
# 2. benchmarks/gpu_check.py --out OUT_DIR (default benchmarks/results/gpu)
#    under `timeout`, leaving $ROPE_S seconds (default 100) for step 3:
#    planner against measurement for three paper configs, the mini Mask
#    R-CNN where mmcv's CUDA ops run. Options after OUT_DIR go to it
#    (e.g. --batch 64; --dry-run: the CPU test of tests/test_gpu_check.py).
# 3. Where CUDA is available and time is left:
#    benchmarks/rope_attention_device.py --quick --out OUT_DIR (torch only).
#
# Preparing $WHEELS on a networked machine with the target's Python version
# and platform (versions as pinned in requirements/runtime.txt):
#
#   pip download -d wheels mmengine==0.10.7 mmpretrain==1.2.0 mmdet==3.3.0 \
#       mmsegmentation==1.2.2 pycocotools ftfy regex scipy 'setuptools<81'
#   bash tools/setup_env.sh && cp ~/.cache/mmpos/wheels/torch<version>-*/mmcv-2.1.0-*.whl wheels/
#
# pip download brings each package's dependencies (none of them is torch);
# those the target already has are skipped at install (setuptools too, unless
# its pkg_resources is gone: mmengine reads `mmdet::` configs with it).
# mmcv 2.1.0 is source-only on PyPI, and `import mmpos` needs its compiled
# ops (mmseg imports mmcv.ops), so a pure-Python build (MMCV_WITH_OPS=0) does
# not do: bring the wheel tools/setup_env.sh builds and caches for the
# target's torch version, on a machine with that torch. Its CPU ops serve the
# three configs; a build with CUDA ops (where nvcc and a GPU exist, or
# FORCE_CUDA=1) also gives the mini Mask R-CNN.
#
# Environment: PYTHON (default python3), WHEELS, MMPOS_SITE, TOTAL_S (the
# whole run's seconds, default 470), ROPE_S.
set -uo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
OUT="${1:-benchmarks/results/gpu}"
shift $(( $# > 0 ? 1 : 0 ))
PYTHON="${PYTHON:-python3}"
SITE="${MMPOS_SITE:-/tmp/mmpos_site}"
TOTAL_S="${TOTAL_S:-470}"
ROPE_S="${ROPE_S:-100}"
export PYTHONPATH="$PWD:$SITE${PYTHONPATH:+:$PYTHONPATH}"

log() { printf '[gpu_check.sh %3ds] %s\n' "$SECONDS" "$*" >&2; }

if [[ -n "${WHEELS:-}" ]]; then
    mapfile -t missing < <("$PYTHON" - "$WHEELS" <<'PY'
import importlib.metadata as metadata
import pathlib
import sys

try:
    import pkg_resources  # noqa: F401
    installed = metadata.version
except ImportError:  # setuptools >= 81: counts as missing

    def installed(name):
        if name.lower() == 'setuptools':
            raise metadata.PackageNotFoundError(name)
        return metadata.version(name)

for wheel in sorted(pathlib.Path(sys.argv[1]).glob('*.whl')):
    try:
        installed(wheel.name.split('-')[0])
    except metadata.PackageNotFoundError:
        print(wheel)
PY
    )
    if (( ${#missing[@]} )); then
        log "installing ${#missing[@]} wheels from $WHEELS into $SITE"
        "$PYTHON" -m pip install -q --no-index --no-deps --target "$SITE" \
            "${missing[@]}" || { log "pip install failed"; exit 1; }
    else
        log "every wheel in $WHEELS is installed"
    fi
fi
"$PYTHON" -c "import mmengine, mmpretrain, mmcv.ops, mmpos" || {
    log "mmengine, mmpretrain, mmcv.ops or mmpos does not import: set WHEELS" \
        "(an mmcv wheel with ops built for this torch; see the header)"
    exit 1; }

check_s=$(( TOTAL_S - SECONDS - ROPE_S ))
log "benchmarks/gpu_check.py (at most ${check_s} s)"
timeout -k 10 "$check_s" "$PYTHON" benchmarks/gpu_check.py --out "$OUT" \
    --budget $(( check_s - 120 > 30 ? check_s - 120 : 30 )) "$@"
rc=$?
(( rc == 124 )) && log "gpu_check.py stopped at its limit; $OUT keeps the cases it finished"

left=$(( TOTAL_S - SECONDS - 5 ))
if "$PYTHON" -c "import sys, torch; sys.exit(not torch.cuda.is_available())" \
        && (( left >= 60 )); then
    log "benchmarks/rope_attention_device.py --quick (at most ${left} s)"
    timeout -k 5 "$left" "$PYTHON" benchmarks/rope_attention_device.py \
        --quick --out "$OUT" > /dev/null
else
    log "rope_attention_device.py not run (no CUDA, or ${left} s left)"
fi
log "done: $OUT"
exit "$rc"
