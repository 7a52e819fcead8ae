#!/usr/bin/env python3
"""Freezes of gait from many causal features at once: a leave-one-subject-out logistic detector.

docs/detection.md §8 ("Many causal features at once, measured: not shipped") reports what this
script prints.

The latency bound (fog_latency_bound.py) scored one feature past one threshold. This script asks
whether a weighted combination of all of them carries across people better than any one: a
logistic regression over the bound's 36 causal features (freeze indices of the three magnitudes
over 1-3 s, the ankle's band powers, moving standard deviations), each also read 1.5 s and 3 s
earlier (what the wearer did just before), 108 inputs.

Per-wearer normalisation, as the shipped freeze pack's `normalise` (docs/detection.md §8): every
feature of a recording is taken relative to its median and standard deviation over the first 30 s
of that recording in which the 3-s freeze index of some sensor is above 0.05 in absolute value
(the wearer moving, as pipeline/baseline.cc counts it);
nothing before that is scored, trained on or alarmed. A dead sensor's features (undefined) read 0,
the wearer's own median.

Fit and choice, leave-one-subject-out: the weights are fitted on the other subject's samples only
(label 2 against label 1 farther than 5 s from a freeze, one sample in 8, classes weighted equally,
L2 penalty LAMBDA on standardised inputs), and so is the threshold: the most permissive one at
which the training subject has at most R false alarms per hour. The scored subject contributes
nothing. Alarms and scoring as in fog_latency_bound.py (rising edge of the score sustained D s,
5-s refractory; a freeze detected by the first alarm in [onset - 1 s, end]; alert precision =
alarms within 1 s of a freeze / all alarms on labelled samples).

A "hindsight" block fits and chooses on both subjects and scores both: memory, not detection,
reported only as an upper bound of what this feature set can separate at all.

Usage:
  /usr/bin/python3 scripts/packs/fog_multifeature.py [--rates 10,25] [--lambdas 0.001,0.01,0.1,1]
                                                     [--durations 0,0.25,0.5]
Needs numpy (Debian: python3-numpy). One core; about a minute on the 2-core build machine.
"""
import argparse
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fog_latency_bound as lb  # noqa: E402

LEARN_S = 30.0
ACTIVE_ABOVE = 0.05
LAGS_S = (0.0, 1.5, 3.0)
STRIDE = 8
SCORE = 'logistic_score'  # the feature name the model's score is stored under


def feature_matrix(rec, names):
    """Per-sample inputs relative to the wearer's baseline, and the first sample scored."""
    raw = np.array([rec.feat[n] for n in names], dtype=float).T  # n x f
    # As pipeline/baseline.cc: a sample counts when some channel's |value| passes the level.
    active = np.array([max((abs(v) for v in (rec.feat['fi_%s_3' % s][t] for s in lb.SENSORS)
                            if v == v), default=-np.inf) > ACTIVE_ABOVE
                       for t in range(rec.n)])
    idx = np.flatnonzero(active)[:int(LEARN_S * lb.RATE)]
    start = int(idx[-1]) + 1 if len(idx) == int(LEARN_S * lb.RATE) else rec.n
    base = raw[idx]
    med = np.nanmedian(base, axis=0)
    sd = np.nanstd(base, axis=0)
    sd[~(sd > 1e-9)] = 1.0
    med[np.isnan(med)] = 0.0
    z = (raw - med) / sd
    z[np.isnan(z)] = 0.0
    cols = []
    for lag in LAGS_S:
        k = int(round(lag * lb.RATE))
        shifted = np.zeros_like(z)
        shifted[k:] = z[:rec.n - k] if k else z
        cols.append(shifted)
    return np.hstack(cols), start


def fit_logistic(x, y, lam, iters=300):
    """L2-penalised logistic regression, classes weighted equally, Newton steps."""
    mu = x.mean(axis=0)
    sig = x.std(axis=0)
    sig[sig < 1e-9] = 1.0
    xs = np.hstack([(x - mu) / sig, np.ones((len(x), 1))])
    wts = np.where(y == 1, 0.5 / max(1, y.sum()), 0.5 / max(1, (1 - y).sum()))
    beta = np.zeros(xs.shape[1])
    pen = np.full(xs.shape[1], lam)
    pen[-1] = 0.0
    for _ in range(iters):
        p = 1.0 / (1.0 + np.exp(-np.clip(xs @ beta, -30, 30)))
        grad = xs.T @ (wts * (p - y)) + pen * beta
        hess = (xs * (wts * p * (1 - p))[:, None]).T @ xs + np.diag(pen + 1e-12)
        step = np.linalg.solve(hess, grad)
        beta -= step
        if np.max(np.abs(step)) < 1e-7:
            break
    return mu, sig, beta


def scores(model, x):
    mu, sig, beta = model
    return ((x - mu) / sig) @ beta[:-1] + beta[-1]


