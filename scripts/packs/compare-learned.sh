#!/usr/bin/env bash
# Compares learned decisions for the FoG pack (docs/detection.md §6): each line
# of learned_variants.txt is NAME|ARGS of fog_candidates.py|ARGS of gaitwatch
# train; every variant is fitted and scored with `train --evaluate` (each
# subject scored with a decision fitted without it), one process per variant,
# on every core. On the GPU machine: carry .offline-deps (its packages are
# unpacked to /tmp/p). Results: $OUT/results.tgz (one JSON per variant).
set -uo pipefail
cd "$(dirname "$0")/../.."
WORK_OUT=/tmp/learned-out
source scripts/packs/lib-cpu-build.sh
D=data/daphnet
FILES="--file $D/S02R01.txt --file $D/S02R02.txt --file $D/S03R02.txt --file $D/S03R03.txt"
W=build/packs; mkdir -p $W
jobs=()
while IFS='|' read -r name cargs targs; do
  [ -z "$name" ] && continue
  python3 scripts/packs/fog_candidates.py --out $W/$name.yaml $cargs 2>$OUT/$name.gen
  jobs+=("$G train --config $W/$name.yaml --pattern fog --backend cpu $FILES --out $OUT/$name.decision.yaml --evaluate --json $targs > $OUT/$name.json 2>$OUT/$name.err")
done < ${VARIANTS:-scripts/packs/learned_variants.txt}
printf '%s\n' "${jobs[@]}" | xargs -P "$(nproc)" -I{} bash -c '{}'
echo "evaluated at $((SECONDS-T0)) s"
tar czf $FINAL/results.tgz -C $OUT .
