#!/usr/bin/env python3
"""Two files of alert lines (gaitwatch detect --json) say the same when they
hold the same alerts in the same order, member for member, except that a
`distance` may differ by float32 rounding: the CPU and CUDA backends sum a
DTW path's costs in a different order. The tolerance is relative to the
larger distance, and absolute below 1 (a distance near 0 has no relative
precision to speak of). Exit 0 when they agree, else 1 with
the first difference.

    alerts_close.py OLD NEW [RELATIVE_TOLERANCE (default 1e-5)]
"""
import json
import sys


def close(a, b, key, tol):
    if key == 'distance' and isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return abs(a - b) <= tol * max(abs(a), abs(b), 1.0)
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(close(a[k], b[k], k, tol) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(close(x, y, key, tol) for x, y in zip(a, b))
    return a == b


def main():
    old, new = sys.argv[1], sys.argv[2]
    tol = float(sys.argv[3]) if len(sys.argv) > 3 else 1e-5
    a = [json.loads(line) for line in open(old) if line.strip()]
    b = [json.loads(line) for line in open(new) if line.strip()]
    if len(a) != len(b):
        print('%d alerts against %d' % (len(a), len(b)))
        return 1
    for k, (x, y) in enumerate(zip(a, b)):
        if not close(x, y, None, tol):
            print('alert %d differs:\n< %s\n> %s' % (k, json.dumps(x, sort_keys=True), json.dumps(y, sort_keys=True)))
            return 1
    return 0


if __name__ == '__main__':
    sys.exit(main())
