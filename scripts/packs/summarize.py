#!/usr/bin/env python3
import json, sys, glob, os
d = sys.argv[1]
tags = sorted({os.path.basename(f).split('.')[0] for f in glob.glob(f'{d}/*.S02.json')})
print(f"{'variant':14} {'S02 R/P/lat':22} {'S03 R/P/lat':22} pooled R   P    f/h  pos/neg")
for t in tags:
    row, tot = [], dict(events=0, detected=0, true_alerts=0, false_alerts=0, hours=0)
    for s in ['S02', 'S03']:
        try: j = json.loads(open(f'{d}/{t}.{s}.json').read().splitlines()[0])
        except Exception as e: row.append('   (failed)           '); continue
        for k in tot: tot[k] += j.get(k, 0)
        row.append(f"{j['recall']:.2f}/{j['precision']:.2f}/{j['median_latency_s']:.1f}s".ljust(22))
    P = tot['true_alerts'] / max(1, tot['true_alerts'] + tot['false_alerts']); R = tot['detected'] / max(1, tot['events'])
    gen = open(f'{d}/{t}.gen').read().strip() if os.path.exists(f'{d}/{t}.gen') else ''
    print(f"{t:14} {row[0]} {row[1]} {R:.3f} {P:.3f} {tot['false_alerts']/max(tot['hours'],1e-9):5.1f}  {gen}")
