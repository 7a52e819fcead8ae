#!/usr/bin/env python3
"""Candidate configs for the falls pack: templates cut (gaitwatch pattern cut) around each
SisFall trial's largest acceleration magnitude."""
import argparse, glob, gzip, math, os, subprocess
ap = argparse.ArgumentParser()
ap.add_argument('--out', required=True)
ap.add_argument('--before', type=float, default=1.0)
ap.add_argument('--after', type=float, default=1.5)
ap.add_argument('--threshold', type=float, default=6)
ap.add_argument('--neighbours', type=int, default=0)
ap.add_argument('--margin', type=float, default=0)
ap.add_argument('--hysteresis', type=float, default=0)
ap.add_argument('--transforms', default='[magnitude]')
ap.add_argument('--channels', default='[x, y, z]')
ap.add_argument('--min-dims', type=int, default=1)
ap.add_argument('--znorm', default='false')
ap.add_argument('--band', type=float, default=0.1)
ap.add_argument('--no-negatives', action='store_true')
ap.add_argument('--lead-in', type=int, default=0)
ap.add_argument('--cooldown', type=float, default=10)
a = ap.parse_args()
root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
outdir = os.path.dirname(os.path.abspath(a.out))
tdir = os.path.join(outdir, 'falls_t')
os.makedirs(tdir, exist_ok=True)
G = os.environ.get('GW', f'{root}/build/daemon/gaitwatch')
base = open(f'{root}/config/gaitwatch.yaml').read()
base = base[:base.index('\npatterns:')] + '\n'
cfgp = os.path.join(outdir, 'falls_base.yaml')
open(cfgp, 'w').write(base + 'patterns: []\n')
rate = 100
m = int(round((a.before + a.after) * rate))
pos, neg = [], []
for f in sorted(glob.glob(f'{root}/data/sisfall/*_R01.txt.gz')):
    name = os.path.basename(f)[:-7]
    vals = []
    for line in gzip.open(f, 'rt'):
        line = line.strip().rstrip(';')
        if not line: continue
        x, y, z = (int(v) * 32 / 8192 for v in line.split(',')[:3])
        vals.append(math.sqrt(x * x + y * y + z * z))
    peak = max(range(len(vals)), key=lambda i: vals[i]) // 2  # 200 Hz -> 100 Hz
    start = max(a.lead_in, peak - int(a.before * rate))
    n100 = len(vals) // 2
    if start + m > n100 - 2: start = n100 - 2 - m
    t = os.path.join(tdir, f'{"positive" if name[0] == "F" else "negative"}_{name}_{start}.csv')
    if not os.path.exists(t):
        subprocess.run([G, 'pattern', 'cut', '--config', cfgp, '--device', 'accelerometer', '--file', f,
                        '--start', str(start), '--end', str(start + m), '--lead-in', str(a.lead_in), '--out', t],
                       check=True, stderr=subprocess.DEVNULL)
    (pos if name[0] == 'F' else neg).append(os.path.relpath(t, outdir))
out = [base, 'patterns:\n  - name: fall\n    kind: fall\n    severity: critical\n    device: accelerometer\n',
       f'    channels: {a.channels}\n    transforms: {a.transforms}\n    length: {m}\n    band: {a.band}\n',
       f'    znorm: {a.znorm}\n    threshold: {a.threshold}\n    min_dims: {a.min_dims}\n    margin: {a.margin}\n',
       f'    hysteresis: {a.hysteresis}\n    neighbours: {a.neighbours}\n    cooldown_s: {a.cooldown}\n    examples:\n']
out += [f'      - {{template: {p}}}\n' for p in pos]
if not a.no_negatives and neg:
    out.append('    negatives:\n'); out += [f'      - {{template: {p}}}\n' for p in neg]
open(a.out, 'w').write(''.join(out))
