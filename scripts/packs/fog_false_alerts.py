#!/usr/bin/env python3
"""Can a second signal tell the freeze pattern's false alerts from its true ones?

docs/detection.md §8 ("What the remaining false alerts look like") reports what this prints.

Input: the alerts of the shipped freeze pattern, leave-one-subject-out, as `gaitwatch detect
--json` prints them (one JSON alert per line; `scripts/packs/fog-false-alerts.sh` makes them:
S02's recordings searched with a library of S03's examples only, S03's with S02's only).
Each alert is labelled as `gaitwatch eval` does: true when its window [first, last] overlaps a
freeze widened by the tolerance (1 s) on both sides; alerts whose last sample is unannotated
(Daphnet label 0) are not scored.

For each alert, every causal feature of `fog_latency_bound.py` (freeze indices of the three
magnitudes over 1-3 s, the ankle's band powers, moving standard deviations) is read at the
alert's last sample and 3 s and 6 s before it (what the wearer did just before), plus the
alert's own DTW distance and matched dims. A gate is one feature past one threshold: alerts
outside it are dropped. For each gate:
  - hindsight: the threshold, on the alerts of both subjects together, with the best alert
    precision among those that keep freeze recall >= 0.85 (a freeze stays detected while one
    of its true alerts passes). Not a detector: the threshold sees the scored labels.
  - across people: the threshold chosen on the other subject's true alerts alone, the
    strictest that keeps every one of them (no false alert needed to choose it), applied to
    the scored subject.
  - AUC: how well the feature orders S02's false alerts against all true alerts (0.5 = not at
    all; shown as max(AUC, 1 - AUC)); S03 has only two false alerts to order.
Plain Python 3, one core.

Usage:
  bash scripts/packs/fog-false-alerts.sh      # makes the alerts, then runs this
  python3 scripts/packs/fog_false_alerts.py --alerts DIR [--top N]
"""
import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fog_latency_bound as bound  # noqa: E402  (the features and the recordings' reader)

RECALL_FLOOR = 0.85
OFFSETS_S = (0, 3, 6)


class Alert:
    def __init__(self, subject, rec, j):
        self.subject = subject
        self.rec = rec
        # as pipeline/evaluation.cc scored_alert(): the window's first sample from its span
        self.last = int(j['end_index'])
        self.first = self.last - int(round((j['t_end'] - j['t_start']) * bound.RATE))
        tol = int(round(bound.TOL_S * bound.RATE))
        self.events = [k for k, (s, e) in enumerate(rec.episodes)
                       if self.first <= e - 1 + tol and self.last >= s - tol]
        self.true = bool(self.events)
        self.values = {'distance': j['distance'], 'matched_dims': j['matched_dims']}
        for name, series in rec.feat.items():
            for off in OFFSETS_S:
                t = self.last - int(off * bound.RATE)
                self.values['%s@-%gs' % (name, off)] = series[t] if t >= 0 else bound.NAN


def read_alerts(directory, recs):
    alerts = []
    for subject, files in bound.FILES.items():
        for f, rec in zip(files, recs[subject]):
            path = os.path.join(directory, f.replace('.txt', '.jsonl'))
            with open(path) as fh:
                for line in fh:
                    if not line.strip():
                        continue
                    a = Alert(subject, rec, json.loads(line))
                    if rec.labels[a.last] != 0:
                        alerts.append(a)
    return alerts


def outcome(alerts, keep):
    kept = [a for a in alerts if keep(a)]
    true = sum(1 for a in kept if a.true)
    detected = {(id(a.rec), k) for a in kept for k in a.events}
    return {'alerts': len(kept), 'true': true, 'false': len(kept) - true,
            'detected': len(detected), 'precision': true / len(kept) if kept else float('nan')}


def passes(v, thr, above):
    return v == v and (v >= thr if above else v <= thr)


