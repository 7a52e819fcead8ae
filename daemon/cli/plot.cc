// gaitwatch plot: pictures of what the detector did, drawn by gnuplot (run as
// an external process; Debian package gnuplot-nox, installed by
// scripts/install-deps.sh). Two kinds:
//   overview (default): the channels a pattern searches over the whole
//     recording, with the annotated events and the alerts on one time axis;
//   --alert N: one detection, per matched dim the pattern example over the
//     matched window with the DTW warping alignment between them.
// The alerts come from the same engine run as `gaitwatch detect`. The output
// format follows --out's extension: .svg or .png.
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <limits>
#include <map>
#include <sstream>

#include "common/error.h"
#include "daemon/cli/cli.h"
#include "pipeline/alignment.h"
#include "pipeline/detector.h"
#include "pipeline/evaluation.h"

namespace gw::cli {
namespace {

namespace fs = std::filesystem;

struct PlotOptions {
  std::string config_path;
  RecordingSource source;
  OfflineRun run;
  std::string out;
  std::string pattern;  // default: the device's first pattern
  std::string events_file;
  int alert = -1;  // >= 0: plot this alert of the pattern (0-based)
  int width = 1200;
  int height = 0;  // 0 = by plot kind
};

// A temporary folder for gnuplot's data and script, removed on scope exit.
class ScratchDir {
 public:
  ScratchDir() {
    path_ = fs::temp_directory_path() / ("gaitwatch-plot-" + std::to_string(::getpid()));
    fs::create_directories(path_);
  }
  ~ScratchDir() {
    std::error_code ignored;
    fs::remove_all(path_, ignored);
  }
  fs::path file(const std::string& name) const { return path_ / name; }

