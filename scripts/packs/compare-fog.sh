#!/usr/bin/env bash
# Compares FoG pack variants leave-one-subject-out (docs/detection.md §6), one
# process per subject and variant, on every core; lines of fog_variants.txt are
# NAME|ARGS of fog_candidates.py (ARGS shell-quoted), M:NAME adds hard negatives
# mined per subject (their items carry the subject, so --loso leaves them out
# with it).
# On the GPU machine: carry .offline-deps (its packages are unpacked to /tmp/p).
set -uo pipefail
cd "$(dirname "$0")/../.."
WORK_OUT=/tmp/exp-out
source scripts/packs/lib-cpu-build.sh
D=data/daphnet
S02="--file $D/S02R01.txt --file $D/S02R02.txt"
S03="--file $D/S03R02.txt --file $D/S03R03.txt"
W=build/packs; mkdir -p $W
# Stage 1: hard negatives, per subject, in-sample with only that subject's examples.
jobs1=()
while IFS='|' read -r name args; do
  [[ $name == M:* ]] || continue
  v=${name#M:}
  eval "set -- $args"
  for s in S02 S03; do
    python3 scripts/packs/fog_candidates.py --out $W/mine_${v}_$s.yaml --subjects $s "$@" 2>$OUT/mine_${v}_$s.gen ||
      { echo "mine_${v}_$s: fog_candidates.py failed"; tail -3 $OUT/mine_${v}_$s.gen; exit 1; }
    rm -rf $W/mined_${v}_$s; files=$S02; [ $s = S03 ] && files=$S03
    jobs1+=("$G eval --config $W/mine_${v}_$s.yaml --backend cpu --json $files --mine-negatives $W/mined_${v}_$s > $OUT/mine_${v}_$s.json 2>$OUT/mine_${v}_$s.err")
  done
done < ${VARIANTS:-scripts/packs/fog_variants.txt}
printf '%s\n' "${jobs1[@]}" | xargs -P "$(nproc)" -I{} bash -c '{}'
echo "mined at $((SECONDS-T0)) s"
# Stage 2: every variant, leave-one-subject-out, each subject its own process.
jobs2=()
while IFS='|' read -r name args; do
  v=${name#M:}; tag=$v; extra=""
  if [[ $name == M:* ]]; then tag=${v}_mined; extra="--extra-neg $W/mined_${v}_S02 --extra-neg $W/mined_${v}_S03"; fi
  eval "set -- $args"
  python3 scripts/packs/fog_candidates.py --out $W/$tag.yaml "$@" $extra 2>$OUT/$tag.gen ||
    { echo "$tag: fog_candidates.py failed"; tail -3 $OUT/$tag.gen; exit 1; }
  for s in S02 S03; do
    files=$S02; [ $s = S03 ] && files=$S03
    jobs2+=("$G eval --config $W/$tag.yaml --backend cpu --loso --json $files ${EVAL_EXTRA:-} > $OUT/$tag.$s.json 2>$OUT/$tag.$s.err")
  done
done < ${VARIANTS:-scripts/packs/fog_variants.txt}
printf '%s\n' "${jobs2[@]}" | xargs -P "$(nproc)" -I{} bash -c '{}'
echo "evaluated at $((SECONDS-T0)) s"
cp -r $W $OUT/work 2>/dev/null
tar czf $FINAL/results.tgz -C $OUT .
