#!/usr/bin/env python3
"""SisFall trials as another wearer might record them: the sensor tilted, the movement softer
or harder, slower or faster.

docs/detection.md §7 ("Falls on other bodies, simulated") reports what the falls pack makes of
them (scripts/packs/falls-robustness.sh runs this, then `gaitwatch eval`).

Every SisFall trial of --data is written to --out under the same file name, in the same format
(nine comma-separated integer columns, lines ending in ';', gzip-compressed), changed by one
transform:
  rot<AXIS><DEG>    the sensor rotated by DEG degrees (negative allowed) about its AXIS (x, y or
                    z): every sample's ADXL345 and MMA8451Q vectors (columns 1-3 and 7-9) and the
                    gyroscope (4-6) rotated alike. SisFall's y axis is the vertical one; a tilt
                    about x or z moves gravity onto another axis, as a belt sitting on another
                    body would.
  amp<PCT>          each accelerometer's movement about its slowly varying part (a centred
                    0.5-s moving average: gravity and posture) scaled to PCT percent; the
                    gyroscope's rates scaled by the same factor (about zero).
Every value is clipped to its sensor's range (ADXL345 and gyroscope as 13- and 16-bit counts,
MMA8451Q 14-bit), as the real sensors would saturate.
  time<PCT>         the trial played at PCT percent of its speed (every column linearly
                    interpolated onto the stretched time axis; 80 = 1.25x as long).
The file names are unchanged, so `eval --leave-out recording` leaves out the examples cut from the
original trial while it scores the changed one.

Usage:
  python3 scripts/packs/falls_augment.py --out DIR --transform rotx15 [--data data/sisfall]
      [--trials F11_SA01_R01,D12_SA01_R01]   (only these trials; default every one)
Plain Python 3.
"""
import argparse
import gzip
import math
import os
import re
import sys

ACC_COLUMNS = ((0, 1, 2), (6, 7, 8))
GYRO_COLUMNS = (3, 4, 5)
# Largest magnitude each column can report: ADXL345 13-bit, ITG3200 16-bit, MMA8451Q 14-bit.
COLUMN_LIMITS = (4095,) * 3 + (32767,) * 3 + (8191,) * 3
SMOOTH_S = 0.5
ADXL345_G_PER_COUNT = 32 / 8192  # +-16 g in 13 bits, as SisFall records it
RATE = 200


def adxl345_magnitudes(rows):
    """Per row of a trial (read_trial), the ADXL345's acceleration magnitude in g."""
    return [math.sqrt(sum((v * ADXL345_G_PER_COUNT) ** 2 for v in r[:3])) for r in rows]


def read_trial(path):
    opener = gzip.open if path.endswith('.gz') else open
    rows = []
    with opener(path, 'rt') as f:
        for line in f:
            line = line.strip().rstrip(';').strip()
            if not line:
                continue
            rows.append([float(v) for v in line.split(',')])
    return rows


def write_trial(path, rows):
    with gzip.open(path, 'wt') as f:
        for r in rows:
            f.write(','.join('%4d' % max(-lim - 1, min(lim, int(round(v))))
                             for v, lim in zip(r, COLUMN_LIMITS)) + ';\n')


def rotation(axis, degrees):
    c, s = math.cos(math.radians(degrees)), math.sin(math.radians(degrees))
    if axis == 'x':
        return ((1, 0, 0), (0, c, -s), (0, s, c))
    if axis == 'y':
        return ((c, 0, s), (0, 1, 0), (-s, 0, c))
    return ((c, -s, 0), (s, c, 0), (0, 0, 1))


def rotate(rows, axis, degrees):
    m = rotation(axis, degrees)
    out = []
    for r in rows:
        r = list(r)
        for cols in ACC_COLUMNS + (GYRO_COLUMNS,):
            v = [r[c] for c in cols]
            for i, c in enumerate(cols):
                r[c] = sum(m[i][k] * v[k] for k in range(3))
        out.append(r)
    return out


def centred_mean(x, half):
    n = len(x)
    prefix = [0.0]
    for v in x:
        prefix.append(prefix[-1] + v)
    out = []
    for t in range(n):
        a, b = max(0, t - half), min(n, t + half + 1)
        out.append((prefix[b] - prefix[a]) / (b - a))
    return out


def scale_movement(rows, factor):
    half = int(SMOOTH_S * RATE / 2)
    out = [list(r) for r in rows]
    for cols in ACC_COLUMNS:
        for c in cols:
            x = [r[c] for r in rows]
            slow = centred_mean(x, half)
            for t in range(len(rows)):
                out[t][c] = slow[t] + factor * (x[t] - slow[t])
    for c in GYRO_COLUMNS:
        for t in range(len(rows)):
            out[t][c] = factor * rows[t][c]
    return out


def stretch(rows, speed):
    """Played at `speed` (1 = unchanged): output sample k reads input time k * speed."""
    n = len(rows)
    m = int((n - 1) / speed) + 1
    out = []
    for k in range(m):
        t = k * speed
        i = min(int(t), n - 2)
        w = t - i
        out.append([(1 - w) * a + w * b for a, b in zip(rows[i], rows[i + 1])])
    return out


def apply(rows, transform):
    m = re.fullmatch(r'rot([xyz])(-?\d+(?:\.\d+)?)', transform)
    if m:
        return rotate(rows, m.group(1), float(m.group(2)))
    m = re.fullmatch(r'amp(\d+)', transform)
    if m:
        return scale_movement(rows, int(m.group(1)) / 100.0)
    m = re.fullmatch(r'time(\d+)', transform)
    if m:
        return stretch(rows, int(m.group(1)) / 100.0)
    sys.exit('unknown transform %r (rot<x|y|z><deg>, amp<pct>, time<pct>)' % transform)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('--out', required=True)
    ap.add_argument('--transform', required=True)
    ap.add_argument('--data', default=None)
    ap.add_argument('--trials', default=None, metavar='NAME,NAME',
                    help='only these trials, e.g. F11_SA01_R01,D12_SA01_R01 (default: all)')
    a = ap.parse_args()
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    data = a.data or os.path.join(root, 'data', 'sisfall')
    os.makedirs(a.out, exist_ok=True)
    names = sorted(n for n in os.listdir(data) if re.match(r'[DF]\d\d_S[AE]\d\d_R\d\d\.txt', n))
    if a.trials:
        wanted = a.trials.split(',')
        names = [n for n in names if n.split('.')[0] in wanted]
        missing = set(wanted) - {n.split('.')[0] for n in names}
        if missing:
            sys.exit('no such SisFall trial in %s: %s' % (data, ', '.join(sorted(missing))))
    if not names:
        sys.exit('no SisFall trials in %s' % data)
    for name in names:
        rows = read_trial(os.path.join(data, name))
        out = name if name.endswith('.gz') else name + '.gz'
        write_trial(os.path.join(a.out, out), apply(rows, a.transform))
    print('%s: %d trials -> %s' % (a.transform, len(names), a.out))


if __name__ == '__main__':
    main()
