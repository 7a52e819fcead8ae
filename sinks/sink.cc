#include "sinks/sink.h"

#include "sinks/curve.h"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <future>
#include <limits>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <variant>
#include <vector>
#include <zmq.hpp>

#include "common/error.h"
#include "common/thread_name.h"
#include "sinks/store.h"

namespace gw::pipeline {
namespace {

using Clock = std::chrono::steady_clock;
using nlohmann::json;

constexpr auto kRetentionPeriod = std::chrono::minutes(1);
constexpr auto kCheckpointPeriod = std::chrono::milliseconds(500);
// A WAL past SinkOptions::wal_restart_bytes: the checkpointer's PASSIVE
// passes (at most kWalCatchUpPasses, until at most kWalRestartRestBytes
// are left to copy) leave the writer little to copy when the checkpoints
// keep up with it (else the writer's copy is what slows it to their pace);
// the writer then has the WAL start again between two transactions,
// waiting at most kWalRestartWaitMs for readers of older snapshots. When it
// starts again, a file grown past kWalFileLimitFactor times the limit (held
// off by a reader for a while) is cut back to that.
constexpr int kWalCatchUpPasses = 4;
constexpr std::uint64_t kWalRestartRestBytes = 8u << 20;
constexpr int kWalRestartWaitMs = 10;
constexpr std::uint64_t kWalFileLimitFactor = 4;
// How long closing the socket may wait for queued messages to reach
// subscribers; bounds how long stop() can take on the ZeroMQ side.
constexpr int kLingerMs = 1000;
// While running, a batch that fails to commit is retried until it commits
// (new alerts are held meanwhile, up to max_pending_alerts), with a back-off
// that doubles from kFirstBackoff up to kMaxBackoff.
constexpr auto kFirstBackoff = std::chrono::milliseconds(50);
constexpr auto kMaxBackoff = std::chrono::seconds(2);
// Once drain() has been called, a failing batch is retried kDrainBackoff
// apart until the drain's deadline, then given up.
constexpr auto kDrainBackoff = std::chrono::milliseconds(200);
// Room in the writer's queue besides the alerts held: each group's end
// marker (at most one per alert) and status messages.
constexpr std::size_t kQueueRoomBesidesAlerts = 4096;
const std::string kStatsTopic = "stats.";
// How long after a failed save of devices' rows the writer tries again.
constexpr auto kDeviceRowsRetry = std::chrono::seconds(1);
// Devices' rows stored in one transaction at most: thousands of wearers'
// rows go in several, so that no alert waits behind all of them.
constexpr std::size_t kDeviceRowsPerTransaction = 2048;
// From this many alerts in a transaction their JSON (the rows' dims texts
// and the bodies) is made on a thread of its own while the transaction runs;
// fewer are not worth starting one.
constexpr std::size_t kAlertsForSerializer = 64;

struct StatsMessage {
  json body;
};
// Ends the alerts of one submit_all() (a tick's alerts): nothing more of that
// group is coming, so the writer commits without waiting for the interval.
struct GroupEnd {};
// Devices' last frames for table wearer_devices (submit_wearer_devices).
struct DeviceRows {
  std::vector<WearerDeviceRecord> rows;
};
using Item = std::variant<Alert, StatsMessage, GroupEnd, Event, DeviceRows>;

// "<3>" is the syslog priority "err"; journald strips it from the line and
// records the priority (sd-daemon(3)).
void log_error(const std::string& message) {
  std::fprintf(stderr, "<3>gaitwatch alert sink: %s\n", message.c_str());
}

std::uint64_t nanoseconds_between(Clock::time_point from, Clock::time_point to) {
  return static_cast<std::uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(to - from).count());
}

double unix_now_s() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

// The text of one flush's alerts: each row's dims column and, when
// publishing, each body. make() runs on the serializer thread while the
// writer commits, which takes the dims texts through dims() as they come.
class BatchText {
 public:
  BatchText(const std::vector<Alert>& alerts, bool with_bodies, const TimeZone& zone)
      : alerts_(alerts),
        with_bodies_(with_bodies),
        zone_(zone),
        objects_(with_bodies ? alerts.size() : 0),
        dims_(alerts.size()),
        bodies_(alerts.size()) {}

  // The dims texts in order (the commit waits for each), then the bodies
  // for seqs first_seq, first_seq + 1, ... Each alert's JSON is built once:
  // its "dims" member gives the dims column's text, and the whole, with its
  // seq, the body, so the two cannot disagree.
  void make(std::uint64_t first_seq) {
    try {
      for (std::size_t i = 0; i < alerts_.size(); ++i) {
        if (with_bodies_) {
          objects_[i] = alert_message_json(alerts_[i], zone_);
          dims_[i] = json_text(objects_[i].at("dims"));
        } else {
          dims_[i] = json_text(dims_to_json(alerts_[i]));
        }
        {
          // Under the lock, so that dims() cannot check just before and
          // then miss the notification.
          std::lock_guard<std::mutex> lock(mu_);
          dims_made_.store(i + 1, std::memory_order_release);
        }
        made_cv_.notify_one();
      }
    } catch (...) {
      {
        std::lock_guard<std::mutex> lock(mu_);
        failed_ = true;
      }
      made_cv_.notify_one();
      throw;
    }
    for (std::size_t i = 0; i < objects_.size(); ++i)
      write_body(i, std::move(objects_[i]), first_seq);
  }

