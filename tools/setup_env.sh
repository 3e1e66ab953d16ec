#!/usr/bin/env bash
# Create (or refresh) the project's virtual environment with the pinned OpenMMLab stack.
#
#   bash tools/setup_env.sh            # idempotent: seconds when nothing changed
#
# Environment overrides:
#   MMPOS_VENV   where the venv lives        (default: <repo>/.venv)
#   MMPOS_CACHE  wheel cache outside the repo (default: ~/.cache/mmpos)
#   PYTHON       interpreter for the venv     (default: python3.11, else python3)
#   FORCE_CUDA   1: build mmcv's CUDA ops without a visible GPU (a Docker
#                build); 0: CPU ops only even where a GPU and nvcc exist
#
# mmcv 2.1.0 is source-only on PyPI and torch 2.14's headers need C++20, so the
# sdist is patched ('-std=c++17' -> '-std=c++20') and built once into
# $MMPOS_CACHE/wheels/<torch version>-<cpu|cuXY>/; later runs reuse that wheel.
# CUDA ops are built where nvcc and a GPU exist (FORCE_CUDA overrides); the
# key keeps a CPU-only build from being reused on a GPU machine. A wheel put
# directly in $MMPOS_CACHE/wheels/ serves the CPU key once it imports.
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

# Which mmcv build this machine needs: CUDA ops with nvcc and a GPU.
TORCH_VERSION="$("$VENV/bin/python" -c 'import torch; print(torch.__version__.split("+")[0])')"
CUDA_OPS="${FORCE_CUDA:-}"
if [[ -z "$CUDA_OPS" ]]; then
    CUDA_OPS=0
    if command -v nvcc >/dev/null 2>&1 && "$VENV/bin/python" -c 'import torch, sys; sys.exit(not torch.cuda.is_available())'; then
        CUDA_OPS=1
    fi
fi
if [[ "$CUDA_OPS" == 1 ]]; then
    command -v nvcc >/dev/null 2>&1 || { log "FORCE_CUDA=1 needs nvcc on the PATH (the CUDA toolkit)"; exit 1; }
    CUDA_TAG="cu$(nvcc --version | sed -n 's/.*release \([0-9]*\)\.\([0-9]*\).*/\1\2/p')"
else
    CUDA_TAG=cpu
fi
KEY="torch$TORCH_VERSION-$CUDA_TAG"
mkdir -p "$WHEELS/$KEY"
if [[ "$CUDA_TAG" == cpu ]] && ! ls "$WHEELS/$KEY"/mmcv-"$MMCV_VERSION"-*.whl >/dev/null 2>&1 \
    && ls "$WHEELS"/mmcv-"$MMCV_VERSION"-*.whl >/dev/null 2>&1; then
    log "using the mmcv wheel in $WHEELS for $KEY (checked by importing its ops below)"
    cp "$WHEELS"/mmcv-"$MMCV_VERSION"-*.whl "$WHEELS/$KEY/"
fi
WHEELS="$WHEELS/$KEY"
if ! ls "$WHEELS"/mmcv-"$MMCV_VERSION"-*.whl >/dev/null 2>&1; then
    log "building mmcv $MMCV_VERSION for $KEY (CPU ops: about 10 minutes on 2 cores; CUDA ops: longer)"
    BUILD="$(mktemp -d)"
    trap 'rm -rf "$BUILD"' EXIT
    "${PIP[@]}" install -q 'setuptools<70'   # what mmcv 2.1.0's setup.py was written for
    "${PIP[@]}" download -q --no-deps --no-binary :all: --no-build-isolation -d "$BUILD" "mmcv==$MMCV_VERSION"
    tar -xzf "$BUILD"/mmcv-"$MMCV_VERSION".tar.gz -C "$BUILD"
    SRC="$BUILD/mmcv-$MMCV_VERSION"
    grep -q "'-std=c++17'" "$SRC/setup.py" || { log "mmcv setup.py no longer has '-std=c++17'"; exit 1; }
    sed -i "s/'-std=c++17'/'-std=c++20'/g" "$SRC/setup.py"
    (cd "$SRC" && MMCV_WITH_OPS=1 FORCE_CUDA="$CUDA_OPS" MAX_JOBS="${MAX_JOBS:-$(nproc)}" \
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
# this key's build, also over an mmcv of the same version built for another key
"${PIP[@]}" install -q --no-deps --force-reinstall "$WHEELS"/mmcv-"$MMCV_VERSION"-*.whl
"${PIP[@]}" install -q --no-deps --no-build-isolation -e "$ROOT"

"$VENV/bin/python" -c "import mmcv.ops" || {
    log "mmcv from $WHEELS does not import (built for another torch?); delete that wheel and run again"
    exit 1
}
"$VENV/bin/python" -c "import mmpos, mmpos_harness, mmdet, mmseg, mmpretrain; print('mmpos', mmpos.__version__)"
BUILT="$("$VENV/bin/python" -c 'from mmcv.ops import get_compiling_cuda_version as v; print(v())')"
if [[ "$CUDA_TAG" != cpu && "$BUILT" == "not available" ]]; then
    log "the mmcv wheel in $WHEELS has no CUDA ops; delete it and run again"
    exit 1
fi
log "mmcv ops: $([[ "$BUILT" == "not available" ]] && echo "CPU only" || echo "CUDA $BUILT") ($KEY)"
stamp_of > "$STAMP_FILE"
log "done: activate with 'source $VENV/bin/activate'"
