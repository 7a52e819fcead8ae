#!/usr/bin/env bash
# Builds the CPU tree with a sanitizer and runs the test suite under it
# (docs/reliability.md says why this subset and what it costs in CI).
#
# Usage: scripts/sanitize.sh address|thread [CTEST_ARGS...]
#   address: ASan + UBSan (GCC, -fno-sanitize-recover: the first report fails
#            the test), build dir build-asan/
#   thread:  TSan, build dir build-tsan/
# Default: builds the target gw_unit_tests (every test binary not labelled
# `integration`) and runs those tests; `thread` builds and runs only those
# not labelled `one_thread` either (gw_threaded_unit_tests). The process-level
# tests spawn the daemon and the CLI and take most of the suite's time; with
# extra arguments everything is built and the arguments go to ctest as they
# are, e.g.
#   scripts/sanitize.sh address -L integration
set -euo pipefail
cd "$(dirname "$0")/.."
kind=${1:-}
case "$kind" in
  address) dir=${BUILD_DIR:-build-asan} ;;
  thread) dir=${BUILD_DIR:-build-tsan} ;;
  *) echo "usage: $0 address|thread [ctest args...]" >&2; exit 2 ;;
esac
shift
ctest_args=("$@")
targets=(--target all)
if [ ${#ctest_args[@]} -eq 0 ]; then
  # The unbuilt integration binaries show up as *_NOT_BUILT placeholders.
  # The test that uses up every file descriptor of its process ("out of
  # descriptors") runs only in the normal suite: the sanitizer runtimes need
  # descriptors of their own (UBSan's type checks and the reports read
  # /proc), and without them report errors that are not in the code.
  not_here="_NOT_BUILT|out of descriptors"
  ctest_args=(-LE integration -E "$not_here")
  targets=(--target gw_unit_tests)
  if [ "$kind" = thread ]; then
    # The exhaustive search sweeps against brute force take minutes under
    # TSan (one alone 7.5 min) and check arithmetic, not threading; they run
    # under ASan and in the normal suite. Binaries labelled one_thread never
    # start a second thread: TSan has nothing to find there.
    ctest_args=(-LE "integration|one_thread" -E "$not_here|brute.force|Every subset of pruning")
    targets=(--target gw_threaded_unit_tests)
  fi
fi

source scripts/lib/ccache.sh
start=$(date +%s)
# -O1 -g1 (line tables, enough for the reports' stacks) instead of -O2 -g:
# half the compile time of an instrumented build (docs/reliability.md).
# NDEBUG as in the release build, so the tests check the shipped code.
cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g1 -DNDEBUG" -DCMAKE_C_FLAGS_RELWITHDEBINFO="-O1 -g1 -DNDEBUG" \
  -DGAITWATCH_CUDA=OFF -DGAITWATCH_SANITIZE="$kind" -DGAITWATCH_BENCH=OFF "${launcher[@]}" >/dev/null
cmake --build "$dir" -j"$(nproc)" "${targets[@]}"
built=$(date +%s)
echo "== sanitize $kind: build $(( built - start ))s"

# Every finding fails the test that hit it. Leaks count (ASan); TSan's
# second_deadlock_stack gives both stacks of a lock-order report.
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1:detect_stack_use_after_return=1:strict_string_checks=1${ASAN_OPTIONS:+:$ASAN_OPTIONS}
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1${UBSAN_OPTIONS:+:$UBSAN_OPTIONS}
export TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1${TSAN_OPTIONS:+:$TSAN_OPTIONS}
# Debian's libzmq is not instrumented: tests/tsan.supp says why it is suppressed.
export TSAN_OPTIONS="$TSAN_OPTIONS:suppressions=$PWD/tests/tsan.supp"
cd "$dir"
status=0
ctest --output-on-failure -j2 --timeout 900 "${ctest_args[@]}" || status=$?
echo "== sanitize $kind: tests $(( $(date +%s) - built ))s"
exit $status
