// Sample-rate conversion of recordings, so that a recording made at one rate
// can feed a device profile of another (e.g. SisFall's 200 Hz into a 100 Hz
// accelerometer profile).
//
// Method: rational resampling by L/M with a polyphase FIR (Crochiere &
// Rabiner, "Multirate Digital Signal Processing", Prentice-Hall 1983, ch. 2-3).
// L/M is target/source rate reduced to lowest terms. The filter is one
// linear-phase windowed-sinc lowpass at the upsampled rate L * source rate,
// designed with a Kaiser window (Kaiser's formulas for beta and length, as in
// Oppenheim & Schafer, "Discrete-Time Signal Processing", §7.5):
//   - f_low = min(source rate, target rate) / 2, the lower Nyquist frequency;
//   - passband edge 0.8 * f_low, stopband edge f_low (so nothing at or above
//     the lower Nyquist aliases), cutoff halfway between;
//   - stopband attenuation kResampleStopbandDb, passband ripple of the same
//     relative size;
//   - each polyphase branch is normalised to unit gain at 0 Hz, so a constant
//     signal stays exactly constant.
// The filter is applied centred (zero phase): output sample k is the signal
// at time_s[0] + k / target rate, with no delay, so sample indices and times
// keep their meaning. Beyond either end the signal is taken to continue at
// its first/last value; within half the filter's length of an end the output
// is therefore only an approximation of the band-limited signal.
#pragma once

#include "sensors/recording.h"

namespace gw::sensors {

constexpr double kResampleStopbandDb = 80.0;
// L and M are at most this after reduction; rates whose ratio needs more
// (e.g. 100 and 100.0001 Hz) are refused.
constexpr long kResampleMaxFactor = 4096;

// `rec` at `target_rate_hz`. Output samples: floor((n - 1) * L / M) + 1 for n
// input samples (the last one at or before the input's last time). time_s is
// recomputed as time_s[0] (0 when the recording has no times) + k / target
// rate; labels, when present, take the label of the input sample nearest in
// time. Channel names and source are kept. The same rate returns a copy.
// Throws gw::Error for a rate that is not positive and finite, a ratio beyond
// kResampleMaxFactor, or a recording without samples.
Recording resample(const Recording& rec, double target_rate_hz);

// The ratio target/source as L/M in lowest terms (L, M <= kResampleMaxFactor),
// within a relative error of 1e-9; throws gw::Error when there is none.
void resample_ratio(double source_rate_hz, double target_rate_hz, long& up, long& down);

}  // namespace gw::sensors
