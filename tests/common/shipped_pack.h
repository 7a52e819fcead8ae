// The shipped freeze pack with its exported templates replaced by the
// recording windows they came from: the config tests check the templates'
// values against the windows, the baseline tests their baselines.
#pragma once

#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <regex>
#include <string>

namespace gw::test {

// The shipped config whose fog pack has each template exported from a
// Daphnet window (config/patterns/fog/{positive,negative}_NN_RECORDING_START.csv,
// `gaitwatch pattern export`) replaced by that window of the recording, its
// baseline (if any) then learned from the recording: a copy of the pack
// written to the folder `dir`, included instead of the shipped one.
inline std::string shipped_config_with_windows(const std::filesystem::path& dir) {
  const std::string config_dir = GW_CONFIG_DIR;
  const std::string data_dir = GW_DATA_DIR;
  const auto read_text = [](const std::string& path) {
    std::ifstream in(path);
    return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  };
  const std::string pack = read_text(config_dir + "/patterns/fog.yaml");
  REQUIRE_FALSE(pack.empty());
  const std::regex exported(
      R"(\{template: fog/(?:positive|negative)_[0-9]+_(S[0-9]+R[0-9]+)_([0-9]+)\.csv)"
      R"((?:, baseline: (?:&\w+ \{[^}]*\}|\*\w+))?\})");
  const std::string windows = std::regex_replace(
      pack, exported, "{file: " + data_dir + "/daphnet/$1.txt, format: daphnet, start: $2}");
  REQUIRE(windows != pack);
  std::ofstream(dir / "fog_windows.yaml") << windows;

  const std::string config = read_text(config_dir + "/gaitwatch.yaml");
  const std::string shipped_include = "- include: patterns/fog.yaml";
  const std::size_t at = config.find(shipped_include);
  REQUIRE(at != std::string::npos);
  return config.substr(0, at) + "- include: " + (dir / "fog_windows.yaml").string() +
         config.substr(at + shipped_include.size());
}

}  // namespace gw::test
