#!/usr/bin/env bash
# scripts/gpu-run.sh refuses an unknown step name (or none) with exit 2 before
# it unpacks or builds anything, and names the steps it knows.
set -u
script="$1/scripts/gpu-run.sh"
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
fail=0
for args in "tests" "tests-all tset" ""; do
  # shellcheck disable=SC2086
  msg=$(OUT="$out" bash "$script" $args 2>&1 >/dev/null)
  rc=$?
  if [ "$rc" != 2 ]; then echo "FAIL: '$args' exited $rc, expected 2"; fail=1; fi
  case "$msg" in *tests-all*) ;; *) echo "FAIL: '$args' did not list the known steps: $msg"; fail=1 ;; esac
done
if [ -e "$out/build.log" ] || [ -e "$out/machine.txt" ]; then echo "FAIL: it started work"; fail=1; fi
[ $fail = 0 ] && echo "gpu-run.sh step checks: ok"
exit $fail