def auc(false_values, true_values):
    """P(a false alert's value > a true alert's value), ties half."""
    if not false_values or not true_values:
        return float('nan')
    wins = sum((f > t) + 0.5 * (f == t) for f in false_values for t in true_values)
    return wins / (len(false_values) * len(true_values))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('--alerts', required=True, help='directory of <recording>.jsonl alert files')
    ap.add_argument('--data', default=None, help='Daphnet directory (default data/daphnet)')
    ap.add_argument('--top', type=int, default=15)
    a = ap.parse_args()
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    data = a.data or os.path.join(root, 'data', 'daphnet')
    recs = {s: [bound.Recording(f, os.path.join(data, f)) for f in files]
            for s, files in bound.FILES.items()}
    events = {s: sum(len(r.episodes) for r in rs) for s, rs in recs.items()}
    alerts = read_alerts(a.alerts, recs)
    by_subject = {s: [x for x in alerts if x.subject == s] for s in recs}

    def fmt_outcome(o, n_events):
        return '%d/%d freezes, %d true, %d false, precision %.3f' % (
            o['detected'], n_events, o['true'], o['false'], o['precision'])

    print('alerts scored (no gate):')
    for s in recs:
        print('  %s: %s' % (s, fmt_outcome(outcome(by_subject[s], lambda x: True), events[s])))
    base = outcome(alerts, lambda x: True)
    print('  pooled: %s' % fmt_outcome(base, sum(events.values())))

    names = sorted(alerts[0].values)
    total_events = sum(events.values())
    rows = []
    for name in names:
        for above in (True, False):
            values = sorted({x.values[name] for x in alerts if x.values[name] == x.values[name]})
            best = None
            for thr in values:
                o = outcome(alerts, lambda x: passes(x.values[name], thr, above))
                if o['detected'] < RECALL_FLOOR * total_events or not o['alerts']:
                    continue
                if best is None or (o['precision'], o['detected']) > (best[1]['precision'],
                                                                       best[1]['detected']):
                    best = (thr, o)
            if best is None:
                continue
            # across people: the strictest threshold keeping all of the other subject's true alerts
            honest = {}
            for s in recs:
                other = [x.values[name] for o_s in recs if o_s != s for x in by_subject[o_s]
                         if x.true and x.values[name] == x.values[name]]
                if not other:
                    continue
                thr = min(other) if above else max(other)
                honest[s] = (thr, outcome(by_subject[s],
                                          lambda x: passes(x.values[name], thr, above)))
            false_values = [x.values[name] for x in by_subject['S02'] if not x.true]
            true_values = [x.values[name] for x in alerts if x.true]
            ar = auc([v for v in false_values if v == v], [v for v in true_values if v == v])
            rows.append((name, above, best, honest, max(ar, 1 - ar) if ar == ar else ar))
    rows.sort(key=lambda r: (-r[2][1]['precision'], -r[2][1]['detected']))
    print('\nhindsight gates (threshold on both subjects\' labels), best %d of %d:' % (
        a.top, len(rows)))
    print('| gate | hindsight: freezes / true / false / precision | S02 across people | '
          'S03 across people | AUC, S02 false vs all true |')
    print('|---|---|---|---|---|')
    for name, above, (thr, o), honest, ar in rows[:a.top]:
        cells = []
        for s in recs:
            if s in honest:
                t, h = honest[s]
                cells.append('%s %.3g: %d/%d, %d true, %d false' % (
                    '>=' if above else '<=', t, h['detected'], events[s], h['true'], h['false']))
            else:
                cells.append('-')
        print('| %s %s %.3g | %d/%d / %d / %d / %.3f | %s | %s | %.2f |' % (
            name, '>=' if above else '<=', thr, o['detected'], total_events, o['true'],
            o['false'], o['precision'], cells[0], cells[1], ar))
    reach = [r for r in rows if r[2][1]['precision'] >= 0.85]
    print('\ngates reaching precision 0.85 at recall >= %.2f in hindsight: %d of %d' % (
        RECALL_FLOOR, len(reach), len(rows)))
    aucs = sorted((r[4] for r in rows if r[4] == r[4]), reverse=True)
    if aucs:
        print('AUC (S02 false vs all true), over all gates: max %.2f, median %.2f' % (
            aucs[0], aucs[len(aucs) // 2]))


if __name__ == '__main__':
    main()
