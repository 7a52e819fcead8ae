// e2e_bench: W1 wearers through the whole daemon (docs/design.md, "Soft
// deadlines").
//
// Each run starts the real gaitwatchd on a W1 configuration written to a
// temporary directory (a real SQLite file, real ZeroMQ, its Prometheus
// endpoint), sends N synthetic W1 wearers' frames to it at real time over TCP
// or UDP, subscribes to its alerts, and reads its metrics after a warm-up and
// at the end. One JSON line per run on stdout ("e2e_run"), then a summary
// ("e2e_summary") with the largest N that was sustained: after the warm-up,
// no deadline miss, nothing deferred, shed or dropped, every frame sent
// accepted, the sender on schedule, and the ingest -> alert latency p99 within
// the deadline (250 ms) both as the daemon measures it (alert ready) and as
// the subscriber sees it (alert committed and published). Progress goes to
// stderr.
//
// The W1 wearer is one generic device of 201 channels (left insole 0..98,
// right insole 99..197, accelerometer 198..200; three channel groups), so
// that the 16 patterns span all 201 dims as W1 says (a pattern reads one
// device). Data: sensors/synthetic.h (synthetic from gaitpdb). Patterns: the
// same random-walk library as search_bench (bench/w1_workload.h), or windows
// cut from the synthetic source (--patterns synthetic).
//
// --overload runs the daemon once through a load change instead
// (docs/reliability.md, "Overload"): --wearers N for the warm-up,
// --overload-factor x N wearers for --overload-s, N again for --recover-s, then
// stops sending, waits for the drain and stops the daemon with SIGTERM. One
// JSON line "e2e_overload": per phase what the engine did (deadline misses,
// deferred, shed, dropped, lost, latency and batch p99 from histogram deltas,
// queue depth at the phase end), whether the configured degradation happened
// and the last part of the recovery was clean, and the final accounting from
// the counters the daemon publishes at shutdown (docs/reliability.md,
// "Overload").
//
// --via-jetstream NATS_SERVER sends the frames through `gaitwatchd --gateway`
// and a JetStream server the run starts, the daemon a worker of every
// partition (bench/e2e/jetstream_path.h): the run's line says "path":
// "jetstream" and carries what the path cost (the gateway's counters, the
// stream's largest size, the server's memory, per 1,000 wearers too).
//
// --micro prints micro benchmarks instead: frames/s one thread decodes (the
// real decoder on W1 frames, no socket), frames/s the daemon's ingest thread
// takes in (daemon/ingest.h over loopback TCP: framing, decode, profile
// check, queue), and hits/s the SQLite writer commits (sinks/sink.h with
// the daemon's batch and commit policy, real file, WAL).
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <sys/resource.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <atomic>
#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>
#include <zmq.hpp>

#include "bench/w1_workload.h"
#include "common/error.h"
#include "config/config.h"
#include "daemon/cli/usage.h"
#include "daemon/ingest.h"
#include "daemon/metrics_families.h"
#include "pipeline/engine.h"
#include "sinks/alert.h"
#include "sinks/sink.h"
#include "sinks/store.h"
#include "sensors/frame.h"
#include "sensors/recording.h"
#include "sensors/synthetic.h"
#include "common/child_process.h"

// The parts of the benchmark, in dependency order.
#include "bench/e2e/options.h"
#include "bench/e2e/workload.h"
#include "bench/e2e/scrape.h"
#include "bench/e2e/subscriber.h"
#include "bench/e2e/senders.h"
#include "bench/e2e/daemon_run.h"

