#!/usr/bin/env bash
# 1000 tensors of 4 KiB per step against one allreduce of 4 MB, at np 2, R runs (default 5):
# prints every run's medians and the median ratio over runs.
#   bench/fusion_step.sh [BUILD_DIR] [RUNS]
set -euo pipefail
build=${1:-build}
runs=${2:-5}
ratios=()
for i in $(seq "$runs"); do
  line=$(timeout 300 "$build/bin/hvdsparse" run -np 2 "$build/bin/hvdsparse-fusion-bench" \
         -t 1000 -s 4096 -n 30 -w 5 | grep "ratio" | sed 's/^\[0\]<stdout>://')
  echo "run $i: $line"
  ratios+=("${line##*ratio }")
done
printf '%s\n' "${ratios[@]}" | sort -g | awk '{a[NR]=$1} END {printf "median ratio over %d runs: %.2f (min %.2f, max %.2f)\n", NR, a[int((NR+1)/2)], a[1], a[NR]}'
