// Pressure hotspots under a foot, online: per insole region (cells grouped by
// anatomy) the region's pressure peak and pressure-time integral over moving
// windows, and a `pressure_hotspot` event when a region keeps exceeding a
// load for longer than a set time while the wearer stands or walks
// (docs/gait.md, "Pressure hotspots").
//
// What "keeps exceeding" measures. A region is loaded only in the stance of
// its foot, and within the stance only for part of it (the heel early, the
// metatarsal heads late), so its pressure is below any threshold for most of
// every stride. The published limits the defaults come from are per-step peak
// pressures, so the tracker compares each sample of the region's pressure
// with the threshold and joins the samples above it into an episode as long
// as no two of them lie more than `peak_window_s` apart. With `peak_window_s`
// at least the longest stride, an episode lasts while every stride's peak in
// the region exceeds the threshold; standing, it lasts while the static
// pressure does. A region's pressure at a sample is the largest value among
// its cells: the region's peak pressure, as in the region masks of plantar
// pressure analysis, so that a small hot spot is not averaged away by the
// unloaded rest of its region.
//
// Units. The threshold is in the device's unit: newtons per sensor for the
// 8-sensor force insole, and for the 99-cell pressure insole the unit of its
// cells. The cells made by sensors::interpolate_insoles are weighted means of
// the force insole's sensors: newtons on a sensor-equivalent area, the force
// insole's unit, so one threshold serves both. Their sum over a foot, though,
// is about 99 / 8 times the force insole's, which the foot-load minimum of
// the pressure-insole defaults allows for.
//
// Defaults. The threshold is the in-shoe peak-pressure target for footwear
// that offloads the diabetic foot, 200 kPa (Bus et al., "Effect of
// custom-made footwear on foot ulcer recurrence in diabetes: a multicenter
// randomized controlled trial"; Owings et al., "Plantar pressures in diabetic
// patients with foot ulcers which have remained healed"), on an assumed
// sensor area of 25 cm2: a force insole whose 8 readings sum to the foot's
// vertical force divides the insole of an adult shoe, about 200 cm2, between
// its 8 sensors. 200 kPa * 25 cm2 = 500 N.
//
// Thread safety: a HotspotTracker is one foot's state; not shared.
#pragma once

#include <cstdint>
#include <deque>
#include <string>
#include <vector>

#include "gait/cycles.h"

namespace gw::gait {

// A named group of a foot's cells (indices into the frame given to push()).
struct InsoleRegion {
  std::string name;
  std::vector<int> cells;
};

// The W1 pressure insole's 9 x 11 grid (cell = row * 9 + column, row 0 at
// the heel, column 0 lateral) in 8 anatomical regions, every cell in exactly
// one. The grid spans the force insole's heel sensor (row 0) to its toe
// sensor (row 10); the rows follow the usual shares of foot length:
//   heel                 rows 0-2, all columns
//   midfoot_lateral      rows 3-5, columns 0-4 (the weight-bearing lateral band)
//   midfoot_medial       rows 3-5, columns 5-8 (the arch)
//   metatarsal_lateral   rows 6-8, columns 0-2 (4th and 5th metatarsal heads)
//   metatarsal_central   rows 6-8, columns 3-5 (2nd and 3rd)
//   metatarsal_medial    rows 6-8, columns 6-8 (1st)
//   lesser_toes          rows 9-10, columns 0-5
//   hallux               rows 9-10, columns 6-8
// The same regions for both feet: the grid is anatomical (the right foot's
// is mirrored).
std::vector<InsoleRegion> pressure_grid_regions();

// The gaitpdb force insole: one region per sensor, cells 0..7 = sensors
// 1..8 (gaitpdb_layout): heel, rear_midfoot_lateral, rear_midfoot_medial,
// midfoot_lateral, midfoot_medial, forefoot_lateral, forefoot_medial, toe.
// Sensors 2, 4 and 6 lie farther from the midline (lateral) under either foot.
std::vector<InsoleRegion> force_insole_regions();

struct HotspotParams {
  // A region's sample above `threshold` (device unit) counts toward an
  // episode; the default is hotspot_defaults_force_insole()'s.
  double threshold = 500;
  // Samples above the threshold at most this far apart belong to one
  // episode. At least the longest stride (CycleParams::max_stride_s), so
  // that one stride's peak carries the episode to the next.
  double peak_window_s = 2.5;
  // An episode raises its event once it spans this long (from its first to
  // its latest sample above the threshold).
  double min_duration_s = 30;
  // After an event, the region's next event comes no sooner than this and
  // only from a new episode.
  double cooldown_s = 300;
  // The window of the moving pressure-time integral (reported, not tested
  // against the threshold).
  double integral_window_s = 10;
  // Standing or walking: the foot's total load (the sum of its cells) has
  // exceeded this within the last `peak_window_s`. Sitting with the feet
  // down loads each foot with a small part of the body weight; standing and
  // every stance load it with about half of it or more. Below it, no sample
  // counts toward an episode.
  double min_foot_load = 200;
};

// Which insole a foot's cells come from; its regions and defaults follow.
enum class InsoleForm {
  kPressureGrid,  // the 99-cell pressure insole: pressure_grid_regions()
  kForceInsole,   // the 8-sensor force insole: force_insole_regions()
};
std::vector<InsoleRegion> insole_regions(InsoleForm form);

// Region r's pressure of one sample of a foot's cells: the largest value
// among its cells (negative values count as zero), into out[r].
void region_pressures(const std::vector<InsoleRegion>& regions, const float* cells, float* out);

// For the 8-sensor force insole (newtons per sensor): the threshold above;
// the foot-load minimum is a share of body weight between sitting and
// standing for a light adult.
HotspotParams hotspot_defaults_force_insole();
// For the 99-cell pressure insole in interpolate_insoles' unit: the same
// threshold; the foot-load minimum scaled by 99 / 8, since each cell holds
// a sensor-equivalent reading.
HotspotParams hotspot_defaults_pressure_insole();
// The defaults of the form above.
HotspotParams hotspot_defaults(InsoleForm form);

struct HotspotEvent {
  Foot foot = Foot::kLeft;
  std::string region;
  double start_s = 0;                  // the episode's first sample above the threshold
  double t_s = 0;                      // the sample that completed min_duration_s
  double duration_s = 0;               // t_s - start_s
  double peak = 0;                     // the region's highest pressure in the episode
  double pressure_time_integral = 0;   // the region's pressure integrated over the episode (unit * s)
};

class HotspotTracker {
 public:
  // Throws gw::Error for no regions, an empty region or a negative cell
  // index, or a parameter or rate that is not positive.
  HotspotTracker(Foot foot, std::vector<InsoleRegion> regions, HotspotParams params, double rate_hz);