namespace {

using namespace gw::bench::e2e;

// ---------------------------------------------------------------- one run

// Counters whose increase loses data or work (counters-JSON paths): any of
// them > 0 after a run means it was not sustained.
const std::vector<std::string> kDropCounters = {
    "/ingest/queue_dropped",    "/ingest/oversized",
    "/ingest/tcp_bad_length",   "/ingest/unknown_device",
    "/ingest/profile_mismatch", "/engine/frames_out_of_order",
    "/engine/missing_frames",   "/engine/gaps",
    "/engine/restarts",         "/engine/overrun_samples",
    "/engine/shed_streams",     "/engine/shed_windows",
    "/engine/dropped_windows",  "/engine/lost_windows",
    "/engine/backend_failovers", "/sink/store_errors",
    "/slots/late_samples"};

// The counters-JSON paths of the decode failures, one per DecodeStatus.
std::vector<std::string> decode_error_counters() {
  std::vector<std::string> paths;
  for (int s = 1; s < gw::sensors::kDecodeStatusCount; ++s)
    paths.push_back(std::string("/ingest/decode_errors/") +
                    gw::sensors::to_string(static_cast<gw::sensors::DecodeStatus>(s)));
  return paths;
}

// "/ingest/queue_dropped" -> "ingest_queue_dropped": the keys of the bench's
// output, as they were when /metrics named samples by the JSON path.
std::string output_key(const std::string& json_path) {
  std::string key = json_path.substr(1);
  std::replace(key.begin(), key.end(), '/', '_');
  return key;
}

json run_once(const Options& options, int wearers, double duration_s,
              const gw::sensors::Recording& base, const gw::bench::W1PatternSet& patterns,
              const fs::path& workdir, int run_number) {
  json line;
  line["bench"] = "e2e_run";
  line["wearers"] = wearers;
  line["duration_s"] = duration_s;
  line["warmup_s"] = options.warmup_s;
  line["backend"] = gw::config::name(options.backend);
  line["tick_ms"] = options.tick_ms;
  line["devices"] = options.devices;
  line["warm_up"] = options.warm_up;
  line["commit_interval_ms"] = options.commit_ms;

  const WearerPool pool = make_pool(base, wearers, options);
  DaemonRun run(options, wearers, patterns, workdir,
                workdir / fmt::format("run{:03}-{}", run_number, wearers));
  if (!run.error.empty()) {
    line["error"] = run.error;
    return line;
  }

  const auto start = Clock::now() + std::chrono::milliseconds(200);
  const double start_unix = unix_now() + 0.2;
  const auto measure_from = start + std::chrono::duration_cast<Clock::duration>(
                                        std::chrono::duration<double>(options.warmup_s));
  const auto end = measure_from + std::chrono::duration_cast<Clock::duration>(
                                      std::chrono::duration<double>(duration_s));
  SendControl control;
  control.active = wearers;
  Senders senders(options, pool, wearers, control, start, end, start_unix, run.port(options));
  progress(fmt::format("run {}: {} wearers, {} s (+{} s warm-up), {} sender thread(s), {}",
                       run_number, wearers, duration_s, options.warmup_s, senders.count(),
                       options.transport));

  // Queue depths over time, and the window's start.
  std::optional<Scrape> first;
  double max_queue_depth = 0;
  double max_batch_predicted = 0;
  auto next_report = Clock::now() + std::chrono::seconds(30);
  run.watch(end, [&](const Scrape& s) {
    if (run.jetstream) run.jetstream->sample();
    if (Clock::now() >= measure_from) {
      if (!first) first = s;
      max_queue_depth = std::max(max_queue_depth, s.counter("/ingest/queue_depth"));
      max_batch_predicted =
          std::max(max_batch_predicted, s.counter("/engine/cost_model/last_predicted_ms"));
    }
    if (Clock::now() >= next_report) {
      progress(fmt::format(
          "  {} wearers: {:.0f} s, {:.0f} frames accepted, {:.0f} deadline misses, "
          "{:.0f} deferred, queue {:.0f}, last batch {:.1f} ms; pool growths dedup {:.0f} "
          "({:.0f} ms), slots {:.0f} ({:.0f} ms)",
          wearers, std::chrono::duration<double>(Clock::now() - start).count(),
          s.counter("/engine/frames_accepted"), s.counter("/engine/deadline_misses"),
          s.counter("/engine/deferred_streams"), s.counter("/ingest/queue_depth"),
          s.counter("/engine/last_batch_ms"), s.counter("/dedup/pool_growths"),
          1e3 * s.counter("/dedup/pool_growth_s"), s.counter("/slots/pool_growths"),
          1e3 * s.counter("/slots/pool_growth_s")));
      next_report += std::chrono::seconds(30);
    }
  });
  senders.join();
  const double send_end_unix = unix_now();
  const Senders::Totals sent = senders.totals();

  // Drain: every frame sent is searched and its alerts published.
  const Scrape last = run.drain(sent.frames);
  if (!first) first = last;
  const std::uint64_t stored = run.stop(line);
  line["path"] = run.jetstream ? "jetstream" : "direct";
  if (run.jetstream) {
    line["jetstream"] = run.jetstream->stop(wearers);
    line["jetstream"]["frames_per_message"] = options.frames_per_message;
  }
  const auto& exit_code = run.exit_code;
  Subscriber& subscriber = *run.subscriber;
  const Scrape& a = *first;
  const Scrape& b = last;
  const double window_s = std::max(1e-9, b.time - a.time);
  const auto delta = [&](const std::string& path) { return b.counter(path) - a.counter(path); };
  const double accepted = b.counter("/engine/frames_accepted");

  // Alerts of the window, as the subscriber saw them.
  std::vector<double> daemon_ms, subscriber_ms, sample_ms;
  const auto seen = subscriber.alerts();
  for (const SeenAlert& s : seen) {
    if (s.detected_at < a.time) continue;
    daemon_ms.push_back(s.daemon_ms);
    subscriber_ms.push_back(s.subscriber_ms);
    sample_ms.push_back(s.sample_ms);
  }
  const HistogramWindow latency = histogram_window(a, b, "gaitwatch_alert_latency_seconds");
  const HistogramWindow batch = histogram_window(a, b, "gaitwatch_batch_seconds");

  line["sender"] = sender_json(options, senders, sent, wearers * 1000.0 / kFramePeriodMs);
  line["window_s"] = window_s;
  line["frames_accepted"] = accepted;
  line["frames_lost"] = static_cast<double>(sent.frames) - accepted;
  // Over the sending part of the window: the drain after it adds frames
  // but would dilute the rate.
  line["frames_per_s_accepted_window"] =
      delta("/engine/frames_accepted") / std::max(1e-9, send_end_unix - a.time);
  line["alerts"] = {{"engine_window", delta("/engine/alerts")},
                    {"committed_window", delta("/sink/committed")},
                    {"published_total", b.counter("/sink/published")},
                    {"received_total", seen.size()},
                    {"received_window", daemon_ms.size()},
                    {"stored_total", stored},
                    {"dedup_duplicates_total", b.counter("/dedup/duplicates")},
                    {"bad_messages", subscriber.bad_messages()}};
  line["latency_ms"] = {
      {"daemon_histogram",
       {{"count", latency.count},
        {"p50", latency.p50_ms},
        {"p99", latency.p99_ms},
        {"mean", latency.mean_ms}}},
      {"ingest_to_alert_ready",
       {{"p50", quantile_of(daemon_ms, 0.5)},
        {"p99", quantile_of(daemon_ms, 0.99)},
        {"max", daemon_ms.empty() ? 0.0 : *std::max_element(daemon_ms.begin(), daemon_ms.end())}}},
      {"ingest_to_subscriber",
       {{"p50", quantile_of(subscriber_ms, 0.5)},
        {"p99", quantile_of(subscriber_ms, 0.99)},
        {"max", subscriber_ms.empty()
                    ? 0.0
                    : *std::max_element(subscriber_ms.begin(), subscriber_ms.end())}}},
      {"sample_to_subscriber",
       {{"p50", quantile_of(sample_ms, 0.5)}, {"p99", quantile_of(sample_ms, 0.99)}}},
      {"daemon_max_since_start", b.counter("/engine/max_latency_ms")}};
  line["batch_ms"] = {{"count", batch.count},
                      {"p50", batch.p50_ms},
                      {"p99", batch.p99_ms},
                      {"mean", batch.mean_ms},
                      {"max_since_start", b.counter("/engine/max_batch_ms")},
                      {"max_predicted_window", max_batch_predicted}};
  line["deadline_misses_window"] = delta("/engine/deadline_misses");
  line["deadline_misses_total"] = b.counter("/engine/deadline_misses");
  line["deferred_streams_window"] = delta("/engine/deferred_streams");
  line["deferred_streams_total"] = b.counter("/engine/deferred_streams");
  // Times the host did not run the daemon for 50 ms or more (daemon/pause_monitor.h):
  // misses that come with them had their cause outside the tick's work.
  line["process_pauses"] = {{"window", delta("/process/pauses")},
                            {"window_ms", delta("/process/pause_ms_total")},
                            {"total", b.counter("/process/pauses")},
                            {"max_ms_since_start", b.counter("/process/pause_ms_max")}};
  // The search's warm-up before the daemon was ready (search.warm_up_streams).
  line["search_warm_up"] = {{"seconds", b.counter("/engine/warm_up/seconds")},
                            {"batches", b.counter("/engine/warm_up/batches")},
                            {"buffer_growths", b.counter("/engine/warm_up/buffer_growths")},
                            {"matches", b.counter("/engine/warm_up/matches")},
                            {"first_ms", b.counter("/engine/warm_up/first_ms")},
                            {"last_ms", b.counter("/engine/warm_up/last_ms")}};
  line["cost_model_skipped_total"] = b.counter("/engine/cost_model/skipped_batches");
  json drops = json::object();
  double dropped = 0;
  std::vector<std::string> drop_counters = kDropCounters;
  for (const std::string& path : decode_error_counters()) drop_counters.push_back(path);
  for (const std::string& path : drop_counters) {
    const double value = b.counter(path);
    drops[output_key(path)] = value;
    dropped += value;
  }
  line["drops_total"] = drops;
  line["queue"] = {{"ingest_depth_max_sampled", max_queue_depth},
                   {"ingest_high_water", b.counter("/ingest/queue_high_water")},
                   {"ingest_capacity", std::max(8192, 8 * wearers)}};
  // The daemon's pipeline thread over the window, as fractions of it: is it
  // the limit (waiting near 0), and on what.
  json pipeline_thread = json::object();
  for (const char* part :
       {"waiting", "frames", "frames_engine", "batch", "batch_start", "after_batch", "alerts_out",
        "other"})
    pipeline_thread[part] =
        delta(std::string("/pipeline_thread/") + part + "_s") / window_s;
  line["pipeline_thread_fraction"] = pipeline_thread;
  // The engine's host stages (within the batch part above), likewise.
  json engine_host = json::object();
  for (const char* stage : {"due", "slices", "fill", "phase2"})
    engine_host[stage] = delta(std::string("/engine/host_s/") + stage) / window_s;
  line["engine_host_fraction"] = engine_host;
  // The alert writer's thread, likewise: transactions and publishing.
  line["sink_fraction"] = {{"commit", delta("/sink/commit_s") / window_s},
                           {"publish", delta("/sink/publish_s") / window_s}};
  line["daemon_exit_code"] = exit_code ? *exit_code : -1;

  // The verdict.
  std::vector<std::string> reasons;
  if (!sent.error.empty()) reasons.push_back("sender error");
  if (sent.late_frames > 0)
    reasons.push_back(
        "sender more than a tick behind schedule (daemon not reading, or the host starved it)");
  if (line["deadline_misses_window"].get<double>() > 0) reasons.push_back("deadline misses");
  if (line["deferred_streams_window"].get<double>() > 0) reasons.push_back("deferred streams");
  if (dropped > 0) reasons.push_back("drops");
  if (line["frames_lost"].get<double>() != 0) reasons.push_back("frames sent but not accepted");
  if (quantile_of(daemon_ms, 0.99) > kDeadlineMs || latency.p99_ms > kDeadlineMs)
    reasons.push_back("daemon p99 latency > 250 ms");
  if (quantile_of(subscriber_ms, 0.99) > kDeadlineMs)
    reasons.push_back("subscriber p99 latency > 250 ms");
  if (!exit_code || *exit_code != 0) reasons.push_back("daemon did not exit cleanly");
  // Every committed alert is published after its commit, so the subscriber
  // must have seen as many as the store holds.
  if (seen.size() != stored) reasons.push_back("subscriber missed published alerts");
  line["sustained"] = reasons.empty();
  line["reasons"] = reasons;
  line["end_unix"] = send_end_unix;
  if (!options.keep) fs::remove_all(run.dir);
  progress(
      fmt::format("  -> {} wearers: {} (p99 {:.0f} ms daemon / {:.0f} ms subscriber, {} alerts, "
                  "batch p99 {:.0f} ms, {:.0f} deadline misses){}",
                  wearers, reasons.empty() ? "sustained" : "NOT sustained",
                  quantile_of(daemon_ms, 0.99), quantile_of(subscriber_ms, 0.99), daemon_ms.size(),
                  batch.p99_ms, line["deadline_misses_window"].get<double>(),
                  reasons.empty() ? "" : " [" + fmt::format("{}", fmt::join(reasons, "; ")) + "]"));
  return line;
}

// ---------------------------------------------------------------- micro benchmarks

// Frames/s one thread decodes and checks against the W1 profile, as the
// daemon's ingest thread does per datagram (decode_frame + profile check).
void micro_decode(const Options& options, const gw::sensors::Recording& base,
                  const std::string& format) {
  const int distinct = 32;
  WearerPool pool = make_pool(base, distinct, options);
  std::vector<std::vector<std::uint8_t>> frames;
  for (int w = 0; w < distinct; ++w)
    for (std::uint32_t k = 0; k < 8; ++k)
      frames.push_back(
          gw::sensors::encode_frame(frame_of(pool, w, k, 1000000ull * k, format == "int16")));
  gw::sensors::Frame out;
  std::uint64_t decoded = 0, bytes = 0, bad = 0;
  const auto start = Clock::now();
  double elapsed = 0;
  while (elapsed < options.micro_seconds) {
    for (const auto& f : frames) {
      if (gw::sensors::decode_frame(f.data(), f.size(), out) != gw::sensors::DecodeStatus::kOk ||
          out.channels != kW1Channels || out.device_id != kDeviceId)
        ++bad;
      ++decoded;
      bytes += f.size();
    }
    elapsed = std::chrono::duration<double>(Clock::now() - start).count();
  }
  json line;
  line["bench"] = "ingest_decode";
  line["format"] = format;
  line["frame_bytes"] = frames.front().size();
  line["samples_per_frame"] = kFrameSamples;
  line["channels"] = kW1Channels;
  line["threads"] = 1;
  line["frames"] = decoded;
  line["bad_frames"] = bad;
  line["seconds"] = elapsed;
  line["frames_per_s"] = decoded / elapsed;
  line["mb_per_s"] = bytes / elapsed / 1e6;
  line["w1_wearers_per_ingest_thread"] = decoded / elapsed / (1000.0 / kFramePeriodMs);
  line["note"] =
      "one thread: decode_frame (header, counts, CRC, int16 scaling / float checks) on "
      "W1 frames of 10 samples x 201 channels; W1 wearers = frames/s / 10";
  std::cout << line.dump() << std::endl;
}

// Frames/s the daemon's ingest thread takes in: the real gw::daemon::Ingest
// (asio TCP session: length prefix, body, decode_frame, profile check, push)
// on the W1 configuration, on its own io_context thread, fed over one
// loopback TCP connection as fast as it reads, its queue drained by another
// thread. Also per CPU second of that thread, which a loaded host distorts
// less than the wall-clock rate.
void micro_ingest(const Options& options, const gw::sensors::Recording& base,
                  const fs::path& workdir) {
  const gw::bench::W1PatternSet patterns = gw::bench::w1_patterns(base, options.patterns, options.seed);
  gw::bench::write_w1_templates(patterns, workdir / "patterns");
  Ports ports;  // udp 0: that transport off; the others only have to be valid
  ports.tcp = gw::free_port(false);
  ports.publish = ports.tcp + 1;
  ports.control = ports.tcp + 2;
  ports.metrics = ports.tcp + 3;
  gw::config::Config config = gw::config::parse_config(
      w1_config(options, 1, patterns, workdir / "patterns", workdir, ports), "e2e_bench micro",
      workdir.string());
  config.ingest.threads = 1;  // the connection on io's thread, whose CPU time is measured
  gw::daemon::FrameQueue queue(8192, gw::OverflowPolicy::kBlock);
  asio::io_context io;
  gw::daemon::Ingest ingest(io, config, queue);
  double io_cpu_s = 0;
  std::thread io_thread([&] {
    const double cpu0 = thread_cpu_s();
    io.run();
    io_cpu_s = thread_cpu_s() - cpu0;
  });
  std::thread consumer([&] {
    while (queue.pop_for(std::chrono::milliseconds(100)) || !io.stopped()) {
    }
  });

  const int distinct = 32;
  const WearerPool pool = make_pool(base, distinct, options);
  std::vector<std::uint8_t> stream;  // length-prefixed frames, sent round and round
  int frames_per_pass = 0;
  for (int w = 0; w < distinct; ++w)
    for (std::uint32_t k = 0; k < 8; ++k, ++frames_per_pass) {
      const auto bytes = gw::sensors::encode_frame(frame_of(pool, w, k, 1000000ull * k, true));
      const auto n = static_cast<std::uint32_t>(bytes.size());
      for (int b = 0; b < 4; ++b) stream.push_back(static_cast<std::uint8_t>(n >> (8 * b)));
      stream.insert(stream.end(), bytes.begin(), bytes.end());
    }
  std::uint64_t sent = 0;
  const auto start = Clock::now();
  {
    asio::io_context client_io;
    asio::ip::tcp::socket socket(client_io);
    socket.connect({asio::ip::make_address("127.0.0.1"), static_cast<unsigned short>(ports.tcp)});
    while (std::chrono::duration<double>(Clock::now() - start).count() < options.micro_seconds) {
      asio::write(socket, asio::buffer(stream));
      sent += frames_per_pass;
    }
  }
  const auto& counters = ingest.counters();
  const auto wait_until = Clock::now() + std::chrono::seconds(30);
  while (counters.tcp_frames < sent && Clock::now() < wait_until)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  io.stop();
  io_thread.join();
  queue.close();
  consumer.join();
  std::uint64_t decode_errors = 0;
  for (const auto& d : counters.decode) decode_errors += d;
  json line;
  line["bench"] = "ingest_thread";
  line["transport"] = "tcp";
  line["format"] = "int16";
  line["frame_bytes"] = stream.size() / frames_per_pass - 4;
  line["frames_sent"] = sent;
  line["frames_received"] = counters.tcp_frames.load();
  line["frames_queued"] = counters.queued.load();
  line["rejected"] = decode_errors + counters.unknown_device + counters.profile_mismatch;
  line["seconds"] = seconds;
  line["frames_per_s"] = counters.queued / seconds;
  line["ingest_thread_cpu_s"] = io_cpu_s;
  line["frames_per_ingest_cpu_s"] = counters.queued / std::max(1e-9, io_cpu_s);
  line["w1_wearers_per_ingest_thread"] = counters.queued / std::max(1e-9, io_cpu_s) / 10.0;
  line["note"] =
      "gw::daemon::Ingest on one io_context thread, one loopback TCP connection sending as fast "
      "as it reads (the sender and the queue consumer share the host); W1 wearers = frames per "
      "ingest-thread CPU second / 10";
  std::cout << line.dump() << std::endl;
}

// Hits/s the daemon's SQLite writer commits: AlertSink (its writer thread,
// batched transactions, publish after commit) with the daemon's defaults
// (commit_interval_ms 50, max_batch) on a real file in WAL mode, and the
// store alone (HitStore::insert of max_batch alerts per transaction). With
// --micro-batch N the sink gets groups of N (submit_all, as the daemon hands
// it a tick's alerts) and the store N per transaction; ms_per_transaction
// is the sink's commit time (rows and fsync) or the store's insert() per
// transaction, flush_ms_per_transaction the sink's commit and publish.
void micro_store(const Options& options, const fs::path& workdir) {
  const gw::config::StorageConfig defaults;
  gw::pipeline::Alert alert;
  alert.device = kDeviceId;
  alert.pattern = "w1_p00";
  alert.kind = "other";
  alert.severity = "warning";
  alert.distance = 1.5;
  alert.pattern_dims = kW1Dims;
  alert.matched_dims = options.micro_dims;
  alert.dims.resize(static_cast<std::size_t>(options.micro_dims));
  const auto make = [&](int i) {
    gw::pipeline::Alert a = alert;
    a.wearer = static_cast<std::uint32_t>(i % 10000 + 1);
    // Full-precision distances, as the detector's are (their text is
    // 17 digits, not "0.5").
    for (int d = 0; d < options.micro_dims; ++d)
      a.dims[static_cast<std::size_t>(d)] = {d, d, 0.25 + std::fmod((i + d) * 0.6180339887, 1.0), i};
    a.t_end = 1.7e9 + i * 0.01;
    a.t_start = a.t_end - 1.28;
    a.end_index = i;
    a.detected_at = unix_now();
    return a;
  };
  for (const bool publish : {false, true}) {
    const fs::path db = workdir / fmt::format("micro-sink-{}.db", publish ? "pub" : "nopub");
    gw::pipeline::SinkOptions sink_options;
    sink_options.db_path = db.string();
    sink_options.commit_interval_ms = defaults.commit_interval_ms;
    sink_options.max_batch = defaults.max_batch;
    sink_options.retention_days = 0;
    // Alert by alert, every hit may be held at once: none is dropped.
    sink_options.max_pending_alerts = static_cast<std::size_t>(std::max(options.micro_hits, 1));
    if (publish)
      sink_options.publish_endpoint =
          "tcp://127.0.0.1:" + std::to_string(gw::free_port(false));
    const auto start = Clock::now();
    gw::pipeline::SinkCounters counters;
    {
      gw::pipeline::AlertSink sink(sink_options);
      if (options.micro_batch > 0) {
        std::vector<gw::pipeline::Alert> group;
        for (int i = 0; i < options.micro_hits;) {
          const int group_start = i;
          for (int k = 0; k < options.micro_batch && i < options.micro_hits; ++k)
            group.push_back(make(i++));
          sink.submit_all(group);
          if (options.micro_episodes) {
            // The group before: its alerts are committed (waited for below).
            for (int j = std::max(0, group_start - options.micro_batch); j < group_start; j += 2) {
              const gw::pipeline::Alert first = make(j);
              gw::pipeline::EpisodeEnd end;
              end.wearer = first.wearer;
              end.device = first.device;
              end.pattern = first.pattern;
              end.kind = first.kind;
              end.severity = first.severity;
              end.first_alert_end_index = first.end_index;
              end.first_alert_t_end = first.t_end;
              end.t_start = first.t_start;
              end.t_end = first.t_end + 2;
              end.alerts = 2;
              sink.submit_event(gw::pipeline::episode_ended_event(end, unix_now()));
            }
          }
          // One transaction per group, as at the daemon's ticks: the next
          // group comes once this one is in (else groups queued behind a
          // commit would share the next one).
          while (sink.counters().committed < static_cast<std::uint64_t>(i))
            std::this_thread::sleep_for(std::chrono::microseconds(50));
        }
      } else {
        for (int i = 0; i < options.micro_hits; ++i) sink.submit(make(i));
      }
      sink.stop();
      counters = sink.counters();
    }
    const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
    json line;
    line["bench"] = "sqlite_writer";
    line["writer"] = "AlertSink";
    line["publish"] = publish;
    line["commit_interval_ms"] = sink_options.commit_interval_ms;
    line["max_batch"] = sink_options.max_batch;
    line["group"] = options.micro_batch;
    line["dims"] = options.micro_dims;
    line["hits"] = options.micro_hits;
    line["committed"] = counters.committed;
    line["episode_events"] = options.micro_episodes;
    line["events_committed"] = counters.events_committed;
    if (options.micro_episodes) {
      // Each event names its first alert's seq: the lookup worked.
      gw::pipeline::HitStore store(db.string());
      gw::pipeline::EventQuery query;
      query.limit = 100000;
      std::uint64_t resolved = 0;
      for (const auto& event : store.events(query)) resolved += event.alert_seq != 0;
      line["events_resolved"] = resolved;
    }
    line["transactions"] = counters.transactions;
    line["ms_per_transaction"] = counters.commit_s * 1000 / counters.transactions;
    // Commit, then the published text (made during the commit) and the sends:
    // the writer's part of the way from detection to subscriber.
    line["flush_ms_per_transaction"] =
        (counters.commit_s + counters.publish_s) * 1000 / counters.transactions;
    line["seconds"] = seconds;
    line["hits_per_s"] = counters.committed / seconds;
    line["db_bytes"] = fs::file_size(db);
    std::cout << line.dump() << std::endl;
  }
  {
    const fs::path db = workdir / "micro-store.db";
    gw::pipeline::HitStore store(db.string());
    const auto start = Clock::now();
    int done = 0;
    std::uint64_t transactions = 0;
    const int per_transaction = options.micro_batch > 0 ? options.micro_batch : defaults.max_batch;
    while (done < options.micro_hits) {
      std::vector<gw::pipeline::Alert> batch;
      for (int i = 0; i < per_transaction && done < options.micro_hits; ++i)
        batch.push_back(make(done++));
      store.insert(batch);
      ++transactions;
    }
    const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
    json line;
    line["bench"] = "sqlite_writer";
    line["writer"] = "HitStore::insert";
    line["max_batch"] = per_transaction;
    line["dims"] = options.micro_dims;
    line["hits"] = options.micro_hits;
    line["committed"] = store.count();
    line["transactions"] = transactions;
    line["ms_per_transaction"] = seconds * 1000 / static_cast<double>(transactions);
    line["seconds"] = seconds;
    line["hits_per_s"] = options.micro_hits / seconds;
    line["db_bytes"] = fs::file_size(db);
    std::cout << line.dump() << std::endl;
  }
}

// ---------------------------------------------------------------- overload

// What one phase changed, between the scrapes at its start and its end.
json phase_json(const std::string& name, int wearers, const Scrape& a, const Scrape& b,
                std::uint64_t frames_sent, double max_queue_depth) {
  const auto delta = [&](const std::string& path) { return b.counter(path) - a.counter(path); };
  const HistogramWindow latency = histogram_window(a, b, "gaitwatch_alert_latency_seconds");
  const HistogramWindow batch = histogram_window(a, b, "gaitwatch_batch_seconds");
  json p;
  p["phase"] = name;
  p["wearers"] = wearers;
  p["seconds"] = b.time - a.time;
  p["frames_sent"] = frames_sent;
  for (const char* c : {"frames_accepted", "batches", "deadline_misses", "deferred_streams",
                        "shed_streams", "shed_windows", "dropped_windows", "lost_windows",
                        "overrun_samples", "due_windows", "searched_windows", "alerts"})
    p[c] = delta(std::string("/engine/") + c);
  p["queue_dropped"] = delta("/ingest/queue_dropped");
  p["pending_windows_end"] = b.counter("/engine/pending_windows");
  p["queue_depth_end"] = b.counter("/ingest/queue_depth");
  p["queue_depth_max_sampled"] = max_queue_depth;
  p["latency_ms"] = {{"count", latency.count}, {"p50", latency.p50_ms}, {"p99", latency.p99_ms}};
  p["batch_ms"] = {{"count", batch.count}, {"p50", batch.p50_ms}, {"p99", batch.p99_ms}};
  return p;
}

// The final accounting, from the daemon's counters after its drain: frames
// sent = received by the ingest = accepted by the engine + dropped (by
// reason) + still queued; window-end items due = searched + shed + dropped +
// lost + pending (pipeline/engine.h).
json accounting_json(const Scrape& f, std::uint64_t frames_sent, const std::string& transport) {
  const double received = f.counter(transport == "tcp" ? "/ingest/tcp_frames"
                                                       : "/ingest/datagrams");
  json reasons = json::object();
  double dropped = 0;
  const auto reason = [&](const std::string& path) {
    const double v = f.counter(path);
    reasons[output_key(path)] = v;
    dropped += v;
  };
  for (const std::string& path : decode_error_counters()) reason(path);
  for (const char* path :
       {"/ingest/oversized", "/ingest/unknown_device", "/ingest/profile_mismatch",
        "/ingest/admission/not_allowed", "/ingest/admission/wrong_source",
        "/ingest/admission/missing_mac", "/ingest/admission/bad_mac",
        "/ingest/admission/unexpected_mac", "/ingest/queue_dropped",
        "/engine/frames_out_of_order", "/engine/frames_unknown_device",
        "/engine/frames_profile_mismatch"})
    reason(path);
  const double accepted = f.counter("/engine/frames_accepted");
  const double queued = f.counter("/ingest/queue_depth");
  json frames = {{"sent", frames_sent},
                 {"received", received},
                 {"accepted", accepted},
                 {"dropped", dropped},
                 {"dropped_by_reason", reasons},
                 {"queued_at_end", queued}};
  frames["sent_equals_received"] = static_cast<double>(frames_sent) == received;
  frames["received_equals_accepted_plus_dropped"] = received == accepted + dropped + queued;
  const auto engine = [&](const char* n) { return f.counter(std::string("/engine/") + n); };
  json windows = {{"due", engine("due_windows")},         {"searched", engine("searched_windows")},
                  {"shed", engine("shed_windows")},       {"dropped", engine("dropped_windows")},
                  {"lost", engine("lost_windows")},       {"pending", engine("pending_windows")},
                  {"overrun_samples", engine("overrun_samples")}};
  windows["due_equals_searched_shed_dropped_lost_pending"] =
      engine("due_windows") == engine("searched_windows") + engine("shed_windows") +
                                   engine("dropped_windows") + engine("lost_windows") +
                                   engine("pending_windows");
  return {{"frames", frames}, {"windows", windows}};
}

// One daemon run: --wearers N for the warm-up, factor x N for --overload-s,
// N again for --recover-s (its last --recovered-s reported as a phase of its
// own), then the drain and a clean stop. One "e2e_overload" line.
json overload_run(const Options& options, const gw::sensors::Recording& base,
                  const gw::bench::W1PatternSet& patterns, const fs::path& workdir) {
  const std::vector<int> counts = gw::bench::parse_counts(options.wearers, "--wearers");
  if (counts.size() != 1) throw gw::Error("--overload: --wearers takes one count (the normal load)");
  const int normal = counts.front();
  auto times_factor = [&](int base) {
    return std::max(normal + 1, static_cast<int>(std::lround(base * options.overload_factor)));
  };
  // With --overload-of sustainable the overload count is only known after
  // the warm-up: everything is sized for the largest it may be.
  const bool of_sustainable = options.overload_of == "sustainable";
  int peak = of_sustainable ? std::max(times_factor(normal), options.overload_max) : times_factor(normal);
  const int capacity = peak;
  struct Phase {
    std::string name;
    int wearers;
    double seconds;
  };
  const double recovered_s = std::min(options.recovered_s, options.recover_s);
  std::vector<Phase> phases = {{"warmup", normal, options.warmup_s},
                                     {"overload", peak, options.overload_s},
                                     {"recovering", normal, options.recover_s - recovered_s},
                                     {"recovered", normal, recovered_s}};
  double total_s = 0;
  for (const auto& p : phases) total_s += p.seconds;

  json line;
  line["bench"] = "e2e_overload";
  line["wearers"] = normal;
  line["overload_wearers"] = peak;
  line["overload_factor"] = options.overload_factor;
  line["overload_of"] = options.overload_of;
  line["policy"] = gw::config::name(options.policy);
  line["backend"] = gw::config::name(options.backend);
  line["tick_ms"] = options.tick_ms;
  line["devices"] = options.devices;
  line["warm_up"] = options.warm_up;
  line["commit_interval_ms"] = options.commit_ms;
  line["search_threads"] = options.threads;
  line["deadline_ms"] = kDeadlineMs;
  line["loadavg_at_start"] = loadavg();
  const WearerPool pool = make_pool(base, capacity, options);
  DaemonRun run(options, capacity, patterns, workdir, workdir / fmt::format("overload-{}", normal));
  line["run_dir"] = run.dir.string();
  if (!run.error.empty()) {
    line["error"] = run.error;
    return line;
  }
  SendControl control;
  control.active = normal;
  Scrape at = scrape(run.ports.metrics);
  const auto start = Clock::now() + std::chrono::milliseconds(200);
  const double start_unix = unix_now() + 0.2;
  const auto end = start + std::chrono::duration_cast<Clock::duration>(
                               std::chrono::duration<double>(total_s));
  Senders senders(options, pool, capacity, control, start, end, start_unix, run.port(options));
  progress(fmt::format("overload: {} wearers, {} for {} s, then {} ({} policy, {} s in all)",
                       normal, of_sustainable ? std::string("factor x sustainable") : std::to_string(peak),
                       options.overload_s, normal, gw::config::name(options.policy), total_s));
  json phase_lines = json::array();
  auto boundary = start;
  std::uint64_t frames_at = 0;
  for (Phase& phase : phases) {
    if (of_sustainable && phase.name == "overload") {
      // Sustainable estimate from the warm-up: the wearers whose batches
      // would fill 90 % of a tick at the warm-up's median batch time per
      // wearer. The batch floor makes it an underestimate, so the overload
      // is at least factor x the estimate and the estimate at least normal.
      const double batch_p50 = phase_lines.back()["batch_ms"]["p50"].get<double>();
      const double per_wearer_ms = batch_p50 / normal;
      const int sustainable =
          per_wearer_ms > 0 ? std::max(normal, static_cast<int>(0.9 * options.tick_ms / per_wearer_ms))
                            : normal;
      peak = std::min(times_factor(sustainable), capacity);
      phase.wearers = peak;
      line["sustainable_estimate"] = sustainable;
      line["warmup_batch_ms_p50"] = batch_p50;
      line["overload_wearers"] = peak;
      progress(fmt::format("  warm-up batch p50 {:.1f} ms for {} wearers: sustainable ~{}, "
                           "overload {} wearers", batch_p50, normal, sustainable, peak));
    }
    control.active = phase.wearers;
    boundary += std::chrono::duration_cast<Clock::duration>(
        std::chrono::duration<double>(phase.seconds));
    double max_depth = 0;
    auto next_report = Clock::now() + std::chrono::seconds(15);
    run.watch(boundary, [&](const Scrape& s) {
      max_depth = std::max(max_depth, s.counter("/ingest/queue_depth"));
      if (Clock::now() < next_report) return;
      next_report += std::chrono::seconds(15);
      progress(fmt::format("  {} ({} wearers): {:.0f} deadline misses, {:.0f} deferred, {:.0f} "
                           "shed, {:.0f} lost windows, queue {:.0f}, last batch {:.0f} ms",
                           phase.name, phase.wearers, s.counter("/engine/deadline_misses"),
                           s.counter("/engine/deferred_streams"),
                           s.counter("/engine/shed_streams"),
                           s.counter("/engine/lost_windows"),
                           s.counter("/ingest/queue_depth"),
                           s.counter("/engine/last_batch_ms")));
    });
    Scrape b = at;
    try {
      b = scrape(run.ports.metrics);
    } catch (const std::exception& e) {
      progress(std::string("  metrics scrape failed: ") + e.what());
    }
    const std::uint64_t frames_now = control.frames.load();
    phase_lines.push_back(
        phase_json(phase.name, phase.wearers, at, b, frames_now - frames_at, max_depth));
    at = b;
    frames_at = frames_now;
  }
  senders.join();
  const Senders::Totals sent = senders.totals();
  const Scrape drained = run.drain(sent.frames, 60);
  phase_lines.push_back(phase_json("drain", 0, at, drained, 0, drained.counter("/ingest/queue_depth")));
  const std::uint64_t stored = run.stop(line);

  // The counters the daemon published at shutdown, after its drain; the
  // last scrape if that message did not arrive.
  Scrape final_counters = drained;
  const nlohmann::json last_stats = run.subscriber->last_stats();
  const bool from_shutdown = last_stats.is_object() && last_stats.value("reason", "") == "shutdown";
  if (from_shutdown) {
    std::string page;
    gw::daemon::render_counter_families(last_stats, page);
    final_counters = parse_scrape(page);
  }
  line["sender"] = sender_json(options, senders, sent, peak * 1000.0 / kFramePeriodMs);
  line["phases"] = phase_lines;
  line["accounting"] = accounting_json(final_counters, sent.frames, options.transport);
  line["accounting"]["source"] = from_shutdown ? "stats at shutdown" : "last metrics scrape";
  line["alerts"] = {{"stored", stored},
                    {"published", final_counters.counter("/sink/published")},
                    {"received", run.subscriber->alerts().size()}};
  line["daemon_exit_code"] = run.exit_code ? *run.exit_code : -1;
  line["loadavg_at_end"] = loadavg();
  const json& overload = phase_lines[1];
  const json& recovered = phase_lines[3];
  const json acc = line["accounting"];  // a copy: adding keys to `line` moves its values
  line["degraded"] = overload["deferred_streams"].get<double>() +
                         overload["shed_streams"].get<double>() +
                         overload["dropped_windows"].get<double>() +
                         overload["deadline_misses"].get<double>() >
                     0;
  line["recovered"] = recovered["deadline_misses"].get<double>() == 0 &&
                      recovered["deferred_streams"].get<double>() == 0 &&
                      recovered["shed_streams"].get<double>() == 0 &&
                      recovered["lost_windows"].get<double>() == 0 &&
                      recovered["latency_ms"]["p99"].get<double>() <= kDeadlineMs;
  line["accounted"] = acc["frames"]["sent_equals_received"].get<bool>() &&
                      acc["frames"]["received_equals_accepted_plus_dropped"].get<bool>() &&
                      acc["windows"]["due_equals_searched_shed_dropped_lost_pending"].get<bool>();
  progress(fmt::format("  -> degraded {}, recovered {}, accounted {}, daemon exit {}",
                       line["degraded"].get<bool>(), line["recovered"].get<bool>(),
                       line["accounted"].get<bool>(), line["daemon_exit_code"].get<int>()));
  if (!options.keep) fs::remove_all(run.dir);
  return line;
}

// ---------------------------------------------------------------- search

int run(Options options) {
  if (options.quick) {
    options.sweep_duration_s = 20;
    options.duration_s = 120;
    options.warmup_s = std::min(options.warmup_s, 5.0);
    options.resolution = std::max(options.resolution, 0.1);
  }
  if (options.start == 0)
    options.start = options.backend == gw::config::BackendKind::kCpu ? 1 : 1000;
  const std::string data =
      options.data.empty() ? std::string(GW_DATA_DIR) + "/gaitpdb/GaCo01_01.txt" : options.data;
  const gw::sensors::Recording base = gw::sensors::read_gaitpdb(data);
  fs::path workdir = options.workdir;
  if (workdir.empty()) {
    std::string pattern = (fs::temp_directory_path() / "gw-e2e-XXXXXX").string();
    if (!mkdtemp(pattern.data())) throw gw::Error("cannot create a temporary directory");
    workdir = pattern;
  }
  fs::create_directories(workdir);
  progress("work directory " + workdir.string());

  if (options.micro) {
    micro_decode(options, base, "int16");
    micro_decode(options, base, "float32");
    micro_ingest(options, base, workdir);
    micro_store(options, workdir);
    if (!options.keep) fs::remove_all(workdir);
    return 0;
  }
  if (options.daemon.empty()) options.daemon = self_dir() + "/../daemon/gaitwatchd";
  if (!fs::exists(options.daemon))
    throw gw::Error("no daemon at " + options.daemon + " (--daemon)");

  const gw::bench::W1PatternSet patterns = gw::bench::w1_patterns(base, options.patterns, options.seed);
  gw::bench::write_w1_templates(patterns, workdir / "patterns");
  if (options.overload) {
    std::cout << overload_run(options, base, patterns, workdir).dump() << std::endl;
    if (!options.keep) fs::remove_all(workdir);
    return 0;
  }

  json summary;
  summary["bench"] = "e2e_summary";
  summary["backend"] = gw::config::name(options.backend);
  summary["data"] =
      "synthetic from gaitpdb (sensors/synthetic.h, " + fs::path(data).filename().string() + ")";
  summary["patterns"] = options.patterns;
  summary["threshold"] = options.threshold > 0 ? options.threshold : patterns.threshold;
  summary["min_dims"] = options.min_dims > 0 ? options.min_dims : patterns.min_dims;
  summary["deadline_ms"] = kDeadlineMs;
  summary["tick_ms"] = options.tick_ms;
  summary["devices"] = options.devices;
  summary["warm_up"] = options.warm_up;
  summary["commit_interval_ms"] = options.commit_ms;
  summary["host_cpus"] = std::thread::hardware_concurrency();
  summary["loadavg_at_start"] = loadavg();
  int run_number = 0;
  std::vector<json> runs;
  const auto attempt = [&](int wearers, double duration) {
    json line = run_once(options, wearers, duration, base, patterns, workdir, ++run_number);
    line["loadavg_after"] = loadavg();
    std::cout << line.dump() << std::endl;
    runs.push_back(line);
    return line.value("sustained", false);
  };

  int sustained = 0;
  int confirmed = 0;
  if (!options.wearers.empty()) {
    for (int n : gw::bench::parse_counts(options.wearers, "--wearers"))
      if (attempt(n, options.duration_s)) sustained = std::max(sustained, n);
    confirmed = sustained;
    summary["mode"] = "list";
  } else {
    // Doubling from --start, then bisection between the last sustained and
    // the first failed count, with short runs; then one run at --duration.
    summary["mode"] = "search";
    int good = 0, bad = 0;
    for (int n = options.start; n <= options.max_wearers; n *= 2) {
      if (attempt(n, options.sweep_duration_s)) {
        good = n;
      } else {
        bad = n;
        break;
      }
    }
    if (bad == 0 && good > 0) bad = good;  // hit --max
    while (bad > good + std::max(1, static_cast<int>(good * options.resolution))) {
      const int mid = good + (bad - good) / 2;
      if (attempt(mid, options.sweep_duration_s)) {
        good = mid;
      } else {
        bad = mid;
      }
    }
    sustained = good;
    summary["sweep_sustained"] = good;
    summary["sweep_first_failed"] = bad > good ? json(bad) : json(nullptr);
    if (!options.no_confirm && good > 0) {
      // A failed confirmation steps down 10 % once.
      int n = good;
      bool ok = attempt(n, options.duration_s);
      if (!ok) {
        n = std::max(1, static_cast<int>(n * 0.9));
        if (n < good) ok = attempt(n, options.duration_s);
      }
      confirmed = ok ? n : 0;
    }
  }
  summary["sweep_duration_s"] = options.sweep_duration_s;
  summary["confirm_duration_s"] = options.duration_s;
  summary["runs"] = run_number;
  summary["w1_wearers_sustained"] = options.no_confirm ? sustained : confirmed;
  summary["confirmed"] = !options.no_confirm;
  std::vector<json> tried;
  for (const auto& r : runs)
    tried.push_back({{"wearers", r["wearers"]},
                     {"duration_s", r["duration_s"]},
                     {"sustained", r.value("sustained", false)}});
  summary["tried"] = tried;
  summary["criterion"] =
      "after the warm-up: ingest->alert p99 <= 250 ms (daemon and subscriber), zero deadline "
      "misses, "
      "nothing deferred/shed/dropped, every frame sent accepted, sender on schedule";
  summary["loadavg_at_end"] = loadavg();
  std::cout << summary.dump() << std::endl;
  if (!options.keep) fs::remove_all(workdir);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Options options;
  CLI::App app{
      "W1 wearers through the whole daemon (or --micro: decode and store rates); JSON lines"};
  app.add_option("--daemon", options.daemon,
                 "gaitwatchd binary (default: ../daemon/gaitwatchd next to this)");
  gw::cli::add_choice_option<gw::config::BackendKind>(app, "--backend", options.backend,
                                                      "search.backend (default cpu)");
  app.add_option("--threads", options.threads, "search.threads (CPU backend; 0 = all cores)");
  app.add_option("--wearers", options.wearers,
                 "comma-separated wearer counts, each run for --duration; "
                 "without it: a search (doubling, bisection, confirmation)");
  app.add_option("--start", options.start,
                 "search: first wearer count (default 1 on cpu, 1000 otherwise)")
      ->check(CLI::PositiveNumber);
  app.add_option("--max", options.max_wearers, "search: largest wearer count tried")
      ->check(CLI::PositiveNumber);
  app.add_option("--duration", options.duration_s,
                 "seconds measured per listed run and for the confirmation (default 600)")
      ->check(CLI::PositiveNumber);
  app.add_option("--sweep-duration", options.sweep_duration_s,
                 "seconds measured per search run (default 30)")
      ->check(CLI::PositiveNumber);
  app.add_option("--warmup", options.warmup_s, "seconds of load before measuring (default 10)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--resolution", options.resolution,
                 "search: stop bisecting within this fraction (default 0.05)");
  app.add_flag("--quick", options.quick,
               "20-s search runs, a 120-s confirmation, warm-up <= 5 s, resolution >= 0.1");
  app.add_flag("--no-confirm", options.no_confirm, "search: skip the confirmation run");
  app.add_flag("--micro", options.micro,
               "only the micro benchmarks: ingest decode frames/s, SQLite hits/s");
  app.add_option("--transport", options.transport, "tcp | udp (default tcp)")
      ->check(CLI::IsMember({"tcp", "udp"}));
  app.add_option("--format", options.format, "frame samples: int16 | float32 (default int16)")
      ->check(CLI::IsMember({"int16", "float32"}));
  app.add_option("--sender-threads", options.sender_threads,
                 "load generator threads (0: by wearer count)");
  app.add_option("--ingest-threads", options.ingest_threads,
                 "the daemon's ingest.threads (0: one per sender thread, i.e. per connection)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--patterns", options.patterns, "random-walk (search_bench's library) | synthetic")
      ->check(CLI::IsMember({"random-walk", "synthetic"}));
  app.add_option("--devices", options.devices,
                 "the daemon's search.devices, e.g. 0 or 0,1 (default: every visible GPU)")
      ->delimiter(',');
  app.add_flag("--warm-up-search", options.warm_up,
               "the daemon's search.warm_up_streams set to the run's wearers: its search "
               "warmed up before the first frame");
  app.add_option("--tick-ms", options.tick_ms, "the daemon's search.tick_ms (default 100)")
      ->check(CLI::Range(10, 1000));
  app.add_option("--node-capacity", options.node_capacity,
                 "the daemon's dedup.node_capacity and slots.node_capacity (default: the "
                 "daemon's own; size them for wearers x seconds kept so that no pool "
                 "doubles during a run)");
  app.add_option("--commit-ms", options.commit_ms,
                 "the daemon's storage.commit_interval_ms (default 50)")
      ->check(CLI::Range(1, 1000));
  app.add_option("--threshold", options.threshold,
                 "per-dim DTW threshold (default: the pattern source's)");
  app.add_option("--min-dims", options.min_dims,
                 "matched dims an alert needs (default: the pattern source's)");
  app.add_option("--data", options.data, "gaitpdb recording the synthetic wearers are made from");
  app.add_option("--config-section", options.config_sections,
                 "a top-level YAML section added to the daemon's config, e.g. "
                 "'marks: {alert_windows: false}' (repeatable; not one the bench writes)");
  app.add_option("--workdir", options.workdir,
                 "directory for configs and databases (default: a new temp dir)");
  app.add_flag("--keep", options.keep, "keep the work directory (configs, logs, databases)");
  app.add_option("--via-jetstream", options.nats_server,
                 "NATS_SERVER binary: frames through `gaitwatchd --gateway` and a JetStream server "
                 "it starts, the daemon a worker of every partition (docs/scale.md)");
  app.add_option("--frames-per-message", options.frames_per_message,
                 "--via-jetstream: the gateway's nats.frames_per_message (default 64; 1 = a message per frame)")
      ->check(CLI::Range(1, 4096));
  app.add_option("--seed", options.seed, "generator seed");
  app.add_option("--micro-seconds", options.micro_seconds,
                 "--micro: seconds per decode measurement");
  app.add_option("--micro-hits", options.micro_hits, "--micro: hits per writer measurement");
  app.add_option("--micro-batch", options.micro_batch,
                 "--micro: alerts per writer transaction (a tick's group; ~900 at 10,000 GPU "
                 "wearers); default: the sink's own batching")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--micro-dims", options.micro_dims, "--micro: dims per alert (default 3)")
      ->check(CLI::PositiveNumber);
  app.add_flag("--micro-episodes", options.micro_episodes,
               "--micro with --micro-batch: an episode_ended event for every second alert of "
               "the group before each group (the store finds its first alert's seq)");
  app.add_flag("--overload", options.overload,
               "one daemon run: --wearers N for --warmup s, --overload-factor x N for "
               "--overload-s, N for --recover-s, drain, stop; one e2e_overload line");
  app.add_option("--overload-factor", options.overload_factor,
                 "--overload: load multiple (default 3)")
      ->check(CLI::Range(1.0, 1000.0));
  app.add_option("--overload-of", options.overload_of,
                 "--overload: what the factor multiplies: normal (--wearers) or sustainable "
                 "(estimated from the warm-up's median batch time; default normal)")
      ->check(CLI::IsMember({"normal", "sustainable"}));
  app.add_option("--overload-max", options.overload_max,
                 "--overload-of sustainable: largest overload wearer count (default 64)")
      ->check(CLI::Range(2, 100000));
  app.add_option("--overload-s", options.overload_s, "--overload: seconds of overload (default 60)")
      ->check(CLI::PositiveNumber);
  app.add_option("--recover-s", options.recover_s,
                 "--overload: seconds of normal load after it (default 60)")
      ->check(CLI::PositiveNumber);
  app.add_option("--recovered-s", options.recovered_s,
                 "--overload: the last part of --recover-s reported as phase \"recovered\" "
                 "(default 20)")
      ->check(CLI::PositiveNumber);
  gw::cli::add_choice_option<gw::config::OverloadPolicy>(app, "--policy", options.policy,
                                                         "search.overload_policy (default defer)");
  CLI11_PARSE(app, argc, argv);
  if (options.overload && options.wearers.empty()) {
    std::cerr << "e2e_bench: --overload needs --wearers N (the normal load)\n";
    return 2;
  }
  try {
    return run(options);
  } catch (const std::exception& e) {
    std::cerr << "e2e_bench: " << e.what() << "\n";
    return 1;
  }
}
