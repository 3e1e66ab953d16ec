#!/usr/bin/env bash
# Create (or refresh) the project's virtual environment with the pinned OpenMMLab stack.
#
#   bash tools/setup_env.sh            # idempotent: seconds when nothing changed
#
# Environment overrides:
#   MMPOS_VENV   where the venv lives        (default: <repo>/.venv)
#   MMPOS_CACHE  wheel cache outside the repo (default: ~/.cache/mmpos)
#   PYTHON       interpreter for the venv     (default: python3.11, else python3)
#
# mmcv 2.1.0 is source-only on PyPI and torch 2.14's headers need C++20, so the
# sdist is patched ('-std=c++17' -> '-std=c++20') and built once into
# $MMPOS_CACHE/wheels; later runs reuse that wheel.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${MMPOS_VENV:-$ROOT/.venv}"
CACHE="${MMPOS_CACHE:-$HOME/.cache/mmpos}"
WHEELS="$CACHE/wheels"
PYTHON="${PYTHON:-$(command -v python3.11 || command -v python3)}"
MMCV_VERSION=2.1.0

log() { printf '[setup_env] %s\n' "$*" >&2; }

stamp_of() {
    cat "$ROOT"/requirements/*.txt "$ROOT/setup.py" "$ROOT/tools/setup_env.sh" | sha256sum | cut -d' ' -f1
}
STAMP_FILE="$VENV/.mmpos-setup-stamp"
if [[ -f "$STAMP_FILE" && "$(cat "$STAMP_FILE")" == "$(stamp_of)" ]] \
    && "$VENV/bin/python" -c "import mmpos, mmpos_harness, mmcv.ops, mmdet, mmseg, mmpretrain" 2>/dev/null; then
    log "environment at $VENV is up to date"
    exit 0
fi

if [[ ! -x "$VENV/bin/python" ]]; then
    log "creating venv at $VENV with $PYTHON"
    "$PYTHON" -m venv "$VENV"
fi
PIP=("$VENV/bin/python" -m pip --disable-pip-version-check)

log "installing build requirements (torch, torchvision, numpy, ninja)"
"${PIP[@]}" install -q -r "$ROOT/requirements/build.txt"

mkdir -p "$WHEELS"
if ! ls "$WHEELS"/mmcv-"$MMCV_VERSION"-*.whl >/dev/null 2>&1; then
    log "building mmcv $MMCV_VERSION with compiled ops (about 10 minutes on 2 cores)"
    BUILD="$(mktemp -d)"
    trap 'rm -rf "$BUILD"' EXIT
    "${PIP[@]}" install -q 'setuptools<70'   # what mmcv 2.1.0's setup.py was written for
    "${PIP[@]}" download -q --no-deps --no-binary :all: --no-build-isolation -d "$BUILD" "mmcv==$MMCV_VERSION"
    tar -xzf "$BUILD"/mmcv-"$MMCV_VERSION".tar.gz -C "$BUILD"
    SRC="$BUILD/mmcv-$MMCV_VERSION"
    grep -q "'-std=c++17'" "$SRC/setup.py" || { log "mmcv setup.py no longer has '-std=c++17'"; exit 1; }
    sed -i "s/'-std=c++17'/'-std=c++20'/g" "$SRC/setup.py"
    (cd "$SRC" && MMCV_WITH_OPS=1 MAX_JOBS="${MAX_JOBS:-$(nproc)}" \
        "${PIP[@]}" wheel -q --no-deps --no-build-isolation -w "$BUILD/out" .)
    # Move into place atomically so an interrupted build never leaves a broken wheel in the cache.
    for whl in "$BUILD"/out/mmcv-*.whl; do
        cp "$whl" "$WHEELS/.tmp.$(basename "$whl")"
        mv "$WHEELS/.tmp.$(basename "$whl")" "$WHEELS/$(basename "$whl")"
    done
    "${PIP[@]}" install -q -r "$ROOT/requirements/build.txt"   # back to torch's setuptools
fi

log "installing the runtime and test stack"
"${PIP[@]}" install -q --find-links "$WHEELS" -r "$ROOT/requirements/tests.txt"
"${PIP[@]}" install -q --no-deps --no-build-isolation -e "$ROOT"

"$VENV/bin/python" -c "import mmpos, mmpos_harness, mmcv.ops, mmdet, mmseg, mmpretrain; print('mmpos', mmpos.__version__)"
stamp_of > "$STAMP_FILE"
log "done: activate with 'source $VENV/bin/activate'"
