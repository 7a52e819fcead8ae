#!/usr/bin/env bash
# Builds the libFuzzer targets (clang, ASan + UBSan; GAITWATCH_FUZZ=ON) into
# build-fuzz/ and runs each for a bounded time against its checked-in seed
# corpus (tests/fuzz/corpus/<target>/). Fails on the first crash, leak,
# sanitizer report or timeout; the offending input is left in build-fuzz/
# (crash-*, leak-*, timeout-*) and can be replayed with
#   build-fuzz/tests/fuzz/<target> build-fuzz/crash-...
#
# Usage: scripts/fuzz.sh [SECONDS_PER_TARGET] [TARGET...]
#   defaults: 60 s, all targets (frame_fuzz config_fuzz).
# New inputs the fuzzer finds go to build-fuzz/corpus/<target>/ (not checked
# in); to keep interesting ones, merge them:
#   build-fuzz/tests/fuzz/<t> -merge=1 tests/fuzz/corpus/<t> build-fuzz/corpus/<t>
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-60}
shift || true
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then targets=(frame_fuzz config_fuzz); fi
BUILD_DIR=${FUZZ_BUILD_DIR:-build-fuzz}

source scripts/lib/ccache.sh
CC=clang CXX=clang++ cmake -S . -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DGAITWATCH_FUZZ=ON -DGAITWATCH_CUDA=OFF -DGAITWATCH_TESTS=OFF -DGAITWATCH_BENCH=OFF \
  "${launcher[@]}" >/dev/null
cmake --build "$BUILD_DIR" -j"$(nproc)" --target "${targets[@]}"

# Leaks are findings too; UBSan reports abort (-fno-sanitize-recover).
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1:symbolize=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
status=0
for t in "${targets[@]}"; do
  seeds="tests/fuzz/corpus/$t"
  work="$BUILD_DIR/corpus/$t"
  mkdir -p "$work"
  echo "== $t: ${seconds}s from $(ls "$seeds" | wc -l) seeds"
  start=$(date +%s)
  # -rss_limit_mb/-timeout: a single input may not take 2 GB or 10 s (a
  # finding in itself); -max_len covers the largest valid frame (65507 B).
  if ! "$BUILD_DIR/tests/fuzz/$t" -max_total_time="$seconds" -timeout=10 \
          -rss_limit_mb=2048 -max_len=65536 -print_final_stats=1 \
          -artifact_prefix="$BUILD_DIR/" "$work" "$seeds" 2>"$BUILD_DIR/fuzz-$t.log"; then
    echo "!! $t failed: see $BUILD_DIR/fuzz-$t.log"
    grep -E "ERROR|SUMMARY|runtime error|frame_fuzz:|config_fuzz:|Test unit written" \
      "$BUILD_DIR/fuzz-$t.log" | head -20 || true
    status=1
  fi
  grep -E "^stat::number_of_executed_units|^stat::new_units_added|^#[0-9]+ *DONE" \
    "$BUILD_DIR/fuzz-$t.log" || true
  echo "== $t: $(( $(date +%s) - start ))s"
done
exit $status
