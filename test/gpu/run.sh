#!/usr/bin/env bash
# `make test-gpu`: builds and runs the GPU tests and the allreduce bandwidth comparison on this
# machine's GPU(s) (docs/gpu.md). Usage: test/gpu/run.sh [build dir, default build]
#   1. cuda_host_test   the kernels' element logic on the CPU (also part of `make test`)
#   2. gpu_kernels_test every cuda/ kernel against the CPU implementation in ops/
#   3. gpu_nccl_test    the NCCL backend's collectives, np 1 and np = GPUs when there are two+
#   4. nccl_allreduce_bench  bus bandwidth of our allreduce path next to ncclAllReduce
#   5. gpu_runtime_test      GPU tensors through the runtime with no framework: np 2 staged on
#      the one GPU, np 1 on the NCCL route against raw ncclAllReduce (gpu_runtime.csv), and
#      the route's consumer stream with completion at launch
#   6. torch_gpu_checks.py   PyTorch CUDA tensors through the runtime (host-staged): every
#      collective, a producer stream delayed by a long kernel, GPU memory over 1000 operations,
#      DistributedOptimizer / DeAR / top-k training against the CPU, at np 1; then np 2 on the
#      one GPU with the bandwidth against torch.distributed's gloo on the same CUDA tensors; then
#      the checks again at np 1 on the NCCL route (HVDSPARSE_GPU_OPERATIONS=nccl) with its
#      figures against torch.distributed's NCCL; then the route with handles completing at
#      launch (HOROVOD_ENABLE_ASYNC_COMPLETION=1: results ordered on the consumer's stream)
#   7. tf_gpu_checks.py      TensorFlow GPU tensors in place through DLPack (staged and routed),
#      where this Python has a TensorFlow that sees the GPU
# Figures go to $HVDS_GPU_OUT (default BUILD/gpu-figures): torch_gpu.jsonl, tf_gpu.jsonl and the
# logs.
# Fails at once without a GPU. Each step has a time limit; the whole run (build included) is
# meant to stay under 8 minutes on one GPU with a few cores.
# HVDS_GPU_TEST_BIN=DIR runs the programs already built into DIR (on a machine with the build's
# dependencies and the same CUDA major version) without configuring or building: for a GPU host
# that lacks Gloo, hwloc or GoogleTest. test/gpu/bundle.sh gathers them with the libraries they
# need into DIR and DIR/../lib, which then goes first on the loader's path; libcudart and libnccl
# are the GPU host's own (on its loader's path).
set -euo pipefail
BUILD=${1:-build}
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
JOBS=${JOBS:-$(nproc)}
start=$(date +%s)

if command -v nvidia-smi >/dev/null 2>&1; then
  if ! nvidia-smi -L >/dev/null 2>&1; then
    echo "test-gpu: no GPU here (nvidia-smi -L failed); these tests need one" >&2
    exit 1
  fi
  nvidia-smi -L
else
  echo "test-gpu: no nvidia-smi; the tests themselves fail if there is no GPU"
fi

BIN=${HVDS_GPU_TEST_BIN:-$BUILD/bin}
if [ -n "${HVDS_GPU_TEST_BIN:-}" ]; then
  echo "test-gpu: prebuilt programs in $BIN, nothing built"
  if [ -d "$BIN/../lib" ]; then
    export LD_LIBRARY_PATH="$(cd "$BIN/../lib" && pwd)${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  fi
elif [ ! -f "$BUILD/CMakeCache.txt" ]; then
  cmake -S "$ROOT" -B "$BUILD" ${CMAKE_FLAGS:--DCMAKE_BUILD_TYPE=RelWithDebInfo} \
    >"$BUILD.configure.log" 2>&1 || { cat "$BUILD.configure.log"; exit 1; }
fi
targets="cuda_host_test gpu_kernels_test gpu_nccl_test nccl_allreduce_bench gpu_runtime_test hvdsparse_cli hvdsparse_lib hvdsparse_device"
if [ -z "${HVDS_GPU_TEST_BIN:-}" ] && ! timeout 360 cmake --build "$BUILD" -j "$JOBS" --target $targets; then
  echo "test-gpu: building $targets in $BUILD failed; CUDA and NCCL must be found at configure" \
       "time (see the CUDA and NCCL lines of the configure summary)" >&2
  exit 1
fi
[ -n "${HVDS_GPU_TEST_BIN:-}" ] || echo "test-gpu: built in $(( $(date +%s) - start )) s"

fail=0
run() {  # run LIMIT NAME ARGS...: one step, its time and result
  local limit=$1 name=$2 t0 rc
  shift 2
  t0=$(date +%s)
  echo "=== $name"
  timeout "$limit" "$BIN/$name" "$@" && rc=0 || rc=$?
  echo "=== $name: $([ $rc -eq 0 ] && echo passed || echo "FAILED (exit $rc)")" \
       "in $(( $(date +%s) - t0 )) s"
  [ $rc -eq 0 ] || fail=1
}
run 60 cuda_host_test --gtest_brief=1
run 180 gpu_kernels_test --gtest_brief=1
run 180 gpu_nccl_test --gtest_brief=1
run 120 nccl_allreduce_bench 256 50

