// The pattern part of the config reader (internal to config/): the
// `patterns:` list of a config, its items and the pattern packs it includes.
#pragma once

#include <string>
#include <vector>

#include "config/config.h"
#include "config/yaml_reader.h"

namespace gw::config::detail {

// Reads `patterns:` of `root` into `patterns`: every item, the packs the
// include items name (resolved against base_dir; `source_name` names the
// config in a pack's notes), then the checks across patterns (unique names,
// agreement between views). Issues go to root.issues() with their key path;
// devices whose channels did not read (device_channels_ok false) are not
// checked against.
void read_patterns(const MapReader& root, const std::string& base_dir,
                   const std::string& source_name, const std::vector<DeviceProfile>& devices,
                   const std::vector<bool>& device_channels_ok,
                   std::vector<PatternConfig>& patterns);

}  // namespace gw::config::detail
