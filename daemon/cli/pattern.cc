// gaitwatch pattern export: writes every example of a config's pattern as a
// template file (the pattern's channels, the transforms' lead-in rows first,
// then the window), and prints the YAML items that use them, so that a
// pattern cut from recordings can be shipped without the recordings.
#include <charconv>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <system_error>

#include "common/error.h"
#include "daemon/cli/cli.h"

namespace gw::cli {
namespace {

namespace fs = std::filesystem;

struct ExportOptions {
  std::string config_path;
  std::string pattern;
  std::string out_dir;
};

// The shortest text that reads back as the same float (integers stay integers).
std::string exact_text(float value) {
  char buffer[32];
  const auto [end, error] = std::to_chars(buffer, buffer + sizeof buffer, value);
  if (error != std::errc()) throw Error("cannot format a sample value");
  return std::string(buffer, end);
}

// "positive_01_S02R01_54552.csv" for a window, "negative_03.csv" for a template.
std::string template_name(const config::PatternExample& example, int number) {
  const std::string index = (number < 10 ? "0" : "") + std::to_string(number);
  std::string name = (example.negative ? "negative_" : "positive_") + index;
  if (example.source)
    name += "_" + fs::path(example.source->file).stem().string() + "_" +
            std::to_string(example.source->start);
  return name + ".csv";
}

void write_template(const fs::path& file, const config::PatternConfig& pattern,
                    const config::PatternExample& example) {
  const std::size_t dims = pattern.channels.size();
  const std::size_t rows = dims == 0 ? 0 : example.raw.size() / dims;
  std::ofstream out(file, std::ios::trunc);
  if (!out) throw Error("cannot write " + file.string());
  for (std::size_t d = 0; d < dims; ++d) out << (d ? "," : "") << pattern.channels[d];
  out << "\n";
  for (std::size_t s = 0; s < rows; ++s) {
    for (std::size_t d = 0; d < dims; ++d)
      out << (d ? "," : "") << exact_text(example.raw[d * rows + s]);
    out << "\n";
  }
  out.close();
  if (!out) throw Error("cannot write " + file.string());
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

  std::string positives, negatives;
  int positive_count = 0, negative_count = 0;
  for (const auto& example : pattern->examples) {
    const int number = example.negative ? ++negative_count : ++positive_count;
    const fs::path file = out_dir / template_name(example, number);
    write_template(file, *pattern, example);
    std::string item = "      - {template: " +
                       file.lexically_normal().lexically_relative(config_dir).string() + "}";
    if (example.source)
      item += "  # " + fs::path(example.source->file).filename().string() + ":" +
              std::to_string(example.source->start) + ":" + std::to_string(example.source->end);
    (example.negative ? negatives : positives) += item + "\n";
  }
  std::cout << "    examples:\n" << positives;
  if (!negatives.empty()) std::cout << "    negatives:\n" << negatives;
  std::cerr << "pattern export: " << positive_count << " positive and " << negative_count
            << " negative templates of '" << pattern->name << "' ("
            << (pattern->examples.empty() ? 0 : pattern->examples[0].lead_in) << " lead-in + " << pattern->length << " rows each) in " << out_dir.string() << "\n";
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
}

}  // namespace gw::cli