  // The dims text of alerts[i], once make() has it. Should make() fail
  // first (its exception reaches flush() through its future), the text is
  // made here, so that a commit never waits for ever.
  const std::string& dims(std::size_t i) {
    if (dims_made_.load(std::memory_order_acquire) <= i) {
      std::unique_lock<std::mutex> lock(mu_);
      made_cv_.wait(lock, [&] { return dims_made_.load() > i || failed_; });
      if (dims_made_.load() <= i) dims_[i] = json_text(dims_to_json(alerts_[i]));
    }
    return dims_[i];
  }

  // The bodies for seqs first_seq, first_seq + 1, ... (without make(), or
  // again when the commit gave other seqs than make() was told).
  void write_bodies(std::uint64_t first_seq) {
    for (std::size_t i = 0; i < alerts_.size(); ++i)
      write_body(i, alert_message_json(alerts_[i], zone_), first_seq);
  }

  const std::string& body(std::size_t i) const { return bodies_[i]; }

 private:
  void write_body(std::size_t i, json object, std::uint64_t first_seq) {
    object["seq"] = first_seq + i;
    bodies_[i] = json_text(object);
  }

  const std::vector<Alert>& alerts_;
  const bool with_bodies_;
  const TimeZone& zone_;  // the bodies' wall-clock times
  std::vector<json> objects_;  // make()'s, between the dims texts and the bodies
  std::vector<std::string> dims_;
  std::vector<std::string> bodies_;        // made only with a publisher
  std::atomic<std::size_t> dims_made_{0};  // dims_[0, dims_made_) are made
  std::mutex mu_;
  std::condition_variable made_cv_;
  bool failed_ = false;  // make() threw; guarded by mu_
};

// True at most once per kSinkReportPeriod, from any thread.
class ReportLimiter {
 public:
  bool due(Clock::time_point now) {
    Clock::rep next = next_.load();
    const Clock::rep at = now.time_since_epoch().count();
    if (at < next) return false;
    const Clock::rep after =
        (now + std::chrono::duration_cast<Clock::duration>(kSinkReportPeriod)).time_since_epoch().count();
    return next_.compare_exchange_strong(next, after);
  }

 private:
  std::atomic<Clock::rep> next_{std::numeric_limits<Clock::rep>::min()};
};

// A counter's report, at most once per kSinkReportPeriod: when one is due,
// how much the counter grew since the previous one.
class CountReport {
 public:
  std::optional<std::uint64_t> due(Clock::time_point now, std::uint64_t total) {
    if (!limiter_.due(now)) return std::nullopt;
    return total - at_report_.exchange(total);
  }

 private:
  ReportLimiter limiter_;
  std::atomic<std::uint64_t> at_report_{0};
};

void validate(const SinkOptions& options) {
  auto fail = [](const std::string& message) { throw Error("alert sink: " + message); };
  if (options.db_path.empty()) fail("db_path is empty");
  if (!(options.retention_days >= 0))
    fail("retention_days must be >= 0 (0 keeps hits forever), got " +
         std::to_string(options.retention_days));
  if (options.commit_interval_ms < 0)
    fail("commit_interval_ms must be >= 0, got " + std::to_string(options.commit_interval_ms));
  if (options.max_batch < 1)
    fail("max_batch must be >= 1, got " + std::to_string(options.max_batch));
  if (options.send_hwm < 0)
    fail("send_hwm must be >= 0 (0 = no limit), got " + std::to_string(options.send_hwm));
  if (options.max_pending_alerts < 1) fail("max_pending_alerts must be >= 1");
  if (options.wal_restart_bytes < 1) fail("wal_restart_bytes must be >= 1");
}

}  // namespace

struct AlertSink::Impl {
  explicit Impl(const SinkOptions& opts)
      : options((validate(opts), opts)),
        store(options.db_path),
        // Never full while at most max_pending_alerts alerts are held (see
        // kQueueRoomBesidesAlerts); should status messages fill it, what
        // does not fit is dropped, alerts counted as store_dropped.
        queue(2 * options.max_pending_alerts + kQueueRoomBesidesAlerts,
              OverflowPolicy::kDropNewest) {
    if (options.max_size_bytes > 0) store.limit_size(options.max_size_bytes);
    last_seq = store.last_seq();
    // Checkpoints run on their own thread and connection (checkpoint_loop),
    // not inside a commit: copying megabytes of WAL and two fsyncs every few
    // ticks would delay that tick's alerts.
    store.disable_auto_checkpoint();
    store.limit_wal_file(kWalFileLimitFactor * options.wal_restart_bytes);
    if (!options.publish_endpoint.empty()) bind_publisher();
    checkpointer = std::thread([this] {
      set_thread_name("gw-sink-ckpt");
      checkpoint_loop();
    });
    writer = std::thread([this] {
      set_thread_name("gw-sink");
      run();
    });
  }

