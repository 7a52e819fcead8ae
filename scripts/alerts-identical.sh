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
# config/gaitwatch.yaml; BACKEND to cpu (the CUDA backend gives the same
# alerts, checked by its own tests). Exit status 1 when any output differs.
set -euo pipefail
old=$1
new=$2
config=${3:-config/gaitwatch.yaml}
backend=${4:-cpu}
here=$(cd "$(dirname "$0")/.." && pwd)
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

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
    bin=$old
    [ "$side" = new ] && bin=$new
    "$bin" detect --config "$config" --device "$device" --backend "$backend" --file "$f" --json \
      > "$out/$name.$side.raw" 2> "$out/$name.$side.err" || {
      echo "$side: detect failed on $name:"; cat "$out/$name.$side.err"; exit 2; }
    detections_only < "$out/$name.$side.raw" > "$out/$name.$side"
  done
  if ! cmp -s "$out/$name.old" "$out/$name.new"; then
    echo "differs: $name"
    diff "$out/$name.old" "$out/$name.new" | head -5
    status=1
  fi
  alerts=$((alerts + $(wc -l < "$out/$name.new")))
done
if [ $status -eq 0 ]; then
  echo "identical: ${#files[@]} recordings, $alerts alerts"
fi
exit $status
