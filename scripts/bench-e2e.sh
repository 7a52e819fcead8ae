#!/usr/bin/env bash
# The end-to-end benchmark (docs/benchmarks.md, "End to end") in one run: the
# micro benchmarks (frames/s one ingest thread decodes, hits/s the SQLite
# writer commits), then W1 wearers
# through the whole daemon: a search (doubling, then bisection, with short
# runs) and a confirmation run at the full duration. JSON lines on stdout
# (e2e_bench's "ingest_decode", "ingest_thread", "sqlite_writer", "e2e_run" per run and one
# "e2e_summary"), progress on stderr.
#   bash scripts/bench-e2e.sh [BUILD_DIR] [e2e_bench options]
#   bash scripts/bench-e2e.sh build                              # CPU, 30-s sweep runs, 600-s confirmation
#   bash scripts/bench-e2e.sh /tmp/gw-build --backend cuda --quick   # 20-s runs, 120-s confirmation
#   bash scripts/bench-e2e.sh build --wearers 2,3,4 --duration 60    # fixed counts, no search
# Needs BUILD_DIR/bench/e2e_bench and BUILD_DIR/daemon/gaitwatchd
# (cmake --build BUILD_DIR --target e2e_bench builds both).
set -uo pipefail
BUILD=build
if [ $# -gt 0 ] && [ "${1#-}" = "$1" ]; then BUILD=$1; shift; fi
B=$BUILD/bench/e2e_bench
D=$BUILD/daemon/gaitwatchd
for f in "$B" "$D"; do
  [ -x "$f" ] || { echo "bench-e2e: no $f (cmake --build $BUILD --target e2e_bench)" >&2; exit 2; }
done
echo "bench-e2e: $(nproc) CPUs, load average $(cut -d' ' -f1-3 /proc/loadavg); $*" >&2
"$B" --micro || echo "bench-e2e: micro benchmarks failed (rc $?)" >&2
"$B" --daemon "$D" "$@"
rc=$?
echo "bench-e2e: done (rc $rc), load average $(cut -d' ' -f1-3 /proc/loadavg)" >&2
exit $rc
