#!/usr/bin/env python3
"""Candidate configs for the FoG pack (docs/detection.md §6): one pattern whose examples
are windows of the bundled Daphnet recordings, tagged by subject through their file names."""
import argparse, csv, os, sys
ap = argparse.ArgumentParser()
ap.add_argument('--out', required=True)
ap.add_argument('--pos-step', type=float, default=0)   # extra positives every N s inside an episode (0 = one)
ap.add_argument('--neg-step', type=float, default=20)  # a negative every N s of label-1 activity
ap.add_argument('--neg-gap', type=float, default=5)    # seconds away from any freeze
ap.add_argument('--threshold', type=float, default=6.0)
ap.add_argument('--min-dims', type=int, default=2)
ap.add_argument('--margin', type=float, default=0)
ap.add_argument('--hysteresis', type=float, default=2)
ap.add_argument('--neighbours', type=int, default=0)
ap.add_argument('--min-duration', type=float, default=0.5)
ap.add_argument('--cooldown', type=float, default=5)
ap.add_argument('--length', type=int, default=128)
ap.add_argument('--window-s', type=float, default=3)
ap.add_argument('--power-floor', type=float, default=3000)
ap.add_argument('--band', type=float, default=0.1)
ap.add_argument('--extra-neg', action='append', default=[])  # eval --mine-negatives folders
ap.add_argument('--transforms', default='')
ap.add_argument('--subjects', default='S02,S03')
ap.add_argument('--pos-offset', type=float, default=1.0)
# per-wearer normalisation, e.g. '{learn_s: 120, statistic: median, scale: none}'; the
# examples' baselines are learned by gaitwatch from each recording's first learn_s seconds
ap.add_argument('--normalise', default='')
# Views that must agree (docs/detection.md §7): --view 'NAME:key=value;...' adds a pattern with
# publish: false, its examples the windows of the pattern's examples (and negatives, unless
# negatives=0) ending where they end; keys: channels (all|ankle|thigh|trunk|a,b,..), transforms,
# length, threshold, min_dims, znorm, negatives, hysteresis. The pattern then alerts only when
# every view detects within --within seconds of it.
ap.add_argument('--view', action='append', default=[])
ap.add_argument('--within', type=float, default=2)
a = ap.parse_args()
root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
base = open(f'{root}/config/gaitwatch.yaml').read()
base = base[:base.index('\npatterns:')] + '\n'
eps = {}
for r in csv.DictReader(open(f'{root}/data/daphnet/FOG_EPISODES.tsv'), delimiter='\t'):
    eps.setdefault(r['file'], []).append((int(r['start_row']) - 1, int(r['end_row'])))
rate = 64
m = a.length
lead = int(round(a.window_s * rate)) + 2
pos, neg = [], []
for f in ['S02R01.txt', 'S02R02.txt', 'S03R02.txt', 'S03R03.txt']:
    if f[:3] not in a.subjects.split(','): continue
    path = f'{root}/data/daphnet/{f}'; rel = os.path.relpath(path, os.path.dirname(os.path.abspath(a.out)))
    labels = [int(l.split()[10]) for l in open(path)]
    n = len(labels)
    for (s, e) in eps.get(f, []):
        t = s + int(a.pos_offset * rate)
        while True:
            if t - lead >= 0 and t + m <= n:
                pos.append((rel, t, t + m))
            if a.pos_step <= 0: break
            t += int(a.pos_step * rate)
            if t + m > e + rate: break
    fr = eps.get(f, [])
    gap = int(a.neg_gap * rate)
    step = int(a.neg_step * rate)
    t = lead + 10
    while t + m < n:
        ok = all(labels[i] == 1 for i in range(t - lead, t + m, 8))
        far = all(t + m + gap < s or t > e + gap for (s, e) in fr)
        if ok and far:
            neg.append((rel, t, t + m)); t += step
        else:
            t += rate
