#!/usr/bin/env python3
"""How early can a freeze of gait be seen? A leave-one-subject-out bound from single features.

docs/detection.md §6 ("How early can a freeze be seen?") reports what this script prints.

The shipped freeze detector (DTW on the freeze index) alerts on subject S02 seconds after the
annotated onset. This script asks whether ANY simple causal signal of the bundled Daphnet
recordings could do much better at a comparable false-alarm level, with one threshold per
feature chosen on the other subject only (leave-one-subject-out), and, for comparison, in
hindsight (threshold chosen on the scored subject itself: not a detector).

Features (per sample, causal: each looks only at the past; none is defined before its window
has filled):
  fi_<s>_<w>        the project's freeze index (pipeline/transforms.cc: rectangular DFT of the
                    last w seconds of the magnitude, band powers 2|X_k|^2/W^2 summed over bins
                    0.5-3 Hz (locomotion) and 3-8 Hz (freeze), ln((Pf+3000)/(Pl+3000))) of
                    sensor s in ank/thi/tru, w in 1, 1.5, 2, 3 s
  fimax_<w>         the largest of the live sensors' freeze indices
  fimed_<w>         the second largest (what a 2-of-3 rule sees)
  fi300_ank_<w>     ankle freeze index with a power floor of 300 mg^2 (w in 1.5, 3)
  lpl_ank_<w>       ln(1 + locomotion-band power) of the ankle magnitude, w in 1, 1.5, 2, 3 s
  lpf_ank_<w>       ln(1 + freeze-band power) of the ankle magnitude
  sd_<s>_<w>        moving standard deviation of sensor s's magnitude, w in 0.5, 1 s
A sensor reading exactly 0 0 0 is dead (a live accelerometer always feels gravity): its features
are undefined where their window holds such a sample, and false-alarm hours leave those samples
out.
Rules: feature past a threshold (above or below) continuously for at least D seconds,
D in 0, 0.25, 0.5. An alarm is a rising edge of that condition; an alarm within 5 s of the
previous alarm is suppressed (refractory).

Scoring (per recording, summed per subject; episodes = runs of Daphnet label 2):
  - false alarms per hour: alarms on label-1 samples farther than 5 s from any freeze, per
    hour of such samples;
  - a freeze is detected by the first alarm in [onset - 1 s, end]; latency = that alarm's time
    minus the onset (>= -1 s; the 1 s before the onset is the tolerance gaitwatch eval uses);
  - alert precision: alarms in [onset - 1 s, end + 1 s] of some freeze / all alarms on
    labelled samples (label != 0).
  - "by 1.5 s": the share of all freezes with an alarm by onset + 1.5 s.
Threshold selection: on the training subject's recordings, the most permissive threshold (on a
grid of the feature's quantiles, refined by bisection) such that it and every stricter grid
threshold give <= R false alarms per hour, R in 10, 25, 50.

Usage:
  python3 scripts/packs/fog_latency_bound.py              # all tables
  python3 scripts/packs/fog_latency_bound.py --top 15 --rates 25
Plain Python 3 (no numpy needed); one core; about 1.5 minutes on the 2-core build machine.
"""
import argparse
import bisect
import cmath
import collections
import itertools
import math
import os
import statistics
import sys

RATE = 64
FLOOR = 3000.0
REFRACTORY_S = 5.0
FAR_S = 5.0
TOL_S = 1.0
FILES = {'S02': ['S02R01.txt', 'S02R02.txt'], 'S03': ['S03R02.txt', 'S03R03.txt']}
SENSORS = ('ank', 'thi', 'tru')
FI_WINDOWS = (1, 1.5, 2, 3)
SD_WINDOWS = (0.5, 1)
DURATIONS = (0, 0.25, 0.5)
NAN = float('nan')


def wname(w):
    return ('%g' % w)


def read_recording(path):
    mags = ([], [], [])
    labels = []
    with open(path) as f:
        for line in f:
            v = line.split()
            if len(v) < 11:
                continue
            for s in range(3):
                x, y, z = float(v[1 + 3 * s]), float(v[2 + 3 * s]), float(v[3 + 3 * s])
                mags[s].append(math.sqrt(x * x + y * y + z * z))
            labels.append(int(v[10]))
    return mags, labels


