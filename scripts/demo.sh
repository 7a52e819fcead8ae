#!/usr/bin/env bash
# The main job, end to end, on a patient the pattern never saw: install the
# dependencies, build the daemon and the CLI (nothing else), start gaitwatchd
# on the default config (config/gaitwatch.yaml) with the freeze pack's
# examples of subject S03 left out, replay S03's Daphnet recording S03R02 into
# it over UDP, print each alert as the subscriber receives it, stop the daemon
# cleanly (SIGTERM), and list the stored alerts next to the freezes annotated
# in the recording. Then the insoles: two gaitpdb walks (a patient with
# Parkinson's disease and a control) replayed into the gaitpdb_insoles device,
# with a gait pack built without both subjects: the wearers' minutes of
# walking and the abnormal-gait alert next to who walked.
#
#   SPEED=8 START=18000 END=27500 bash scripts/demo.sh
# Set-up output goes to build/demo/*.log; the screen shows one headline per stage.
set -euo pipefail
cd "$(dirname "$0")/.."
SPEED=${SPEED:-8}
RECORDING=data/daphnet/S03R02.txt
START=${START:-18000}  # S03R02 samples (64 Hz): its first freezes lie in 18000..27500
END=${END:-27500}
BUILD=${BUILD_DIR:-build}
DEMO=$BUILD/demo
mkdir -p "$DEMO"
step() { printf '\n== %s\n' "$*"; }
quietly() {  # quietly LOG COMMAND...: the command's output to LOG; its tail when it fails
  local log=$1
  shift
  "$@" >"$log" 2>&1 || { echo "failed: $*" >&2; tail -30 "$log" >&2; exit 1; }
}

step "installing dependencies with apt-get (log: $DEMO/setup.log)"
quietly "$DEMO/setup.log" bash scripts/install-deps.sh
step "building gaitwatchd and gaitwatch (log: $DEMO/build.log)"
quietly "$DEMO/build.log" bash -c "cmake -S . -B '$BUILD' -DCMAKE_BUILD_TYPE=RelWithDebInfo &&
  cmake --build '$BUILD' -j$(nproc) --target gaitwatchd gaitwatch"
BIN=$BUILD/daemon

# The demo's config: the shipped one with its state files in $DEMO, its
# relative paths made absolute, and the freeze pack replaced by a copy
# without the examples cut from subject S03 (whose recording is replayed).
CONFIG=$DEMO/gaitwatch.yaml
FOG_PACK=$(cd "$DEMO" && pwd)/fog.yaml
without_s03_examples() { grep -v -E '^[[:space:]]*- \{(template|file): [^}]*S03R0'; }
sed -e "s#\(file: \|template: \)\([^/ ][^,}]*\)#\1$PWD/config/patterns/\2#" \
  config/patterns/fog.yaml | without_s03_examples >"$FOG_PACK"
sed -e "s#include: patterns/fog.yaml#include: $FOG_PACK#" \
  -e "s#\(file: \|template: \|include: \|pack: \)\([^/ ][^,}]*\)#\1$PWD/config/\2#" \
  -e "s#static_dir: \.\./console/web#static_dir: $PWD/console/web#" \
  config/gaitwatch.yaml | without_s03_examples >"$CONFIG"
if grep -q 'S03R0' <(grep -E '(template|file): ' "$CONFIG" "$FOG_PACK"); then
  echo "demo config still holds examples of S03" >&2
  exit 1
