#!/usr/bin/env bash
# The gateway's publishing rate, one message per frame against batches, side
# by side: a nats-server with JetStream, `gaitwatchd --gateway`, and WEARERS
# replays of a whole Daphnet recording sent as fast as TCP takes them
# (blocking queue, so nothing is dropped and the senders wait for the
# gateway). Per run one JSON line: frames, messages, seconds from the first
# send until the server took its last byte (its /varz in_bytes, polled every
# 50 ms until it has not moved for 1 s), frames per second. Every frame sent
# must be acknowledged (`complete`).
# Usage: scripts/bench-gateway.sh [BUILD_DIR]   (env: WEARERS=8 ROUNDS=2 FPM="1 64")
set -euo pipefail
BUILD=${1:-build}
WEARERS=${WEARERS:-8}
ROUNDS=${ROUNDS:-2}
FPM=${FPM:-"1 64"}
NATS=${NATS_SERVER:-/usr/sbin/nats-server}
W=$(mktemp -d /tmp/gw-bench-gateway.XXXXXX)
trap 'kill $(jobs -p) 2>/dev/null || true; [ -n "${KEEP:-}" ] || rm -rf "$W"' EXIT
# The copied config's relative paths: the pattern packs beside it, the console's pages.
ln -s "$PWD/config/patterns" "$W/patterns"
port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
for round in $(seq "$ROUNDS"); do
  for fpm in $FPM; do
    nats_port=$(port); tcp_port=$(port); monitor_port=$(port)
    rm -rf "$W/js"; "$NATS" -a 127.0.0.1 -p "$nats_port" -m "$monitor_port" -js -sd "$W/js" > "$W/nats.log" 2>&1 &
    nats_pid=$!
    sleep 0.5
    sed -e "s|^  log_level: .*|  log_level: info|" config/gaitwatch.yaml > "$W/gw.yaml"
    cat >> "$W/gw.yaml" <<YAML
nats:
  url: nats://127.0.0.1:$nats_port
  partitions: 64
  max_pending: 1000000
  frames_max_age_s: 600
  frames_per_message: $fpm
YAML
    python3 - "$W/gw.yaml" "$tcp_port" "$PWD/console/web" <<'PY'
import sys, yaml
path, port = sys.argv[1], int(sys.argv[2])
c = yaml.safe_load(open(path))
c['ingest']['udp']['port'] = 0
c['ingest']['tcp']['port'] = port
c['ingest']['queue_overflow'] = 'block'
c['console']['static_dir'] = sys.argv[3]
yaml.safe_dump(c, open(path, 'w'))
PY
    (cd "$W" && exec "$OLDPWD/$BUILD/daemon/gaitwatchd" --gateway --config "$W/gw.yaml" > "$W/gateway.out" 2> "$W/gateway.err") &
    gw_pid=$!
    for _ in $(seq 100); do grep -q "gateway ready" "$W/gateway.err" 2>/dev/null && break; sleep 0.1; done
    t0=$(date +%s.%N)
    pids=()
    for w in $(seq "$WEARERS"); do
      "$BUILD/daemon/gaitwatch" replay --file data/daphnet/S02R01.txt --format daphnet --speed 0 --wearer "$w" \
        --to "tcp://127.0.0.1:$tcp_port" > "$W/replay$w.out" 2> "$W/replay$w.err" &
      pids+=($!)
    done
    wait "${pids[@]}"
    t1=$(python3 - "$monitor_port" <<'PY'
import json, sys, time, urllib.request
url = f"http://127.0.0.1:{sys.argv[1]}/varz"
last, changed = None, time.time()
while time.time() - changed < 1.0:
    n = json.load(urllib.request.urlopen(url))["in_bytes"]
    if n != last: last, changed = n, time.time()
    time.sleep(0.05)
print(f"{changed:.6f}")
PY
)
    kill -TERM "$gw_pid"; wait "$gw_pid" || true
    cat "$W"/replay*.out > "$W/sent.jsonl"
    kill "$nats_pid"; wait "$nats_pid" 2>/dev/null || true
    python3 - "$W/gateway.out" "$fpm" "$t0" "$t1" "$round" "$WEARERS" "$W/sent.jsonl" <<'PY'
import json, sys
out, fpm, t0, t1, rnd, wearers = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), float(sys.argv[4]), int(sys.argv[5]), int(sys.argv[6])
sent = sum(json.loads(l)['frames'] for l in open(sys.argv[7]) if l.startswith('{'))
g = [json.loads(l)['gateway'] for l in open(out) if l.startswith('{')][-1]
p = g['publisher']; s = t1 - t0
print(json.dumps({'bench': 'gateway', 'round': rnd, 'frames_per_message': fpm, 'wearers': wearers,
                  'frames_sent': sent, 'frames_acked': p['acked'], 'messages': p['messages'],
                  'dropped': p['dropped'] + g['ingest']['queue_dropped'], 'failed': p['failed'],
                  'complete': p['acked'] == sent, 'seconds': round(s, 3), 'frames_per_s': round(sent / s)}))
PY
  done
done
