#include "gait/walk.h"

#include <algorithm>

#include "common/error.h"

namespace gw::gait {

namespace {
// Indices of `prefix`1..`count` (or `prefix`0..count-1 with `from_zero`) in
// `names`; empty when any is missing.
std::vector<int> named_cells(const std::vector<std::string>& names, const std::string& prefix, int count,
                             bool from_zero) {
  std::vector<int> out;
  for (int i = 0; i < count; ++i) {
    const std::string want = prefix + std::to_string(from_zero ? i : i + 1);
    const auto it = std::find(names.begin(), names.end(), want);
    if (it == names.end()) return {};
    out.push_back(static_cast<int>(it - names.begin()));
  }
  return out;
}
}  // namespace

InsoleChannels insole_channels(const std::vector<std::string>& channel_names) {
  InsoleChannels out;
  out.cells[0] = named_cells(channel_names, "L", 8, false);
  out.cells[1] = named_cells(channel_names, "R", 8, false);
  if (!out.cells[0].empty() && !out.cells[1].empty()) {
    out.layout[0] = gaitpdb_layout(Foot::kLeft);
    out.layout[1] = gaitpdb_layout(Foot::kRight);
    return out;
  }
  out.cells[0] = named_cells(channel_names, "left_p", 99, true);
  out.cells[1] = named_cells(channel_names, "right_p", 99, true);
  if (!out.cells[0].empty() && !out.cells[1].empty()) {
    out.layout[0] = pressure_grid_layout();
    out.layout[1] = pressure_grid_layout();
    return out;
  }
  throw Error("no insole channels: expected L1..L8 and R1..R8 (force insoles) or left_p0..left_p98 and "
              "right_p0..right_p98 (pressure insoles)");
}

void foot_loads(const InsoleChannels& insoles, const float* row_values, FootLoad& left, FootLoad& right) {
  FootLoad* feet[2] = {&left, &right};
  float cells[99];
  for (int f = 0; f < 2; ++f) {
    const auto& index = insoles.cells[f];
    const int n = static_cast<int>(std::min<std::size_t>(index.size(), 99));
    for (int i = 0; i < n; ++i) cells[i] = row_values[index[static_cast<std::size_t>(i)]];
    *feet[f] = foot_load(cells, n, insoles.layout[f]);
  }
}

std::vector<Stride> walk_strides(const sensors::Recording& rec, CycleParams params) {
  const InsoleChannels insoles = insole_channels(rec.channel_names);
  params.sample_rate_hz = rec.sample_rate_hz;
  StrideTracker tracker(params);
  std::vector<Stride> strides;
  const std::size_t channels = rec.channels();
  for (std::size_t s = 0; s < rec.samples(); ++s) {
    FootLoad left, right;
    foot_loads(insoles, &rec.values[s * channels], left, right);
    const double t = s < rec.time_s.size() ? rec.time_s[s] : static_cast<double>(s) / rec.sample_rate_hz;
    tracker.push(t, left, right, strides);
  }
  return strides;
}

}  // namespace gw::gait
