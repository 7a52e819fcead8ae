#!/usr/bin/env bash
# Compares learned decisions for the FoG pack (docs/detection.md §6): each line
# of learned_variants.txt is NAME|ARGS of fog_candidates.py|ARGS of gaitwatch
# train; every variant is fitted and scored with `train --evaluate` (each
# subject scored with a decision fitted without it), one process per variant,
# on every core. On the GPU machine: carry .offline-deps (its packages are
# unpacked to /tmp/p). Results: $OUT/results.tgz (one JSON per variant).
set -uo pipefail
cd "$(dirname "$0")/../.."
FINAL=${OUT:-$PWD/build/packs-out}; OUT=/tmp/learned-out; rm -rf $OUT; mkdir -p "$OUT" "$FINAL"
P=/tmp/p
if [ ! -d $P/usr ]; then mkdir -p $P; for f in .offline-deps/*.deb; do dpkg -x "$f" $P; done; fi
export CMAKE_PREFIX_PATH=$P/usr LD_LIBRARY_PATH=$P/usr/lib/x86_64-linux-gnu
B=/tmp/gw-cpu
T0=$SECONDS
[ -f $B/CMakeCache.txt ] || cmake -S . -B $B -DCMAKE_BUILD_TYPE=Release -DGAITWATCH_CUDA=OFF > $OUT/configure.log 2>&1 || { tail -20 $OUT/configure.log; exit 1; }
cmake --build $B -j"$(nproc)" --target gaitwatch > $OUT/build.log 2>&1 || { grep -A3 error $OUT/build.log | head -40; exit 1; }
echo "built in $((SECONDS-T0)) s"
G=$B/daemon/gaitwatch
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
