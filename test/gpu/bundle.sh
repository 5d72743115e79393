#!/usr/bin/env bash
# Gathers what `test/gpu/run.sh` runs into one folder for a GPU host that cannot build the
# project (no Gloo, hwloc or GoogleTest there, or no network to install them): the GPU test
# programs and the launcher into DIR/bin; libhvdsparse, the device library and every shared
# library they load, except the C and C++ runtimes, CUDA's and NCCL's (the GPU host's own),
# into DIR/lib. Then, on the GPU host: HVDS_GPU_TEST_BIN=DIR/bin test/gpu/run.sh (docs/gpu.md).
# Usage: test/gpu/bundle.sh [build dir, default build] DIR
set -euo pipefail
if [ $# -eq 1 ]; then BUILD=build DIR=$1; else BUILD=$1 DIR=$2; fi
PROGRAMS="cuda_host_test gpu_kernels_test gpu_nccl_test nccl_allreduce_bench gpu_runtime_test hvdsparse"
LIBRARIES="libhvdsparse.so libhvdsparse_device.so"
# What every GPU host has, or must bring itself: libc's parts, the C++ runtime, CUDA, NCCL.
HOST_OWN='^(linux-vdso|ld-linux|libc|libm|libdl|libpthread|librt|libstdc\+\+|libgcc_s|libcudart|libcuda|libnccl)\.'

mkdir -p "$DIR/bin" "$DIR/lib"
for p in $PROGRAMS; do
  [ -x "$BUILD/bin/$p" ] || { echo "bundle: $BUILD/bin/$p is missing; build it first" >&2; exit 1; }
  cp "$BUILD/bin/$p" "$DIR/bin/"
done
for l in $LIBRARIES; do
  [ -f "$BUILD/lib/$l" ] || { echo "bundle: $BUILD/lib/$l is missing; build it first" >&2; exit 1; }
  cp "$BUILD/lib/$l" "$DIR/lib/"
done
# ldd lists every library a file loads, its libraries' libraries too.
for f in "$DIR"/bin/* "$DIR"/lib/libhvdsparse*.so; do
  LD_LIBRARY_PATH="$BUILD/lib" ldd "$f" | awk '$2 == "=>" && $3 ~ /^\// { print $1, $3 }'
done | sort -u | while read -r name path; do
  if ! [[ $name =~ $HOST_OWN ]] && [ ! -e "$DIR/lib/$name" ]; then
    cp -L "$path" "$DIR/lib/$name"
  fi
done
missing=$(for f in "$DIR"/bin/* "$DIR"/lib/*.so*; do
  LD_LIBRARY_PATH="$DIR/lib" ldd "$f" | grep "not found" | grep -Ev "$(echo "$HOST_OWN" | tr -d '^')" \
    || true; done | sort -u)
[ -z "$missing" ] || { echo "bundle: still unresolved:" >&2; echo "$missing" >&2; exit 1; }
echo "bundle: $(ls "$DIR/bin" | wc -l) programs, $(ls "$DIR/lib" | wc -l) libraries," \
     "$(du -sh "$DIR" | cut -f1) in $DIR"