def score_rule(recs, model, mats, d):
    """The model's score on each recording as a rule of fog_latency_bound (value > thr): the
    score is the recording's feature SCORE, undefined before the baseline is learned."""
    for r in recs:
        x, start = mats[r.name]
        r.feat[SCORE] = [float(v) if t >= start else lb.NAN for t, v in enumerate(scores(model, x))]
    return lb.Rule(recs, SCORE, True, d)


def training_set(recs, mats):
    xs, ys = [], []
    for r in recs:
        x, start = mats[r.name]
        lab = np.array(r.labels)
        far = np.array(r.far)
        keep = np.zeros(r.n, dtype=bool)
        keep[start::STRIDE] = True
        pos = keep & (lab == 2)
        neg = keep & far
        xs.append(x[pos | neg])
        ys.append(pos[pos | neg].astype(float))
    return np.vstack(xs), np.concatenate(ys)


def cell(s):
    return '%s / %s / %s s' % (lb.fmt(s['recall']), lb.fmt(s['precision']), lb.fmt(s['median'], 1))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('--data', default=None)
    ap.add_argument('--rates', default='10,25')
    ap.add_argument('--lambdas', default='0.001,0.01,0.1,1')
    ap.add_argument('--durations', default='0,0.25,0.5')
    a = ap.parse_args()
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    data = a.data or os.path.join(root, 'data', 'daphnet')
    recs = {}
    for subj, files in lb.FILES.items():
        recs[subj] = []
        for f in files:
            print('# features of %s' % f, file=sys.stderr)
            recs[subj].append(lb.Recording(f[:6], os.path.join(data, f)))
    names = sorted(recs['S02'][0].feat)
    mats = {r.name: feature_matrix(r, names) for rs in recs.values() for r in rs}
    for subj, rs in recs.items():
        for r in rs:
            start = mats[r.name][1]
            lost = sum(1 for s, e in r.episodes if s < start)
            print('# %s: scored from %.1f s (%d of %d freezes before that)' % (
                r.name, start / lb.RATE, lost, len(r.episodes)), file=sys.stderr)
    rates = [float(x) for x in a.rates.split(',')]
    print('| lambda | D | rate | S02 (fitted on S03) recall / precision / latency (FA/h) '
          '| S03 (fitted on S02) | pooled recall | pooled precision | pooled median latency '
          '| by 1.5 s | FA/h |')
    print('|---|---|---|---|---|---|---|---|---|---|')
    hind = []
    for lam in (float(x) for x in a.lambdas.split(',')):
        models = {}
        for scored, train in (('S02', 'S03'), ('S03', 'S02')):
            models[scored] = fit_logistic(*training_set(recs[train], mats), lam)
        models['both'] = fit_logistic(*training_set(recs['S02'] + recs['S03'], mats), lam)
        for d in (float(x) for x in a.durations.split(',')):
            # Each rule is made before the next overwrites the recordings' SCORE feature.
            rules = {}
            for scored, train in (('S02', 'S03'), ('S03', 'S02')):
                rules[scored] = (score_rule(recs[train], models[scored], mats, d),
                                 score_rule(recs[scored], models[scored], mats, d))
            both_recs = recs['S02'] + recs['S03']
            both = score_rule(both_recs, models['both'], mats, d)
            for rate in rates:
                per = {}
                for scored, train in (('S02', 'S03'), ('S03', 'S02')):
                    train_rule, test_rule = rules[scored]
                    thr = train_rule.choose(recs[train], [rate])[rate]
                    per[scored] = test_rule.run(recs[scored], thr)
                pooled = lb.summary(lb.merge(per.values()))
                s02, s03 = lb.summary(per['S02']), lb.summary(per['S03'])
                print('| %g | %g | %g | %s (%s) | %s (%s) | %s | %s | %s s | %s | %s |' % (
                    lam, d, rate, cell(s02), lb.fmt(s02['fa_h'], 1), cell(s03),
                    lb.fmt(s03['fa_h'], 1), lb.fmt(pooled['recall']),
                    lb.fmt(pooled['precision']), lb.fmt(pooled['median'], 1),
                    lb.fmt(pooled['by15']), lb.fmt(pooled['fa_h'], 1)))
                sys.stdout.flush()
                thr = both.choose(both_recs, [rate])[rate]
                hind.append((lam, d, rate, lb.summary(both.run(both_recs, thr))))
    print('\nHindsight (fitted and chosen on both subjects, scored on both: memory, not detection)')
    print('| lambda | D | rate | recall / precision / latency | by 1.5 s | FA/h |')
    print('|---|---|---|---|---|---|')
    for lam, d, rate, h in hind:
        print('| %g | %g | %g | %s | %s | %s |' % (lam, d, rate, cell(h), lb.fmt(h['by15']),
                                                   lb.fmt(h['fa_h'], 1)))


if __name__ == '__main__':
    main()
