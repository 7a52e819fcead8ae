#!/usr/bin/env python3
"""Tells a stall of the whole host from a stall of one process.

Runs beside a benchmark as its own process. A thread sleeps --period-ms in a
loop and logs every wake-up later than --late-ms (wall-clock time and how
late), so a pause that also hit this process shows up here. Once a second it
logs the kernel's pressure-stall totals (/proc/pressure/{cpu,io,memory}, in
microseconds) and the /proc/vmstat counters that move when the kernel
compacts memory, collapses huge pages or reclaims, as differences from the
previous second, only for the seconds where one of them moved.

Output: one JSON object per line on stdout:
  {"t": unix_s, "late_ms": x}                         a late wake-up
  {"t": unix_s, "psi_us": {...}, "vmstat": {...}}     a second with pressure
Stops on SIGTERM or after --seconds.
"""
import argparse
import json
import signal
import sys
import threading
import time

VMSTAT_KEYS = (
    "compact_stall", "compact_fail", "compact_success", "thp_fault_alloc",
    "thp_collapse_alloc", "thp_split_page", "pgmajfault", "allocstall_normal",
    "allocstall_movable", "pgscan_direct", "pgsteal_direct", "pgscan_kswapd",
    "nr_dirty", "nr_writeback", "pgpgout",
)


def read_psi():
    totals = {}
    for resource in ("cpu", "io", "memory"):
        try:
            with open(f"/proc/pressure/{resource}") as f:
                for line in f:
                    kind, *fields = line.split()
                    totals[f"{resource}_{kind}"] = int(fields[-1].split("=")[1])
        except OSError:
            pass
    return totals


def read_vmstat():
    values = {}
    try:
        with open("/proc/vmstat") as f:
            for line in f:
                key, value = line.split()
                if key in VMSTAT_KEYS:
                    values[key] = int(value)
    except OSError:
        pass
    return values


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--period-ms", type=float, default=10.0)
    parser.add_argument("--late-ms", type=float, default=30.0)
    parser.add_argument("--seconds", type=float, default=3600.0)
    args = parser.parse_args()
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    lock = threading.Lock()

    def emit(obj):
        with lock:
            print(json.dumps(obj), flush=True)

    def heartbeat():
        period = args.period_ms / 1000.0
        while not stop.is_set():
            before = time.monotonic()
            time.sleep(period)
            late_ms = (time.monotonic() - before - period) * 1000.0
            if late_ms > args.late_ms:
                emit({"t": round(time.time(), 3), "late_ms": round(late_ms, 1)})

    threading.Thread(target=heartbeat, daemon=True).start()
    # Counters that are levels, not totals, are reported as they are.
    levels = {"nr_dirty", "nr_writeback"}
    end = time.monotonic() + args.seconds
    psi, vm = read_psi(), read_vmstat()
    while not stop.is_set() and time.monotonic() < end:
        stop.wait(1.0)
        new_psi, new_vm = read_psi(), read_vmstat()
        psi_delta = {k: v - psi.get(k, v) for k, v in new_psi.items() if v != psi.get(k, v)}
        vm_delta = {k: (v if k in levels else v - vm.get(k, v)) for k, v in new_vm.items()}
        moved = {k: v for k, v in vm_delta.items() if k not in levels and v}
        if moved or any(v > 20000 for v in psi_delta.values()):
            emit({"t": round(time.time(), 3), "psi_us": psi_delta, "vmstat": vm_delta})
        psi, vm = new_psi, new_vm
    return 0


if __name__ == "__main__":
    sys.exit(main())
