// Where a wearer's frames go on the NATS JetStream frame path (docs/scale.md):
// its partition and the subject a gateway publishes its frames on. A gateway
// and every worker must agree on both, across hosts and releases, so the
// hash is fixed here and must not change.
#pragma once

#include <cstdint>
#include <string>

namespace gw::cluster {

// The wearer's partition in [0, partitions): the wearer id mixed by the
// 32-bit finaliser of MurmurHash3 (Appleby), modulo `partitions`. Neighbouring
// ids land apart, so a ward's consecutive wearers spread over the workers.
// `partitions` must be at least 1.
std::uint32_t partition_of(std::uint32_t wearer, std::uint32_t partitions);

// "<prefix>.<partition>.<wearer>", e.g. gw.frames.17.4021: a worker consumes
// its partition with the filter "<prefix>.<partition>.>".
std::string frame_subject(const std::string& prefix, std::uint32_t partition, std::uint32_t wearer);

// Worker ids name lease keys and JetStream consumers, and the lease bucket
// is a JetStream name too: such names hold only characters valid in all of
// them, letters, digits, '-' and '_'.
bool is_plain_name_char(char c);
// Non-empty and every character a plain-name character.
bool is_plain_name(const std::string& name);

}  // namespace gw::cluster
