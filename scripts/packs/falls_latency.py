#!/usr/bin/env python3
"""When does the falls pack alert after the impact? For every SisFall fall trial: `gaitwatch
detect` with a copy of the pack that holds none of the examples cut from that trial (as
`eval --leave-out recording` scores it), and the time from the trial's largest acceleration
to the end of the first alert's window (when the alert is raised). Prints one line per fall
and the median.

    python3 scripts/packs/falls_latency.py [--config config/gaitwatch.yaml]
G: the gaitwatch CLI (default build/daemon/gaitwatch).
"""
import argparse
import glob
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from falls_augment import adxl345_magnitudes, read_trial  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SISFALL_RATE_HZ = 200


def impact_time_s(path):
    """Seconds from the trial's start to its largest ADXL345 magnitude."""
    mags = adxl345_magnitudes(read_trial(path))
    return max(range(len(mags)), key=mags.__getitem__) / SISFALL_RATE_HZ


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--config', default=os.path.join(ROOT, 'config/gaitwatch.yaml'))
    a = ap.parse_args()
    gw = os.environ.get('G', os.path.join(ROOT, 'build/daemon/gaitwatch'))
    config_dir = os.path.dirname(os.path.abspath(a.config))
    pack = os.path.join(config_dir, 'patterns/falls.yaml')
    base = open(a.config).read()
    if 'include: patterns/falls.yaml' not in base:
        sys.exit('%s does not include patterns/falls.yaml' % a.config)
    pack_text = open(pack).read()
    # The copies lie beside the originals, so their relative paths resolve as the originals' do.
    pack_copy = os.path.join(config_dir, 'patterns/.falls-latency-%d.yaml' % os.getpid())
    config_copy = os.path.join(config_dir, '.falls-latency-%d.yaml' % os.getpid())
    latencies = []
    trials = sorted(glob.glob(os.path.join(ROOT, 'data/sisfall/F*_R01.txt.gz')))
    try:
        for trial in trials:
            name = os.path.basename(trial)[:-len('.txt.gz')]
            # Every line naming the trial is one of its examples.
            with open(pack_copy, 'w') as f:
                f.write(''.join(l for l in pack_text.splitlines(True) if name not in l))
            with open(config_copy, 'w') as f:
                f.write(base.replace('include: patterns/falls.yaml',
                                     'include: patterns/' + os.path.basename(pack_copy)))
            r = subprocess.run([gw, 'detect', '--config', config_copy, '--device', 'accelerometer',
                                '--backend', 'cpu', '--json', '--file', trial],
                               capture_output=True, text=True)
            if r.returncode != 0:
                sys.exit('%s: detect failed:\n%s' % (name, r.stderr[-2000:]))
            impact = impact_time_s(trial)
            after = [json.loads(l)['t_end'] - impact for l in r.stdout.splitlines() if l.strip()]
            print('%s impact at %.2f s, alerts %s' % (
                name, impact, ', '.join('%.2f s after it' % t for t in after) or 'none'))
            if after:
                latencies.append(after[0])
    finally:
        for path in (pack_copy, config_copy):
            if os.path.exists(path):
                os.remove(path)
    if latencies:
        latencies.sort()
        print('first alert after the impact: median %.2f s, %.2f-%.2f s, %d of %d falls alerted' % (
            latencies[len(latencies) // 2], latencies[0], latencies[-1], len(latencies), len(trials)))


if __name__ == '__main__':
    main()
