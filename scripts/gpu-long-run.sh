#!/usr/bin/env bash
# Runs on the GPU machine (the `device` tool): one e2e_bench window longer
# than a device command may last (10 minutes). `start` builds, runs the GPU
# test suite (E2E_TESTS=1) and starts scripts/gpu-e2e.sh in its own process
# session, so it outlives the command; it then waits up to START_WAIT_S
# seconds and copies what is there. `collect`, in the next command (the
# machine must still be warm), waits for the run to end (up to COLLECT_WAIT_S)
# and copies its results to $OUT. The run's settings are gpu-e2e.sh's
# (E2E_WEARERS, E2E_DURATION, E2E_WARMUP, E2E_ARGS, ENV_new ...); its files
# are under $LONG_DIR (default /tmp/gw-long): e2e.jsonl, e2e.err (progress,
# one line every 30 s), threads.txt, gpu_util.txt, host_probe.jsonl,
# commands.txt (when each device command began and ended), run.log and whatever the
# run's environment writes there (GW_DAEMON_TICK_LOG, GW_ENGINE_BATCH_LOG);
# $OUT gets e2e.jsonl, e2e.err and long.tgz (all of it).
set -uo pipefail
cd "$(dirname "$0")/.."
LONG_DIR=${LONG_DIR:-/tmp/gw-long}
# The device tool brings back at most 8 files: the results and progress as
# they are, everything else of the run in one archive.
copy_results() {
  cp "$LONG_DIR/e2e.jsonl" "$LONG_DIR/e2e.err" "$OUT/" 2>/dev/null
  tar -C "$LONG_DIR" -czf "$OUT/long.tgz" . 2>/dev/null
  grep -- "->\|wearers:" "$LONG_DIR/e2e.err" 2>/dev/null | tail -30
}
# When each device command began and ended, on the machine's clock, so that a
# pause in the run can be set beside the tool's transfers.
# mark_command NAME [UNIX_TIME] (default now).
mark_command() {
  local t=${2:-$(date +%s.%N | cut -c1-14)}
  echo "$1 $t $(date -u -d "@${t%.*}" +%T)" >> "$LONG_DIR/commands.txt"
}
case "${1:-}" in
  start)
    source scripts/lib/gpu-env.sh
    targets="e2e_bench gaitwatchd"
    [ "${E2E_TESTS:-0}" = 1 ] && targets="$targets test_kernels_gpu test_hashtable_gpu"
    gpu_build $targets || exit 1
    echo "build done at ${SECONDS} s"
    if [ "${E2E_TESTS:-0}" = 1 ]; then
      (cd $BUILD && ctest -L gpu --output-on-failure --timeout 300) > "$OUT/ctest-gpu.log" 2>&1
      echo "gpu tests rc=$?"; grep -E "tests passed|FAILED|Failed" "$OUT/ctest-gpu.log" | head -20
    fi
    rm -rf "$LONG_DIR"; mkdir -p "$LONG_DIR"
    mark_command start-began "$(( $(date +%s) - SECONDS ))"
    # gpu-e2e.sh reuses the build above (same BUILD folder).
    OUT=$LONG_DIR E2E_TESTS=0 setsid nohup bash scripts/gpu-e2e.sh > "$LONG_DIR/run.log" 2>&1 < /dev/null &
    echo "long run started at ${SECONDS} s"
    while [ "$SECONDS" -lt "${START_WAIT_S:-560}" ] && ! grep -q '"e2e_summary"' "$LONG_DIR/e2e.jsonl" 2>/dev/null; do
      sleep 5
    done
    mark_command start-ended
    copy_results
    ;;
  collect)
    mark_command collect-began
    while [ "$SECONDS" -lt "${COLLECT_WAIT_S:-570}" ] && pgrep -f scripts/gpu-e2e.sh > /dev/null; do
      sleep 5
    done
    pgrep -f scripts/gpu-e2e.sh > /dev/null && echo "still running after ${SECONDS} s"
    mark_command collect-ended
    copy_results
    tail -5 "$LONG_DIR/run.log"
    ;;
  *)
    echo "usage: $0 start|collect" >&2
    exit 2
    ;;
esac
