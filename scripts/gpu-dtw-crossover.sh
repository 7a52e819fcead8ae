#!/usr/bin/env bash
# Device-side measurement of the DTW kernel shapes (docs/gpu.md): one
# alignment per thread vs one per warp, for several pattern lengths (band 10 %
# of m) and candidate counts. Every window is a candidate (threshold inf, so
# no bound prunes); the DTW stage time comes from GW_CUDA_STAGE_TIMES. Also
# runs the GPU tests with the warp kernel forced. Results to $OUT.
set -uo pipefail
cd "$(dirname "$0")/.."
source scripts/lib/gpu-env.sh
gpu_build search_bench test_kernels_gpu || exit 1
GW_CUDA_DTW=warp $BUILD/tests/kernels/test_kernels_gpu > "$OUT/gpu-tests-warp.log" 2>&1
echo "gpu tests (warp DTW forced) rc=$?"; tail -2 "$OUT/gpu-tests-warp.log"
for m in ${CROSS_M:-128 256 512 1024}; do
  for wearers in ${CROSS_WEARERS:-1 4 16 64 256 1024}; do
    for kernel in thread warp; do
      GW_CUDA_DTW=$kernel GW_CUDA_STAGE_TIMES=1 $BUILD/bench/search_bench --backend cuda --mode window \
        --m $m --dims 1 --patterns 1 --wearers $wearers --seconds 0.5 --threshold inf \
        --repeat 5 > "$OUT/x-$m-$wearers-$kernel.jsonl" 2> "$OUT/x-$m-$wearers-$kernel.err"
      dtw=$(grep -o '"dtw":[0-9.]*' "$OUT/x-$m-$wearers-$kernel.err" | tail -3 | cut -d: -f2 | sort -n | head -2 | tail -1)
      windows=$(grep -o '"windows":[0-9]*' "$OUT/x-$m-$wearers-$kernel.jsonl" | head -1 | cut -d: -f2)
      echo "{\"m\":$m,\"band\":$((m / 10)),\"wearers\":$wearers,\"candidates\":${windows:-0},\"kernel\":\"$kernel\",\"dtw_ms\":${dtw:-null}}"
    done
  done
done | tee "$OUT/dtw_crossover.jsonl"
