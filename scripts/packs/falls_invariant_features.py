#!/usr/bin/env python3
"""Fall features that do not depend on how the sensor is worn, per SisFall trial.

docs/detection.md §7 ("Falls on other bodies, simulated") reports what this prints.

A rotation of the sensor (another wearer's belt) rotates every acceleration vector of a trial
alike, so three features of the trial's largest acceleration are unchanged by it:
  peak       the largest acceleration magnitude (g), at the device's 100 Hz (SisFall's 200 Hz
             averaged in pairs, as a stand-in for the device mapping's resampling);
  tilt       the angle between the mean acceleration vector 1.5-0.5 s before the peak (gravity
             in the posture before) and 1-3 s after it (the posture after), in degrees;
  still      the standard deviation of the magnitude 1-3 s after the peak (g).
A trial that ends less than 3 s after its peak has no posture after it: its tilt and still are
not defined (a stream would go on; the rule does not fire on it, marked "cut").
Printed per trial, falls and everyday activities apart, sorted by tilt; then how one rule over
the three, with thresholds given on the command line, splits them. The thresholds are chosen
on these very trials (the only falls there are): a hindsight figure, not a detector's.

Usage:
  python3 scripts/packs/falls_invariant_features.py [--tilt 60 --peak 2.5 --still 0.05]
Plain Python 3.
"""
import argparse
import glob
import math
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from falls_augment import ADXL345_G_PER_COUNT as G_PER_COUNT, read_trial  # noqa: E402  (SisFall's line format, plain or gzipped)

RATE = 100


def read_axes(path):
    """The ADXL345's axes in g, SisFall's 200 Hz averaged in pairs to 100 Hz."""
    raw = [[v * G_PER_COUNT for v in row[:3]] for row in read_trial(path)]
    return [[(a + b) / 2 for a, b in zip(raw[i], raw[i + 1])] for i in range(0, len(raw) - 1, 2)]


def mean_vector(rows):
    return [sum(r[k] for r in rows) / len(rows) for k in range(3)]


def features(axes):
    mags = [math.sqrt(sum(v * v for v in r)) for r in axes]
    n = len(axes)
    p = max(range(n), key=lambda i: mags[i])
    before = axes[max(0, p - int(1.5 * RATE)):max(1, p - int(0.5 * RATE))]
    after_lo, after_hi = p + RATE, p + 3 * RATE
    if after_hi > n:
        return mags[p], float('nan'), float('nan')
    b, e = mean_vector(before), mean_vector(axes[after_lo:after_hi])
    cos = sum(x * y for x, y in zip(b, e)) / (math.sqrt(sum(x * x for x in b)) *
                                              math.sqrt(sum(y * y for y in e)))
    tail = mags[after_lo:after_hi]
    mu = sum(tail) / len(tail)
    still = math.sqrt(sum((v - mu) ** 2 for v in tail) / len(tail))
    return mags[p], math.degrees(math.acos(max(-1.0, min(1.0, cos)))), still


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('--data', default=None)
    ap.add_argument('--tilt', type=float, default=60, help='degrees, at least')
    ap.add_argument('--peak', type=float, default=2.5, help='g, at least')
    ap.add_argument('--still', type=float, default=0.05, help='g, at most')
    a = ap.parse_args()
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    data = a.data or os.path.join(root, 'data', 'sisfall')
    rows = []
    for path in sorted(glob.glob(os.path.join(data, '[DF][0-9][0-9]_S[AE][0-9][0-9]_R[0-9][0-9].txt*'))):
        name = os.path.basename(path).split('.')[0]
        rows.append((name,) + features(read_axes(path)))
    print('| trial | peak (g) | tilt (degrees) | still (g) | rule |')
    print('|---|---|---|---|---|')
    passed = {'F': 0, 'D': 0}
    total = {'F': 0, 'D': 0}
    # everyday trials first, falls after; within each, the undecided ("cut") first, then by tilt
    for name, peak, tilt, still in sorted(rows, key=lambda r: (r[0][0] == 'F', not math.isnan(r[2]),
                                                                0 if math.isnan(r[2]) else r[2])):
        hit = tilt >= a.tilt and peak >= a.peak and still <= a.still  # False when cut (NaN)
        passed[name[0]] += hit
        total[name[0]] += 1
        print('| %s | %.2f | %.1f | %.3f | %s |' % (name, peak, tilt, still,
                                                    'fall' if hit else 'cut' if math.isnan(tilt) else ''))
    print('\nrule tilt >= %g deg, peak >= %g g, still <= %g g: %d of %d fall trials, '
          '%d of %d everyday trials' % (a.tilt, a.peak, a.still, passed['F'], total['F'],
                                        passed['D'], total['D']))


if __name__ == '__main__':
    main()
