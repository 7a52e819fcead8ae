// The bundled real walks the gait tests run over: one walk of each gaitpdb
// subject in data/gaitpdb (the *_01.txt[.gz] files), in name order.
#pragma once

#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

namespace gw::gait::testing {

inline std::vector<std::filesystem::path> bundled_walks() {
  std::vector<std::filesystem::path> walks;
  for (const auto& entry : std::filesystem::directory_iterator(std::string(GW_DATA_DIR) + "/gaitpdb"))
    if (entry.path().filename().string().find("_01.txt") != std::string::npos) walks.push_back(entry.path());
  std::sort(walks.begin(), walks.end());
  return walks;
}

}  // namespace gw::gait::testing
