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
# walking and the abnormal-gait alert next to who walked. Then falls: a SisFall
# fall and a lying down, the sensor worn tilted 45 degrees forward, replayed
# into the accelerometer device with the falls pack's examples of that fall
# left out: the fall alert next to what each wearer did.
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
# Falls: one fall (F11: falling backward when trying to sit down) and lying
# down on a bed and sitting up again (D12), both of subject SA01, rewritten as
# a sensor tilted 45 degrees forward on the belt would have recorded them; the
# falls pack without the examples cut from F11's trial.
FALL_TRIAL=F11_SA01_R01
LYING_TRIAL=D12_SA01_R01
FALLS_PACK=$(cd "$DEMO" && pwd)/falls.yaml
TILTED=$DEMO/tilted45
sed -e "s#template: \([^/ ][^,}]*\)#template: $PWD/config/patterns/\1#" \
  config/patterns/falls.yaml | grep -v "$FALL_TRIAL" >"$FALLS_PACK"
without_s03_examples() { grep -v -E '^[[:space:]]*- \{(template|file): [^}]*S03R0'; }
sed -e "s#\(file: \|template: \)\([^/ ][^,}]*\)#\1$PWD/config/patterns/\2#" \
  config/patterns/fog.yaml | without_s03_examples >"$FOG_PACK"
sed -e "s#include: patterns/fog.yaml#include: $FOG_PACK#" \
  -e "s#include: patterns/falls.yaml#include: $FALLS_PACK#" \
  -e "s#\(file: \|template: \|include: \|pack: \)\([^/ ][^,}]*\)#\1$PWD/config/\2#" \
  -e "s#static_dir: \.\./console/web#static_dir: $PWD/console/web#" \
  config/gaitwatch.yaml | without_s03_examples >"$CONFIG"
if grep -q 'S03R0' <(grep -E '(template|file): ' "$CONFIG" "$FOG_PACK"); then
  echo "demo config still holds examples of S03" >&2
  exit 1
fi
if grep -q "$FALL_TRIAL" "$FALLS_PACK" || ! grep -q 'template: ' "$FALLS_PACK"; then
  echo "demo falls pack holds examples of $FALL_TRIAL, or none at all" >&2
  exit 1
fi
quietly "$DEMO/tilt.log" python3 scripts/packs/falls_augment.py --out "$TILTED" --transform rotx45 \
  --trials "$FALL_TRIAL,$LYING_TRIAL"
rm -f "$DEMO"/*.db "$DEMO"/*.db-wal "$DEMO"/*.db-shm
step "checking the config ($CONFIG: config/gaitwatch.yaml with $FOG_PACK, the freeze pack without S03's examples, and $FALLS_PACK, the falls pack without $FALL_TRIAL's)"
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
step "replaying SisFall trials into device accelerometer at 4x, the sensor tilted 45 degrees forward: $FALL_TRIAL, a fall (wearer 31), $LYING_TRIAL, lying down (wearer 32)"
for w in "31 $FALL_TRIAL" "32 $LYING_TRIAL"; do
  set -- $w
  "$BIN/gaitwatch" replay --config "$CONFIG" --device accelerometer --file "$TILTED/$2.txt.gz" \
    --wearer "$1" --speed 4 --to udp://127.0.0.1:7700 >/dev/null
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

step "stored fall alerts; the truth: wearer 31 fell ($FALL_TRIAL), wearer 32 lay down on a bed and sat up again ($LYING_TRIAL)"
"$BIN/gaitwatch" hits --db "$DB" --pattern fall_turn_impact

step "the same alerts in the ward console (docs/console.md)"
cat <<HINT
   $BIN/gaitwatch user add YOU --role carer --db $DB
   $BIN/gaitwatchd --config $CONFIG
   then open http://127.0.0.1:9720/ and log in (replay again to see alerts arrive live)
HINT
