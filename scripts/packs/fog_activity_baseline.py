#!/usr/bin/env python3
"""Does a per-wearer baseline learned over walking make the freeze index carry across people?

docs/detection.md §8 ("A baseline learned while the wearer moves") reports what this prints.

The engine's per-wearer normalisation (`normalise:`) learns a channel's median over a stream's
first minutes, which on the bundled Daphnet recordings are quiet standing: the freeze index is
about 0 there and the learned centre changes nothing. This script measures the alternative that
section names: a centre learned only from samples where the wearer moves, so that each person's
freeze index is read relative to their own walking.

For each recording (one stream, one wearer placement) and each freeze-index feature of
fog_latency_bound.py, the normalised feature is x - c, with c the median of the first L seconds
of *gated* samples of x, frozen once learned; before that the feature is undefined (the wearer
is not searched yet), as in the engine. Gates:
  all      every sample (what `normalise:` does today)
  walking  the ankle magnitude's locomotion-band (0.5-3 Hz) power over 3 s above 10 x the
           power floor (the wearer walks)
  active   |x| > 0.05 (not standing still, where both band powers are under the floor)
Rules, scoring and threshold choice are fog_latency_bound.py's: one feature above a threshold
for at least D s; the threshold for each subject chosen on the other subject at <= R false
alarms per hour. "chosen" rows pick, for each scored subject, the rule (feature, gate, L, D)
with the best F1 (recall and precision) on the other subject at that subject's own threshold.

Usage:
  python3 scripts/packs/fog_activity_baseline.py                 # the table
  python3 scripts/packs/fog_activity_baseline.py --learn 60,120 --rates 25,50
Plain Python 3; one core; about a minute on the 2-core build machine.
"""
import argparse
import math
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fog_latency_bound as B  # noqa: E402

NAN = float('nan')
WALKING_POWER = math.log1p(10 * B.FLOOR)
GATES = ('all', 'walking', 'active')
BASE_FEATURES = ['fi_ank_%s', 'fi_thi_%s', 'fi_tru_%s']
WINDOWS = ('1.5', '3')
DURATIONS = (0.25, 0.5)


def gated(rec, gate, t, v):
    if gate == 'all':
        return True
    if gate == 'active':
        return abs(v) > 0.05
    p = rec.feat['lpl_ank_3'][t]
    return p == p and p > WALKING_POWER


def normalised(rec, values, gate, learn_s):
    """x - c, c the median of the first learn_s seconds of gated samples; NaN before; also
    the time (s) at which c was learned (None if never)."""
    need = int(learn_s * B.RATE)
    buf = []
    out = [NAN] * len(values)
    centre = None
    learned_at = None
    for t, v in enumerate(values):
        if v != v:
            continue
        if centre is None:
            if gated(rec, gate, t, v):
                buf.append(v)
                if len(buf) >= need:
                    centre = statistics.median(buf)
                    learned_at = t / B.RATE
            continue
        out[t] = v - centre
    return out, learned_at


def add_features(rec, variants):
    """Adds '<gate><L>:<feature>' for every per-sensor index and their max / second largest.
    Returns {variant: [(sensor feature, learned_at)]}."""
    learned = {}
    for gate, learn_s in variants:
        tag = '%s%g' % (gate, learn_s)
        for w in WINDOWS:
            per_sensor = []
            for f in BASE_FEATURES:
                name = f % w
                vals, at = normalised(rec, rec.feat[name], gate, learn_s)
                rec.feat['%s:%s' % (tag, name)] = vals
                per_sensor.append(vals)
                learned.setdefault(tag, []).append((name, at))
            ninf = -math.inf
            ordered = [sorted(x if x == x else ninf for x in xs) for xs in zip(*per_sensor)]
            rec.feat['%s:fimax_%s' % (tag, w)] = [NAN if o[2] == ninf else o[2] for o in ordered]
            rec.feat['%s:fimed_%s' % (tag, w)] = [NAN if o[1] == ninf else o[1] for o in ordered]
    return learned


