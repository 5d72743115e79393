#!/usr/bin/env bash
# The long soak (docs/reliability.md): 20,000 steps of the mixed workload at np 4 and 200
# init/shutdown cycles, each rank's resident memory and descriptors sampled as they run.
#   test/reliability/soak.sh [BUILD_DIR] [STEPS] [CYCLES]
# Needs a build with the reliability tests (default build dir: build). Writes the figures to
# BUILD_DIR/soak-report.md and prints them; exits non-zero when memory grew by 5% or more after
# the warm-up, or any descriptor leaked. `make test` runs a short form of the same tests.
set -euo pipefail
BUILD=${1:-build}
STEPS=${2:-20000}
CYCLES=${3:-200}
TEST=$BUILD/test/reliability/soak_test
[[ -x "$TEST" ]] || TEST=$BUILD/bin/soak_test
[[ -x "$TEST" ]] || { echo "soak.sh: no soak_test in $BUILD; build first" >&2; exit 1; }
REPORT=$BUILD/soak-report.md
: >"$REPORT"
HVDS_SOAK_STEPS=$STEPS HVDS_SOAK_CYCLES=$CYCLES HVDS_SOAK_REPORT=$(realpath "$REPORT") \
  "$TEST" --gtest_filter='Soak.*'
echo "figures in $REPORT"