  void bind_publisher() {
    try {
      publisher.emplace(context, zmq::socket_type::pub);
      if (!options.curve_secret_key.empty()) {
        authenticator = secure_curve_server(context, *publisher, options.curve_secret_key,
                                            options.curve_authorized_keys);
      }
      publisher->set(zmq::sockopt::sndhwm, options.send_hwm);
      publisher->set(zmq::sockopt::linger, kLingerMs);
      // Explicitly off (the default): at the high-water mark a slow
      // subscriber loses messages instead of stalling the writer and with it
      // every other subscriber and the store. The subscriber sees the gap in
      // seq and reads the missing alerts from the store.
      publisher->set(zmq::sockopt::xpub_nodrop, false);
      publisher->bind(options.publish_endpoint);
      bound_endpoint = publisher->get(zmq::sockopt::last_endpoint);
    } catch (const zmq::error_t& e) {
      publisher.reset();
      throw Error("publish.endpoint: cannot bind the alert publisher to '" +
                  options.publish_endpoint + "': " + e.what());
    }
  }

  // Every kCheckpointPeriod (and once at stop), a PASSIVE checkpoint on a
  // connection of its own: it never blocks the writer. A failure is reported
  // and retried at the next period.
  //
  // A PASSIVE checkpoint copies what was committed when it began, and SQLite
  // starts the WAL again from its beginning only when a transaction begins
  // with every frame copied. A writer that commits without a pause (an alert
  // storm) never lets that happen, and the WAL would grow until the disk is
  // full. So past options.wal_restart_bytes the passes go on until little
  // is left to copy, and the writer is asked to restart it (restart_wal_if_asked).
  void checkpoint_loop() {
    std::optional<HitStore> connection;
    std::uint64_t page_bytes = 0;
    bool last_failed = false;
    while (true) {
      bool stop_now = false;
      {
        std::unique_lock<std::mutex> lock(sleep_mu);
        stop_now = sleep_cv.wait_for(lock, kCheckpointPeriod, [&] { return stopping.load(); });
      }
      try {
        if (!connection) {
          connection.emplace(options.db_path);
          page_bytes = connection->page_size();
        }
        HitStore::WalState wal = connection->checkpoint();
        ++checkpoints;
        if (wal.frames * page_bytes > options.wal_restart_bytes) {
          const auto left = [&] {
            return (wal.frames - std::min(wal.copied, wal.frames)) * page_bytes;
          };
          for (int pass = 0; pass < kWalCatchUpPasses && left() > kWalRestartRestBytes; ++pass) {
            wal = connection->checkpoint();
            ++checkpoints;
          }
          wal_bytes_to_restart = wal.frames * page_bytes;
        }
        last_failed = false;
      } catch (const std::exception& e) {
        if (!last_failed) log_error(std::string("WAL checkpoint: ") + e.what());
        last_failed = true;
        connection.reset();
      }
      if (stop_now) return;
    }
  }

  // Between two transactions, when the checkpointer asked for it: copies
  // what is left of the WAL, so that the next transaction writes it from its
  // start again (the file keeps its size, which bounds it; not truncating it
  // keeps this pause short). A reader of an older snapshot (or the
  // checkpointer's pass) can keep it from finishing within
  // kWalRestartWaitMs: then it is counted and logged (at most every
  // kSinkReportPeriod), and the checkpointer asks again.
  void restart_wal_if_asked() {
    const std::uint64_t bytes = wal_bytes_to_restart.exchange(0);
    if (bytes == 0) return;
    std::string failure;
    try {
      if (!store.restart_wal(kWalRestartWaitMs).busy) {
        ++wal_restarts;
        return;
      }
      failure = "held for more than " + std::to_string(kWalRestartWaitMs) +
                " ms (a reader of an older snapshot, or a checkpoint)";
    } catch (const std::exception& e) {
      failure = e.what();
    }
    const std::uint64_t total = ++wal_restarts_busy;
    if (const auto since = wal_busy_report.due(Clock::now(), total))
      log_error("the WAL (" + std::to_string(bytes >> 20) + " MiB) could not be restarted " +
                std::to_string(*since) + " times since the last report (" + std::to_string(total) +
                " in all; tried again): " + failure);
  }

  // The writer thread: the only user of `store` and `publisher` after the
  // constructor.
  void run() {
    try {
      write_until_stopped();
    } catch (const std::exception& e) {
      // Not expected (store and socket errors are handled below); make the
      // reason visible before std::terminate.
      log_error(std::string("writer thread failed: ") + e.what());
      throw;
    }
    if (publisher) publisher->close();
  }

