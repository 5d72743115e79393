#!/usr/bin/env bash
# Builds Horovod 0.28.1 (its last release) once, for the CPU (Gloo, no MPI, no CUDA), with one
# framework, into a virtual environment in a cache directory that `make bench` reuses, and
# prints that environment's python. Later runs print it at once.
#
#   bench/peers/build_horovod.sh              # PyTorch: venv/ in the cache
#   bench/peers/build_horovod.sh tensorflow   # TensorFlow: venv-tensorflow/ in the cache
#   (cache: $HVDSPARSE_HOROVOD_CACHE or ~/.cache/hvdsparse/horovod)
#
# 0.28.1 does not build as released against current torch: its CMake asks for C++14 where torch's
# headers need C++17 (fixed on Horovod's master, never released), and it builds CUDA kernels
# whenever nvcc is on the machine or torch is a CUDA build. The build below edits only those lines of the extracted
# sources. It takes tens of minutes on two cores (Gloo is built twice, once per C++ ABI, since
# the torch wheel uses the old one); it runs at nice 19, and the log is build.log in the cache.
# Against TensorFlow 2.20 the TensorFlow ops build once the XLA ops are left out (they include
# tensorflow/compiler/xla/client/xla_builder.h, which TensorFlow has since moved); Horovod's
# Keras layer then needs TF_USE_LEGACY_KERAS=1 and tf_keras, as 0.28.1 predates Keras 3, and
# its backend import pointed at tf.keras (below).
set -euo pipefail

VERSION=0.28.1
FRAMEWORK=${1:-torch}
CACHE=${HVDSPARSE_HOROVOD_CACHE:-$HOME/.cache/hvdsparse/horovod}
case "$FRAMEWORK" in
  torch)
    VENV=$CACHE/venv WORK=$CACHE MODULE=horovod.torch
    WITH="HOROVOD_WITH_PYTORCH=1 HOROVOD_WITHOUT_TENSORFLOW=1" ;;
  tensorflow)
    VENV=$CACHE/venv-tensorflow WORK=$CACHE/tensorflow MODULE=horovod.tensorflow
    WITH="HOROVOD_WITHOUT_PYTORCH=1 HOROVOD_WITH_TENSORFLOW=1" ;;
  *) echo "usage: $0 [torch|tensorflow]" >&2; exit 2 ;;
esac
mkdir -p "$CACHE" "$WORK"

if [ -x "$VENV/bin/python" ] && "$VENV/bin/python" -c "import $MODULE" 2>/dev/null; then
  echo "$VENV/bin/python"
  exit 0
fi

exec 3>&1 >>"$WORK/build.log" 2>&1
echo "== $(date -u +%FT%TZ) building Horovod $VERSION for $FRAMEWORK in $WORK"
if [ ! -x "$VENV/bin/python" ]; then
  # torch comes from the system's site-packages: the same torch hvdsparse is measured with.
  python3 -m venv --system-site-packages "$VENV"
fi
WHEEL=$(ls "$WORK"/wheels/horovod-$VERSION-*.whl 2>/dev/null | head -1 || true)
if [ -z "$WHEEL" ]; then
  if [ ! -f "$CACHE/horovod-$VERSION.tar.gz" ]; then
    "$VENV/bin/pip" download "horovod==$VERSION" --no-deps --no-binary :all: -d "$CACHE"
  fi
  SRC=$WORK/src/horovod-$VERSION
  if [ ! -d "$SRC" ]; then
    mkdir -p "$WORK/src"
    tar xzf "$CACHE/horovod-$VERSION.tar.gz" -C "$WORK/src"
    # C++17 for torch's headers; no CUDA language or toolkit lookup.
    sed -i 's/set(CMAKE_CXX_STANDARD 14)/set(CMAKE_CXX_STANDARD 17)/' \
      "$SRC/CMakeLists.txt" "$SRC/horovod/torch/CMakeLists.txt"
    sed -i 's/^check_language(CUDA)$/# CUDA left out for a CPU build/; s/^ *find_package(CUDAToolkit)$/# CUDA toolkit left out/' \
      "$SRC/CMakeLists.txt"
    # The torch wheel is a CUDA build; build the extension for CPU tensors only all the same.
    sed -i 's/^    add_cuda()$/    # CUDA left out for a CPU build/' "$SRC/horovod/torch/CMakeLists.txt"
    # TensorFlow 2.20 no longer has the XLA header the XLA ops include; the ops themselves build.
    sed -i 's|^list(APPEND TF_SOURCES "${PROJECT_SOURCE_DIR}/horovod/tensorflow/xla_mpi_ops.cc")$|# XLA ops left out|' \
      "$SRC/horovod/tensorflow/CMakeLists.txt"
  fi
  "$VENV/bin/pip" install --quiet wheel setuptools cloudpickle psutil pyyaml packaging cffi
  env -u HOROVOD_GPU_OPERATIONS -u HOROVOD_GPU \
    HOROVOD_WITH_GLOO=1 HOROVOD_WITHOUT_MPI=1 $WITH HOROVOD_WITHOUT_MXNET=1 MAKEFLAGS=-j2 \
    nice -n 19 "$VENV/bin/pip" wheel --no-deps --no-build-isolation -v "$SRC" -w "$WORK/wheels"
  WHEEL=$(ls "$WORK"/wheels/horovod-$VERSION-*.whl | head -1)
fi
"$VENV/bin/pip" install --no-deps --force-reinstall "$WHEEL"
if [ "$FRAMEWORK" = tensorflow ]; then
  # Its Keras layer takes the backend from the `keras` package, which is Keras 3 beside TF 2.20;
  # take it from tf.keras (tf_keras under TF_USE_LEGACY_KERAS=1) like the rest of the layer.
  SITE=$("$VENV/bin/python" -c "import os, horovod; print(os.path.dirname(horovod.__file__))")
  sed -i 's/^    from keras import backend as K$/    K = keras.backend/' \
    "$SITE/tensorflow/keras/__init__.py" "$SITE/tensorflow/keras/callbacks.py"
fi
"$VENV/bin/python" -c "import horovod, $MODULE as hvd; print('horovod', horovod.__version__, 'gloo', hvd.gloo_built())"
echo "== $(date -u +%FT%TZ) done"
echo "$VENV/bin/python" >&3
