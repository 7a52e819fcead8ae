#!/usr/bin/env bash
# Runs on the GPU machine (the `device` tool): W1 wearers through the whole
# daemon on the CUDA backend at fixed counts, each count under one or more
# variants side by side (same binaries, same machine), with the daemon's
# threads' CPU use sampled mid-run and the GPU's utilisation throughout.
#   E2E_WEARERS=4000,6000       counts (comma-separated)
#   E2E_DURATION=30 E2E_WARMUP=10
#   E2E_VARIANTS="new old"      names; per name: ENV_<name> (environment
#                               assignments), ARGS_<name> (e2e_bench options) and
#                               DAEMON_<name> (another gaitwatchd binary)
#   AB_BASE=DIR                 a source tree built into $BUILD-base as well
#                               (its daemon: DAEMON_x=$BUILD-base/daemon/gaitwatchd)
#   E2E_ARGS                    e2e_bench options for every run (e.g. --threads 12)
#   E2E_TESTS=1                 first the GPU test suite (test_kernels_gpu, test_hashtable_gpu)
# Results in $OUT: e2e.jsonl (e2e_bench lines, each with "variant"), e2e.err
# (progress), threads.txt (per-thread CPU of the daemon and the load
# generator), gpu_util.txt, host_probe.jsonl (scripts/lib/host_stall_probe.py),
# build.log, ctest-gpu.log.
set -uo pipefail
cd "$(dirname "$0")/.."
source scripts/lib/gpu-env.sh
targets="e2e_bench gaitwatchd"
[ "${E2E_TESTS:-0}" = 1 ] && targets="$targets test_kernels_gpu test_hashtable_gpu"
start=$SECONDS
if [ -n "${AB_BASE:-}" ]; then
  # The reference tree's daemon, built beside (its own build folder).
  (cmake -S "$AB_BASE" -B $BUILD-base -DCMAKE_BUILD_TYPE=Release -DGAITWATCH_CUDA=ON \
     -DCMAKE_CUDA_ARCHITECTURES=90 > "$OUT/build-base.log" 2>&1 &&
   cmake --build $BUILD-base -j"$(nproc)" --target gaitwatchd >> "$OUT/build-base.log" 2>&1) &
  base_build=$!
fi
gpu_build $targets || exit 1
if [ -n "${AB_BASE:-}" ]; then wait $base_build || { tail -20 "$OUT/build-base.log"; exit 1; }; fi
echo "build: $((SECONDS - start)) s"
if [ "${E2E_TESTS:-0}" = 1 ]; then
  (cd $BUILD && ctest -L gpu --output-on-failure --timeout 300) > "$OUT/ctest-gpu.log" 2>&1
  echo "gpu tests rc=$?"; grep -E "tests passed|FAILED|Failed" "$OUT/ctest-gpu.log" | head -20
fi
nvidia-smi --query-gpu=timestamp,utilization.gpu,clocks.sm --format=csv,noheader -lms 1000 \
  > "$OUT/gpu_util.txt" 2>&1 &
smi=$!
# Late wake-ups of an independent process and the kernel's pressure and
# memory-management counters: tells a host-wide pause from one of the daemon.
python3 scripts/lib/host_stall_probe.py > "$OUT/host_probe.jsonl" 2>&1 &
probe=$!
duration=${E2E_DURATION:-30}
warmup=${E2E_WARMUP:-10}
IFS=',' read -ra counts <<< "${E2E_WEARERS:-4000,6000}"
for n in "${counts[@]}"; do
  for name in ${E2E_VARIANTS:-new}; do
    env_var="ENV_$name"
    args_var="ARGS_$name"
    daemon_var="DAEMON_$name"
    # Per-thread CPU (% of one core) over 5 s in the middle of the window.
    python3 scripts/lib/thread_cpu.py --after $((warmup + duration / 2)) --seconds 5 \
      --label "$name $n" gaitwatchd e2e_bench >> "$OUT/threads.txt" 2>&1 &
    sampler=$!
    # shellcheck disable=SC2086
    env ${!env_var:-} $BUILD/bench/e2e_bench --daemon "${!daemon_var:-$BUILD/daemon/gaitwatchd}" --backend cuda \
      --wearers "$n" --duration "$duration" --warmup "$warmup" ${E2E_ARGS:-} ${!args_var:-} \
      2> >(tee -a "$OUT/e2e.err" | grep -- "->" | sed "s/^/[$name] /" >&2) |
      python3 -c "
import json, sys
for line in sys.stdin:
    j = json.loads(line)
    j['variant'] = '$name'
    print(json.dumps(j))
    if j.get('bench') == 'e2e_run':
        p = j.get('pipeline_thread_fraction', {})
        print('[$name] $n: sustained %s; ready p50/p99 %.0f/%.0f, subscriber p50/p99 %.0f/%.0f, batch p50/p99 %.0f/%.0f, '
              'misses %d, deferred %d, lost frames %d, sender late %d, process pauses %d; pipeline thread wait %.2f '
              'frames %.2f (engine %.2f) batch %.2f (start %.2f) after %.2f (alerts out %.2f); engine due %.3f slices %.3f '
              'fill %.3f phase2 %.3f; sink commit %.3f publish %.3f' % (
              j['sustained'], j['latency_ms']['ingest_to_alert_ready']['p50'],
              j['latency_ms']['ingest_to_alert_ready']['p99'], j['latency_ms']['ingest_to_subscriber']['p50'],
              j['latency_ms']['ingest_to_subscriber']['p99'],
              j['batch_ms']['p50'], j['batch_ms']['p99'], j['deadline_misses_window'],
              j['deferred_streams_window'], j['frames_lost'], j['sender']['late_frames'],
              j.get('process_pauses', {}).get('window', 0),
              p.get('waiting', 0), p.get('frames', 0), p.get('frames_engine', 0),
              p.get('batch', 0), p.get('batch_start', 0), p.get('after_batch', 0), p.get('alerts_out', 0),
              *[j.get('engine_host_fraction', {}).get(k, 0) for k in ('due', 'slices', 'fill', 'phase2')],
              j.get('sink_fraction', {}).get('commit', 0), j.get('sink_fraction', {}).get('publish', 0)),
              file=sys.stderr)
" >> "$OUT/e2e.jsonl"
    wait $sampler
  done
done
kill $smi $probe 2>/dev/null
echo "total: $((SECONDS - start)) s"
