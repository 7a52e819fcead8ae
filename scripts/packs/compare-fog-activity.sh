#!/usr/bin/env bash
# The freeze pack's windows with a per-wearer baseline learned from active
# samples (normalise.active_above), leave-one-subject-out (docs/detection.md
# §8, "A baseline learned while the wearer moves"). Lines of the variants file
# are NAME|ARGS of fog_candidates.py (ARGS shell-quoted); every variant is
# scored on S02 and S03, each with a library holding none of its examples,
# one process per subject and variant on every core. Then the table, and the
# setting chosen for each subject by the best F1 on the other subject alone.
#   bash scripts/packs/compare-fog-activity.sh [VARIANTS_FILE]
# G: the gaitwatch CLI (default build/daemon/gaitwatch); OUT: results folder.
set -uo pipefail
cd "$(dirname "$0")/../.."
G=${G:-build/daemon/gaitwatch}
OUT=${OUT:-build/packs-activity}
VARIANTS=${1:-scripts/packs/fog_activity_variants.txt}
mkdir -p "$OUT"
D=data/daphnet
declare -A FILES=([S02]="--file $D/S02R01.txt --file $D/S02R02.txt"
                  [S03]="--file $D/S03R02.txt --file $D/S03R03.txt")
jobs=()
while IFS='|' read -r name args; do
  [ -n "$name" ] || continue
  eval "set -- $args"
  python3 scripts/packs/fog_candidates.py --out "$OUT/$name.yaml" "$@" > "$OUT/$name.gen" 2>&1 ||
    { echo "$name: fog_candidates.py failed"; cat "$OUT/$name.gen"; exit 1; }
  for s in S02 S03; do
    jobs+=("$G eval --config $OUT/$name.yaml --pattern fog --loso --backend cpu --json ${FILES[$s]} > $OUT/$name.$s.json 2> $OUT/$name.$s.err")
  done
done < "$VARIANTS"
printf '%s\n' "${jobs[@]}" | xargs -P "$(nproc)" -I{} bash -c '{}'
python3 - "$OUT" "$VARIANTS" <<'PY'
import json, sys
out, variants = sys.argv[1], sys.argv[2]
names = [l.split('|')[0] for l in open(variants) if l.strip()]
res = {}
for n in names:
    res[n] = {}
    for s in ('S02', 'S03'):
        try:
            res[n][s] = json.loads(open(f'{out}/{n}.{s}.json').read().splitlines()[0])
        except Exception:
            print(f'{n} {s}: no result (see {out}/{n}.{s}.err)')
def f1(j):
    r, p = j['recall'], j['precision']
    return 2 * r * p / (r + p) if r + p else 0.0
def cell(j):
    return f"{j['recall']:.2f} / {j['precision']:.2f} / {j['median_latency_s']:.1f} s"
def pooled(parts):
    ev = sum(j['events'] for j in parts); det = sum(j['detected'] for j in parts)
    tr = sum(j['true_alerts'] for j in parts); fa = sum(j['false_alerts'] for j in parts)
    h = sum(j['hours'] for j in parts)
    return det / ev, (tr / (tr + fa) if tr + fa else float('nan')), fa / h
print('| variant | S02 recall / precision / latency | S03 recall / precision / latency | pooled recall | pooled precision | false alerts / h |')
print('|---|---|---|---|---|---|')
for n in names:
    if len(res[n]) < 2: continue
    r, p, fh = pooled([res[n]['S02'], res[n]['S03']])
    print(f"| {n} | {cell(res[n]['S02'])} | {cell(res[n]['S03'])} | {r:.2f} | {p:.3f} | {fh:.1f} |")
other = {'S02': 'S03', 'S03': 'S02'}
ok = [n for n in names if len(res[n]) == 2]
pick = {s: max(ok, key=lambda n: (f1(res[n][other[s]]), res[n][other[s]]['precision'])) for s in other}
parts = [res[pick[s]][s] for s in ('S02', 'S03')]
r, p, fh = pooled(parts)
print(f"| chosen leave-one-subject-out (S02 with {pick['S02']}, best F1 on S03; S03 with {pick['S03']}, best F1 on S02) | {cell(parts[0])} | {cell(parts[1])} | {r:.2f} | {p:.3f} | {fh:.1f} |")
PY