fi
rm -f "$DEMO"/*.db "$DEMO"/*.db-wal "$DEMO"/*.db-shm
step "checking the config ($CONFIG: config/gaitwatch.yaml with $FOG_PACK, the freeze pack without S03's examples)"
"$BIN/gaitwatchd" --check-config "$CONFIG"
# The gait pack without the two demo walkers' strides (docs/gait.md).
GAIT_PATIENT=data/gaitpdb/GaPt07_01.txt
GAIT_CONTROL=data/gaitpdb/JuCo01_01.txt
step "building a gait pack without the demo walkers (GaPt07, JuCo01) (log: $DEMO/gait-pack.log)"
quietly "$DEMO/gait-pack.log" "$BIN/gaitwatch" gait --export-examples "$DEMO/gait-strides.csv" \
  $(for f in data/gaitpdb/*_01.txt*; do case $f in *GaPt07*|*JuCo01*) ;; *) echo --file "$f" ;; esac; done)
sed -e "s#examples: gait/strides.csv#examples: $(cd "$DEMO" && pwd)/gait-strides.csv#" \
  config/patterns/gait.yaml >"$DEMO/gait.yaml"
# Minutes of 30 s of walking, so that the control's 53-s walk has one too.
sed -i -e "s#pack: $PWD/config/patterns/gait.yaml#pack: $(cd "$DEMO" && pwd)/gait.yaml#" \
  -e "s#^  minute_s: 60#  minute_s: 30#" "$CONFIG"
"$BIN/gaitwatchd" --check-config "$CONFIG" >/dev/null
DB=$DEMO/$(sed -n 's/^  path: *\([^ #]*\).*/\1/p' "$CONFIG" | head -1)

step "starting gaitwatchd (log: $DEMO/daemon.log)"
"$BIN/gaitwatchd" --config "$CONFIG" 2>"$DEMO/daemon.log" &
DAEMON=$!
trap 'kill $DAEMON 2>/dev/null || true' EXIT
for _ in $(seq 100); do grep -q "gaitwatchd ready" "$DEMO/daemon.log" && break; sleep 0.2; done
grep -q "gaitwatchd ready" "$DEMO/daemon.log" || { tail "$DEMO/daemon.log"; exit 1; }

step "alerts as a subscriber receives them (gaitwatch subscribe --config $CONFIG --format text)"
"$BIN/gaitwatch" subscribe --config "$CONFIG" --topic alert. --format text &
SUBSCRIBER=$!
sleep 0.5
secs=$(( (END - START) / 64 ))
step "replaying $RECORDING samples $START..$END (${secs} s of recording) at ${SPEED}x over UDP"
"$BIN/gaitwatch" replay --file "$RECORDING" --format daphnet \
  --start "$START" --end "$END" --speed "$SPEED" --to udp://127.0.0.1:7700 >/dev/null
step "replaying two insole walks into device gaitpdb_insoles at 20x: $GAIT_PATIENT (wearer 21), $GAIT_CONTROL (wearer 22)"
for w in "21 $GAIT_PATIENT" "22 $GAIT_CONTROL"; do
  set -- $w
  "$BIN/gaitwatch" replay --config "$CONFIG" --device gaitpdb_insoles --file "$2" --wearer "$1" \
    --speed 20 --to udp://127.0.0.1:7700 >/dev/null
done
sleep 1
step "the wearers' minutes of walking, from the daemon (gaitwatch gait --wearer N)"
for w in 21 22; do "$BIN/gaitwatch" gait --config "$CONFIG" --wearer $w; done
"$BIN/gaitwatch" status --config "$CONFIG" >"$DEMO/status.json"
echo "   (the daemon's counters, from its control socket: $DEMO/status.json)"

step "stopping gaitwatchd (SIGTERM: drain, commit, exit 0)"
kill -TERM $DAEMON
wait $DAEMON
trap - EXIT
sleep 0.3
kill $SUBSCRIBER 2>/dev/null || true
wait $SUBSCRIBER 2>/dev/null || true
grep -E "stopped:" "$DEMO/daemon.log" | sed 's/^.*stopped: /   /'

step "stored alerts ($DB) next to the freezes annotated in $RECORDING"
"$BIN/gaitwatch" hits --db "$DB" --wearer 1 --truth "$RECORDING" --truth-format daphnet \
  --truth-start "$START" --truth-end "$END"

step "stored abnormal-gait alerts; the truth: wearer 21 walked $GAIT_PATIENT (a patient), wearer 22 $GAIT_CONTROL (a control)"
"$BIN/gaitwatch" hits --db "$DB" --pattern abnormal_gait

step "the same alerts in the ward console (docs/console.md)"
cat <<HINT
   $BIN/gaitwatch user add YOU --role carer --db $DB
   $BIN/gaitwatchd --config $CONFIG
   then open http://127.0.0.1:9720/ and log in (replay again to see alerts arrive live)
HINT