  // Feeds one sample of the foot's `count` cells at `t_s` (increasing; a
  // step over two sample periods, or back, is a gap: the windows and open
  // episodes start afresh, the cooldowns stay). Appends at most one event
  // per region to `out`. Negative cell values count as zero. Throws
  // gw::Error when `count` does not cover every region's cells.
  void push(double t_s, const float* cells, int count, std::vector<HotspotEvent>& out);
  // The same sample reduced elsewhere (the daemon's ingest threads):
  // `pressures` holds one value per region (region_pressures()) and
  // `foot_load` the sum of the foot's cells, negative ones as zero. push()
  // is exactly this after the reduction.
  void push_regions(double t_s, const float* pressures, double foot_load, std::vector<HotspotEvent>& out);

  // Forgets everything, cooldowns included (a restarted device, another wearer).
  void reset();

  const std::vector<InsoleRegion>& regions() const { return regions_; }
  const HotspotParams& params() const { return params_; }
  // Region `region`'s highest pressure over the last peak_window_s.
  double peak(int region) const;
  // Region `region`'s pressure integrated over the last integral_window_s
  // (less while the window fills after a start or gap), in unit * s.
  double pressure_time_integral(int region) const;

 private:
  struct RegionState {
    std::deque<std::pair<std::int64_t, float>> window_max;  // monotonic: the peak window's maximum
    double integral_sum = 0;       // sum of the integral window's samples
    bool in_episode = false;
    bool reported = false;         // the open episode raised its event
    double episode_start_s = 0;
    double last_above_s = 0;
    double episode_peak = 0;
    double episode_sum = 0;        // sum of the episode's samples since its start
    bool has_event = false;
    double last_event_s = 0;
  };

  void restart_windows();

  Foot foot_;
  std::vector<InsoleRegion> regions_;
  HotspotParams params_;
  double rate_hz_;
  int needed_cells_ = 0;
  std::int64_t peak_window_samples_ = 1;
  std::size_t integral_window_samples_ = 1;
  std::vector<RegionState> state_;
  std::vector<float> pressures_;  // push()'s scratch: one sample's region pressures
  std::vector<float> history_;  // ring: integral_window_samples_ x regions, the window's region pressures
  std::size_t history_fill_ = 0;
  std::deque<std::pair<std::int64_t, float>> foot_load_max_;  // monotonic: the foot's load over the peak window
  std::int64_t index_ = 0;
  double last_t_s_ = 0;
  bool started_ = false;
};

}  // namespace gw::gait
