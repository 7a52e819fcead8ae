#!/usr/bin/env python3
"""Candidate configs for the falls pack: templates cut (gaitwatch pattern cut) around each
SisFall trial's largest acceleration magnitude."""
import argparse, glob, math, os, subprocess, sys
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from falls_augment import adxl345_magnitudes, read_trial  # noqa: E402  (SisFall's line format)
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
ap.add_argument('--negatives-of', help='only these everyday activities as negatives, e.g. D12,D13')
ap.add_argument('--lead-in', type=int, default=0)
ap.add_argument('--cooldown', type=float, default=10)
# Views that must agree with the impact (docs/detection.md §7): each a pattern with
# publish: false, its positives cut from the fall trials from AFTER s to AFTER + LENGTH s
# after the largest acceleration; the impact pattern then alerts only when every view
# detects within --within seconds of it.
ap.add_argument('--orientation-view', metavar='AFTER,LENGTH,THRESHOLD',
                help='lying: the low-passed (1 Hz) axes of --orientation-channels')
ap.add_argument('--orientation-channels', default='[y]')
ap.add_argument('--orientation-min-dims', type=int, default=1)
ap.add_argument('--stillness-view', metavar='AFTER,LENGTH,THRESHOLD',
                help='little movement: the acceleration magnitude')
ap.add_argument('--tilt-rate-view', metavar='AFTER,LENGTH,THRESHOLD',
                help='a fast change of orientation: the derivative of the low-passed axes '
                     '(AFTER may be negative: before the largest acceleration)')
ap.add_argument('--tilt-rate-cutoff', type=float, default=2)
ap.add_argument('--tilt-rate-min-dims', type=int, default=2)
ap.add_argument('--impact-view', metavar='AFTER,LENGTH,THRESHOLD',
                help='an impact: the acceleration magnitude around the largest acceleration '
                     '(AFTER negative: before it); unchanged by how the sensor is worn')
ap.add_argument('--turn-view', metavar='AFTER,LENGTH,THRESHOLD',
                help='the body turned: orientation_change (--turn-window, --turn-lag), the angle '
                     'between the mean acceleration now and --turn-lag seconds earlier')
ap.add_argument('--turn-window', type=float, default=1)
ap.add_argument('--turn-lag', type=float, default=3)
ap.add_argument('--magnitude-view', type=float, metavar='THRESHOLD',
               help='the impact on the acceleration magnitude, the window of the impact pattern')
ap.add_argument('--within', type=float, default=3)
# Examples also cut from every trial as falls_augment.py changed it (the sensor tilted, say):
# the templates' names keep the trial's name, so leave-one-recording-out leaves them out with it.
ap.add_argument('--augment', default='', metavar='T1,T2',
                help='falls_augment.py transforms whose trials (in --augment-dir/T) add examples')
ap.add_argument('--augment-dir', default=None, help='default: build/packs/falls-augmented')
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
def cut(f, name, start, m, lead_in, prefix):
    t = os.path.join(tdir, f'{prefix}_{name}_{start}_{m}_lead{lead_in}.csv')
    if not os.path.exists(t):
        subprocess.run([G, 'pattern', 'cut', '--config', cfgp, '--device', 'accelerometer', '--file', f,
                        '--start', str(start), '--end', str(start + m), '--lead-in', str(lead_in), '--out', t],
                       check=True, stderr=subprocess.DEVNULL)
    return os.path.relpath(t, outdir)

def lowpass_history(cutoff_hz):  # samples before the first output: taps - 1, taps = 2 * round(rate / cutoff) + 1
    return 2 * int(round(rate / cutoff_hz))
