#!/usr/bin/env bash
# Device-side A/B runs of the window search (development aid, docs/gpu.md):
# builds the search bench and GPU tests, runs the GPU tests (unless AB_TESTS=0),
# then the W1 stage times at ${AB_WEARERS:-10000} wearers for each variant,
# ${AB_ROUNDS:-2} times interleaved, so variants are compared side by side.
# A kernel variant is another kernels/ tree (AB_BASE) or, for what the
# diagnostics switches set (docs/design.md, "Diagnostics"), an environment.
#   AB_VARIANTS  space-separated "tag:ENV=v,ENV=v,..." (tag alone: defaults), e.g.
#                "default per-lane-16:GW_CUDA_DTW_PER_LANE=16"
#   AB_PRUNING   search_bench --pruning (on|kim|kim-eq), default on
#   AB_BASE      optional folder (relative to the repository root) holding a
#                reference kernels/ tree: built in a second build folder from
#                this tree with kernels/ replaced, and run as variant "base".
# Results to $OUT (ab-<tag>-<round>.jsonl / .err).
set -uo pipefail
cd "$(dirname "$0")/.."
source scripts/lib/gpu-env.sh
ROOT=$PWD
if [ -n "${AB_BASE:-}" ]; then
  (rm -rf /tmp/gw-base && mkdir -p /tmp/gw-base &&
   tar -C "$ROOT" --exclude=./gpu-out --exclude="./$AB_BASE" -cf - . | tar -C /tmp/gw-base -xf - &&
   rm -rf /tmp/gw-base/kernels && cp -r "$ROOT/$AB_BASE/kernels" /tmp/gw-base/kernels &&
   cmake -S /tmp/gw-base -B /tmp/gw-base-build -DCMAKE_BUILD_TYPE=Release -DGAITWATCH_CUDA=ON \
     -DCMAKE_CUDA_ARCHITECTURES=90 && cmake --build /tmp/gw-base-build -j8 --target search_bench) \
    > "$OUT/base-build.log" 2>&1 &
  base_pid=$!
fi
gpu_build search_bench test_kernels_gpu || exit 1
if [ "${AB_TESTS:-1}" != 0 ]; then
  $BUILD/tests/kernels/test_kernels_gpu > "$OUT/gpu-tests.log" 2>&1
  echo "gpu tests rc=$?"; tail -3 "$OUT/gpu-tests.log"
fi
variants=${AB_VARIANTS:-default}
if [ -n "${AB_BASE:-}" ]; then
  wait $base_pid && variants="base $variants" || { echo "base build failed"; tail -20 "$OUT/base-build.log"; }
fi
for round in $(seq 1 ${AB_ROUNDS:-2}); do
  for variant in $variants; do
    tag=${variant%%:*}
    envs=(); [[ $variant == *:* ]] && IFS=, read -ra envs <<< "${variant#*:}"
    bin=$BUILD/bench/search_bench; [ "$tag" = base ] && bin=/tmp/gw-base-build/bench/search_bench
    env "${envs[@]}" GW_CUDA_STAGE_TIMES=1 $bin --backend cuda --mode window \
      --pruning ${AB_PRUNING:-on} --sweep-wearers ${AB_WEARERS:-10000} --sweep-repeats 2 \
      > "$OUT/ab-$tag-$round.jsonl" 2> "$OUT/ab-$tag-$round.err"
    echo "== $tag ($round): $(grep -o '"filter":[0-9.]*\|"dtw":[0-9.]*' "$OUT/ab-$tag-$round.err" | tail -4 | tr '\n' ' ')" \
      "$(grep -o '"matches":[0-9]*' "$OUT/ab-$tag-$round.err" | tail -1)" \
      "$(grep -o '"batch_s_median":[0-9.e+-]*\|"pruned_[a-z_]*":[0-9.e+-]*' "$OUT/ab-$tag-$round.jsonl" | head -4 | tr '\n' ' ')"
  done
done
