#!/usr/bin/env bash
# The main job, end to end: install dependencies, build, start gaitwatchd on
# the default config (config/gaitwatch.yaml), replay the bundled Daphnet
# freezing-of-gait recording S02R01 into it over UDP, show the alerts live as a
# ZeroMQ subscriber receives them, ask the time-slot index through the control
# interface, stop the daemon cleanly (SIGTERM) and list the hits it stored in
# SQLite.
# ZeroMQ subscriber receives them, stop the daemon cleanly (SIGTERM), list
# the hits it stored in SQLite, and search the raw-stream history it kept for
# the windows most like the freeze pattern.
#
#   SPEED=8 START=53000 END=61500 bash scripts/demo.sh
set -euo pipefail
cd "$(dirname "$0")/.."
SPEED=${SPEED:-8}
START=${START:-53000}   # ~14 min into S02R01, just before the freeze episodes
END=${END:-61500}
bash scripts/install-deps.sh
bash scripts/build.sh
BIN=${BUILD_DIR:-build}/daemon
CONFIG=config/gaitwatch.yaml
DB=$(sed -n 's/^  path: *\([^ #]*\).*/\1/p' "$CONFIG" | head -1)
HISTORY=$(sed -n '/^history:/,/^[a-z]/s/^  path: *\([^ #]*\).*/\1/p' "$CONFIG" | head -1)

"$BIN/gaitwatchd" --check-config "$CONFIG"
rm -f "config/$DB" "config/$DB-wal" "config/$DB-shm"
rm -f "config/$HISTORY" "config/$HISTORY-wal" "config/$HISTORY-shm"
echo "== starting gaitwatchd (log: build/demo-daemon.log)"
"$BIN/gaitwatchd" --config "$CONFIG" 2>build/demo-daemon.log &
DAEMON=$!
trap 'kill $DAEMON 2>/dev/null || true' EXIT
for _ in $(seq 50); do grep -q "gaitwatchd ready" build/demo-daemon.log && break; sleep 0.2; done

echo "== subscribed to the config's publish.endpoint; alerts appear below as they are published"
"$BIN/gaitwatch" subscribe --config "$CONFIG" --topic alert. &
SUBSCRIBER=$!
sleep 0.5
echo "== replaying data/daphnet/S02R01.txt samples $START..$END at ${SPEED}x over UDP"
"$BIN/gaitwatch" replay --file data/daphnet/S02R01.txt --format daphnet \
  --start "$START" --end "$END" --speed "$SPEED" --to udp://127.0.0.1:7700 >/dev/null
sleep 1
echo "== time-slot index: wearer 1's seconds (activity, posture, loading, receiving zone)"
"$BIN/gaitwatch" slots --config "$CONFIG" --wearer 1 --since -10m || true
echo "== stopping gaitwatchd (SIGTERM: drain, commit, exit 0)"
kill -TERM $DAEMON
wait $DAEMON
trap - EXIT
sleep 0.3
kill $SUBSCRIBER 2>/dev/null || true
wait $SUBSCRIBER 2>/dev/null || true
grep -E "final counters|stopped" build/demo-daemon.log | sed 's/^[^ ]* [A-Z]* /   /'
echo "== hits stored in config/$DB"
"$BIN/gaitwatch" hits --db "config/$DB"
echo "== annotated freezes in this range (data/daphnet/FOG_EPISODES.tsv, 1-based rows):"
awk -v s="$START" -v e="$END" 'NR>1 && $6>=s && $6<=e {printf "   episode %s: %.2f s .. %.2f s\n", $2, $3/1000, $4/1000}' data/daphnet/FOG_EPISODES.tsv
echo "== the 3 windows of the recorded history most like the pattern fog_freeze_index (config/$HISTORY)"
"$BIN/gaitwatch" search --history "config/$HISTORY" --pattern fog_freeze_index -k 3 2>/dev/null