  void write_until_stopped() {
    const bool retention_enabled = options.retention_days > 0;
    const auto commit_interval = std::chrono::milliseconds(options.commit_interval_ms);
    auto next_retention = Clock::now();  // at start, then every kRetentionPeriod
    std::vector<Item> batch;
    std::size_t batch_alerts = 0;
    Clock::time_point batch_deadline;

    // Set when a group's end was added: the batch is committed as soon as
    // what is already queued has joined it (group commit), not at the
    // deadline.
    bool group_complete = false;
    auto add = [&](Item item) {
      if (auto* devices = std::get_if<DeviceRows>(&item)) {
        device_rows.insert(device_rows.end(), devices->rows.begin(), devices->rows.end());
        return;
      }
      if (std::holds_alternative<GroupEnd>(item)) {
        group_complete = !batch.empty();
        return;
      }
      if (batch.empty() && std::holds_alternative<StatsMessage>(item)) {
        // No alert is waiting for a commit, so order is kept by publishing
        // now; a status message never waits for commit_interval_ms.
        publish(kStatsTopic, json_text(std::get<StatsMessage>(item).body));
        return;
      }
      if (batch.empty()) batch_deadline = Clock::now() + commit_interval;
      if (std::holds_alternative<Alert>(item)) ++batch_alerts;
      // An event is a person's action or a sensor's state: it goes out with
      // whatever is queued now, without waiting for commit_interval_ms.
      if (std::holds_alternative<Event>(item)) group_complete = true;
      batch.push_back(std::move(item));
      if (batch_alerts >= static_cast<std::size_t>(options.max_batch)) {
        flush(batch);
        batch_alerts = 0;
      }
    };
    std::vector<Item> queued;  // reused: what was waiting behind a popped item

    while (true) {
      auto now = Clock::now();
      if (retention_enabled && now >= next_retention) {
        apply_retention();
        now = Clock::now();
        next_retention = now + kRetentionPeriod;
      }
      // Sleep until the open batch is due or retention is; a push or close()
      // wakes pop_for earlier. The 1 s cap only bounds an idle wait.
      auto wake = batch.empty() ? now + std::chrono::seconds(1) : batch_deadline;
      if (batch.empty() && !device_rows.empty()) wake = std::max(now, next_device_rows_try);
      if (retention_enabled) wake = std::min(wake, next_retention);
      std::optional<Item> item = queue.pop_for(std::max(wake - now, Clock::duration::zero()));
      if (item) {
        add(std::move(*item));
        // Whatever else is waiting joins this batch (up to max_batch per
        // transaction, see add): several ticks' alerts that queued behind a
        // slow commit go out in one transaction, not one each.
        queued.clear();
        queue.drain(queued);
        for (Item& next : queued) add(std::move(next));
      } else if (stopping.load()) {
        // stop() closes the queue before it sets `stopping`, so nothing can
        // be pushed any more: take what is left, commit, publish, finish.
        std::vector<Item> rest;
        queue.drain(rest);
        for (Item& left : rest) add(std::move(left));
        flush(batch);
        while (!device_rows.empty() && save_device_rows()) {
        }
        if (!device_rows.empty())
          log_error("stopped with " + std::to_string(device_rows.size()) +
                    " devices' last frames not stored (their saves failed)");
        return;
      }
      // A drain commits at once, but first takes in what is still queued
      // (the loop comes back to pop it without waiting), so that what was
      // submitted before the drain goes out in as few transactions as
      // max_batch allows.
      if (!batch.empty() && (group_complete || (draining.load() && queue.size() == 0) ||
                             Clock::now() >= batch_deadline)) {
        flush(batch);
        batch_alerts = 0;
      }
      if (batch.empty()) group_complete = false;
      // Devices' rows wait for no alert: they go in when no batch is open
      // (after a failure, not before kDeviceRowsRetry).
      if (batch.empty() && !device_rows.empty() && Clock::now() >= next_device_rows_try)
        save_device_rows();
    }
  }

  // Stores the first kDeviceRowsPerTransaction of device_rows in one
  // transaction and returns true; on failure returns false and keeps the
  // newest row of each (wearer, device) for the next try.
  bool save_device_rows() {
    if (device_rows.empty()) return true;
    try {
      const std::size_t count = std::min(device_rows.size(), kDeviceRowsPerTransaction);
      if (count == device_rows.size()) {
        store.save_wearer_devices(device_rows);
        device_rows.clear();
      } else {
        const std::vector<WearerDeviceRecord> part(device_rows.begin(),
                                                   device_rows.begin() + static_cast<std::ptrdiff_t>(count));
        store.save_wearer_devices(part);
        device_rows.erase(device_rows.begin(), device_rows.begin() + static_cast<std::ptrdiff_t>(count));
      }
      wearer_devices_saved += count;
      device_rows_failing = false;
      return true;
    } catch (const std::exception& e) {
      ++wearer_devices_errors;
      if (!device_rows_failing)
        log_error(std::string("cannot store the devices' last frames (kept, tried again): ") +
                  e.what());
      device_rows_failing = true;
      next_device_rows_try = Clock::now() + kDeviceRowsRetry;
      // Later rows of a device replace earlier ones: keep the last of each.
      std::vector<WearerDeviceRecord> newest;
      std::set<std::pair<std::uint32_t, std::uint16_t>> seen;
      for (auto it = device_rows.rbegin(); it != device_rows.rend(); ++it)
        if (seen.insert({it->wearer, it->device}).second) newest.push_back(*it);
      device_rows.assign(newest.rbegin(), newest.rend());
      return false;
    }
  }

