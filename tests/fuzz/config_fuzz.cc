// libFuzzer target for the config loader (config/config.h): any text either
// parses into a Config or is rejected with a ConfigError whose issues name a
// key path or a line; nothing else may escape (no crash, no sanitizer report,
// no other exception type).
//
// Relative files in the input resolve against GW_FUZZ_BASE_DIR, the directory
// of the seed corpus's pattern templates (a small copy of
// config/patterns/*.csv), so that mutated configs reach the pattern loader
// without reading a full recording per run.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>

#include "config/config.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  // Configs are small files; a megabyte of YAML only measures yaml-cpp.
  if (size > 64 * 1024) return -1;
  const std::string text(reinterpret_cast<const char*>(data), size);
  try {
    const gw::config::Config config = gw::config::parse_config(text, "fuzz.yaml", GW_FUZZ_BASE_DIR);
    // Touch what the daemon reads first, so that a Config holding dangling
    // data is caught here and not only in the daemon.
    for (const auto& device : config.devices) {
      if (config.device_by_id(device.id) == nullptr) std::abort();
      if (config.device_by_name(device.name) == nullptr) std::abort();
    }
  } catch (const gw::config::ConfigError& error) {
    if (error.issues().empty()) {
      std::fprintf(stderr, "config_fuzz: a ConfigError without issues\n");
      std::abort();
    }
    for (const auto& issue : error.issues()) {
      if (issue.message.empty()) {
        std::fprintf(stderr, "config_fuzz: an issue without a message\n");
        std::abort();
      }
      (void)issue.to_string("fuzz.yaml");
    }
  } catch (const std::exception& e) {
    // Everything a user can write must come back as a ConfigError that names
    // the key; any other exception is a loader bug.
    std::fprintf(stderr, "config_fuzz: unexpected exception: %s\n", e.what());
    std::abort();
  }
  return 0;
}
