#!/usr/bin/env python3
"""Summarises a daemon run's per-tick logs (docs/benchmarks.md, "End to end on
the H100 machine ... 2026-11-27"): GW_DAEMON_TICK_LOG (lines S/D/R/F/P,
daemon/daemon.cc) and GW_ENGINE_BATCH_LOG (one line per batch,
pipeline/engine.cc).

  scripts/tick_log_summary.py --tick tick.txt --batches batches.txt [--skip 30]

Prints, after the first --skip seconds: the pipeline thread's steps (p50, p99,
max per kind), the gap between a search's end and the next batch's start, and
every batch that deferred streams with the tick-log lines before it.
"""
import argparse
import bisect


def quantiles(values):
    if not values:
        return "n=0"
    v = sorted(values)
    pick = lambda q: v[min(len(v) - 1, int(q * (len(v) - 1)))]
    return "n=%d p50 %.1f p99 %.1f max %.1f" % (len(v), pick(0.5), pick(0.99), v[-1])


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tick", required=True)
    parser.add_argument("--batches", required=True)
    parser.add_argument("--skip", type=float, default=30.0, help="seconds of start-up left out")
    parser.add_argument("--context", type=float, default=0.3, help="seconds of tick log shown")
    args = parser.parse_args()

    ticks = [line.split() for line in open(args.tick) if line.strip()]
    # Lines starting with '#' are the warm-up searches before the first tick.
    batches = [[float(x) for x in line.split()] for line in open(args.batches)
               if line.strip() and not line.startswith("#")]
    t0 = batches[0][0]
    ticks = [t for t in ticks if float(t[1]) - t0 >= args.skip]

    # S t frames take begin late | D t phase2 admit submit metrics final |
    # R t ms seconds in_flight | F t frames ms | P t ms
    steps = {
        "tick: frames taken (ms)": [float(t[3]) for t in ticks if t[0] == "S"],
        "tick: engine start (ms)": [float(t[4]) for t in ticks if t[0] == "S"],
        "phase 2 (ms)": [float(t[2]) for t in ticks if t[0] == "D"],
        "dedup admit (ms)": [float(t[3]) for t in ticks if t[0] == "D"],
        "alerts to the writer (ms)": [float(t[4]) for t in ticks if t[0] == "D"],
        "metrics snapshot (ms)": [float(t[5]) for t in ticks if t[0] == "D"],
        "slot recording step (ms)": [float(t[2]) for t in ticks if t[0] == "R" and int(t[3]) > 0],
        "slot recording step (seconds)": [int(t[3]) for t in ticks if t[0] == "R" and int(t[3]) > 0],
        "frames turn > 2 ms (ms)": [float(t[3]) for t in ticks if t[0] == "F"],
    }
    for name, values in steps.items():
        print("%-32s %s" % (name, quantiles(values)))

    # Batch log: start, slices, work, predicted ms, start->search end ms,
    # search ms, phase 2 ms, matches, deferred streams so far.
    kept = [b for b in batches if b[0] - t0 >= args.skip]
    gaps = [(b[0] - (a[0] + a[4] / 1000.0)) * 1000.0 for a, b in zip(kept, kept[1:])]
    print("%-32s %s" % ("search end -> next start (ms)", quantiles(gaps)))
    print("%-32s %s" % ("batch start -> search end (ms)", quantiles([b[4] for b in kept])))

    tick_times = [float(t[1]) for t in ticks]
    deferring = [
        (a, b) for a, b in zip(batches, batches[1:]) if b[8] > a[8] and b[0] - t0 >= args.skip
    ]
    print("batches that deferred streams: %d" % len(deferring))
    for before, batch in deferring:
        print("  at %.1f s: %d slices, predicted %.1f ms, %d streams deferred"
              % (batch[0] - t0, batch[1], batch[3], batch[8] - before[8]))
        lo = bisect.bisect_left(tick_times, batch[0] - args.context)
        hi = bisect.bisect_right(tick_times, batch[0] + 0.03)
        for t in ticks[lo:hi]:
            print("    %s %.3f %s" % (t[0], float(t[1]) - t0, " ".join(t[2:])))


if __name__ == "__main__":
    main()