  // Commits the batch's alerts in one transaction, then publishes the batch
  // in order (alerts with their seq, stats as they came). Empties `batch`.
  void flush(std::vector<Item>& batch) {
    if (batch.empty()) return;
    std::vector<Alert> alerts;
    std::vector<Event> events;
    for (Item& item : batch) {
      if (auto* alert = std::get_if<Alert>(&item)) alerts.push_back(std::move(*alert));
      if (auto* event = std::get_if<Event>(&item)) events.push_back(std::move(*event));
    }
    shed_windows_when_behind(alerts);
    // From kAlertsForSerializer alerts, their text is made on a thread of
    // its own while the transaction runs: first each row's dims text, which
    // the commit binds as it comes, then the published bodies, with the seqs
    // the alerts will get: this writer is the store's only one, so they
    // follow the last seq it committed (checked after the commit; bodies
    // made for other seqs are made again). With many alerts a tick this
    // takes the JSON off the way from detection to the subscribers.
    const bool with_bodies = publisher.has_value() || static_cast<bool>(options.on_committed);
    BatchText text(alerts, with_bodies, zone);
    const std::uint64_t expected_first = last_seq.load() + 1;
    std::future<void> text_made;
    if (alerts.size() >= kAlertsForSerializer)
      text_made = std::async(std::launch::async, [&] {
        set_thread_name("gw-sink-json");
        text.make(expected_first);
      });
    else if (with_bodies)
      text.write_bodies(expected_first);
    const auto commit_start = Clock::now();
    const std::optional<std::uint64_t> first_seq =
        commit(alerts, events, text_made.valid() ? &text : nullptr);
    const auto publish_start = Clock::now();
    commit_ns += nanoseconds_between(commit_start, publish_start);
    if (text_made.valid()) text_made.get();
    if (first_seq) {
      for (std::size_t i = 0; i < alerts.size(); ++i) alerts[i].seq = *first_seq + i;
      if (with_bodies && *first_seq != expected_first) text.write_bodies(*first_seq);
    }
    std::size_t next_alert = 0;
    std::size_t next_event = 0;
    for (const Item& item : batch) {
      if (std::holds_alternative<Alert>(item)) {
        const std::size_t i = next_alert++;
        // Never publish an alert whose row is not committed.
        if (!first_seq) continue;
        const std::string topic = alert_topic(alerts[i]);
        if (publish(topic, text.body(i))) ++published;
        if (options.on_committed) options.on_committed(topic, text.body(i));
      } else if (std::holds_alternative<Event>(item)) {
        const Event& event = events[next_event++];
        if (!first_seq) continue;
        const std::string topic = event_topic(event);
        const std::string body = json_text(event_to_json(event, &zone));
        publish(topic, body);
        if (options.on_committed) options.on_committed(topic, body);
      } else if (const auto* stats = std::get_if<StatsMessage>(&item)) {
        publish(kStatsTopic, json_text(stats->body));
      }
    }
    batch.clear();
    publish_ns += nanoseconds_between(publish_start, Clock::now());
    restart_wal_if_asked();
  }