def band_bins(window, band):
    return [k for k in range(1, window // 2 + 1) if band[0] <= k * RATE / window < band[1]]


def band_powers(x, window):
    """Locomotion (0.5-3 Hz) and freeze (3-8 Hz) band power of the last `window` samples at
    every sample (NaN before the window has filled), as pipeline/transforms.cc computes them;
    sliding DFT through cumulative sums of x[m] e^{-2 pi i k m / W}."""
    n = len(x)
    scale = 2.0 / (window * window)
    out = []
    for band in ((0.5, 3.0), (3.0, 8.0)):
        p = [0.0] * n
        for k in band_bins(window, band):
            tw = [cmath.exp(-2j * math.pi * k * m / window) for m in range(window)]
            c = list(itertools.accumulate(
                (xv * tw[m % window] for m, xv in enumerate(x)), initial=0j))
            # sum over samples t-window+1..t = c[t+1] - c[t+1-window]
            for t in range(window - 1, n):
                d = c[t + 1] - c[t + 1 - window]
                p[t] += (d.real * d.real + d.imag * d.imag) * scale
        for t in range(min(window - 1, n)):
            p[t] = NAN
        out.append(p)
    return out


def direct_band_powers(x, t, window):
    """Reference: the direct DFT of transforms.cc at one sample (for --check)."""
    w = x[t - window + 1:t + 1]
    res = []
    for band in ((0.5, 3.0), (3.0, 8.0)):
        p = 0.0
        for k in band_bins(window, band):
            re = sum(w[m] * math.cos(2 * math.pi * k * m / window) for m in range(window))
            im = -sum(w[m] * math.sin(2 * math.pi * k * m / window) for m in range(window))
            p += (re * re + im * im) * 2.0 / (window * window)
        res.append(p)
    return res


def moving_sd(x, window):
    n = len(x)
    s1 = list(itertools.accumulate(x, initial=0.0))
    s2 = list(itertools.accumulate((v * v for v in x), initial=0.0))
    out = [NAN] * n
    for t in range(window - 1, n):
        a = s1[t + 1] - s1[t + 1 - window]
        b = s2[t + 1] - s2[t + 1 - window]
        var = (b - a * a / window) / window
        out[t] = math.sqrt(var) if var > 0 else 0.0
    return out


def mask_dead(values, dead_prefix, win):
    """NaN where a dead sample (magnitude exactly 0) lies in the last `win` samples."""
    return [NAN if t + 1 < win or dead_prefix[t + 1] - dead_prefix[t + 1 - win] else v
            for t, v in enumerate(values)]


def features(mags):
    f = {}
    dead = [list(itertools.accumulate((1 if v == 0 else 0 for v in m), initial=0)) for m in mags]
    for w in FI_WINDOWS:
        win = int(round(w * RATE))
        fis = []
        for s, name in enumerate(SENSORS):
            pl, pf = band_powers(mags[s], win)
            pl = mask_dead(pl, dead[s], win)
            pf = mask_dead(pf, dead[s], win)
            fi = [math.log((b + FLOOR) / (a + FLOOR)) if a == a else NAN for a, b in zip(pl, pf)]
            f['fi_%s_%s' % (name, wname(w))] = fi
            fis.append(fi)
            if name == 'ank':
                f['lpl_ank_%s' % wname(w)] = [math.log1p(a) if a == a else NAN for a in pl]
                f['lpf_ank_%s' % wname(w)] = [math.log1p(b) if b == b else NAN for b in pf]
                if w in (1.5, 3):
                    f['fi300_ank_%s' % wname(w)] = [
                        math.log((b + 300.0) / (a + 300.0)) if a == a else NAN
                        for a, b in zip(pl, pf)]
        # over the live sensors: the largest, and the second largest (2 of 3 must pass)
        ninf = -math.inf
        f['fimax_%s' % wname(w)] = [
            max(a if a == a else ninf, b if b == b else ninf, c if c == c else ninf)
            for a, b, c in zip(*fis)]
        f['fimed_%s' % wname(w)] = [
            sorted((a if a == a else ninf, b if b == b else ninf, c if c == c else ninf))[1]
            for a, b, c in zip(*fis)]
        for k in ('fimax_%s' % wname(w), 'fimed_%s' % wname(w)):
            f[k] = [NAN if v == ninf else v for v in f[k]]
    for w in SD_WINDOWS:
        for s, name in enumerate(SENSORS):
            win = int(round(w * RATE))
            f['sd_%s_%s' % (name, wname(w))] = mask_dead(moving_sd(mags[s], win), dead[s], win)
    return f


def sustained(g, dn, above):
    """The value that has been passed for the last dn+1 samples: running min (above) or max
    (below) over them; NaN until dn+1 valid samples are in."""
    if dn == 0:
        return g
    out = [NAN] * len(g)
    dq = collections.deque()
    valid = 0
    for t, v in enumerate(g):
        if v != v:
            dq.clear()
            valid = 0
            continue
        valid += 1
        if above:
            while dq and g[dq[-1]] >= v:
                dq.pop()
        else:
            while dq and g[dq[-1]] <= v:
                dq.pop()
        dq.append(t)
        if dq[0] <= t - dn - 1:
            dq.popleft()
        if valid > dn:
            out[t] = g[dq[0]]
    return out


class Recording:
    def __init__(self, name, path):
        self.name = name
        mags, self.labels = read_recording(path)
        self.n = len(self.labels)
        self.episodes = []  # [start, end) sample indices of label-2 runs
        t = 0
        while t < self.n:
            if self.labels[t] == 2:
                s = t
                while t < self.n and self.labels[t] == 2:
                    t += 1
                self.episodes.append((s, t))
            else:
                t += 1
        far = int(FAR_S * RATE)
        self.far = [l == 1 for l in self.labels]
        for s, e in self.episodes:
            for t in range(max(0, s - far), min(self.n, e + far + 1)):
                self.far[t] = False
        self.far_hours = sum(self.far) / RATE / 3600.0
        self.true_zone = [False] * self.n
        tol = int(TOL_S * RATE)
        for s, e in self.episodes:
            for t in range(max(0, s - tol), min(self.n, e + tol)):
                self.true_zone[t] = True
        self.feat = features(mags)
        self.mags = mags


def alarm_times(up, thr):
    """Rising edges (prepared pairs (t, previous, current) with current > previous) of
    value > thr, with the refractory."""
    refr = int(REFRACTORY_S * RATE)
    out = []
    last = -10 ** 9
    for t, a, b in up:
        if a <= thr < b and t - last >= refr:
            out.append(t)
            last = t
    return out


def prepare(g):
    """Pairs (t, g[t-1], g[t]) where g rises (NaN lead-in counts as -inf)."""
    up = []
    prev = -math.inf
    for t, v in enumerate(g):
        if v != v:
            prev = -math.inf
            continue
        if v > prev:
            up.append((t, prev, v))
        prev = v
    return up


def score(rec, alarms, g, thr, hours):
    """`g`: the rule's (sign-adjusted, sustained) value; 'slat' is the state latency: the first
    sample in [onset - 1 s, end) where g > thr, alarm or not (refractory and rising edge
    ignored)."""
    fa = sum(1 for t in alarms if rec.far[t])
    scored = [t for t in alarms if rec.labels[t] != 0]
    true = sum(1 for t in scored if rec.true_zone[t])
    tol = int(TOL_S * RATE)
    lat = []
    for s, e in rec.episodes:
        i = bisect.bisect_left(alarms, s - tol)
        lat.append((alarms[i] - s) / RATE if i < len(alarms) and alarms[i] < e else None)
    slat = []
    for s, e in rec.episodes:
        first = next((t for t in range(max(0, s - tol), e) if g[t] > thr), None)
        slat.append(None if first is None else (first - s) / RATE)
    return {'fa': fa, 'alarms': len(scored), 'true': true, 'lat': lat, 'slat': slat,
            'hours': hours}


def merge(scores):
    m = {'fa': 0, 'alarms': 0, 'true': 0, 'lat': [], 'slat': [], 'hours': 0.0}
    for s in scores:
        for k in ('fa', 'alarms', 'true', 'hours'):
            m[k] += s[k]
        m['lat'] += s['lat']
        m['slat'] += s['slat']
    return m


def summary(m):
    det = [x for x in m['lat'] if x is not None]
    sdet = [x for x in m['slat'] if x is not None]
    n = len(m['lat'])
    return {
        'srecall': len(sdet) / n if n else NAN,
        'smedian': statistics.median(sdet) if sdet else NAN,
        'sby15': sum(1 for x in sdet if x <= 1.5) / n if n else NAN,
        'events': n, 'detected': len(det),
        'recall': len(det) / n if n else NAN,
        'by15': sum(1 for x in det if x <= 1.5) / n if n else NAN,
        'median': statistics.median(det) if det else NAN,
        'precision': m['true'] / m['alarms'] if m['alarms'] else NAN,
        'fa_h': m['fa'] / m['hours'] if m['hours'] else NAN,
        'fa': m['fa'], 'alarms': m['alarms'],
    }


class Rule:
    """One feature, direction and minimum duration over a set of recordings (sign-flipped for
    'below', so every rule is 'value > thr')."""

    def __init__(self, recs, feat, above, d):
        self.recs = recs
        dn = int(round(d * RATE))
        self.g = {}
        self.up = {}
        self.hours = {}  # far-from-freeze label-1 hours where the rule is defined (live sensors)
        for r in recs:
            g = r.feat[feat] if above else [-v for v in r.feat[feat]]
            g = sustained(g, dn, True)
            self.g[r.name] = g
            self.up[r.name] = prepare(g)
            self.hours[r.name] = sum(1 for v, f in zip(g, r.far) if f and v == v) / RATE / 3600.0

    def run(self, recs, thr):
        return merge(score(r, alarm_times(self.up[r.name], thr), self.g[r.name], thr,
                           self.hours[r.name]) for r in recs)

    def fa_rate(self, recs, thr):
        fa = sum(1 for r in recs for t in alarm_times(self.up[r.name], thr) if r.far[t])
        return fa / sum(self.hours[r.name] for r in recs)

    def choose(self, recs, targets):
        """Most permissive threshold with <= target false alarms/h at it and every stricter
        grid point; per target."""
        vals = sorted(v for r in recs for v, l in zip(self.g[r.name], r.labels) if l != 0 and v == v)
        levels = [1 - 0.0002 * 1.25 ** i for i in range(36)]  # 0.9998 .. about 0.29
        grid = [vals[min(len(vals) - 1, int(q * len(vals)))] for q in levels]
        rates = {}  # grid index -> false alarms per hour, computed only as far as needed

        def rate_at(i):
            if i not in rates:
                rates[i] = self.fa_rate(recs, grid[i])
            return rates[i]

        out = {}
        for target in targets:
            i = 0
            while i < len(grid) and rate_at(i) <= target:
                i += 1
            if i == 0:
                out[target] = grid[0]  # even the strictest grid point is above target
                continue
            if i == len(grid):
                out[target] = grid[-1]
                continue
            ok, bad = grid[i - 1], grid[i]
            for _ in range(8):
                mid = 0.5 * (ok + bad)
                if self.fa_rate(recs, mid) <= target:
                    ok = mid
                else:
                    bad = mid
            out[target] = ok
        return out


def fmt(x, p=2):
    return '-' if x != x else ('%.*f' % (p, x))


def cell(s):
    return '%s / %s / %s s (%s/h)' % (fmt(s['recall']), fmt(s['precision']), fmt(s['median'], 1),
                                      fmt(s['fa_h'], 1))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog=__doc__.split('\n', 2)[2])
    ap.add_argument('--data', default=None, help='directory of the Daphnet files '
                    '(default: data/daphnet of this repository)')
    ap.add_argument('--rates', default='10,25,50', help='false alarms per hour to choose at')
    ap.add_argument('--top', type=int, default=12, help='rules listed per rate')
    ap.add_argument('--check', action='store_true',
                    help='compare the sliding band powers with a direct DFT at a few samples')
    a = ap.parse_args()
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    data = a.data or os.path.join(root, 'data', 'daphnet')
    targets = [float(x) for x in a.rates.split(',')]

    recs = {}
    for subj, files in FILES.items():
        recs[subj] = []
        for f in files:
            print('# features of %s' % f, file=sys.stderr)
            recs[subj].append(Recording(f[:6], os.path.join(data, f)))
    allrecs = recs['S02'] + recs['S03']
    for subj in FILES:
        print('%s: %d freezes, %.3f h of label 1 farther than %g s from a freeze' % (
            subj, sum(len(r.episodes) for r in recs[subj]),
            sum(r.far_hours for r in recs[subj]), FAR_S))

    if a.check:
        r = allrecs[0]
        for w in FI_WINDOWS:
            win = int(round(w * RATE))
            pl, pf = band_powers(r.mags[0], win)
            for t in (win + 5, r.n // 2, r.n - 1, r.episodes[0][0] + 70):
                dl, df = direct_band_powers(r.mags[0], t, win)
                print('check w=%g t=%d loco %.6g vs %.6g, freeze %.6g vs %.6g' % (
                    w, t, pl[t], dl, pf[t], df))

    feats = sorted(allrecs[0].feat)
    other = {'S02': 'S03', 'S03': 'S02'}
    results = []  # per rule: dict
    for feat in feats:
        for above in (True, False):
            for d in DURATIONS:
                rule = Rule(allrecs, feat, above, d)
                own = {s: rule.choose(recs[s], targets) for s in FILES}  # hindsight
                thr = {s: own[other[s]] for s in FILES}  # chosen on the other subject
                res = {'feat': feat, 'dir': 'above' if above else 'below', 'd': d, 'by': {}}
                for t in targets:
                    per = {s: rule.run(recs[s], thr[s][t]) for s in FILES}
                    hind = {s: rule.run(recs[s], own[s][t]) for s in FILES}
                    res['by'][t] = {
                        'thr': {s: (thr[s][t] if above else -thr[s][t]) for s in FILES},
                        'own_thr': {s: (own[s][t] if above else -own[s][t]) for s in FILES},
                        'subj': {s: summary(per[s]) for s in FILES},
                        'pooled': summary(merge(per.values())),
                        'hind': {s: summary(hind[s]) for s in FILES},
                        'hind_pooled': summary(merge(hind.values())),
                        'hind_lat': {s: hind[s]['lat'] for s in FILES},
                        'loso_lat': {s: per[s]['lat'] for s in FILES},
                        'raw': per,
                    }
                results.append(res)
                print('# %s %s D=%g done' % (feat, res['dir'], d), file=sys.stderr)

    def rank(s):
        # share alerted by onset + 1.5 s, then shorter median latency, then precision
        return (s['by15'], -s['median'] if s['median'] == s['median'] else -99,
                s['precision'] if s['precision'] == s['precision'] else 0)

    def key(res, t, which='pooled'):
        return rank(res['by'][t][which])

    def name(res):
        return '%s %s, D %g s' % (res['feat'], res['dir'], res['d'])

    def lats(xs):
        det = sorted(x for x in xs if x is not None)
        q = ('quartiles %s / %s / %s s' % tuple(fmt(det[min(len(det) - 1, int(p * len(det)))], 1)
                                             for p in (0.25, 0.5, 0.75))) if det else 'none'
        return '%s (%d of %d detected; %s)' % (
            ' '.join('miss' if x is None else '%.1f' % x for x in xs), len(det), len(xs), q)

    head = ('| rule | thr for S02 / S03 | S02 recall / precision / latency (FA/h) | '
            'S03 recall / precision / latency (FA/h) | pooled recall | pooled precision | '
            'pooled median latency | pooled by 1.5 s | pooled FA/h |\n'
            '|---|---|---|---|---|---|---|---|---|')

    def row(r, t, thr='thr', subj='subj', pooled='pooled'):
        b = r['by'][t]
        p = b[pooled]
        return '| %s | %s / %s | %s | %s | %s | %s | %s s | %s | %s |' % (
            name(r), fmt(b[thr]['S02']), fmt(b[thr]['S03']), cell(b[subj]['S02']),
            cell(b[subj]['S03']), fmt(p['recall']), fmt(p['precision']),
            fmt(p['median'], 1), fmt(p['by15']), fmt(p['fa_h'], 1))

    refs = [r for r in results if r['feat'] in ('fimed_3', 'fi_ank_3') and r['dir'] == 'above'
            and r['d'] == 0.5]
    for t in targets:
        ranked = sorted(results, key=lambda r: key(r, t), reverse=True)
        print('\n## Thresholds chosen on the other subject at <= %g false alarms/h: top %d rules '
              'by the pooled share of freezes alerted by onset + 1.5 s' % (t, a.top))
        print(head)
        for r in ranked[:a.top] + refs:
            print(row(r, t))
        print('\n## ... the same, only rules whose pooled false alarms stay <= %g/h (1.25 x %g)'
              % (1.25 * t, t))
        print(head)
        for r in [r for r in ranked if r['by'][t]['pooled']['fa_h'] <= 1.25 * t][:a.top]:
            print(row(r, t))

    t0 = 25.0 if 25.0 in targets else targets[0]
    print('\n## Rule AND threshold chosen on the other subject (rule ranked by the training '
          'subject\'s own by-1.5-s share at its own <= %g/h threshold)' % t0)
    print('| scored | rule chosen on the other subject | recall / precision / latency (FA/h) | by 1.5 s |')
    print('|---|---|---|---|')
    picks = {}
    for s in FILES:
        best = max(results, key=lambda r: rank(r['by'][t0]['hind'][other[s]]))
        picks[s] = best
        su = best['by'][t0]['subj'][s]
        print('| %s | %s | %s | %s |' % (s, name(best), cell(su), fmt(su['by15'])))
    pp = summary(merge(picks[s]['by'][t0]['raw'][s] for s in FILES))
    print('| pooled | | %s | %s |' % (cell(pp), fmt(pp['by15'])))

    for t in targets:
        print('\n## HINDSIGHT (NOT a detector): threshold chosen on the scored subject itself at '
              '<= %g/h; top %d rules by pooled by-1.5-s share; "state" = the feature past the '
              'threshold at some time in [onset - 1 s, end], alarm or not' % (t, a.top))
        print('| rule | thr S02 / S03 | S02 | S03 | pooled recall | pooled precision | '
              'pooled median latency | pooled by 1.5 s | pooled FA/h | state recall / median / by 1.5 s |')
        print('|---|---|---|---|---|---|---|---|---|---|')
        hr = sorted(results, key=lambda r: key(r, t, 'hind_pooled'), reverse=True)
        for r in hr[:a.top]:
            p = r['by'][t]['hind_pooled']
            print(row(r, t, 'own_thr', 'hind', 'hind_pooled') + ' %s / %s s / %s |' % (
                fmt(p['srecall']), fmt(p['smedian'], 1), fmt(p['sby15'])))
        if t != t0:
            continue
        for r in hr[:3]:
            for s in FILES:
                print('hindsight per-freeze latency, %s, %s: %s' % (
                    name(r), s, lats(r['by'][t0]['hind_lat'][s])))
        for s in FILES:
            print('\n## HINDSIGHT, %s alone at <= %g/h of its own: top 5 rules by its by-1.5-s share'
                  % (s, t0))
            for r in sorted(results, key=lambda r: rank(r['by'][t0]['hind'][s]), reverse=True)[:5]:
                h = r['by'][t0]['hind'][s]
                print('%s: thr %s, %s, by 1.5 s %s; state recall %s, by 1.5 s %s; %s' % (
                    name(r), fmt(r['by'][t0]['own_thr'][s]), cell(h), fmt(h['by15']),
                    fmt(h['srecall']), fmt(h['sby15']), lats(r['by'][t0]['hind_lat'][s])))
    for r in sorted(results, key=lambda r: key(r, t0), reverse=True)[:3]:
        for s in FILES:
            print('leave-one-subject-out per-freeze latency at %g/h, %s, %s: %s' % (
                t0, name(r), s, lats(r['by'][t0]['loso_lat'][s])))

    # Why S02 is late: features around S02's onsets against S02's ordinary activity.
    offsets = (-1, 0, 0.5, 1, 1.5, 2, 3)
    for subj in FILES:
        print('\n## %s: median over its %d freezes of each feature at onset + offset, against '
              'its ordinary activity (label 1, > %g s from a freeze): median / p90 / p95; '
              '"n>p95" = freezes above the p95 at that offset' % (
                  subj, sum(len(r.episodes) for r in recs[subj]), FAR_S))
        print('| feature | ordinary median / p90 / p95 | %s |' % ' | '.join(
            '%+g s' % o for o in offsets))
        print('|---|---|%s' % ('---|' * len(offsets)))
        for feat in feats:
            base = sorted(v for r in recs[subj] for v, f in zip(r.feat[feat], r.far) if f and v == v)
            q = lambda p: base[min(len(base) - 1, int(p * len(base)))]
            p95 = q(0.95)
            row = []
            for o in offsets:
                vals = [r.feat[feat][s + int(round(o * RATE))] for r in recs[subj]
                        for s, e in r.episodes]
                above = sum(1 for v in vals if v > p95)
                row.append('%s (%d)' % (fmt(statistics.median(vals)), above))
            print('| %s | %s / %s / %s | %s |' % (feat, fmt(q(0.5)), fmt(q(0.9)), fmt(p95),
                                                  ' | '.join(row)))


if __name__ == '__main__':
    main()
