#!/usr/bin/env python3
"""Aggregates an `ncu --page source --csv --print-source cuda,sass` dump per CUDA source line:
warp stall samples, executed warp instructions and average active lanes."""
import csv, sys, collections
rows = csv.reader(open(sys.argv[1], newline=''))
file = '?'; line = None; header = None
agg = collections.defaultdict(lambda: [0.0, 0.0, 0.0])  # samples, warp instr, thread instr
for r in rows:
    if not r: continue
    if r[0] == 'File Path': file = r[1].split('/')[-1]; continue
    if r[0] == 'Function Name': continue
    if r[0] == 'Line No': header = r; continue
    if header is None: continue
    if r[0].strip():
        line = (file, int(r[0])) if r[0].strip().isdigit() else None; continue
    if line is None or len(r) < len(header): continue
    d = dict(zip(header[2:], r[2:]))  # SASS columns follow 'Address'
    def num(k):
        v = d.get(k, '0').replace(',', '')
        try: return float(v)
        except ValueError: return 0.0
    a = agg[line]
    a[0] += num('Warp Stall Sampling (All Samples)')
    a[1] += num('Instructions Executed')
    a[2] += num('Thread Instructions Executed')
tot = [sum(v[i] for v in agg.values()) for i in range(3)]
print(f"total samples {tot[0]:.0f} warp instr {tot[1]:.3e} thread instr {tot[2]:.3e} lanes {tot[2]/max(tot[1],1):.1f}")
src = {}
for (f, l), a in sorted(agg.items(), key=lambda kv: -kv[1][1])[:int(sys.argv[2]) if len(sys.argv) > 2 else 40]:
    print(f"{f}:{l:5d} instr {100*a[1]/tot[1]:5.1f}% stall {100*a[0]/max(tot[0],1):5.1f}% lanes {a[2]/max(a[1],1):5.1f}")
