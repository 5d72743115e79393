#!/usr/bin/env bash
# test/gpu/bundle.sh made from this build holds what its programs load beyond a GPU host's own:
# every program and library resolves libhvdsparse, Gloo and hwloc inside the bundle, and the
# bundle's launcher runs the bundle's cuda_host_test at np 2 (no GPU needed for either).
# Usage: bundle_test.sh BUILD SCRATCH_DIR
set -euo pipefail
BUILD=$1 DIR=$2
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
rm -rf "$DIR"
"$ROOT/test/gpu/bundle.sh" "$BUILD" "$DIR"
bad=0
for f in "$DIR"/bin/* "$DIR"/lib/*.so*; do
  LD_LIBRARY_PATH="$DIR/lib" ldd "$f" | awk -v lib="$DIR/lib/" -v f="$f" '
    $1 ~ /^lib(hvdsparse|gloo|hwloc)/ && index($3, lib) != 1 { print f ": " $1 " from " $3; bad = 1 }
    END { exit bad }' || bad=1
done
[ $bad -eq 0 ] || { echo "bundle_test: libraries above resolve outside the bundle" >&2; exit 1; }
LD_LIBRARY_PATH="$DIR/lib" timeout 120 "$DIR/bin/hvdsparse" run -np 2 \
  "$DIR/bin/cuda_host_test" --gtest_brief=1
rm -rf "$DIR"
