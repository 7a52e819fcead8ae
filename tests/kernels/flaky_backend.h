// A test stand-in for a GPU that can fail (what CI cannot make a real GPU do):
// searches with a CPU backend, records what it was given, and throws once told
// to, like a device that fell off the bus.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "common/error.h"
#include "kernels/search.h"

namespace gw::testing {

class FlakyBackend final : public kernels::SearchBackend {
 public:
  // What the test sees after the backend was handed over.
  struct Record {
    std::atomic<bool> fail{false};  // every search from now on throws
    std::atomic<int> searches{0};
    std::mutex mutex;
    std::set<std::uint64_t> keys;       // stream keys of the slices searched
    std::set<std::uint64_t> forgotten;  // keys passed to forget_streams
  };
  FlakyBackend(std::shared_ptr<Record> record, int threads = 1)
      : record_(std::move(record)), cpu_(kernels::make_cpu_backend(threads)) {}

  std::string name() const override { return "flaky-" + cpu_->name(); }
  void set_library(std::shared_ptr<const kernels::PatternLibrary> library) override {
    cpu_->set_library(std::move(library));
  }
  kernels::SearchResult search(const kernels::SearchBatch& batch) override {
    kernels::SearchResult result;
    search_into(batch, result);
    return result;
  }
  void search_into(const kernels::SearchBatch& batch, kernels::SearchResult& result) override {
    ++record_->searches;
    if (record_->fail) throw Error("CUDA error: an illegal memory access was encountered (test)");
    {
      const std::lock_guard<std::mutex> lock(record_->mutex);
      for (const kernels::StreamSlice& slice : batch.streams) record_->keys.insert(slice.stream_key);
    }
    cpu_->search_into(batch, result);
  }
  void forget_streams(const std::vector<std::uint64_t>& keys) override {
    const std::lock_guard<std::mutex> lock(record_->mutex);
    record_->forgotten.insert(keys.begin(), keys.end());
  }

 private:
  std::shared_ptr<Record> record_;
  std::unique_ptr<kernels::SearchBackend> cpu_;
};

}  // namespace gw::testing
