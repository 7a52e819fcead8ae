#include "kernels/multi_device_backend.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <exception>
#include <future>
#include <limits>
#include <unordered_map>
#include <utility>

#include "common/diagnostics.h"
#include "common/worker_pool.h"

namespace gw::kernels {
namespace {

// A batch that breaks the SearchBackend contract (samples omitted that the
// member does not hold): the caller's error, not the device's.
class BadBatch : public Error {
 public:
  using Error::Error;
};

class MultiDeviceBackend final : public SearchBackend {
 public:
  MultiDeviceBackend(std::vector<SearchMember> members, int copy_threads)
      : copy_pool_(std::max(1, copy_threads), "gw-multi-copy") {
    if (members.size() < 2)
      throw Error("multi-device search: needs at least two members, got " +
                  std::to_string(members.size()));
    for (SearchMember& m : members) {
      if (!m.backend) throw Error("multi-device search: member " + m.label + " has no backend");
      members_.emplace_back();
      members_.back().backend = std::move(m.backend);
      members_.back().label = std::move(m.label);
    }
  }

  std::string name() const override {
    std::string labels;
    std::size_t live = 0;
    for (const Member& m : members_) {
      if (m.lost) continue;
      labels += (live++ == 0 ? "" : ", ") + m.label;
    }
    const auto first = std::find_if(members_.begin(), members_.end(),
                                    [](const Member& m) { return !m.lost; });
    if (first == members_.end()) return "multi-device search, no device left";
    return first->backend->name() + " x" + std::to_string(live) + " [" + labels + "]";
  }

  void set_library(std::shared_ptr<const PatternLibrary> library) override {
    // Checked once here, so that no member takes a library another rejects.
    if (library) validate_library(*library);
    for (std::size_t m = 0; m < members_.size(); ++m) {
      if (members_[m].lost) continue;
      try {
        members_[m].backend->set_library(library);
      } catch (...) {
        // The previous library stays in effect everywhere (the contract).
        for (std::size_t back = 0; back < m; ++back) {
          if (members_[back].lost) continue;
          try {
            members_[back].backend->set_library(library_);
          } catch (...) {
          }
        }
        throw;
      }
    }
    library_ = std::move(library);
    // No member holds any stream's samples now: streams are placed afresh
    // (keys of views the new library dropped are not kept), and what the
    // members keep per stream is freed.
    std::vector<std::uint64_t> keys;
    keys.reserve(owner_.size());
    for (const auto& [key, owner] : owner_) keys.push_back(key);
    forget_streams(keys);
  }

  SearchResult search(const SearchBatch& batch) override {
    SearchResult result;
    search_into(batch, result);
    return result;
  }

  int held_samples(const StreamSlice& slice) const override {
    const auto found = owner_.find(slice.stream_key);
    if (found == owner_.end()) return 0;
    return members_[found->second.member].backend->held_samples(slice);
  }

  void forget_streams(const std::vector<std::uint64_t>& stream_keys) override {
    std::vector<std::vector<std::uint64_t>> by_member(members_.size());
    for (const std::uint64_t key : stream_keys) {
      const auto found = owner_.find(key);
      if (found == owner_.end()) continue;
      members_[found->second.member].load -= found->second.load;
      by_member[found->second.member].push_back(key);
      owner_.erase(found);
    }
    for (std::size_t m = 0; m < members_.size(); ++m)
      if (!members_[m].lost && !by_member[m].empty()) members_[m].backend->forget_streams(by_member[m]);
  }