OUT_DIR=${HVDS_GPU_OUT:-$BUILD/gpu-figures}
mkdir -p "$OUT_DIR"
PY=${PYTHON:-python3}
LIBDIR=$(cd "$BIN/../lib" 2>/dev/null && pwd || echo "$BIN")

# GPU tensors through the runtime without a framework: two processes staging on the one GPU,
# then the NCCL route at np 1 with its figures against raw ncclAllReduce (gpu_runtime.csv).
runtime_run() {  # runtime_run MODE NP FILTER
  local t0 rc
  t0=$(date +%s)
  echo "=== gpu_runtime_test $1 np $2"
  HVDS_GPU_OUT="$OUT_DIR" HVDSPARSE_GPU_OPERATIONS=$1 \
    HVDSPARSE_DEVICE_LIBRARY="$LIBDIR/libhvdsparse_device.so" LD_LIBRARY_PATH="$LIBDIR${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" \
    timeout 150 "$BIN/hvdsparse" run -np "$2" "$BIN/gpu_runtime_test" --gtest_filter="$3" \
    2>&1 | tee -a "$OUT_DIR/gpu_runtime.log" && rc=0 || rc=$?
  echo "=== gpu_runtime_test $1 np $2: $([ $rc -eq 0 ] && echo passed || echo "FAILED (exit $rc)")" \
       "in $(( $(date +%s) - t0 )) s"
  [ $rc -eq 0 ] || fail=1
}
runtime_run host 2 'Staged.*'
runtime_run nccl 1 'Routed.*'
HOROVOD_ENABLE_ASYNC_COMPLETION=1 runtime_run nccl 1 'Routed.TheConsumersStreamSeesTheResult'

# The PyTorch checks, where this Python has a torch that sees the GPU.
torch_run() {  # torch_run LIMIT NP ARGS...: the checks under the launcher
  local limit=$1 np=$2 t0 rc
  shift 2
  t0=$(date +%s)
  echo "=== torch_gpu_checks np $np $*"
  PYTHONPATH="$ROOT/frameworks/common:$ROOT/frameworks/pytorch${PYTHONPATH:+:$PYTHONPATH}" \
    HVDSPARSE_LIBRARY="$LIBDIR/libhvdsparse.so" HVDSPARSE_DEVICE_LIBRARY="$LIBDIR/libhvdsparse_device.so" \
    timeout "$limit" "$BIN/hvdsparse" run -np "$np" "$PY" "$ROOT/test/gpu/torch_gpu_checks.py" \
    --out "$OUT_DIR" "$@" 2>&1 | tee -a "$OUT_DIR/torch_gpu.log" && rc=0 || rc=$?
  echo "=== torch_gpu_checks np $np: $([ $rc -eq 0 ] && echo passed || echo "FAILED (exit $rc)")" \
       "in $(( $(date +%s) - t0 )) s"
  [ $rc -eq 0 ] || fail=1
}
if "$PY" -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)" 2>/dev/null; then
  "$PY" -c "import torch; print('torch', torch.__version__, 'CUDA', torch.version.cuda, 'NCCL', torch.cuda.nccl.version())"
  torch_run 150 1
  torch_run 150 2 --checks collectives,stream,training,sync_bn,split_sparse --bench
  HVDSPARSE_GPU_OPERATIONS=nccl torch_run 150 1 --bench-nccl
  HVDSPARSE_GPU_OPERATIONS=nccl HOROVOD_ENABLE_ASYNC_COMPLETION=1 torch_run 120 1 \
    --checks collectives,stream,training,split_sparse
else
  echo "=== torch_gpu_checks: skipped: $PY has no torch that sees a GPU"
  fail=1
fi
# TensorFlow's GPU tensors in place (DLPack), where this Python has a TensorFlow that sees the GPU
# (the issue's figures are PyTorch's; this step is reported, not required).
if "$PY" -c "import tensorflow as tf, sys; sys.exit(0 if tf.config.list_physical_devices('GPU') else 1)" 2>/dev/null; then
  for mode in host nccl; do
    echo "=== tf_gpu_checks np 1 $mode"
    PYTHONPATH="$ROOT/frameworks/common:$ROOT/frameworks/tensorflow${PYTHONPATH:+:$PYTHONPATH}" \
      HVDSPARSE_LIBRARY="$LIBDIR/libhvdsparse.so" HVDSPARSE_DEVICE_LIBRARY="$LIBDIR/libhvdsparse_device.so" \
      HVDSPARSE_GPU_OPERATIONS=$mode timeout 120 "$BIN/hvdsparse" run -np 1 "$PY" \
      "$ROOT/test/gpu/tf_gpu_checks.py" --out "$OUT_DIR" 2>&1 | tee -a "$OUT_DIR/tf_gpu.log" && rc=0 || rc=$?
    echo "=== tf_gpu_checks np 1 $mode: $([ $rc -eq 0 ] && echo passed || echo "FAILED (exit $rc)")"
    [ $rc -eq 0 ] || fail=1
  done
else
  echo "=== tf_gpu_checks: not run: $PY has no TensorFlow that sees a GPU"
fi
echo "test-gpu: $([ $fail -eq 0 ] && echo passed || echo FAILED) in $(( $(date +%s) - start )) s"
exit $fail
