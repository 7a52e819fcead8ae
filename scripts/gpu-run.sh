#!/usr/bin/env bash
# Runs on the GPU machine (the `device` tool): unpacks the carried Debian
# packages (.offline-deps/, see docs/gpu.md), builds for sm_90 and runs what
# is asked: `tests-search`, `tests-hash`, `tests-all`, `bench-search`,
# `stages` (per-stage times of W1 batches), `bench-hash`, `bench-host` (the
# pipeline thread's host work per W1 wearer with the gait work beside it,
# engine_host_bench --gait; HOST_ARGS), `bench-e2e` (W1 wearers
# through the whole daemon on the CUDA backend; E2E_ARGS, default --quick, since one
# device command may run 10 minutes), `bench-jetstream` (the same wearers straight to the
# daemon and through gateway -> JetStream -> worker; JS_WEARERS, JS_DURATION),
# `bench-devices` (the search alone on one GPU and on several, search.devices,
# side by side: search_bench sweeps per DEVICE_SETS, default "0 0,1", at
# DEVICE_WEARERS, default 10000,20000), `backends-alerts` (every alert of the
# default config on the bundled recordings, CPU and CUDA backends of one build,
# scripts/alerts-identical.sh).
# Results go to $OUT (or ./gpu-out when unset).
# Every step name is checked before anything is built: an unknown one (or none)
# fails the whole command with exit 2, so a typo never runs nothing silently.
set -uo pipefail
cd "$(dirname "$0")/.."
known_steps="tests-search tests-hash tests-all bench-search stages bench-e2e bench-hash bench-host bench-jetstream bench-devices backends-alerts"
if [ $# -eq 0 ]; then
  echo "usage: $0 STEP... (steps: $known_steps)" >&2
  exit 2
fi
for step in "$@"; do
  case " $known_steps " in
    *" $step "*) ;;
    *) echo "gpu-run.sh: unknown step '$step' (steps: $known_steps)" >&2; exit 2 ;;
  esac
