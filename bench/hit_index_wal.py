#!/usr/bin/env python3
"""WAL bytes a hit-store commit writes as the store grows (docs/benchmarks.md).

The hits table and its indexes as sinks/store.cc creates them (columns only),
synchronous=FULL, WAL, no automatic checkpoint. Each commit inserts
--per-commit alerts of wearers drawn at random from --wearers, as a tick of
the alert storm does. Every --every commits the WAL is emptied, the next
--measure commits are timed, and their WAL bytes per commit are printed as a
JSON line. --without drops shipped indexes by name (detected_at,
block_wearer_end_index) to see what each one costs; --with wearer_end_index
adds the index of schema version 10, --with wearer_detected_at the one
stores had before.

At the end, the lookups by wearer are timed as the store makes them: all
alerts of one wearer in seq order, and the newest alert of a wearer with a
given end index (an ended episode's first alert, one commit back). With the
index led by the seq block (schema 11) they probe block by block; with
--without block_wearer_end_index --with wearer_end_index (schema 10) each is
one search.

  python3 bench/hit_index_wal.py --rows 3000000 \
      [--without block_wearer_end_index --with wearer_end_index]
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
    "block_wearer_end_index":
        "CREATE INDEX hits_block_wearer_end_index ON hits(seq >> 12, wearer, end_index)",
}
EARLIER_INDEXES = {
    "wearer_detected_at": "CREATE INDEX hits_wearer_detected_at ON hits(wearer, detected_at)",
    "wearer_end_index": "CREATE INDEX hits_wearer_end_index ON hits(wearer, end_index)",
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
    print(json.dumps(time_lookups(db, args, state["seq"], rng)), flush=True)
    db.close()
    for suffix in ("", "-wal", "-shm"):
        if os.path.exists(path + suffix):
            os.remove(path + suffix)
    os.rmdir(folder)


def time_lookups(db, args, rows, rng):
    """Mean ms of the store's lookups by wearer on the store as it ends."""
    blocked = "block_wearer_end_index" not in args.without
    newest_block = rows >> 12
    wearers = [rng.randrange(args.wearers) for _ in range(20)]

    def all_of(wearer):
        if not blocked:
            return db.execute("SELECT seq FROM hits WHERE seq > 0 AND wearer = ? ORDER BY seq",
                              (wearer,)).fetchall()
        found = []
        for block in range(0, newest_block + 1):
            found += db.execute("SELECT seq FROM hits WHERE seq > 0 AND (seq >> 12) = ? AND "
                                "wearer = ? ORDER BY seq", (block, wearer)).fetchall()
        return found

    # The alerts of the commit before the last, as an ended episode names them.
    named = db.execute("SELECT wearer, end_index FROM hits WHERE seq > ? ORDER BY seq LIMIT 200",
                       (rows - 2 * args.per_commit,)).fetchall()

    def newest(wearer, end_index):
        if not blocked:
            return db.execute("SELECT coalesce(max(seq), 0) FROM hits WHERE wearer = ? AND "
                              "end_index = ?", (wearer, end_index)).fetchone()[0]
        for block in range(newest_block, -1, -1):
            seq = db.execute("SELECT coalesce(max(seq), 0) FROM hits WHERE (seq >> 12) = ? AND "
                             "wearer = ? AND end_index = ?",
                             (block, wearer, end_index)).fetchone()[0]
            if seq:
                return seq
        return 0

    start = time.monotonic()
    per_wearer = sum(len(all_of(w)) for w in wearers) / len(wearers)
    all_ms = (time.monotonic() - start) * 1000 / len(wearers)
    start = time.monotonic()
    resolved = sum(1 for w, e in named if newest(w, e))
    episode_ms = (time.monotonic() - start) * 1000 / len(named)
    return {"bench": "hit_index_lookups", "rows": rows, "blocks": newest_block + 1,
            "without": args.without, "with": args.also,
            "ms_all_alerts_of_a_wearer": round(all_ms, 2), "alerts_per_wearer": per_wearer,
            "ms_episode_first_alert": round(episode_ms, 3),
            "episodes_resolved": resolved, "episodes": len(named)}


if __name__ == "__main__":
    main()
