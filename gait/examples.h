// Stride examples on disk: the abnormal-gait pack's example file, written by
// `gaitwatch gait --export-examples` and read when a config loads.
//
// Format (CSV, one stride a line, '#' lines are comments):
//   label,subject,c0,...,c<2P-1>
//   normal,GaCo01,0.000,0.012,...
// label is `normal` or `abnormal`; subject names whose walk the stride was cut
// from; the 2P values are Stride::curve (this foot's time-normalised load,
// then the other foot's, each in [0, 1]). Every line has the same P.
#pragma once

#include <string>
#include <vector>

#include "gait/abnormal.h"

namespace gw::gait {

// Throws gw::Error "FILE:LINE: message" for a line that does not parse, and
// "FILE: message" for an unreadable file, an empty one, or curves of another
// length than 2 * `curve_points`.
std::vector<StrideExample> read_stride_examples(const std::string& path, int curve_points);

// Writes `examples` in the format above (values to 4 decimals); throws
// gw::Error when the file cannot be written.
void write_stride_examples(const std::string& path, const std::vector<StrideExample>& examples,
                           const std::string& comment);

}  // namespace gw::gait
