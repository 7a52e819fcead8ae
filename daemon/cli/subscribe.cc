// gaitwatch subscribe: prints every alert published by gaitwatchd, one JSON
// object (or, with --format text, one readable line) per alert, as it arrives. Alerts carry gapless sequence numbers, so a
// gap means ZeroMQ dropped messages for this subscriber (its high-water mark):
// counted on stderr, and with --catch-up fetched from the daemon's store
// through the control interface and printed in order.
#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <csignal>
#include <ctime>
#include <iostream>
#include <optional>

#include <fmt/format.h>
#include <zmq.hpp>

#include "common/error.h"
#include "daemon/cli/cli.h"
#include "sinks/alert.h"
#include "sinks/curve.h"

namespace gw::cli {
namespace {

struct SubscribeOptions {
  std::string endpoint;    // empty: publish.endpoint of the config
  std::string config;      // the daemon's config file
  std::vector<std::string> topics;
  long count = 0;
  double timeout_s = 0;
  bool with_topic = false;
  bool text = false;       // --format text: alert_text_line / event_text_line instead of JSON
  // Events (topic event.) too: --events, or --format text without --no-events.
  bool events = false;
  bool no_events = false;
  std::string server_key;  // the daemon's .pub file: CURVE on
  std::string key;         // this client's .key file (authorized on the daemon)
  bool catch_up = false;
  std::optional<std::uint64_t> since_seq;  // the last seq already seen (catch up from it)
  ControlTarget control;
  // --nats: the JetStream alert stream instead of the ZeroMQ publisher.
  AlertStreamSubscription stream;
  bool from_start = false;
};

volatile std::sig_atomic_t g_stop = 0;
extern "C" void gw_subscribe_on_stop(int) { g_stop = 1; }

// The seq of an alert message, or the store's newest seq in a stats message
// (sink.last_seq: alerts after the last one received were lost too); nullopt
// for anything else.
std::optional<std::uint64_t> seq_of(const std::string& topic, const std::string& body) {
  const bool alert = topic.rfind("alert.", 0) == 0;
  if (!alert && topic.rfind("stats.", 0) != 0) return std::nullopt;
  const auto j = nlohmann::json::parse(body, nullptr, false);
  const auto pointer = nlohmann::json::json_pointer(alert ? "/seq" : "/sink/last_seq");
  if (!j.is_object() || !j.contains(pointer) || !j[pointer].is_number_unsigned())
    return std::nullopt;
  return j[pointer].get<std::uint64_t>();
}

// --endpoint, else publish.endpoint (and the publisher's CURVE public key,
// unless --server-key is given) of the config, else the built-in default;
// the control target (--catch-up) from the same config.
SubscribeOptions resolved(SubscribeOptions o) {
  o.control.config = o.config;
  if (o.catch_up) o.control = o.control.resolved();
  if (!o.endpoint.empty()) return o;
  const std::string path = client_config_path(o.config);
  if (path.empty()) {
    o.endpoint = config::PublishConfig{}.endpoint;
    return o;
  }
  const config::ClientEndpoints endpoints = config::load_endpoints(path);
  o.endpoint = endpoints.publish.endpoint;
  if (o.server_key.empty() && !endpoints.publish.curve_secret_key.empty()) {
    o.server_key = public_key_file_of(endpoints.publish.curve_secret_key);
    if (o.key.empty())
      throw Error("the publisher in " + path +
                  " uses CURVE (publish.curve_secret_key): give this subscriber's key file "
                  "with --key");
  }
  return o;
}

int run(const SubscribeOptions& unresolved) {
  if (!unresolved.stream.url.empty()) {
    AlertStreamSubscription stream = unresolved.stream;
    stream.from_start = unresolved.from_start;
    stream.count = unresolved.count;
    stream.timeout_s = unresolved.timeout_s;
    stream.text = unresolved.text;
    stream.with_topic = unresolved.with_topic;
    return subscribe_alert_stream(stream);
  }
  const SubscribeOptions o = resolved(unresolved);
  zmq::context_t context;
  zmq::socket_t socket(context, zmq::socket_type::sub);
  if (const auto keys = pipeline::read_curve_client_keys(o.server_key, o.key))
    pipeline::make_curve_client(socket, *keys);
  socket.connect(o.endpoint);
  // Sequence numbers run over all alerts: a gap is a loss only when this
  // subscriber receives every alert.
  const bool all_alerts = o.topics.empty() ||
                          std::find(o.topics.begin(), o.topics.end(), "alert.") != o.topics.end() ||
                          std::find(o.topics.begin(), o.topics.end(), "") != o.topics.end();
  if ((o.catch_up || o.since_seq) && !all_alerts)
    throw Error("--catch-up and --since-seq need every alert (topic alert., the default)");
  if (o.topics.empty()) socket.set(zmq::sockopt::subscribe, "alert.");
  const bool with_events = !o.no_events && (o.events || o.text);
  if (with_events) socket.set(zmq::sockopt::subscribe, "event.");
  // The periodic stats reveal losses at the end of a burst, when no later
  // alert would show the gap.
  const bool print_stats =
      std::any_of(o.topics.begin(), o.topics.end(),
                  [](const std::string& t) { return t.empty() || t.rfind("stats.", 0) == 0; });
  if (o.catch_up && !print_stats) socket.set(zmq::sockopt::subscribe, "stats.");
  for (const auto& topic : o.topics) socket.set(zmq::sockopt::subscribe, topic);
  const auto deadline = std::chrono::steady_clock::now() +
                        std::chrono::milliseconds(static_cast<long>(o.timeout_s * 1000));
  long received = 0;
  std::optional<std::uint64_t> last_seq = o.since_seq;
  std::uint64_t missed = 0, fetched = 0;
  // Prints the stored alerts in (last_seq, before): what ZeroMQ dropped.
  auto fill_gap = [&](std::uint64_t before) {
    const std::uint64_t gap = before - *last_seq - 1;
    missed += gap;
    if (!o.catch_up) return;
    for (const FetchedAlert& f : fetch_alerts(o.control, *last_seq, static_cast<long>(gap))) {
      if (f.alert.seq >= before) break;
      const nlohmann::json& j = f.body;  // as published
      if (o.with_topic) std::cout << pipeline::alert_topic(f.alert) << ' ';
      if (o.text)
        std::cout << alert_text_line(j) << std::endl;
      else
        std::cout << j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << std::endl;
      ++fetched;
      ++received;
    }
  };
  // SIGTERM / Ctrl-C end the loop, so that the summary below is printed.
  std::signal(SIGTERM, gw_subscribe_on_stop);
  std::signal(SIGINT, gw_subscribe_on_stop);
  while ((o.count == 0 || received < o.count) && !g_stop) {
    int wait_ms = 200;
    if (o.timeout_s > 0) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0) break;
      wait_ms = static_cast<int>(std::min<long>(left.count(), 200));
    }
    zmq::pollitem_t item{socket.handle(), 0, ZMQ_POLLIN, 0};
    zmq::message_t topic, body;
    try {
      zmq::poll(&item, 1, std::chrono::milliseconds(wait_ms));
      if (!(item.revents & ZMQ_POLLIN)) continue;
      if (!socket.recv(topic)) continue;
      if (!topic.more() || !socket.recv(body)) continue;
    } catch (const zmq::error_t& e) {
      // A signal (SIGTERM above, or SIGSTOP/SIGCONT of a paused process).
      if (e.num() == EINTR) continue;
      throw;
    }
    const std::string body_text = body.to_string();
    const std::string topic_text = topic.to_string();
    const bool stats = topic_text.rfind("stats.", 0) == 0;
    const bool event = topic_text.rfind("event.", 0) == 0;
    if (all_alerts) {
      if (const auto seq = seq_of(topic_text, body_text)) {
        if (stats) {
          // Everything up to the store's newest seq is owed: fetch the rest.
          if (last_seq && *seq > *last_seq) {
            fill_gap(*seq + 1);
            last_seq = *seq;
          }
        } else {
          if (last_seq && *seq <= *last_seq) continue;  // already printed (fetched)
          if (last_seq && *seq > *last_seq + 1) fill_gap(*seq);
          last_seq = *seq;
        }
      }
    }
    if (stats && !print_stats) continue;
    if (o.with_topic) std::cout << topic_text << ' ';
    const auto parsed = o.text && !stats ? nlohmann::json::parse(body_text, nullptr, false)
                                         : nlohmann::json();
    if (parsed.is_object())
      std::cout << (event ? event_text_line(parsed) : alert_text_line(parsed)) << std::endl;
    else
      std::cout << body_text << std::endl;
    ++received;
  }
  if (missed > 0)
    std::cerr << "gaitwatch subscribe: " << missed
              << " alerts were not delivered (dropped at the publisher's high-water mark); "
              << fetched << " fetched from the store"
              << (o.catch_up ? "" : " (--catch-up fetches them; or gaitwatch alerts --since-seq)")
              << "\n";
  return 0;
}

}  // namespace