  // Returns the first alert's seq once the alerts and the events are
  // committed (the other alerts follow it; each event has its id); nothing
  // only when drain() was called and the batch was given up at its deadline.
  // The rows' dims texts come from `text` when given (else they are made
  // here).
  std::optional<std::uint64_t> commit(const std::vector<Alert>& alerts, std::vector<Event>& events,
                                      BatchText* text) {
    if (alerts.empty() && events.empty()) return last_seq.load() + 1;
    std::string own_text;  // one row's, when `text` is not given
    const HitStore::DimsText dims_text = [&](std::size_t i) -> const std::string& {
      if (text) return text->dims(i);
      own_text = json_text(dims_to_json(alerts[i]));
      return own_text;
    };
    auto backoff = std::chrono::duration_cast<Clock::duration>(kFirstBackoff);
    int failures = 0;
    while (true) {
      // Past a deadline at which a batch has failed already, the store is
      // not tried again: every batch held is given up at once.
      if (draining.load() && Clock::now() >= drain_deadline() &&
          given_up_at == drain_deadline_rep.load()) {
        give_up(alerts.size(), events.size());
        return std::nullopt;
      }
      try {
        const std::uint64_t first_seq = store.insert_rows(alerts, dims_text, &events);
        committed += alerts.size();
        {
          std::lock_guard<std::mutex> lock(by_severity_mu);
          for (const Alert& a : alerts) ++committed_by_severity[a.severity][a.kind];
        }
        events_committed += events.size();
        ++transactions;
        if (!alerts.empty()) last_seq = first_seq + alerts.size() - 1;
        release_pending(alerts.size());
        if (failures > 0) {
          log_error("commit of " + std::to_string(alerts.size()) + " alerts succeeded after " +
                    std::to_string(failures) + " failed attempts");
        }
        return first_seq;
      } catch (const std::exception& e) {
        ++store_errors;
        ++failures;
        const bool ending = draining.load();
        const auto now = Clock::now();
        if (ending && now >= drain_deadline()) {
          given_up_at = drain_deadline_rep.load();
          log_error("giving up on " + std::to_string(alerts.size()) + " alerts and " +
                    std::to_string(events.size()) + " events at the drain deadline after " +
                    std::to_string(failures) +
                    " failed commits, and on every other alert held (" +
                    std::to_string(pending.load() - alerts.size()) +
                    "); they are neither stored nor published: " + e.what());
          give_up(alerts.size(), events.size());
          return std::nullopt;
        }
        const auto pause =
            ending ? std::min<Clock::duration>(kDrainBackoff, drain_deadline() - now) : backoff;
        if (failure_report.due(now)) {
          log_error(
              "commit of " + std::to_string(alerts.size()) + " alerts failed (attempt " +
              std::to_string(failures) + ", " + std::to_string(store_errors.load()) +
              " store errors in all); retrying in " +
              std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(pause).count()) +
              " ms; " + std::to_string(pending.load()) + " alerts held (at most " +
              std::to_string(options.max_pending_alerts) + "), " +
              std::to_string(store_dropped.load()) + " dropped so far: " + e.what());
        }
        std::unique_lock<std::mutex> lock(sleep_mu);
        // drain() cuts a long back-off short; the retries then go at the
        // drain's pace.
        sleep_cv.wait_for(lock, pause, [&] { return draining.load() != ending; });
        if (!ending)
          backoff = std::min(backoff * 2, std::chrono::duration_cast<Clock::duration>(kMaxBackoff));
      }
    }
  }

  Clock::time_point drain_deadline() const {
    return Clock::time_point(Clock::duration(drain_deadline_rep.load()));
  }

  // Takes up to `count` alerts under max_pending_alerts; returns how many.
  std::size_t reserve_pending(std::size_t count) {
    std::uint64_t held = pending.load();
    std::uint64_t take = 0;
    do {
      const std::uint64_t room = held < options.max_pending_alerts ? options.max_pending_alerts - held : 0;
      take = std::min<std::uint64_t>(count, room);
    } while (take > 0 && !pending.compare_exchange_weak(held, held + take));
    return static_cast<std::size_t>(take);
  }

  void release_pending(std::size_t count) {
    pending -= count;
    {
      // drain() waits on this with the lock held: no wake-up is missed.
      std::lock_guard<std::mutex> lock(sleep_mu);
    }
    drained_cv.notify_all();
  }

  // Leaves out the windows of `alerts` (the batch about to commit) when the
  // writer is behind (kWindowsShedBacklog), counted in windows_shed with a
  // log line at most every kSinkReportPeriod. Such alerts cannot be marked
  // (no_window), like those whose window the engine could not cut.
  void shed_windows_when_behind(std::vector<Alert>& alerts) {
    const std::uint64_t held = pending.load();
    const std::uint64_t waiting = held > alerts.size() ? held - alerts.size() : 0;
    if (waiting < std::max<std::uint64_t>(kWindowsShedBacklog, alerts.size())) return;
    std::uint64_t shed = 0;
    for (Alert& alert : alerts) {
      if (!alert.window) continue;
      alert.window.reset();
      ++shed;
    }
    if (shed == 0) return;
    const std::uint64_t total = windows_shed += shed;
    if (const auto since = shed_report.due(Clock::now(), total)) {
      log_error(std::to_string(*since) +
                " alerts stored without their windows since the last report (" + std::to_string(total) +
                " in all): " + std::to_string(waiting) +
                " alerts waited behind a transaction; their rows come first (they cannot be marked)");
    }
  }

  void give_up(std::size_t alert_count, std::size_t event_count) {
    stop_abandoned += alert_count;
    events_dropped += event_count;
    release_pending(alert_count);
  }

  // Counts `count` alerts handed in, of which `refused` were dropped.
  void count_submitted(std::size_t count, std::size_t refused) {
    submitted += count;
    if (refused == 0) return;
    const std::uint64_t dropped = store_dropped += refused;
    if (const auto since = drop_report.due(Clock::now(), dropped)) {
      log_error(std::to_string(*since) +
                " alerts dropped since the last report (" + std::to_string(dropped) +
                " in all): " + std::to_string(options.max_pending_alerts) +
                " alerts (storage.max_pending_alerts) are held, waiting for the store (" +
                std::to_string(store_errors.load()) + " store errors so far)");
    }
  }

  // Returns true when the message went out. A PUB socket does not block: at a
  // subscriber's high-water mark the message is dropped for that subscriber.
  bool publish(const std::string& topic, const std::string& body) {
    if (!publisher) return false;
    try {
      if (!publisher->send(zmq::buffer(topic), zmq::send_flags::sndmore)) return false;
      return publisher->send(zmq::buffer(body), zmq::send_flags::none).has_value();
    } catch (const zmq::error_t& e) {
      log_error("publishing on " + bound_endpoint + " failed: " + e.what());
      return false;
    }
  }

  void apply_retention() {
    const double cutoff = unix_now_s() - options.retention_days * 86400.0;
    try {
      retention_deleted += static_cast<std::uint64_t>(store.delete_older_than(cutoff));
    } catch (const std::exception& e) {
      ++store_errors;
      log_error(std::string("retention failed; trying again in a minute: ") + e.what());
    }
  }

  const SinkOptions options;
  const TimeZone zone = TimeZone::named_or_system(options.time_zone);
  HitStore store;
  // Declared before `publisher`, so the socket is destroyed first.
  zmq::context_t context;
  std::unique_ptr<CurveAuthenticator> authenticator;  // ZAP handler when CURVE is on
  std::optional<zmq::socket_t> publisher;
  std::string bound_endpoint;  // cached: the socket belongs to the writer thread
  BoundedQueue<Item> queue;

  std::mutex stop_mu;    // serializes stop()
  bool stopped = false;  // guarded by stop_mu
  std::atomic<bool> stopping{false};
  std::atomic<bool> accepting{true};  // false from stop(): submit() throws
  // Set by drain() (for good): batches commit at once, and a failing one is
  // given up at the deadline. The deadline is a steady_clock time.
  std::atomic<bool> draining{false};
  std::atomic<Clock::rep> drain_deadline_rep{0};
  // The deadline at which a batch was given up (writer thread only).
  std::optional<Clock::rep> given_up_at;
  // The writer's back-off and the checkpointer's period sleep on these;
  // drain() and stop() wake both. drain() waits on drained_cv.
  std::mutex sleep_mu;
  std::condition_variable sleep_cv;
  std::condition_variable drained_cv;

  ReportLimiter failure_report;
  CountReport drop_report;
  CountReport shed_report;
  std::atomic<std::uint64_t> windows_shed{0};

  std::atomic<std::uint64_t> submitted{0};
  std::atomic<std::uint64_t> store_dropped{0};
  std::atomic<std::uint64_t> pending{0};
  std::atomic<std::uint64_t> stop_abandoned{0};
  std::atomic<std::uint64_t> committed{0};
  mutable std::mutex by_severity_mu;
  std::map<std::string, std::map<std::string, std::uint64_t>> committed_by_severity;  // by_severity_mu
  std::atomic<std::uint64_t> published{0};  // alerts handed to the socket; stats not counted
  std::atomic<std::uint64_t> events_committed{0};
  std::atomic<std::uint64_t> events_dropped{0};
  std::atomic<std::uint64_t> wearer_devices_saved{0};
  std::atomic<std::uint64_t> wearer_devices_errors{0};
  // The writer's: devices' rows waiting to be stored, and when to try again
  // after a failure.
  std::vector<WearerDeviceRecord> device_rows;
  bool device_rows_failing = false;
  Clock::time_point next_device_rows_try{};
  std::atomic<std::uint64_t> transactions{0};
  std::atomic<std::uint64_t> retention_deleted{0};
  std::atomic<std::uint64_t> last_seq{0};
  std::atomic<std::uint64_t> store_errors{0};
  std::atomic<std::uint64_t> commit_ns{0};
  std::atomic<std::uint64_t> publish_ns{0};

  std::atomic<std::uint64_t> checkpoints{0};
  // Set by the checkpointer to the WAL's size in bytes when the writer is to
  // restart it; 0 = nothing asked.
  std::atomic<std::uint64_t> wal_bytes_to_restart{0};
  std::atomic<std::uint64_t> wal_restarts{0};
  std::atomic<std::uint64_t> wal_restarts_busy{0};
  CountReport wal_busy_report;
  std::thread checkpointer;
  std::thread writer;  // last: started when everything above exists
};