  void search_into(const SearchBatch& batch, SearchResult& result) override {
    if (least_loaded() == members_.size()) throw Error("multi-device search: no device left");
    // Which member searches each slice, and where it sits in that member's part.
    slice_member_.resize(batch.streams.size());
    slice_local_.resize(batch.streams.size());
    for (Member& m : members_) {
      m.slices.clear();
      m.part.streams.clear();
      m.data_size = 0;
    }
    for (std::size_t s = 0; s < batch.streams.size(); ++s) {
      const StreamSlice& slice = batch.streams[s];
      const std::size_t size = slice.data_size();
      if (slice.offset + size > batch.data.size() || slice.omitted < 0 || slice.omitted > slice.length)
        throw BadBatch("search batch: slice " + std::to_string(s) + " does not fit the batch's data");
      const std::size_t m = owner_of(slice);
      Member& member = members_[m];
      slice_member_[s] = static_cast<std::uint32_t>(m);
      slice_local_[s] = static_cast<std::uint32_t>(member.slices.size());
      member.slices.push_back(static_cast<std::uint32_t>(s));
      member.part.streams.resize(member.slices.size());
      StreamSlice& copy = member.part.streams.back();
      copy = slice;
      copy.offset = member.data_size;
      member.data_size += size;
    }
    const auto started = std::chrono::steady_clock::now();
    // The parts' samples, copied by slices on the pool (memory-bound).
    for (Member& m : members_)
      if (!m.lost) m.part.data.resize(m.data_size);
    copy_pool_.for_ranges(batch.streams.size(), kSlicesPerRange, [&](std::size_t begin, std::size_t end) {
      for (std::size_t s = begin; s < end; ++s) {
        const StreamSlice& slice = batch.streams[s];
        Member& member = members_[slice_member_[s]];
        std::copy_n(batch.data.begin() + static_cast<std::ptrdiff_t>(slice.offset), slice.data_size(),
                    member.part.data.begin() +
                        static_cast<std::ptrdiff_t>(member.part.streams[slice_local_[s]].offset));
      }
    });
    const auto copied = std::chrono::steady_clock::now();
    // Each member searches its part and counts its matches per slice on its
    // own thread (the first busy member on this one); then the slices'
    // places in the result are laid out in batch order, and the matches are
    // written there by slices on the pool.
    std::vector<std::pair<std::size_t, std::exception_ptr>> failed;
    run_on_members([&](std::size_t m) { search_part(m); }, failed);
    for (const auto& [m, error] : failed) {
      try {
        std::rethrow_exception(error);
      } catch (const BadBatch&) {
        throw;  // the caller's mistake: no device is retired
      } catch (...) {
      }
    }
    if (!failed.empty()) retire(failed);
    const auto searched = std::chrono::steady_clock::now();
    std::size_t total = 0;
    result.stats = SearchStats{};
    slice_place_.resize(batch.streams.size());
    for (std::size_t s = 0; s < batch.streams.size(); ++s) {
      slice_place_[s] = total;
      total += members_[slice_member_[s]].counts[slice_local_[s]];
    }
    for (Member& m : members_) {
      if (m.lost || m.slices.empty()) continue;
      result.stats.add(m.result.stats);
      // Where each of its slices' matches start in its own result.
      m.first_match.resize(m.slices.size());
      std::size_t at = 0;
      for (std::size_t l = 0; l < m.slices.size(); ++l) {
        m.first_match[l] = at;
        at += m.counts[l];
      }
    }
    result.matches.resize(total);
    copy_pool_.for_ranges(batch.streams.size(), kSlicesPerRange, [&](std::size_t begin, std::size_t end) {
      for (std::size_t s = begin; s < end; ++s) {
        const Member& member = members_[slice_member_[s]];
        const std::uint32_t local = slice_local_[s];
        const Match* from = member.result.matches.data() + member.first_match[local];
        Match* out = result.matches.data() + slice_place_[s];
        for (std::size_t k = 0; k < member.counts[local]; ++k) {
          out[k] = from[k];
          out[k].slice = static_cast<std::uint32_t>(s);
        }
      }
    });
    if (diagnostics().cuda_stage_times) {
      const auto ms = [](auto from, auto to) {
        return std::chrono::duration<double, std::milli>(to - from).count();
      };
      std::string members;
      for (const Member& m : members_)
        if (!m.lost && !m.slices.empty())
          members += (members.empty() ? "" : ",") + std::string("{\"search_ms\":") +
                     std::to_string(m.search_ms) + ",\"slices\":" + std::to_string(m.slices.size()) + "}";
      std::fprintf(stderr,
                   "{\"multi_stage_ms\":{\"copy\":%f,\"members\":[%s],\"search\":%f,\"merge\":%f},"
                   "\"matches\":%zu}\n",
                   ms(started, copied), members.c_str(), ms(copied, searched),
                   ms(searched, std::chrono::steady_clock::now()), total);
    }
  }

 private:
  struct Member {
    std::unique_ptr<SearchBackend> backend;
    std::string label;
    bool lost = false;
    std::uint64_t load = 0;              // dims of the streams it owns
    std::vector<std::uint32_t> slices;   // this batch's slices it searches, ascending
    std::size_t data_size = 0;
    SearchBatch part;
    SearchResult result;
    std::vector<std::size_t> counts;       // its matches per slice of part
    std::vector<std::size_t> first_match;  // where each slice's matches start in result
    double search_ms = 0;
  };
  struct Owner {
    std::size_t member = 0;
    std::uint64_t load = 0;
  };