 private:
  fs::path path_;
};

std::string quoted(const std::string& text) {
  std::string out = "'";
  for (const char c : text) out += c == '\'' ? std::string("''") : std::string(1, c);
  return out + "'";
}

std::string terminal_for(const std::string& out, int width, int height) {
  const std::string ext = fs::path(out).extension().string();
  const std::string size = " size " + std::to_string(width) + "," + std::to_string(height);
  if (ext == ".svg") return "set terminal svg" + size + " font 'sans,11' background '#ffffff'\n";
  if (ext == ".png") return "set terminal pngcairo" + size + " font 'sans,10'\n";
  throw Error("--out must end in .svg or .png, got '" + out + "'");
}

void run_gnuplot(const fs::path& script) {
  const std::string command = "gnuplot " + quoted(script.string()) + " 2>&1";
  FILE* pipe = ::popen(command.c_str(), "r");
  if (!pipe) throw Error("cannot start gnuplot");
  std::string output;
  char buffer[512];
  while (std::fgets(buffer, sizeof buffer, pipe)) output += buffer;
  const int status = ::pclose(pipe);
  if (status != 0) {
    if (WIFEXITED(status) && WEXITSTATUS(status) == 127)
      throw Error(
          "gnuplot not found: install it (Debian: apt-get install gnuplot-nox, or run "
          "scripts/install-deps.sh)");
    throw Error("gnuplot failed:\n" + output);
  }
}

// The values a view's channels take over the whole recording, sample-major,
// starting at recording index `first` (raw channels, or the transform chain's
// output, exactly as the engine searched them).
struct ViewSeries {
  std::int64_t first = 0;
  int channels = 0;
  std::vector<float> values;
  float at(std::int64_t index, int channel) const {
    return values[static_cast<std::size_t>(index - first) * static_cast<std::size_t>(channels) +
                  static_cast<std::size_t>(channel)];
  }
  std::int64_t end() const {
    return first + static_cast<std::int64_t>(values.size() / static_cast<std::size_t>(channels));
  }
};

ViewSeries view_series(const pipeline::ChannelView& view, const sensors::Recording& rec,
                       std::int64_t start, std::int64_t stop) {
  ViewSeries out;
  out.channels = static_cast<int>(view.channel_names.size());
  const std::size_t device_channels = rec.channels();
  if (view.raw) {
    out.first = start;
    out.values.assign(rec.values.begin() + static_cast<std::ptrdiff_t>(
                                               static_cast<std::size_t>(start) * device_channels),
                      rec.values.begin() + static_cast<std::ptrdiff_t>(
                                               static_cast<std::size_t>(stop) * device_channels));
    return out;
  }
  const std::size_t inputs = view.inputs.size();
  std::vector<float> block;
  for (std::int64_t s = start; s < stop; ++s)
    for (const int c : view.inputs)
      block.push_back(rec.at(static_cast<std::size_t>(s), static_cast<std::size_t>(c)));
  view.chain->apply(block.data(), static_cast<int>(block.size() / inputs), out.values);
  out.first = start + view.history;
  return out;
}

int overview(const PlotOptions& o, const sensors::Recording& rec,
             const pipeline::CompiledLibrary& library, const pipeline::CompiledPattern& pattern,
             const std::vector<pipeline::Alert>& alerts) {
  const double rate = rec.sample_rate_hz;
  const std::int64_t start = o.run.start;
  const std::int64_t stop = o.run.end < 0 ? static_cast<std::int64_t>(rec.samples()) : o.run.end;
  const pipeline::ChannelView& view = library.views[pattern.view];
  const ViewSeries series = view_series(view, rec, start, stop);
  ScratchDir scratch;
  // At most ~3000 points per line keeps the file small; the shapes of
  // minutes of gait survive that.
  const std::int64_t step = std::max<std::int64_t>(1, (series.end() - series.first) / 3000);
  {
    std::ofstream data(scratch.file("view.dat"));
    for (std::int64_t s = series.first; s < series.end(); s += step) {
      data << static_cast<double>(s) / rate;
      for (int c = 0; c < series.channels; ++c) data << ' ' << series.at(s, c);
      data << '\n';
    }
  }
  std::vector<pipeline::LabelledEvent> events;
  if (!o.events_file.empty())
    events = pipeline::read_events(o.events_file);
  else if (!rec.labels.empty())
    events = pipeline::events_from_labels(rec.labels, 2);
  const auto unannotated = o.events_file.empty() ? pipeline::events_from_labels(rec.labels, 0)
                                                 : std::vector<pipeline::LabelledEvent>{};

  std::ostringstream gp;
  const int height = o.height > 0 ? o.height : 420;
  gp << terminal_for(o.out, o.width, height) << "set output " << quoted(o.out) << "\n";
  gp << "set title "
     << quoted(fs::path(rec.source).filename().string() + ": pattern " + pattern.config.name +
               " (" + std::to_string(alerts.size()) +
               " alerts; red: annotated events, grey: outside the experiment)")
     << " noenhanced\n";
  std::string chain;
  for (const auto& step : pattern.config.transforms)
    chain += std::string(chain.empty() ? "" : ", ") + config::TransformStep::name(step.kind);
  gp << "set xlabel 'time [s]'\nset ylabel " << quoted(view.raw ? "raw channels" : chain)
     << " noenhanced\nset key outside right top noenhanced\nset grid xtics\n";
  gp << "set xrange [" << static_cast<double>(start) / rate << ":"
     << static_cast<double>(stop) / rate << "]\n";
  int object = 1;
  auto shade = [&](double from, double to, const char* colour) {
    gp << "set object " << object++ << " rect from " << from << ", graph 0 to " << to
       << ", graph 1 back fillstyle solid 0.25 noborder fillcolor rgb '" << colour << "'\n";
  };
  for (const auto& u : unannotated)
    if (u.end > start && u.start < stop)
      shade(static_cast<double>(std::max(u.start, start)) / rate,
            static_cast<double>(std::min(u.end, stop)) / rate, "#bbbbbb");
  for (const auto& e : events)
    if (e.end > start && e.start < stop)
      shade(static_cast<double>(e.start) / rate, static_cast<double>(e.end) / rate, "#e8474a");
  int arrow = 1;
  for (const auto& a : alerts) {
    const auto scored = pipeline::scored_alert(a, rate, start);
    const double t = static_cast<double>(scored.last) / rate;
    gp << "set arrow " << arrow++ << " from " << t << ", graph 0 to " << t
       << ", graph 1 nohead front lw 1.5 lc rgb '#1f5fbf'\n";
    gp << "set object " << object++ << " rect from " << static_cast<double>(scored.first) / rate
       << ", graph 0.93 to " << t
       << ", graph 1 front fillstyle solid 0.8 noborder fillcolor rgb '#1f5fbf'\n";
  }
  gp << "plot ";
  for (int c = 0; c < series.channels; ++c) {
    if (c) gp << ", ";
    gp << quoted(scratch.file("view.dat").string()) << " using 1:" << c + 2
       << " with lines lw 1 title " << quoted(view.channel_names[static_cast<std::size_t>(c)]);
  }
  gp << ", NaN with lines lw 1.5 lc rgb '#1f5fbf' title 'alert (bar: matched window)'\n";
  {
    std::ofstream script(scratch.file("plot.gp"));
    script << gp.str();
  }
  run_gnuplot(scratch.file("plot.gp"));
  std::cerr << "plot: wrote " << o.out << " (" << alerts.size() << " alerts, " << events.size()
            << " annotated events)\n";
  return 0;
}

int detection(const PlotOptions& o, const sensors::Recording& rec,
              const pipeline::CompiledLibrary& library, const pipeline::CompiledPattern& pattern,
              const std::vector<pipeline::Alert>& alerts) {
  if (o.alert >= static_cast<int>(alerts.size()))
    throw Error("pattern '" + pattern.config.name + "' raised " + std::to_string(alerts.size()) +
                " alerts; --alert " + std::to_string(o.alert) + " does not exist");
  const pipeline::Alert& alert = alerts[static_cast<std::size_t>(o.alert)];
  const pipeline::ChannelView& view = library.views[pattern.view];
  const int m = pattern.config.length;
  const auto& kernels = library.kernel_library->patterns;
  const ViewSeries series = view_series(
      view, rec, o.run.start, o.run.end < 0 ? static_cast<std::int64_t>(rec.samples()) : o.run.end);
  auto window_of = [&](const pipeline::DimMatch& d) {
    std::vector<float> w;
    const std::int64_t last = o.run.start + d.end_index;
    for (std::int64_t s = last - m + 1; s <= last; ++s) w.push_back(series.at(s, d.stream_dim));
    return w;
  };
  // The nearest positive example over the matched dims: the one the decision used.
  std::vector<std::pair<int, std::vector<float>>> windows;
  for (const auto& d : alert.dims) windows.emplace_back(d.pattern_dim, window_of(d));
  const std::size_t best_example =
      pipeline::nearest_positive_example(library, pattern, alert.wearer, windows).value_or(0);
  const int band = kernels[pattern.examples[best_example].kernel].band;
  const auto& shape = kernels[pattern.examples[best_example].kernel].dims;
  ScratchDir scratch;
  std::ostringstream gp;
  const int rows = static_cast<int>(alert.dims.size());
  const int height = o.height > 0 ? o.height : 260 * std::max(1, rows);
  gp << terminal_for(o.out, o.width, height) << "set output " << quoted(o.out) << "\n";
  gp << "set multiplot layout " << rows << ",1 title "
     << quoted("pattern " + pattern.config.name + ", alert " + std::to_string(o.alert) + " at " +
               std::to_string(alert.t_end) + " s: " + std::to_string(alert.matched_dims) + "/" +
               std::to_string(alert.pattern_dims) + " dims, distance " +
               std::to_string(alert.distance) + " (example " + std::to_string(best_example) + ")")
     << " noenhanced\n";
  gp << "set key outside right top noenhanced\nset xlabel 'sample in window'\n";
  for (int r = 0; r < rows; ++r) {
    const pipeline::DimMatch& d = alert.dims[static_cast<std::size_t>(r)];
    const auto w = window_of(d);
    const auto a =
        pipeline::dtw_alignment(shape.data() + static_cast<std::size_t>(d.pattern_dim) * m,
                                w.data(), m, band, pattern.config.znorm);
    // The pattern drawn above the window, with the aligned pairs joined.
    double lo = std::numeric_limits<double>::infinity(), hi = -lo;
    for (const double v : a.window) lo = std::min(lo, v), hi = std::max(hi, v);
    double qlo = std::numeric_limits<double>::infinity(), qhi = -qlo;
    for (const double v : a.query) qlo = std::min(qlo, v), qhi = std::max(qhi, v);
    const double lift = hi - qlo + 0.3 * (hi - lo + qhi - qlo + 1e-9);
    const std::string name = "dim" + std::to_string(r);
    {
      std::ofstream q(scratch.file(name + "_query.dat")), wdat(scratch.file(name + "_window.dat")),
          links(scratch.file(name + "_path.dat"));
      for (int k = 0; k < m; ++k) {
        q << k << ' ' << a.query[static_cast<std::size_t>(k)] + lift << '\n';
        wdat << k << ' ' << a.window[static_cast<std::size_t>(k)] << '\n';
      }
      const std::size_t stride = std::max<std::size_t>(1, a.path.size() / 60);
      for (std::size_t p = 0; p < a.path.size(); p += stride) {
        const auto [i, j] = a.path[p];
        links << i << ' ' << a.query[static_cast<std::size_t>(i)] + lift << "\n"
              << j << ' ' << a.window[static_cast<std::size_t>(j)] << "\n\n";
      }
    }
    const bool home = d.stream_dim == pattern.home_channel[static_cast<std::size_t>(d.pattern_dim)];
    gp << "set title "
       << quoted("pattern dim " + std::to_string(d.pattern_dim) + " on channel " +
                 view.channel_names[static_cast<std::size_t>(d.stream_dim)] +
                 (home ? "" : " (switched)") + ", DTW distance " + std::to_string(a.distance))
       << " noenhanced\n";
    gp << "unset ytics\nplot " << quoted(scratch.file(name + "_path.dat").string())
       << " with lines lc rgb '#aaaaaa' title 'warping path', "
       << quoted(scratch.file(name + "_query.dat").string())
       << " with lines lw 2 lc rgb '#d95f02' title 'pattern', "
       << quoted(scratch.file(name + "_window.dat").string())
       << " with lines lw 2 lc rgb '#1b9e77' title 'matched window'\n";
  }
  gp << "unset multiplot\n";
  {
    std::ofstream script(scratch.file("plot.gp"));
    script << gp.str();
  }
  run_gnuplot(scratch.file("plot.gp"));
  std::cerr << "plot: wrote " << o.out << "\n";
  return 0;
}

int run(const PlotOptions& o) {
  const config::Config cfg = config::load_config(o.config_path);
  const config::DeviceProfile& device = o.run.device_of(cfg);
  const sensors::Recording rec = o.source.read_for(device);
  const pipeline::CompiledLibrary library = pipeline::compile_library(cfg);
  const pipeline::CompiledPattern* pattern = nullptr;
  for (const auto& p : library.patterns)
    if (p.config.device == device.name && (o.pattern.empty() || p.config.name == o.pattern)) {
      pattern = &p;
      break;
    }
  if (!pattern)
    throw Error("no pattern " + (o.pattern.empty() ? "" : "'" + o.pattern + "' ") + "for device '" +
                device.name + "'");
  std::vector<pipeline::Alert> alerts;
  o.run.run(cfg, rec, [&](const std::vector<pipeline::Alert>& batch) {
    for (const auto& a : batch)
      if (a.pattern == pattern->config.name) alerts.push_back(a);
  });
  return o.alert >= 0 ? detection(o, rec, library, *pattern, alerts)
                      : overview(o, rec, library, *pattern, alerts);
}

}  // namespace

void add_plot(CLI::App& app, int& exit_code) {
  auto options = std::make_shared<PlotOptions>();
  options->run.batch_frames = 200;  // whole recordings: fewer, larger batches, same alerts
  auto* cmd = app.add_subcommand(
      "plot", "draw a recording's detections (overview) or one detection (--alert N) with gnuplot");
  add_engine_flags(*cmd, options->config_path, options->source, options->run);
  cmd->add_option("--out", options->out, "output file, .svg or .png")->required();
  cmd->add_option("--pattern", options->pattern, "pattern to show (default: the device's first)");
  cmd->add_option("--alert", options->alert, "show this alert (0-based) of the pattern in detail");
  cmd->add_option("--events", options->events_file,
                  "events file (START END per line) instead of the recording's annotation");
  cmd->add_option("--width", options->width, "pixels (default 1200)");
  cmd->add_option("--height", options->height, "pixels (default by plot kind)");
  on_run(*cmd, exit_code, [options] { return run(*options); });
}

}  // namespace gw::cli
