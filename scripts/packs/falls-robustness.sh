#!/usr/bin/env bash
# The falls pack on trials changed as another wearer might record them
# (docs/detection.md §7, "Falls on other bodies, simulated"): every SisFall
# trial tilted, yawed, its movement scaled or its speed changed
# (falls_augment.py), then scored leave-one-recording-out as the pack's own
# figures are: each changed trial without the examples cut from its original.
# One process per transform on every core; then the table.
#   bash scripts/packs/falls-robustness.sh [TRANSFORM ...]
# G: the gaitwatch CLI (default build/daemon/gaitwatch); OUT: results folder;
# CONFIG: the config whose fall patterns are scored (default the shipped one).
set -euo pipefail
cd "$(dirname "$0")/../.."
G=${G:-build/daemon/gaitwatch}
OUT=${OUT:-build/packs-falls-robustness}
CONFIG=${CONFIG:-config/gaitwatch.yaml}
TRANSFORMS=("$@")
[ ${#TRANSFORMS[@]} -gt 0 ] || TRANSFORMS=(rotx0 rotx-15 rotx15 rotx-30 rotx30 rotx-45 rotx45 rotz-15 rotz15 rotz-30 rotz30 rotz-45 rotz45
                                        roty45 roty90 amp70 amp130 time80 time125)
mkdir -p "$OUT"
printf '%s\n' "${TRANSFORMS[@]}" | xargs -P "$(nproc)" -I{} \
  python3 scripts/packs/falls_augment.py --out "$OUT/trials/{}" --transform {} > /dev/null
# Two search threads per eval, one eval per two cores: the config's search.threads (0 = every
# core) in every process at once would oversubscribe the machine many times over. The copy lies
# beside the config, so its includes resolve as the original's do; a config whose search.threads
# is not 0 keeps its own.
RUN_CONFIG=$(dirname "$CONFIG")/.falls-robustness-$$.yaml
trap 'rm -f "$RUN_CONFIG"' EXIT
sed 's/^  threads: 0$/  threads: 2/' "$CONFIG" > "$RUN_CONFIG"
score_one() {  # TRANSFORM: every changed trial, leave-one-recording-out
  local files=()
  for f in "$OUT/trials/$1"/*.txt.gz; do files+=(--file "$f"); done
  "$G" eval --config "$RUN_CONFIG" --device accelerometer --leave-out recording --backend cpu \
    --json "${files[@]}" > "$OUT/$1.json" 2> "$OUT/$1.err"
}
export -f score_one
export G RUN_CONFIG OUT
printf '%s\n' "${TRANSFORMS[@]}" | xargs -P "$(( ($(nproc) + 1) / 2 ))" -I{} bash -c 'score_one "$1"' _ {}
python3 - "$OUT" "${TRANSFORMS[@]}" <<'PY'
import json, sys
out, transforms = sys.argv[1], sys.argv[2:]
print('| trials changed by | falls detected | missed | false alerts per everyday trial | raised by |')
print('|---|---|---|---|---|')
for t in transforms:
    lines = [json.loads(l) for l in open(f'{out}/{t}.json') if l.strip()]
    falls = [j for j in lines if j.get('kind') == 'fall']
    if not falls:
        sys.exit(f'{t}: no fall pattern scored (see {out}/{t}.err)')
    # the kind's line (an alert of any fall pattern) when there are several, else the pattern's
    kind = next((j for j in falls if j.get('pattern') is None), falls[0])['trials']
    missed = [a['activity'] for a in kind['activities'] if a['fall'] and not a['trials_alerted']]
    raised = ['%s %d' % (a['activity'], a['alerts']) for a in kind['activities']
              if not a['fall'] and a['alerts']]
    print('| %s | %d/%d | %s | %.3f | %s |' % (
        t, kind['fall_trials_detected'], kind['fall_trials'], ' '.join(missed) or '-',
        kind['false_alerts_per_everyday_trial'], ', '.join(raised) or '-'))
PY
