#!/usr/bin/env bash
# Device-side profile of the fused window filter (development aid, docs/gpu.md):
# W1 stage times at ${PROFILE_WEARERS:-10000} wearers for each pruning level
# (what each bound costs), then one Nsight Compute source-level profile of
# the filter kernel (warp stall samples per SASS instruction with its source
# line). Results to $OUT.
set -uo pipefail
cd "$(dirname "$0")/.."
source scripts/lib/gpu-env.sh
gpu_build search_bench || exit 1
W=${PROFILE_WEARERS:-10000}
for pruning in ${PROFILE_PRUNING:-on kim-eq kim}; do
  GW_CUDA_STAGE_TIMES=1 $BUILD/bench/search_bench --backend cuda --mode window \
    --pruning $pruning --sweep-wearers $W --sweep-repeats 2 \
    > "$OUT/prof-$pruning.jsonl" 2> "$OUT/prof-$pruning.err"
  echo "== pruning $pruning"; tail -2 "$OUT/prof-$pruning.err" | cut -c1-300
  grep -o '"pruned_[a-z_]*":[0-9.e+-]*\|"batch_s_median":[0-9.e+-]*' "$OUT/prof-$pruning.jsonl" | head -5 | tr '\n' ' '; echo
done
NCU=/usr/local/cuda/bin/ncu
$NCU -k regex:fused_filter --launch-skip 3 --launch-count 1 \
  --section SourceCounters --section WarpStateStats --section LaunchStats --section Occupancy \
  --import-source yes -f -o "$OUT/filter" \
  $BUILD/bench/search_bench --backend cuda --mode window --sweep-wearers $W --sweep-repeats 1 \
  > "$OUT/ncu-run.log" 2>&1
echo "ncu rc=$?"; tail -3 "$OUT/ncu-run.log"
$NCU -i "$OUT/filter.ncu-rep" --page details > "$OUT/filter-details.txt" 2>&1
$NCU -i "$OUT/filter.ncu-rep" --page source --csv --print-source cuda,sass \
  > "$OUT/filter-source.csv" 2> "$OUT/filter-source.err" ||
  $NCU -i "$OUT/filter.ncu-rep" --page source --csv > "$OUT/filter-source.csv" 2>> "$OUT/filter-source.err"
echo "source csv lines: $(wc -l < "$OUT/filter-source.csv")"; head -c 600 "$OUT/filter-source.err"
grep -E "Registers|Shared Memory|Achieved Occupancy|Theoretical Occupancy|Block Limit|Eligible|Warp Cycles" "$OUT/filter-details.txt" | head -30
# Per CUDA source line: share of executed warp instructions and of stall
# samples, and the average active lanes (scripts/lib/ncu_lines.py).
python3 scripts/lib/ncu_lines.py "$OUT/filter-source.csv" 60 > "$OUT/filter-lines.txt"
head -45 "$OUT/filter-lines.txt"
gzip -f "$OUT/filter-source.csv"
