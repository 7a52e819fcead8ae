#!/usr/bin/env bash
# The shipped freeze pattern's alerts leave-one-subject-out (S02's recordings
# searched with a library of S03's examples only, S03's with S02's only), then
# fog_false_alerts.py: can one more signal tell its false alerts from its true
# ones (docs/detection.md §8, "What the remaining false alerts look like")?
#   bash scripts/packs/fog-false-alerts.sh [--top N]
# G: the gaitwatch CLI (default build/daemon/gaitwatch); OUT: scratch folder.
set -euo pipefail
cd "$(dirname "$0")/../.."
G=${G:-build/daemon/gaitwatch}
OUT=${OUT:-build/packs-false-alerts}
mkdir -p "$OUT"
# The shipped pack's recipe (docs/detection.md §8, "Shipped"), one library per subject.
for s in S02 S03; do
  python3 scripts/packs/fog_candidates.py --out "$OUT/only$s.yaml" --subjects $s \
    --normalise '{learn_s: 30, statistic: median, scale: std, active_above: 0.05}' \
    --threshold 12 --hysteresis 4 > "$OUT/only$s.gen" 2>&1
done
for r in S02R01 S02R02; do
  "$G" detect --config "$OUT/onlyS03.yaml" --file data/daphnet/$r.txt --backend cpu --json > "$OUT/$r.jsonl" 2> "$OUT/$r.err"
done
for r in S03R02 S03R03; do
  "$G" detect --config "$OUT/onlyS02.yaml" --file data/daphnet/$r.txt --backend cpu --json > "$OUT/$r.jsonl" 2> "$OUT/$r.err"
done
python3 scripts/packs/fog_false_alerts.py --alerts "$OUT" "$@"
