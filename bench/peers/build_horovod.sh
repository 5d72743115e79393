#!/usr/bin/env bash
# Builds Horovod 0.28.1 (its last release) once, for the CPU (Gloo, no MPI, no CUDA, PyTorch),
# into a virtual environment in a cache directory that `make bench` reuses, and prints that
# environment's python. Later runs print it at once.
#
#   bench/peers/build_horovod.sh            # cache: $HVDSPARSE_HOROVOD_CACHE or ~/.cache/hvdsparse/horovod
#
# 0.28.1 does not build as released against current torch: its CMake asks for C++14 where torch's
# headers need C++17 (fixed on Horovod's master, never released), and it builds CUDA kernels
# whenever nvcc is on the machine or torch is a CUDA build. The build below edits only those lines of the extracted
# sources. It takes tens of minutes on two cores (Gloo is built twice, once per C++ ABI, since
# the torch wheel uses the old one); it runs at nice 19, and the log is build.log in the cache.
set -euo pipefail

VERSION=0.28.1
CACHE=${HVDSPARSE_HOROVOD_CACHE:-$HOME/.cache/hvdsparse/horovod}
VENV=$CACHE/venv
mkdir -p "$CACHE"

if [ -x "$VENV/bin/python" ] && "$VENV/bin/python" -c "import horovod.torch" 2>/dev/null; then
  echo "$VENV/bin/python"
  exit 0
fi

exec 3>&1 >>"$CACHE/build.log" 2>&1
echo "== $(date -u +%FT%TZ) building Horovod $VERSION in $CACHE"
if [ ! -x "$VENV/bin/python" ]; then
  # torch comes from the system's site-packages: the same torch hvdsparse is measured with.
  python3 -m venv --system-site-packages "$VENV"
fi
WHEEL=$(ls "$CACHE"/wheels/horovod-$VERSION-*.whl 2>/dev/null | head -1 || true)
if [ -z "$WHEEL" ]; then
  if [ ! -f "$CACHE/horovod-$VERSION.tar.gz" ]; then
    "$VENV/bin/pip" download "horovod==$VERSION" --no-deps --no-binary :all: -d "$CACHE"
  fi
  SRC=$CACHE/src/horovod-$VERSION
  if [ ! -d "$SRC" ]; then
    mkdir -p "$CACHE/src"
    tar xzf "$CACHE/horovod-$VERSION.tar.gz" -C "$CACHE/src"
    # C++17 for torch's headers; no CUDA language or toolkit lookup.
    sed -i 's/set(CMAKE_CXX_STANDARD 14)/set(CMAKE_CXX_STANDARD 17)/' \
      "$SRC/CMakeLists.txt" "$SRC/horovod/torch/CMakeLists.txt"
    sed -i 's/^check_language(CUDA)$/# CUDA left out for a CPU build/; s/^ *find_package(CUDAToolkit)$/# CUDA toolkit left out/' \
      "$SRC/CMakeLists.txt"
    # The torch wheel is a CUDA build; build the extension for CPU tensors only all the same.
    sed -i 's/^    add_cuda()$/    # CUDA left out for a CPU build/' "$SRC/horovod/torch/CMakeLists.txt"
  fi
  "$VENV/bin/pip" install --quiet wheel setuptools cloudpickle psutil pyyaml packaging cffi
  HOROVOD_WITH_GLOO=1 HOROVOD_WITHOUT_MPI=1 HOROVOD_WITH_PYTORCH=1 HOROVOD_WITHOUT_TENSORFLOW=1 \
    HOROVOD_WITHOUT_MXNET=1 MAKEFLAGS=-j2 env -u HOROVOD_GPU_OPERATIONS -u HOROVOD_GPU \
    nice -n 19 "$VENV/bin/pip" wheel --no-deps --no-build-isolation -v "$SRC" -w "$CACHE/wheels"
  WHEEL=$(ls "$CACHE"/wheels/horovod-$VERSION-*.whl | head -1)
fi
"$VENV/bin/pip" install --no-deps --force-reinstall "$WHEEL"
"$VENV/bin/python" -c "import horovod, horovod.torch as hvd; print('horovod', horovod.__version__, 'gloo', hvd.gloo_built())"
echo "== $(date -u +%FT%TZ) done"
echo "$VENV/bin/python" >&3
