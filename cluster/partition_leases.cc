#include "cluster/partition_leases.h"

#include <nats/nats.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <set>

#include "cluster/partition.h"
#include "common/error.h"

namespace gw::cluster {

namespace {

constexpr const char* kWorkerPrefix = "worker.";
constexpr const char* kPartitionPrefix = "partition.";

std::string partition_key(std::uint32_t partition) { return kPartitionPrefix + std::to_string(partition); }

}  // namespace

std::string default_worker_id() {
  char host[256] = {};
  if (gethostname(host, sizeof host - 1) != 0) host[0] = '\0';
  std::string id;
  for (const char* c = host; *c; ++c)
    id += is_plain_name_char(*c) ? *c : '_';
  if (id.empty()) id = "host";
  return id + "-" + std::to_string(getpid());
}

PartitionLeases::PartitionLeases(const NatsClient& client, const PartitionLeasesOptions& options, Callback on_gained,
                                 Callback on_lost)
    : client_(client), options_(options), on_gained_(std::move(on_gained)), on_lost_(std::move(on_lost)) {
  if (options_.partitions == 0) throw Error("partition leases: partitions must be at least 1");
  if (options_.worker_id.empty()) options_.worker_id = default_worker_id();
  natsStatus s = js_KeyValue(&kv_, client_.jetstream(), options_.bucket.c_str());
  if (s == NATS_NOT_FOUND) {
    kvConfig config;
    kvConfig_Init(&config);
    config.Bucket = options_.bucket.c_str();
    config.History = 1;
    config.TTL = static_cast<int64_t>(std::llround(options_.ttl_s * 1e9));  // nanoseconds, as a stream's MaxAge
    config.StorageType = js_FileStorage;
    config.Replicas = options_.replicas;
    s = js_CreateKeyValue(&kv_, client_.jetstream(), &config);
  }
  if (s != NATS_OK)
    throw Error("nats " + client_.url() + ": lease bucket " + options_.bucket + ": " + nats_error(s));
  round();
  thread_ = std::thread([this] {
    const auto period = std::chrono::duration<double>(options_.ttl_s / 3);
    for (;;) {
      {
        std::unique_lock<std::mutex> lock(sleep_mu_);
        if (sleep_cv_.wait_for(lock, period, [this] { return stopping_; })) return;
      }
      round();
    }
  });
}

PartitionLeases::~PartitionLeases() {
  stop();
  kvStore_Destroy(kv_);
}

void PartitionLeases::stop() {
  {
    std::lock_guard<std::mutex> lock(sleep_mu_);
    if (stopped_) return;
    stopped_ = stopping_ = true;
  }
  sleep_cv_.notify_all();
  if (thread_.joinable()) thread_.join();
  for (const std::uint32_t partition : held()) release(partition);
  kvStore_Delete(kv_, (kWorkerPrefix + options_.worker_id).c_str());
}

std::vector<std::uint32_t> PartitionLeases::held() const {
  std::lock_guard<std::mutex> lock(held_mu_);
  std::vector<std::uint32_t> partitions;
  for (const auto& [partition, revision] : held_) partitions.push_back(partition);
  return partitions;
}

void PartitionLeases::release(std::uint32_t partition) {
  on_lost_(partition);
  {
    std::lock_guard<std::mutex> lock(held_mu_);
    held_.erase(partition);
  }
  if (kvStore_Delete(kv_, partition_key(partition).c_str()) != NATS_OK) ++counters_.errors;
  ++counters_.released;
}

void PartitionLeases::round() {
  ++counters_.rounds;
  std::uint64_t revision = 0;
  if (kvStore_PutString(&revision, kv_, (kWorkerPrefix + options_.worker_id).c_str(), "alive") != NATS_OK)
    ++counters_.errors;

  // Renewals first: a lease close to expiry matters more than the count.
  std::map<std::uint32_t, std::uint64_t> held;
  {
    std::lock_guard<std::mutex> lock(held_mu_);
    held = held_;
  }
  for (auto& [partition, last] : held) {
    std::uint64_t renewed = 0;
    const natsStatus s =
        kvStore_UpdateString(&renewed, kv_, partition_key(partition).c_str(), options_.worker_id.c_str(), last);
    if (s == NATS_OK) {
      last = renewed;
      continue;
    }
    // The server refuses a stale revision with a JetStream error; anything
    // else (a timeout, the connection away) leaves the lease to the next
    // round, as it may still be ours.
    if (s != NATS_ERR) {
      ++counters_.errors;
      continue;
    }
    spdlog::warn("leases: partition {} lost (its lease expired and {} was refused)", partition, options_.worker_id);
    on_lost_(partition);
    ++counters_.lost;
    last = 0;
  }
  for (auto it = held.begin(); it != held.end();) it = it->second == 0 ? held.erase(it) : std::next(it);
  {
    std::lock_guard<std::mutex> lock(held_mu_);
    held_ = held;
  }

  kvKeysList keys{};
  std::set<std::string> present;
  std::uint32_t live = 0;
  const natsStatus listed = kvStore_Keys(&keys, kv_, nullptr);
  if (listed == NATS_OK) {
    for (int i = 0; i < keys.Count; ++i) {
      const std::string key = keys.Keys[i];
      if (key.rfind(kWorkerPrefix, 0) == 0) ++live;
      present.insert(key);
    }
    kvKeysList_Destroy(&keys);
  } else if (listed != NATS_NOT_FOUND) {
    ++counters_.errors;
    return;  // without the keys neither the share nor the free partitions are known
  }
  live = std::max<std::uint32_t>(live, 1);
  counters_.live_workers = live;
  const std::size_t share = (options_.partitions + live - 1) / live;

  while (held.size() > share) {
    const std::uint32_t partition = std::prev(held.end())->first;
    held.erase(std::prev(held.end()));
    release(partition);
  }
  const std::uint32_t start = partition_of(static_cast<std::uint32_t>(std::hash<std::string>{}(options_.worker_id)),
                                           options_.partitions);
  for (std::uint32_t i = 0; i < options_.partitions && held.size() < share; ++i) {
    const std::uint32_t partition = (start + i) % options_.partitions;
    if (held.count(partition) || present.count(partition_key(partition))) continue;
    std::uint64_t created = 0;
    if (kvStore_CreateString(&created, kv_, partition_key(partition).c_str(), options_.worker_id.c_str()) != NATS_OK)
      continue;  // another worker was first
    held[partition] = created;
    {
      std::lock_guard<std::mutex> lock(held_mu_);
      held_[partition] = created;
    }
    ++counters_.claimed;
    on_gained_(partition);
  }
}

nlohmann::json PartitionLeases::counters_json() const {
  const std::vector<std::uint32_t> partitions = held();
  return {{"worker", options_.worker_id},
          {"live_workers", counters_.live_workers.load()},
          {"held", partitions.size()},
          {"partitions", partitions},
          {"rounds", counters_.rounds.load()},
          {"claimed", counters_.claimed.load()},
          {"released", counters_.released.load()},
          {"lost", counters_.lost.load()},
          {"errors", counters_.errors.load()}};
}

}  // namespace gw::cluster