AlertSink::AlertSink(const SinkOptions& options) : impl_(std::make_unique<Impl>(options)) {}

AlertSink::~AlertSink() { stop(); }

void AlertSink::submit(Alert alert) {
  if (!impl_->accepting.load())
    throw Error("alert sink is stopped; alert for wearer " + std::to_string(alert.wearer) +
                ", pattern '" + alert.pattern + "' was not accepted");
  std::size_t refused = 1;
  if (impl_->reserve_pending(1) == 1) {
    if (impl_->queue.push(Item(std::move(alert))))
      refused = 0;
    else
      impl_->release_pending(1);
  }
  impl_->count_submitted(1, refused);
}

void AlertSink::submit_all(std::vector<Alert>& alerts) {
  if (alerts.empty()) return;
  const std::size_t given = alerts.size();
  if (!impl_->accepting.load()) {
    alerts.clear();
    throw Error("alert sink is stopped; " + std::to_string(given) +
                " alerts were not all accepted");
  }
  // The group's first alerts, as many as fit under max_pending_alerts.
  const std::size_t taken = impl_->reserve_pending(given);
  std::vector<Item> items;
  items.reserve(taken + 1);
  for (std::size_t i = 0; i < taken; ++i) items.emplace_back(std::move(alerts[i]));
  alerts.clear();
  std::size_t queued_alerts = 0;
  if (taken > 0) {
    items.emplace_back(GroupEnd{});
    // A full queue refuses the rest of the items, in order.
    queued_alerts = std::min(impl_->queue.push_all(items), taken);
    if (queued_alerts < taken) impl_->release_pending(taken - queued_alerts);
  }
  impl_->count_submitted(given, given - queued_alerts);
}

