// gaitwatch pattern export: writes every example of a config's pattern as a
// template file (the pattern's channels, the transforms' lead-in rows first,
// then the window), and prints the YAML items that use them, so that a
// pattern cut from recordings can be shipped without the recordings.
#include <charconv>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <system_error>

#include "common/error.h"
#include "daemon/cli/cli.h"
#include "pipeline/detector.h"
#include "pipeline/evaluation.h"

namespace gw::cli {
namespace {

namespace fs = std::filesystem;

struct ExportOptions {
  std::string config_path;
  std::string pattern;
  std::string out_dir;
};

// "positive_01_S02R01_54552.csv" for a window, "negative_03.csv" for a template.
std::string template_name(const config::PatternExample& example, int number) {
  const std::string index = (number < 10 ? "0" : "") + std::to_string(number);
  std::string name = (example.negative ? "negative_" : "positive_") + index;
  if (example.source)
    name += "_" + fs::path(example.source->file).stem().string() + "_" +
            std::to_string(example.source->start);
  return name + ".csv";
}

int run(const ExportOptions& o) {
  const config::Config cfg = config::load_config(o.config_path);
  const config::PatternConfig* pattern = nullptr;
  for (const auto& p : cfg.patterns)
    if (p.name == o.pattern) pattern = &p;
  if (pattern == nullptr) throw Error("no pattern '" + o.pattern + "' in " + o.config_path);

  std::error_code ec;
  fs::create_directories(o.out_dir, ec);
  if (ec) throw Error("cannot create " + o.out_dir + ": " + ec.message());
  // The items name the templates as the config would: relative to its directory.
  const fs::path config_dir = fs::absolute(o.config_path).parent_path();
  const fs::path out_dir = fs::absolute(o.out_dir);

  // A normalised pattern's templates need their wearers' baselines, as the
  // engine's compiler learned them (a template holds only the window).
  std::vector<pipeline::CompiledExample> compiled;
  if (pattern->normalise.enabled) {
    config::Config single = cfg;
    single.patterns = {*pattern};
    compiled = pipeline::compile_library(single).patterns.at(0).examples;
  }
  std::string positives, negatives;
  int positive_count = 0, negative_count = 0;
  for (std::size_t e = 0; e < pattern->examples.size(); ++e) {
    const config::PatternExample& example = pattern->examples[e];
    const int number = example.negative ? ++negative_count : ++positive_count;
    const fs::path file = out_dir / template_name(example, number);
    write_template_csv(file.string(), *pattern, example);
    const config::ChannelBaseline* baseline =
        !compiled.empty() && compiled[e].baseline ? &*compiled[e].baseline : nullptr;
    // The template's own name does not say whose window it is: the item
    // does, so that --loso leaves it out with its subject.
    std::string subject = example.subject;
    if (subject.empty()) {
      const pipeline::RecordingName named = pipeline::recording_name(
          example.source ? example.source->file : example.template_file);
      if (named.known) subject = named.subject;
    }
    (example.negative ? negatives : positives) +=
        "      - " +
        example_item_yaml(file.lexically_normal().lexically_relative(config_dir).string(),
                          subject, baseline, pattern->normalise, example.source) +
        "\n";
  }
  std::cout << "    examples:\n" << positives;
  if (!negatives.empty()) std::cout << "    negatives:\n" << negatives;
  std::cerr << "pattern export: " << positive_count << " positive and " << negative_count
            << " negative templates of '" << pattern->name << "' ("
            << (pattern->examples.empty() ? 0 : pattern->examples[0].lead_in) << " lead-in + " << pattern->length << " rows each) in " << out_dir.string() << "\n";
  return 0;
}

// A window of a recording, as the device sees it (mapped and resampled like
// `detect` reads it), as a template CSV of the device's channels.
struct CutOptions {
  std::string config_path;
  RecordingSource source;
  std::string device;
  std::int64_t start = 0;
  std::int64_t end = 0;
  int lead_in = 0;
  std::string out_file;
};

int run_cut(const CutOptions& o) {
  const config::Config cfg = config::load_config(o.config_path);
  OfflineRun which;
  which.device = o.device;
  const config::DeviceProfile& device = which.device_of(cfg);
  const sensors::Recording rec = o.source.read_for(device);
  const std::int64_t first = o.start - o.lead_in;
  if (first < 0 || o.end <= o.start || o.end > static_cast<std::int64_t>(rec.samples()))
    throw Error("window " + std::to_string(o.start) + ".." + std::to_string(o.end) + " with " +
                std::to_string(o.lead_in) + " lead-in samples lies outside the recording (" +
                std::to_string(rec.samples()) + " samples at " +
                std::to_string(rec.sample_rate_hz) + " Hz)");
  config::PatternConfig shape;
  shape.channels = rec.channel_names;
  config::PatternExample example;
  const std::size_t rows = static_cast<std::size_t>(o.end - first);
  example.raw.resize(rows * rec.channels());
  for (std::size_t c = 0; c < rec.channels(); ++c)
    for (std::size_t s = 0; s < rows; ++s)
      example.raw[c * rows + s] = rec.at(static_cast<std::size_t>(first) + s, c);
  write_template_csv(o.out_file, shape, example);
  return 0;
}

}  // namespace

void add_pattern(CLI::App& app, int& exit_code) {
  auto* pattern = app.add_subcommand("pattern", "work with a config's patterns");
  pattern->require_subcommand(1);
  auto options = std::make_shared<ExportOptions>();
  auto* cmd = pattern->add_subcommand(
      "export",
      "write each example of a pattern as a template CSV (lead-in rows first) into --out and "
      "print the YAML examples/negatives items that use them (paths relative to the config)");
  cmd->add_option("--config", options->config_path, "config file")->required();
  cmd->add_option("--pattern", options->pattern, "pattern name")->required();
  cmd->add_option("--out", options->out_dir, "directory for the template files")->required();
  on_run(*cmd, exit_code, [options] { return run(*options); });

  auto cut = std::make_shared<CutOptions>();
  auto* cut_cmd = pattern->add_subcommand(
      "cut",
      "write a window of a recording, read as --device sees it (channels mapped, resampled), "
      "as a template CSV: --lead-in rows before --start, then the window up to --end");
  cut_cmd->add_option("--config", cut->config_path, "config file")->required();
  cut->source.add_flags(*cut_cmd);
  cut_cmd->add_option("--device", cut->device, "device profile name (default: the first)");
  cut_cmd->add_option("--start", cut->start, "first sample of the window (device rate)")
      ->required();
  cut_cmd->add_option("--end", cut->end, "end of the window, exclusive")->required();
  cut_cmd->add_option("--lead-in", cut->lead_in,
                      "samples before the window the pattern's transforms need");
  cut_cmd->add_option("--out", cut->out_file, "template file to write")->required();
  on_run(*cut_cmd, exit_code, [cut] { return run_cut(*cut); });
}

}  // namespace gw::cli
