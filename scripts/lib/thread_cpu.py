"""Per-thread CPU use of named processes over a short interval, from /proc.

  python3 scripts/lib/thread_cpu.py [--after S] [--seconds S] [--label TEXT] NAME...

Waits --after seconds, reads every thread's utime + stime of the processes
whose command name is one of NAME, waits --seconds, reads again and prints,
per process, the total in cores and its threads grouped by thread name
(common/thread_name.h names the daemon's), busiest first. Used by
scripts/gpu-e2e.sh to see which of the daemon's threads saturates.
"""
import argparse
import collections
import os
import time

TICKS = os.sysconf("SC_CLK_TCK")


def cpu_ticks(stat):
    """utime + stime of a /proc stat line (the name is in parentheses and may hold spaces)."""
    fields = stat[stat.rindex(")") + 2:].split()
    return int(fields[11]) + int(fields[12])


def read_threads(names):
    """{(pid, comm): {tid: (thread name, cpu ticks)}} for processes named in `names`;
    tid "all" holds the whole process (threads that ended included)."""
    out = {}
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/comm") as f:
                comm = f.read().strip()
            if comm not in names:
                continue
            with open(f"/proc/{pid}/stat") as f:
                threads = {"all": ("all", cpu_ticks(f.read()))}
            for tid in os.listdir(f"/proc/{pid}/task"):
                with open(f"/proc/{pid}/task/{tid}/stat") as f:
                    stat = f.read()
                threads[tid] = (stat[stat.index("(") + 1:stat.rindex(")")], cpu_ticks(stat))
            out[(pid, comm)] = threads
        except (FileNotFoundError, ProcessLookupError, ValueError):
            continue
    return out


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--after", type=float, default=0)
    parser.add_argument("--seconds", type=float, default=5)
    parser.add_argument("--label", default="")
    parser.add_argument("names", nargs="+")
    args = parser.parse_args()
    time.sleep(args.after)
    before = read_threads(set(args.names))
    t0 = time.time()
    time.sleep(args.seconds)
    after = read_threads(set(args.names))
    elapsed = time.time() - t0
    print(f"== {args.label}: {elapsed:.1f} s")
    for key, threads in sorted(after.items()):
        old = before.get(key, {})
        by_name = collections.defaultdict(lambda: [0.0, 0])
        total = 0.0
        for tid, (name, ticks) in threads.items():
            # A thread started during the interval has no baseline: left out
            # of its name's sum (the process total has it).
            used = (ticks - old[tid][1]) / TICKS / elapsed if tid in old else 0.0
            if tid == "all":
                total = used
                continue
            by_name[name][0] += used
            by_name[name][1] += 1
        parts = ", ".join(f"{name} x{count} {cores:.2f}"
                          for name, (cores, count) in sorted(by_name.items(), key=lambda x: -x[1][0]))
        print(f"{key[1]} (pid {key[0]}): {total:.2f} cores in all; threads: {parts}")


if __name__ == "__main__":
    main()
