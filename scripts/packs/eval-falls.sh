#!/bin/bash
# eval-falls.sh TAG ARGS...: builds a falls candidate (falls_candidates.py ARGS) and
# scores it leave-one-recording-out (LEAVE=subject for --loso) on data/sisfall: one line.
tag=$1; shift
cd "$(dirname "$0")/../.."
mkdir -p build/packs; python3 scripts/packs/falls_candidates.py --out build/packs/falls_$tag.yaml "$@" || exit 1
G=${GW:-build/daemon/gaitwatch}
$G eval --config build/packs/falls_$tag.yaml --device accelerometer --leave-out ${LEAVE:-recording} --json $(for f in data/sisfall/*.txt.gz; do echo --file $f; done) 2>/dev/null > build/packs/falls_$tag.json
python3 - build/packs/falls_$tag.json "$tag $*" <<'PY'
import json, sys
j = json.loads(open(sys.argv[1]).read().splitlines()[0])
t = j['trials']; subs = {s['subject']: s['trials'] for s in j['subjects']}
fa = [f"{a['activity']}:{a['alerts']}" for a in t['activities'] if not a['fall'] and a['alerts']]
miss = [a['activity'] for a in t['activities'] if a['fall'] and not a['trials_alerted']]
print(f"{sys.argv[2]:50} recall {t['fall_recall']:.3f} false/ADL {t['false_alerts_per_everyday_trial']:.3f} (SA01 {subs['SA01']['false_alerts_per_everyday_trial']:.3f} SE01 {subs['SE01']['false_alerts_per_everyday_trial']:.3f}) false:{' '.join(fa)} missed:{' '.join(miss)}")
PY