out = [base, 'patterns:\n  - name: fog\n    kind: freezing_of_gait\n    device: daphnet_body\n',
       '    channels: [ankle_fwd, ankle_vert, ankle_lat, thigh_fwd, thigh_vert, thigh_lat, trunk_fwd, trunk_vert, trunk_lat]\n']
tr = a.transforms or f'[magnitude, {{kind: freeze_index, window_s: {a.window_s}, power_floor: {a.power_floor}}}]'
out.append(f'    transforms: {tr}\n')
out.append(f'    length: {m}\n    band: {a.band}\n    znorm: false\n    threshold: {a.threshold}\n    min_dims: {a.min_dims}\n')
if a.normalise: out.append(f'    normalise: {a.normalise}\n')
out.append(f'    margin: {a.margin}\n    hysteresis: {a.hysteresis}\n    neighbours: {a.neighbours}\n    min_duration_s: {a.min_duration}\n    cooldown_s: {a.cooldown}\n')
out.append('    examples:\n')
for p in pos: out.append(f'      - {{file: {p[0]}, format: daphnet, start: {p[1]}, end: {p[2]}}}\n')
out.append('    negatives:\n')
for p in neg: out.append(f'      - {{file: {p[0]}, format: daphnet, start: {p[1]}, end: {p[2]}}}\n')
# A folder of `gaitwatch eval --mine-negatives`: its *_hard.yaml items (with each window's
# subject and, for a normalised pattern, baseline), the template paths made relative to --out.
for d in a.extra_neg:
    here = os.path.dirname(os.path.abspath(a.out))
    manifests = sorted(fn for fn in os.listdir(d) if fn.endswith('_hard.yaml'))
    if not manifests:
        sys.exit(f'{d}: no *_hard.yaml (written by gaitwatch eval --mine-negatives)')
    for fn in manifests:
        for line in open(os.path.join(d, fn)):
            if not line.startswith('- {template: '):
                continue
            name, rest = line[len('- {template: '):].split(',', 1)
            out.append(f'      - {{template: {os.path.relpath(os.path.join(d, name), here)},{rest}')
if a.view:
    allch = ['ankle_fwd', 'ankle_vert', 'ankle_lat', 'thigh_fwd', 'thigh_vert', 'thigh_lat', 'trunk_fwd', 'trunk_vert', 'trunk_lat']
    vs = []
    for spec in a.view:
        name, _, kv = spec.partition(':')
        v = dict(channels='all', transforms='[magnitude]', length=str(m), threshold='6', min_dims='1',
                 znorm='false', negatives='1', hysteresis='0')
        v.update(x.split('=', 1) for x in kv.split(';') if x)
        ch = v['channels']
        ch = allch if ch == 'all' else [c for c in allch if c.startswith(ch + '_')] or ch.split(',')
        vs.append((name, ch, v))
    out.append(f'    agree: {{with: [{", ".join(n for n, _, _ in vs)}], within_s: {a.within}}}\n')
    for name, ch, v in vs:
        vm = int(v['length'])
        out += [f'  - name: {name}\n    publish: false\n    kind: freezing_of_gait\n    device: daphnet_body\n',
                f'    channels: [{", ".join(ch)}]\n    transforms: {v["transforms"]}\n    length: {vm}\n    band: {a.band}\n',
                f'    znorm: {v["znorm"]}\n    threshold: {v["threshold"]}\n    min_dims: {v["min_dims"]}\n',
                f'    margin: 0\n    hysteresis: {v["hysteresis"]}\n    cooldown_s: 1\n    examples:\n']
        out += [f'      - {{file: {p[0]}, format: daphnet, start: {p[2] - vm}, end: {p[2]}}}\n' for p in pos]
        if v['negatives'] != '0':
            out.append('    negatives:\n')
            out += [f'      - {{file: {p[0]}, format: daphnet, start: {p[2] - vm}, end: {p[2]}}}\n' for p in neg]
open(a.out, 'w').write(''.join(out))
import sys; print(f'{len(pos)} positives, {len(neg)} negatives', file=sys.stderr)
