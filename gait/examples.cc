#include "gait/examples.h"

#include <cerrno>
#include <cstdio>
#include <charconv>
#include <cstring>
#include <fstream>
#include <sstream>

#include "common/error.h"

namespace gw::gait {

std::vector<StrideExample> read_stride_examples(const std::string& path, int curve_points) {
  std::ifstream in(path);
  if (!in) throw Error(path + ": cannot read stride examples: " + std::strerror(errno));
  std::vector<StrideExample> out;
  std::string line;
  int number = 0;
  bool header_seen = false;
  const auto fail = [&](const std::string& message) {
    throw Error(path + ":" + std::to_string(number) + ": " + message);
  };
  while (std::getline(in, line)) {
    ++number;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty() || line[0] == '#') continue;
    if (!header_seen) {
      header_seen = true;
      if (line.rfind("label,subject,", 0) != 0) fail("expected the header line label,subject,c0,...");
      continue;
    }
    std::vector<std::string> fields;
    std::stringstream split(line);
    std::string field;
    while (std::getline(split, field, ',')) fields.push_back(field);
    if (fields.size() != 2 + 2 * static_cast<std::size_t>(curve_points))
      fail("expected label, subject and " + std::to_string(2 * curve_points) + " curve values, got " +
           std::to_string(fields.size()) + " fields");
    StrideExample example;
    if (fields[0] == "normal") example.abnormal = false;
    else if (fields[0] == "abnormal") example.abnormal = true;
    else fail("label '" + fields[0] + "': expected normal or abnormal");
    example.subject = fields[1];
    example.curve.reserve(fields.size() - 2);
    for (std::size_t i = 2; i < fields.size(); ++i) {
      const std::string& text = fields[i];
      float value = 0;
      const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
      if (error != std::errc() || end != text.data() + text.size() || !(value >= -1e6f && value <= 1e6f))
        fail("value " + std::to_string(i - 1) + " '" + text + "' is not a number");
      example.curve.push_back(value);
    }
    out.push_back(std::move(example));
  }
  if (!header_seen || out.empty()) throw Error(path + ": no stride examples");
  return out;
}

void write_stride_examples(const std::string& path, const std::vector<StrideExample>& examples,
                           const std::string& comment) {
  std::ofstream out(path);
  if (!out) throw Error(path + ": cannot write: " + std::strerror(errno));
  std::istringstream lines(comment);
  for (std::string line; std::getline(lines, line);) out << "# " << line << "\n";
  const std::size_t values = examples.empty() ? 0 : examples.front().curve.size();
  out << "label,subject";
  for (std::size_t i = 0; i < values; ++i) out << ",c" << i;
  out << "\n";
  char text[32];
  for (const StrideExample& e : examples) {
    out << (e.abnormal ? "abnormal" : "normal") << "," << e.subject;
    for (float v : e.curve) {
      const int n = std::snprintf(text, sizeof text, "%.4f", static_cast<double>(v));
      out << "," << std::string(text, static_cast<std::size_t>(n));
    }
    out << "\n";
  }
  if (!out) throw Error(path + ": cannot write");
}

}  // namespace gw::gait
