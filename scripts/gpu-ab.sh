#!/usr/bin/env bash
# Device-side A/B runs of the window filter (development aid): builds the
# search bench and GPU tests, runs the GPU tests and the W1 stage times at
# ${AB_WEARERS:-10000} wearers with the PAA bound on and off and for each
# pruning level asked. Results to $OUT.
set -uo pipefail
cd "$(dirname "$0")/.."
source scripts/lib/gpu-env.sh
gpu_build search_bench test_kernels_gpu || exit 1
$BUILD/tests/kernels/test_kernels_gpu > "$OUT/gpu-tests.log" 2>&1
echo "gpu tests rc=$?"; tail -3 "$OUT/gpu-tests.log"
# AB_RUNS: "paa:pruning" pairs (paa 1|0, pruning on|off|kim|kim-eq).
for run in ${AB_RUNS:-1:on 0:on}; do
  IFS=: read -r paa pruning <<< "$run"
  tag="paa$paa-$pruning"
  GW_CUDA_PAA=$paa GW_CUDA_STAGE_TIMES=1 $BUILD/bench/search_bench --backend cuda \
    --mode window --pruning $pruning --sweep-wearers ${AB_WEARERS:-10000} --sweep-repeats 2 \
    > "$OUT/ab-$tag.jsonl" 2> "$OUT/ab-$tag.err"
  echo "== $tag"; tail -2 "$OUT/ab-$tag.err" | cut -c1-260
  grep -o '"pruned_[a-z_]*":[0-9.e+]*\|"batch_s_median":[0-9.e+]*' "$OUT/ab-$tag.jsonl" | head -5 | tr '\n' ' '; echo
done