void AlertSink::submit_event(Event event) {
  if (event.at == 0) event.at = unix_now_s();
  const std::string what = std::string(event_type_name(event.type)) + " event for wearer " +
                           std::to_string(event.wearer);
  if (!impl_->accepting.load()) {
    ++impl_->events_dropped;
    log_error("the sink is stopped; the " + what + " is neither stored nor published");
    return;
  }
  if (!impl_->queue.push(Item(std::move(event)))) {
    ++impl_->events_dropped;
    log_error("the writer's queue is full; the " + what + " is neither stored nor published");
  }
}

bool AlertSink::submit_wearer_devices(std::vector<WearerDeviceRecord> devices) {
  if (devices.empty()) return true;
  if (!impl_->accepting.load()) return false;
  return impl_->queue.push(Item(DeviceRows{std::move(devices)}));
}

void AlertSink::submit_stats(nlohmann::json stats) {
  // After stop() the socket is closed and no subscriber could receive a
  // status snapshot any more; it is dropped (unlike an alert), as it is when
  // the writer's queue is full.
  impl_->queue.push(Item(StatsMessage{std::move(stats)}));
}

bool AlertSink::drain(std::chrono::steady_clock::time_point deadline) {
  Impl& impl = *impl_;
  const std::uint64_t abandoned_before = impl.stop_abandoned.load();
  {
    std::lock_guard<std::mutex> lock(impl.sleep_mu);
    impl.drain_deadline_rep = deadline.time_since_epoch().count();
    impl.draining = true;
  }
  impl.sleep_cv.notify_all();
  // Wakes a writer that waits for the open batch's commit interval.
  impl.queue.push(Item(GroupEnd{}));
  {
    std::unique_lock<std::mutex> lock(impl.sleep_mu);
    impl.drained_cv.wait(lock, [&] { return impl.pending.load() == 0; });
  }
  return impl.stop_abandoned.load() == abandoned_before;
}

void AlertSink::stop() {
  std::lock_guard<std::mutex> lock(impl_->stop_mu);
  if (impl_->stopped) return;
  impl_->stopped = true;
  drain(std::chrono::steady_clock::now() + kStopDrainLimit);
  impl_->accepting = false;
  impl_->queue.close();  // before `stopping`: see write_until_stopped
  {
    std::lock_guard<std::mutex> sleep_lock(impl_->sleep_mu);
    impl_->stopping = true;
  }
  impl_->sleep_cv.notify_all();
  if (impl_->writer.joinable()) impl_->writer.join();
  if (impl_->checkpointer.joinable()) impl_->checkpointer.join();
  // The ZAP handler's socket must be closed before the context terminates.
  impl_->authenticator.reset();
  // The writer closed the socket; this returns once its last messages are
  // out or kLingerMs has passed.
  impl_->context.close();
}

SinkCounters AlertSink::counters() const {
  SinkCounters c;
  c.committed = impl_->committed.load();
  {
    std::lock_guard<std::mutex> lock(impl_->by_severity_mu);
    c.committed_by_severity = impl_->committed_by_severity;
  }
  c.stop_abandoned = impl_->stop_abandoned.load();
  c.store_dropped = impl_->store_dropped.load();
  c.pending = impl_->pending.load();
  c.submitted = impl_->submitted.load();
  c.published = impl_->published.load();
  c.events_committed = impl_->events_committed.load();
  c.events_dropped = impl_->events_dropped.load();
  c.transactions = impl_->transactions.load();
  c.retention_deleted = impl_->retention_deleted.load();
  c.last_seq = impl_->last_seq.load();
  c.store_errors = impl_->store_errors.load();
  c.checkpoints = impl_->checkpoints.load();
  c.wal_restarts = impl_->wal_restarts.load();
  c.wal_restarts_busy = impl_->wal_restarts_busy.load();
  c.windows_shed = impl_->windows_shed.load();
  c.wearer_devices_saved = impl_->wearer_devices_saved.load();
  c.wearer_devices_errors = impl_->wearer_devices_errors.load();
  c.commit_s = static_cast<double>(impl_->commit_ns.load()) * 1e-9;
  c.publish_s = static_cast<double>(impl_->publish_ns.load()) * 1e-9;
  return c;
}

std::uint64_t AlertSink::pending() const { return impl_->pending.load(); }

std::string AlertSink::bound_endpoint() const { return impl_->bound_endpoint; }

}  // namespace gw::pipeline