void add_subscribe(CLI::App& app, int& exit_code) {
  auto options = std::make_shared<SubscribeOptions>();
  auto* cmd = app.add_subcommand(
      "subscribe", "print published alerts (and events), one JSON object or readable line each");
  cmd->add_option("--endpoint", options->endpoint,
                  "publisher endpoint, e.g. tcp://127.0.0.1:7710 (default: publish.endpoint of "
                  "the config)");
  cmd->add_option("--config", options->config,
                  "the daemon's config: publish.endpoint, control.endpoint (--catch-up) and their "
                  "CURVE server keys come from it (default " GW_INSTALLED_CONFIG " when it exists)");
  cmd->add_option("--topic", options->topics,
                  "topic prefix, repeatable (default alert.; stats. for the daemon's counters)");
  cmd->add_option("--count", options->count, "exit after this many messages (default: never)");
  cmd->add_option("--timeout", options->timeout_s, "exit after this many seconds (default: never)");
  cmd->add_flag("--with-topic", options->with_topic, "print the topic before each JSON object");
  auto format = std::make_shared<std::string>("json");
  cmd->add_option("--format", *format,
                  "json: each message as published (default); text: one readable line per alert "
                  "and event (the site's wall-clock time, severity, kind, wearer, seq, pattern)")
      ->check(CLI::IsMember({"json", "text"}))
      ->each([options](const std::string& value) { options->text = value == "text"; });
  auto* events = cmd->add_flag(
      "--events", options->events,
      "events too (topic event.: acknowledgements, escalations, marks, ...); on by default "
      "with --format text");
  cmd->add_flag("--no-events", options->no_events, "no events, also with --format text")
      ->excludes(events);
  cmd->add_option("--server-key", options->server_key,
                  "the daemon's CURVE public key file (NAME.pub): encrypt and authenticate");
  cmd->add_option("--key", options->key,
                  "this subscriber's CURVE key file (NAME.key, from gaitwatch keygen); its .pub "
                  "must be in the daemon's publish.curve_authorized_keys directory");
  cmd->add_flag("--catch-up", options->catch_up,
                "fetch alerts that did not arrive (a gap in seq) from the daemon's store through "
                "its control interface (--control-endpoint ...) and print them in order");
  cmd->add_option("--since-seq", options->since_seq,
                  "the last seq already seen: with --catch-up, alerts after it are fetched at "
                  "the first published one");
  auto* nats = cmd->add_option("--nats", options->stream.url,
                               "read the JetStream alert stream of this NATS server (nats://HOST:PORT) "
                               "instead: each stored alert once, whichever worker raised it");
  cmd->add_option("--nats-stream", options->stream.stream, "the alert stream (nats.alerts_stream; default GW_ALERTS)")
      ->needs(nats);
  cmd->add_option("--nats-subject", options->stream.subject,
                  "its subject prefix (nats.alerts_subject; default gw.alerts)")
      ->needs(nats);
  cmd->add_flag("--from-start", options->from_start, "with --nats: every stored alert first, then new ones")
      ->needs(nats);
  options->control.add_flags(*cmd, "control-", false);
  on_run(*cmd, exit_code, [options] { return run(*options); });
}

void add_keygen(CLI::App& app, int& exit_code) {
  auto prefix = std::make_shared<std::string>();
  auto mac = std::make_shared<bool>(false);
  auto* cmd = app.add_subcommand(
      "keygen", "create a ZeroMQ CURVE key pair: PREFIX.key (0600, secret) and PREFIX.pub; "
                "with --mac a device's frame MAC key PREFIX.mackey (0600)");
  cmd->add_option("prefix", *prefix, "path prefix of the files")->required();
  cmd->add_flag("--mac", *mac,
                "a frame MAC key (HMAC-SHA-256, docs/protocol.md) for one device instead: "
                "ingest.allowed_devices[].mac_key and replay --mac-key");
  on_run(*cmd, exit_code, [prefix, mac] {
    if (*mac) {
      sensors::write_frame_mac_key(*prefix + ".mackey", sensors::generate_frame_mac_key());
      std::cout << *prefix << ".mackey\n";
      return 0;
    }
    pipeline::write_curve_keypair(*prefix, pipeline::generate_curve_keypair());
    std::cout << *prefix << ".key\n" << *prefix << ".pub\n";
    return 0;
  });
}

}  // namespace gw::cli