LOWPASS_HISTORY = lowpass_history(1)
TURN_TRANSFORMS = f'[{{kind: orientation_change, window_s: {a.turn_window:g}, lag_s: {a.turn_lag:g}}}]'
# lag + window - 1 samples, each rounded as the engine rounds it (TransformStep::lag_samples,
# window_samples)
TURN_HISTORY = max(1, int(math.floor(a.turn_lag * rate + 0.5))) + max(2, int(math.floor(a.turn_window * rate + 0.5))) - 1
views = {}  # name -> (transforms, channels, min_dims, length, threshold, lead_in, after, examples)
for view, spec, transforms, channels, min_dims, lead_in in [
        ('fall_view_lying', a.orientation_view, '[{kind: lowpass, cutoff_hz: 1}]', a.orientation_channels,
         a.orientation_min_dims, LOWPASS_HISTORY),
        ('fall_view_still', a.stillness_view, '[magnitude]', '[x, y, z]', 1, 0),
        ('fall_view_tilt_rate', a.tilt_rate_view,
         f'[{{kind: lowpass, cutoff_hz: {a.tilt_rate_cutoff:g}}}, derivative]', '[x, y, z]',
         a.tilt_rate_min_dims, lowpass_history(a.tilt_rate_cutoff) + 1),  # + the derivative's sample
        ('fall_view_impact', a.impact_view, '[magnitude]', '[x, y, z]', 1, 0),
        ('fall_view_turn', a.turn_view, TURN_TRANSFORMS, '[x, y, z]', 1, TURN_HISTORY)]:
    if spec:
        after, length, threshold = (float(v) for v in spec.split(','))
        views[view] = (transforms, channels, min_dims, int(round(length * rate)), threshold, lead_in, after, [])
if a.magnitude_view:
    views['fall_view_impact_magnitude'] = ('[magnitude]', '[x, y, z]', 1, m, a.magnitude_view, 0,
                                           -a.before, [])
pos, neg = [], []
sources = [(f, '') for f in sorted(glob.glob(f'{root}/data/sisfall/*_R01.txt.gz'))]
aug_dir = a.augment_dir or f'{root}/build/packs/falls-augmented'
for t in filter(None, a.augment.split(',')):
    if not os.path.isdir(f'{aug_dir}/{t}'):
        subprocess.run(['python3', f'{root}/scripts/packs/falls_augment.py', '--out', f'{aug_dir}/{t}',
                        '--transform', t], check=True, stdout=subprocess.DEVNULL)
    sources += [(f, '_' + t) for f in sorted(glob.glob(f'{aug_dir}/{t}/*_R01.txt.gz'))]
for f, tag in sources:
    name = os.path.basename(f)[:-7] + tag
    vals = adxl345_magnitudes(read_trial(f))
    peak = max(range(len(vals)), key=lambda i: vals[i]) // 2  # 200 Hz -> 100 Hz
    start = max(a.lead_in, peak - int(a.before * rate))
    n100 = len(vals) // 2
    if start + m > n100 - 2: start = n100 - 2 - m
    if name[0] == 'D' and a.negatives_of and name[:3] not in a.negatives_of.split(','):
        continue
    (pos if name[0] == 'F' else neg).append(
        cut(f, name, start, m, a.lead_in, 'positive' if name[0] == 'F' else 'negative'))
    if name[0] == 'F':
        for view, (_, _, _, vm, _, lead_in, after, examples) in views.items():
            vstart = max(lead_in, min(peak + int(round(after * rate)), n100 - 2 - vm))
            examples.append(cut(f, name, vstart, vm, lead_in, view))
out = [base, 'patterns:\n  - name: fall\n    kind: fall\n    severity: critical\n    device: accelerometer\n',
       f'    channels: {a.channels}\n    transforms: {a.transforms}\n    length: {m}\n    band: {a.band}\n',
       f'    znorm: {a.znorm}\n    threshold: {a.threshold}\n    min_dims: {a.min_dims}\n    margin: {a.margin}\n',
       f'    hysteresis: {a.hysteresis}\n    neighbours: {a.neighbours}\n    cooldown_s: {a.cooldown}\n    examples:\n']
out += [f'      - {{template: {p}}}\n' for p in pos]
if not a.no_negatives and neg:
    out.append('    negatives:\n'); out += [f'      - {{template: {p}}}\n' for p in neg]
if views:
    out.append(f'    agree: {{with: [{", ".join(views)}], within_s: {a.within}}}\n')
for view, (transforms, channels, min_dims, vm, threshold, _, _, examples) in views.items():
    out += [f'  - name: {view}\n    publish: false\n    kind: fall\n    device: accelerometer\n',
            f'    channels: {channels}\n    transforms: {transforms}\n    length: {vm}\n    band: {a.band}\n',
            f'    znorm: false\n    threshold: {threshold}\n    min_dims: {min_dims}\n    cooldown_s: 1\n',
            '    examples:\n']
    out += [f'      - {{template: {p}}}\n' for p in examples]
open(a.out, 'w').write(''.join(out))
