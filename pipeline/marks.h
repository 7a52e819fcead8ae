// Examples learned from a carer's marks: an alert's window (AlertWindow, the
// raw samples the alert was raised on) becomes an example of its pattern for
// that alert's wearer only — a negative one when the carer marked the alert
// false, a positive one when true (docs/detection.md, "Wearer-scoped examples").
//
// The daemon and offline tools make these examples with the same functions,
// so that an offline simulation of marks (`gaitwatch eval`) yields exactly
// the examples a running daemon would:
//
//   // alert.end_index counts from the stream's first sample: offline that is
//   // the recording sample OfflineRun::start.
//   AlertWindow w = window_from_recording(pattern, device, recording,
//                                         run.start + alert.end_index, alert.wearer);
//   config::PatternExample e =
//       example_from_window(pattern, device.sample_rate_hz, w, MarkVerdict::kFalse);
//   add_marked_examples(config, {{mark_id, pattern.name, e}}, max_per_wearer);
//
// (the daemon's engine cuts `w` from a stream's ring with window_from_rows()
// instead, at the alert's end_index, and adds the stream's baseline for a
// normalised pattern: a window cut from a recording has none, so offline
// tools take a normalised pattern's windows from the engine's alerts,
// Alert::window).
//
// Thread safety: pure functions.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "config/config.h"
#include "sinks/alert.h"
#include "sensors/recording.h"

namespace gw::pipeline {

// What an example of `pattern` must look like, as text: its channels, its
// transform chain with every option, its length, the transforms' lead-in
// at `sample_rate_hz` and, for a normalised pattern, its normalise settings
// (the window's baseline was learned under them). Two shapes equal = a
// window cut for one fits the other. Stored with each window
// (AlertWindow::shape).
std::string pattern_shape_key(const config::PatternConfig& pattern, double sample_rate_hz);

// Raw samples before a window that the pattern's transforms read: their
// history at the device's rate, 0 for a pattern on raw channels (as the
// config's examples carry).
int example_lead_in(const config::PatternConfig& pattern, const config::DeviceProfile& device);

// The window of `pattern` from lead_in + length consecutive sample-major rows
// (`rows` points at the first lead-in row, `row_width` values per row), the
// pattern's channel c read from column columns[c]. The window's rows must
// be exactly example_lead_in() + pattern.length. Throws gw::Error for a
// columns list that does not match the pattern's channels.
AlertWindow window_from_rows(const config::PatternConfig& pattern,
                             const config::DeviceProfile& device, std::uint32_t wearer,
                             const float* rows, int row_width, const std::vector<int>& columns);

// The window of an alert of `pattern` whose match ends at recording sample
// `end_index` (inclusive), cut from a recording (offline): samples
// [end_index - length + 1 - lead_in, end_index], the pattern's channels
// found by name among the recording's, without a baseline. Throws
// gw::Error when the recording lacks a channel or the samples (the lead-in
// included) are not all in it.
AlertWindow window_from_recording(const config::PatternConfig& pattern,
                                  const config::DeviceProfile& device,
                                  const sensors::Recording& recording, std::int64_t end_index,
                                  std::uint32_t wearer);

// The example a mark of the alert makes: the window's samples, negative for
// MarkVerdict::kFalse, positive for kTrue, scoped to window.wearer; for a
// normalised pattern with the window's baseline (the stream's when the
// alert was raised). Throws gw::Error (saying why) when the window was cut
// for another pattern name or shape (pattern_shape_key at
// `sample_rate_hz`), its sizes are off, or a normalised pattern's window
// keeps no baseline (or another pattern's keeps one).
config::PatternExample example_from_window(const config::PatternConfig& pattern,
                                           double sample_rate_hz, const AlertWindow& window,
                                           MarkVerdict verdict);

// One example learned from a mark, for add_marked_examples().
struct MarkedExample {
  std::uint64_t mark = 0;  // the mark's id (its age: a higher id is newer)
  std::string pattern;     // the pattern's name
  config::PatternExample example;
};

// What add_marked_examples() did with each example, by mark id.
struct MarkedExamplesApplied {
  std::vector<std::uint64_t> applied;
  std::vector<std::uint64_t> unknown_pattern;  // no pattern of that name in the config
  std::vector<std::uint64_t> over_cap;         // older than the newest max_per_wearer
};

// Adds the examples to their patterns in `config`: positives after the
// pattern's positives, negatives at its end, each group in mark order (the
// config keeps positives before negatives). At most `max_per_wearer`
// (>= 1) per (pattern, wearer), positives and negatives together, are kept:
// those of the newest marks; the older ones are reported in over_cap.
// Unscoped examples count for no wearer and are always added. The shapes
// are not checked here (example_from_window did that).
MarkedExamplesApplied add_marked_examples(config::Config& config,
                                          const std::vector<MarkedExample>& examples,
                                          int max_per_wearer);

}  // namespace gw::pipeline
