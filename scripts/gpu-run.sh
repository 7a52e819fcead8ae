#!/usr/bin/env bash
# Runs on the GPU machine (the `device` tool): unpacks the carried Debian
# packages (.offline-deps/, see docs/gpu.md), builds for sm_90 and runs what
# is asked: `tests` (ctest -L gpu plus the whole suite), `bench-search`,
# `bench-hash`. Results go to $OUT (or ./gpu-out when unset).
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-$PWD/gpu-out}
mkdir -p "$OUT"
P=/tmp/p
if [ ! -d $P/usr ]; then
  mkdir -p $P
  for f in .offline-deps/*.deb; do dpkg -x "$f" $P; done
fi
export CMAKE_PREFIX_PATH=$P/usr
export LD_LIBRARY_PATH=$P/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export PATH=/usr/local/cuda/bin:$PATH
BUILD=${BUILD_DIR:-/tmp/gw-build}
{
  nvidia-smi --query-gpu=name,clocks.max.sm,clocks.sm,memory.total,driver_version --format=csv
  nproc
} > "$OUT/machine.txt" 2>&1
if [ ! -f $BUILD/CMakeCache.txt ]; then
  cmake -S . -B $BUILD -DCMAKE_BUILD_TYPE=Release -DGAITWATCH_CUDA=ON \
    -DCMAKE_CUDA_ARCHITECTURES=90 > "$OUT/configure.log" 2>&1 || { tail -30 "$OUT/configure.log"; exit 1; }
fi
cmake --build $BUILD -j"$(nproc)" > "$OUT/build.log" 2>&1 || { grep -E "error" -A3 "$OUT/build.log" | head -60; exit 1; }
for step in "$@"; do
  case "$step" in
    tests)
      (cd $BUILD && ctest -L gpu --output-on-failure --timeout 300) > "$OUT/ctest-gpu.log" 2>&1
      echo "gpu tests rc=$?"; tail -5 "$OUT/ctest-gpu.log"
      (cd $BUILD && ctest -LE gpu -j8 --timeout 300) > "$OUT/ctest-all.log" 2>&1
      echo "all tests rc=$?"; tail -4 "$OUT/ctest-all.log"
      ;;
    bench-search)
      shift_args=${SEARCH_BENCH_ARGS:-}
      bash scripts/bench-search.sh $BUILD > "$OUT/search_bench.jsonl" 2> "$OUT/search_bench.err"
      echo "search bench rc=$?"; tail -c 3000 "$OUT/search_bench.jsonl"
      ;;
    bench-hash)
      $BUILD/bench/hashtable_bench > "$OUT/hashtable_bench.jsonl" 2> "$OUT/hashtable_bench.err"
      echo "hash bench rc=$?"; tail -c 3000 "$OUT/hashtable_bench.jsonl"
      ;;
  esac
done
