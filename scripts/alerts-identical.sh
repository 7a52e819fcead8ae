#!/usr/bin/env bash
# Compares every alert two builds raise on the bundled recordings with the
# default config: `gaitwatch detect --json` over each Daphnet and SisFall
# recording, byte for byte (no shipped pattern reads the gaitpdb insoles). A change that must not alter behaviour
# (a refactor, a folder move) passes when this prints "identical". The
# members that make an alert readable rather than say what was detected
# (schema, detected_at_iso, zone, wearer_name) are left out of the comparison,
# so that builds with and without them compare.
#
#   scripts/alerts-identical.sh OLD_GAITWATCH NEW_GAITWATCH [CONFIG] [BACKEND]
#
# OLD_GAITWATCH: the CLI built from the revision before the change (e.g. a
# clean clone's build/daemon/gaitwatch); CONFIG defaults to
# config/gaitwatch.yaml; BACKEND to cpu. BACKEND OLD,NEW runs each side on its
# own backend: one CUDA build given twice with cpu,cuda compares its backends
# (scripts/gpu-run.sh backends-alerts); then the alerts must agree member for
# member but for distances, which may differ by float32 rounding
# (scripts/alerts_close.py). Exit status 1 when any output differs.
set -euo pipefail
old=$1
new=$2
config=${3:-config/gaitwatch.yaml}
backends=${4:-cpu}
old_backend=${backends%%,*}
new_backend=${backends##*,}
here=$(cd "$(dirname "$0")/.." && pwd)
# ALERTS_DIR: keep each side's alerts there (default: a temporary folder, removed).
if [ -n "${ALERTS_DIR:-}" ]; then
  out=$ALERTS_DIR
  mkdir -p "$out"
else
  out=$(mktemp -d)
  trap 'rm -rf "$out"' EXIT
fi

# An alert line without the readable members (compact JSON, sorted keys: none
# of them is the first member, so each is preceded by a comma).
detections_only() {
  sed -E 's/,"(schema|detected_at_iso|zone|wearer_name)":("([^"\\]|\\.)*"|-?[0-9][0-9.eE+-]*|null)//g'
}

device_for() {
  case $(basename "$1") in
    S[0-9][0-9]R[0-9][0-9].txt) echo daphnet_body ;;
    *_S[AE][0-9][0-9]_R[0-9][0-9].txt.gz) echo accelerometer ;;
    *) return 1 ;;
  esac
}

files=("$here"/data/daphnet/S*.txt "$here"/data/sisfall/*.txt.gz)
status=0
alerts=0
for f in "${files[@]}"; do
  device=$(device_for "$f")
  name=$(basename "$f")
  for side in old new; do
    bin=$old backend=$old_backend
    [ "$side" = new ] && bin=$new backend=$new_backend
    "$bin" detect --config "$config" --device "$device" --backend "$backend" --file "$f" --json \
      > "$out/$name.$side.raw" 2> "$out/$name.$side.err" || {
      echo "$side: detect failed on $name:"; cat "$out/$name.$side.err"; exit 2; }
    detections_only < "$out/$name.$side.raw" > "$out/$name.$side"
  done
  if [ "$old_backend" = "$new_backend" ]; then
    if ! cmp -s "$out/$name.old" "$out/$name.new"; then
      echo "differs: $name"
      diff "$out/$name.old" "$out/$name.new" | head -5 || true
      status=1
    fi
  elif ! python3 "$here/scripts/alerts_close.py" "$out/$name.old" "$out/$name.new" > "$out/$name.diff"; then
    echo "differs: $name"
    head -3 "$out/$name.diff"
    status=1
  fi
  alerts=$((alerts + $(wc -l < "$out/$name.new")))
done
if [ $status -eq 0 ] && [ "$old_backend" = "$new_backend" ]; then
  echo "identical: ${#files[@]} recordings, $alerts alerts"
elif [ $status -eq 0 ]; then
  echo "identical: ${#files[@]} recordings, $alerts alerts ($old_backend and $new_backend; distances within float32 rounding, scripts/alerts_close.py)"
fi
exit $status
