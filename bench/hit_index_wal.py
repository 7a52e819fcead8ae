#!/usr/bin/env python3
"""WAL bytes a hit-store commit writes as the store grows (docs/benchmarks.md).

The hits table and its indexes as sinks/store.cc creates them (columns only),
synchronous=FULL, WAL, no automatic checkpoint. Each commit inserts
--per-commit alerts of wearers drawn at random from --wearers, as a tick of
the alert storm does. Every --every commits the WAL is emptied, the next
--measure commits are timed, and their WAL bytes per commit are printed as a
JSON line. --without drops shipped indexes by name (detected_at,
wearer_end_index) to see what each one costs; --with wearer_detected_at adds
the index stores had before schema version 10.

  python3 bench/hit_index_wal.py --rows 3000000 [--with wearer_detected_at]
"""
import argparse
import json
import os
import random
import sqlite3
import tempfile
import time

SHIPPED_INDEXES = {
    "detected_at": "CREATE INDEX hits_detected_at ON hits(detected_at)",
    "wearer_end_index": "CREATE INDEX hits_wearer_end_index ON hits(wearer, end_index)",
}
EARLIER_INDEXES = {
    "wearer_detected_at": "CREATE INDEX hits_wearer_detected_at ON hits(wearer, detected_at)",
}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=3000000, help="alerts inserted in all")
    parser.add_argument("--wearers", type=int, default=10000)
    parser.add_argument("--per-commit", type=int, default=880, help="alerts a commit (a storm tick)")
    parser.add_argument("--every", type=int, default=250, help="commits between measurements")
    parser.add_argument("--measure", type=int, default=50, help="commits measured each time")
    parser.add_argument("--without", action="append", default=[], choices=sorted(SHIPPED_INDEXES))
    parser.add_argument("--with", dest="also", action="append", default=[],
                        choices=sorted(EARLIER_INDEXES))
    parser.add_argument("--dir", default=None, help="folder of the database (default: a temp one)")
    args = parser.parse_args()

    folder = tempfile.mkdtemp(prefix="gw-wal-", dir=args.dir)
    path = os.path.join(folder, "hits.db")
    db = sqlite3.connect(path, isolation_level=None)
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("PRAGMA synchronous=FULL")
    db.execute("PRAGMA wal_autocheckpoint=0")
    db.execute(
        "CREATE TABLE hits(seq INTEGER PRIMARY KEY, wearer INTEGER NOT NULL, device INTEGER NOT NULL,"
        " pattern TEXT NOT NULL, kind TEXT NOT NULL, severity TEXT NOT NULL, t_start REAL, t_end REAL,"
        " end_index INTEGER NOT NULL, distance REAL, matched_dims INTEGER NOT NULL,"
        " pattern_dims INTEGER NOT NULL, detected_at REAL, latency_ms REAL, dims TEXT NOT NULL)")
    for name, sql in SHIPPED_INDEXES.items():
        if name not in args.without:
            db.execute(sql)
    for name in args.also:
        db.execute(EARLIER_INDEXES[name])
    rng = random.Random(1)
    dims = '[{"pattern_dim":0,"stream_dim":0,"distance":0.61803398874989479,"end_index":12345}]'
    state = {"seq": 0, "t": 1.7e9}

    def commit():
        state["t"] += 0.07
        t = state["t"]
        rows = []
        for _ in range(args.per_commit):
            state["seq"] += 1
            w = rng.randrange(args.wearers)
            rows.append((state["seq"], w, 1, "w1_p00", "other", "warning", t - 1.28, t,
                         int(t * 100) + w, 1.5, 1, 201, t + rng.random() * 0.01, 90.0, dims))
        db.execute("BEGIN")
        db.executemany("INSERT INTO hits VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)", rows)
        db.execute("COMMIT")

    while state["seq"] < args.rows:
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        start = time.monotonic()
        for _ in range(args.measure):
            commit()
        seconds = time.monotonic() - start
        wal = os.path.getsize(path + "-wal")
        print(json.dumps({
            "bench": "hit_index_wal", "rows": state["seq"], "wearers": args.wearers,
            "per_commit": args.per_commit, "without": args.without, "with": args.also,
            "wal_bytes_per_commit": wal // args.measure,
            "wal_pages_per_alert": round(wal / args.measure / args.per_commit / 4096, 2),
            "ms_per_commit": round(seconds * 1000 / args.measure, 1)}), flush=True)
        for _ in range(args.every - args.measure):
            commit()
    db.close()
    for suffix in ("", "-wal", "-shm"):
        if os.path.exists(path + suffix):
            os.remove(path + suffix)
    os.rmdir(folder)


if __name__ == "__main__":
    main()