def f1(s):
    r, p = s['recall'], s['precision']
    if r != r or p != p or r + p == 0:
        return 0.0
    return 2 * r * p / (r + p)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog=__doc__.split('\n', 2)[2])
    ap.add_argument('--data', default=None, help='directory of the Daphnet files')
    ap.add_argument('--learn', default='30,60,120', help='learning seconds of gated samples')
    ap.add_argument('--rates', default='25,50', help='false alarms per hour to choose at')
    a = ap.parse_args()
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    data = a.data or os.path.join(root, 'data', 'daphnet')
    targets = [float(x) for x in a.rates.split(',')]
    variants = [(g, float(l)) for g in GATES for l in a.learn.split(',')]

    recs = {s: [] for s in B.FILES}
    print('## When each recording\'s centre is learned (s from its start; first freeze onset; '
          'freezes before it are not searched)')
    for subj, files in B.FILES.items():
        for f in files:
            r = B.Recording(f[:6], os.path.join(data, f))
            learned = add_features(r, variants)
            recs[subj].append(r)
            onsets = [s / B.RATE for s, e in r.episodes]
            for tag, items in learned.items():
                ats = [at for name, at in items if name.startswith('fi_ank_3')]
                before = sum(1 for o in onsets if ats[0] is None or o < ats[0])
                print('%s %s: ankle 3-s centre learned at %s s; %d of %d freezes before it' % (
                    r.name, tag, 'never' if ats[0] is None else '%.0f' % ats[0], before,
                    len(onsets)))
    allrecs = recs['S02'] + recs['S03']
    other = {'S02': 'S03', 'S03': 'S02'}

    names = [('raw', f % w) for w in WINDOWS for f in BASE_FEATURES + ['fimax_%s', 'fimed_%s']]
    names += [('%s%g' % v, '%s%g:%s' % (v[0], v[1], f % w)) for v in variants for w in WINDOWS
              for f in BASE_FEATURES + ['fimax_%s', 'fimed_%s']]
    rows = []
    for tag, feat in names:
        if any(not any(v == v for r in recs[s] for v in r.feat[feat]) for s in B.FILES):
            print('# %s: undefined on a whole subject (a dead sensor or a centre never learned);'
                  ' left out' % feat, file=sys.stderr)
            continue
        for d in DURATIONS:
            rule = B.Rule(allrecs, feat, True, d)
            own = {s: rule.choose(recs[s], targets) for s in B.FILES}
            res = {'feat': feat, 'd': d, 'by': {}}
            for t in targets:
                per = {s: rule.run(recs[s], own[other[s]][t]) for s in B.FILES}
                hind = {s: B.summary(rule.run(recs[s], own[s][t])) for s in B.FILES}
                res['by'][t] = {'per': per, 'subj': {s: B.summary(per[s]) for s in B.FILES},
                                'pooled': B.summary(B.merge(per.values())), 'hind': hind}
            rows.append(res)
        print('# %s done' % feat, file=sys.stderr)

    for t in targets:
        print('\n## Thresholds chosen on the other subject at <= %g false alarms/h' % t)
        print('| feature (gate, learn s) | D s | S02 recall / precision / latency (FA/h) | '
              'S03 recall / precision / latency (FA/h) | pooled recall | pooled precision | '
              'pooled FA/h |')
        print('|---|---|---|---|---|---|---|')
        ranked = sorted(rows, key=lambda r: f1(r['by'][t]['pooled']), reverse=True)
        for r in ranked:
            b = r['by'][t]
            p = b['pooled']
            print('| %s | %g | %s | %s | %s | %s | %s |' % (
                r['feat'], r['d'], B.cell(b['subj']['S02']), B.cell(b['subj']['S03']),
                B.fmt(p['recall']), B.fmt(p['precision']), B.fmt(p['fa_h'], 1)))
        picks = {}
        for s in B.FILES:
            picks[s] = max(rows, key=lambda r: f1(r['by'][t]['hind'][other[s]]))
        pooled = B.summary(B.merge(picks[s]['by'][t]['per'][s] for s in B.FILES))
        print('\nchosen at %g/h (rule with the best F1 on the other subject): %s' % (t, '; '.join(
            '%s gets %s D %g: %s' % (s, picks[s]['feat'], picks[s]['d'],
                                     B.cell(picks[s]['by'][t]['subj'][s])) for s in B.FILES)))
        print('chosen at %g/h, pooled: recall %s, precision %s, %s false alarms/h' % (
            t, B.fmt(pooled['recall']), B.fmt(pooled['precision']), B.fmt(pooled['fa_h'], 1)))


if __name__ == '__main__':
    main()