done
source scripts/lib/gpu-env.sh
{
  nvidia-smi --query-gpu=name,clocks.max.sm,clocks.sm,memory.total,driver_version --format=csv
  nproc
} > "$OUT/machine.txt" 2>&1
for step in "$@"; do
  case "$step" in
    tests-search)
      gpu_build test_kernels test_kernels_gpu || continue
      (cd $BUILD && ctest -R "test_kernels" --output-on-failure --timeout 300) > "$OUT/ctest-search.log" 2>&1
      echo "search tests rc=$?"; grep -E "tests passed|FAILED|Failed|skipped" "$OUT/ctest-search.log" | head -20
      ;;
    tests-all)
      gpu_build all || continue
      (cd $BUILD && ctest -j8 --timeout 300) > "$OUT/ctest-all.log" 2>&1
      echo "all tests rc=$?"; tail -6 "$OUT/ctest-all.log"
      ;;
    tests-hash)
      gpu_build test_hashtable test_hashtable_gpu || continue
      (cd $BUILD && ctest -R "test_hashtable" --output-on-failure --timeout 300) > "$OUT/ctest-hash.log" 2>&1
      echo "hash tests rc=$?"; grep -E "tests passed|FAILED|Failed|skipped" "$OUT/ctest-hash.log" | head -20
      ;;
    bench-search)
      gpu_build search_bench || continue
      bash scripts/bench-search.sh $BUILD > "$OUT/search_bench.jsonl" 2> "$OUT/search_bench.err"
      echo "search bench rc=$?"; grep -E "kernel|summary" "$OUT/search_bench.jsonl" | cut -c1-600
      ;;
    bench-devices)
      gpu_build search_bench || continue
      for devices in ${DEVICE_SETS:-0 0,1}; do
        $BUILD/bench/search_bench --backend cuda --mode window --resident --devices "$devices" \
          --sweep-wearers "${DEVICE_WEARERS:-10000,20000}" --sweep-repeats 3 \
          >> "$OUT/devices.jsonl" 2>> "$OUT/devices.err"
        echo "devices $devices rc=$?"
      done
      cut -c1-500 "$OUT/devices.jsonl"; tail -4 "$OUT/devices.err"
      ;;
    stages)
      # Where a W1 window-mode batch's time goes (docs/benchmarks.md).
      gpu_build search_bench || continue
      GW_CUDA_STAGE_TIMES=1 $BUILD/bench/search_bench --backend cuda --mode window \
        --sweep-wearers ${STAGE_WEARERS:-4000,10000} --sweep-repeats 3 \
        > "$OUT/stages.jsonl" 2> "$OUT/stages.err"
      echo "stages rc=$?"; cut -c1-400 "$OUT/stages.jsonl"; tail -4 "$OUT/stages.err"
      ;;
    bench-e2e)
      gpu_build e2e_bench gaitwatchd || continue
      bash scripts/bench-e2e.sh $BUILD --backend cuda ${E2E_ARGS:---quick} \
        > "$OUT/e2e_bench.jsonl" 2> "$OUT/e2e_bench.err"
      echo "e2e bench rc=$?"; grep -E "ingest_decode|ingest_thread|sqlite_writer|e2e_summary" "$OUT/e2e_bench.jsonl" | cut -c1-700
      tail -4 "$OUT/e2e_bench.err"
      ;;
    bench-host)
      # CPU work only: the engine's host path and the gait monitor, side by side.
      gpu_build engine_host_bench || continue
      $BUILD/bench/engine_host_bench ${HOST_ARGS:---wearers 10000 --ticks 150 --warmup-ticks 20 --threads 12 --gait} \
        > "$OUT/engine_host.jsonl" 2> "$OUT/engine_host.err"
      echo "host bench rc=$?"; cut -c1-1500 "$OUT/engine_host.jsonl"; tail -3 "$OUT/engine_host.err"
      ;;
    bench-jetstream)
      # The same wearers straight to the daemon and through gateway ->
      # JetStream -> the daemon as a worker, one after the other on this
      # machine (JS_WEARERS, JS_DURATION; the carried nats-server package).
      gpu_build e2e_bench gaitwatchd || continue
      [ -x $P/usr/sbin/nats-server ] || { echo "bench-jetstream: no nats-server in .offline-deps (docs/gpu.md)"; continue; }
      for path in direct jetstream; do
        via=""; [ $path = jetstream ] && via="--via-jetstream $P/usr/sbin/nats-server"
        $BUILD/bench/e2e_bench --daemon $BUILD/daemon/gaitwatchd --backend cuda --threads 12 --tick-ms 70 \
          --wearers ${JS_WEARERS:-1000,4000} --duration ${JS_DURATION:-60} --warmup 10 $via \
          >> "$OUT/jetstream_bench.jsonl" 2>> "$OUT/jetstream_bench.err"
        echo "jetstream bench ($path) rc=$?"
      done
      grep e2e_run "$OUT/jetstream_bench.jsonl" | cut -c1-900
      ;;
    backends-alerts)
      gpu_build gaitwatch || continue
      rm -rf /tmp/backends-alerts
      ALERTS_DIR=/tmp/backends-alerts bash scripts/alerts-identical.sh $BUILD/daemon/gaitwatch \
        $BUILD/daemon/gaitwatch config/gaitwatch.yaml cpu,cuda > "$OUT/backends-alerts.txt" 2>&1
      echo "backends alerts rc=$?"; grep -E "^(differs|identical)" "$OUT/backends-alerts.txt"
      tar -C /tmp -czf "$OUT/backends-alerts.tar.gz" backends-alerts
      ;;
    bench-hash)
      gpu_build hashtable_bench || continue
      $BUILD/bench/hashtable_bench ${HASH_BENCH_ARGS:-} > "$OUT/hashtable_bench.jsonl" 2> "$OUT/hashtable_bench.err"
      echo "hash bench rc=$?"; tail -c 2500 "$OUT/hashtable_bench.jsonl"
      ;;
    *)
      echo "gpu-run.sh: step '$step' has no recipe" >&2
      exit 2
      ;;
  esac
done