  std::size_t least_loaded() const {
    std::size_t best = members_.size();
    for (std::size_t m = 0; m < members_.size(); ++m)
      if (!members_[m].lost && (best == members_.size() || members_[m].load < members_[best].load))
        best = m;
    return best;
  }

  std::size_t owner_of(const StreamSlice& slice) {
    const auto found = owner_.find(slice.stream_key);
    if (found != owner_.end()) return found->second.member;
    const std::size_t m = least_loaded();
    const auto load = static_cast<std::uint64_t>(std::max(slice.dims, 1));
    owner_.emplace(slice.stream_key, Owner{m, load});
    members_[m].load += load;
    return m;
  }

  // Runs task(m) for every live member with slices in this batch, each on
  // its own thread but the first (on this one); collects the failures.
  template <typename Task>
  void run_on_members(const Task& task, std::vector<std::pair<std::size_t, std::exception_ptr>>& failed) {
    failed.clear();
    std::vector<std::pair<std::size_t, std::future<void>>> running;
    std::size_t here = members_.size();
    for (std::size_t m = 0; m < members_.size(); ++m) {
      if (members_[m].lost || members_[m].slices.empty()) continue;
      if (here == members_.size()) {
        here = m;
        continue;
      }
      running.emplace_back(m, std::async(std::launch::async, [&task, m] { task(m); }));
    }
    if (here < members_.size()) {
      try {
        task(here);
      } catch (...) {
        failed.emplace_back(here, std::current_exception());
      }
    }
    for (auto& [m, future] : running) {
      try {
        future.get();
      } catch (...) {
        failed.emplace_back(m, std::current_exception());
      }
    }
  }

  void search_part(std::size_t m) {
    const auto started = std::chrono::steady_clock::now();
    Member& member = members_[m];
    for (std::size_t l = 0; l < member.slices.size(); ++l) {
      const StreamSlice& slice = member.part.streams[l];
      if (slice.omitted > 0 && slice.omitted > member.backend->held_samples(slice))
        throw BadBatch("search batch: slice " + std::to_string(member.slices[l]) + " omits " +
                       std::to_string(slice.omitted) + " samples its device does not hold");
    }
    SearchBatch& part = member.part;
    member.backend->search_into(part, member.result);
    // Matches per local slice (the result is in slice order).
    member.counts.assign(member.slices.size(), 0);
    for (const Match& match : member.result.matches) {
      if (match.slice >= member.counts.size())
        throw Error("multi-device search: " + member.label + " returned a match of slice " +
                    std::to_string(match.slice) + " of " + std::to_string(member.counts.size()));
      ++member.counts[match.slice];
    }
    member.search_ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - started).count();
  }

  // Retires the failed members and moves their streams; throws.
  [[noreturn]] void retire(const std::vector<std::pair<std::size_t, std::exception_ptr>>& failed) {
    std::string what;
    for (const auto& [m, error] : failed) {
      members_[m].lost = true;
      members_[m].load = 0;
      std::string reason;
      try {
        std::rethrow_exception(error);
      } catch (const std::exception& e) {
        reason = e.what();
      } catch (...) {
        reason = "unknown error";
      }
      what += (what.empty() ? "" : "; ") + members_[m].label + " (" + reason + ")";
    }
    if (least_loaded() == members_.size()) std::rethrow_exception(failed.front().second);
    std::size_t moved = 0;
    for (auto& [key, owner] : owner_) {
      if (!members_[owner.member].lost) continue;
      owner.member = least_loaded();
      members_[owner.member].load += owner.load;
      ++moved;
    }
    std::size_t live = 0;
    for (const Member& m : members_) live += m.lost ? 0 : 1;
    throw SearchDeviceLost("search device lost: " + what + "; its " + std::to_string(moved) +
                               " streams moved to the " + std::to_string(live) +
                               " device(s) left; the batch is searched again",
                           failed.size());
  }

  // Slices per range of the copies on the pool: a W1 wearer's slices are a
  // few kB each.
  static constexpr std::size_t kSlicesPerRange = 256;
  std::vector<Member> members_;
  std::shared_ptr<const PatternLibrary> library_;  // what every member has
  WorkerPool copy_pool_;
  std::unordered_map<std::uint64_t, Owner> owner_;
  std::vector<std::uint32_t> slice_member_, slice_local_;
  std::vector<std::size_t> slice_place_;  // where each slice's matches start in the result
};

}  // namespace

std::unique_ptr<SearchBackend> make_multi_device_backend(std::vector<SearchMember> members,
                                                         int copy_threads) {
  return std::make_unique<MultiDeviceBackend>(std::move(members), copy_threads);
}

}  // namespace gw::kernels
