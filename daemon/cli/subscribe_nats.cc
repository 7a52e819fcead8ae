// gaitwatch subscribe --nats: the alert stream's alerts, read with an
// ordered consumer (the client library restarts it where it left off after
// a gap), so each alert the stream stored is printed once, in order.
#include <nats/nats.h>

#include <chrono>
#include <csignal>
#include <iostream>

#include "cluster/nats_client.h"
#include "common/error.h"
#include "daemon/cli/cli.h"

namespace gw::cli {

namespace {
volatile std::sig_atomic_t g_stop_stream = 0;
extern "C" void gw_subscribe_stream_on_stop(int) { g_stop_stream = 1; }
}  // namespace

int subscribe_alert_stream(const AlertStreamSubscription& o) {
  cluster::NatsClientOptions client_options;
  client_options.url = o.url;
  cluster::NatsClient client(client_options);
  jsSubOptions sub_options;
  jsSubOptions_Init(&sub_options);
  sub_options.Stream = o.stream.c_str();
  sub_options.Ordered = true;
  sub_options.Config.DeliverPolicy = o.from_start ? js_DeliverAll : js_DeliverNew;
  const std::string filter = o.subject + ".>";
  natsSubscription* sub = nullptr;
  jsErrCode code = static_cast<jsErrCode>(0);
  const natsStatus s = js_SubscribeSync(&sub, client.jetstream(), filter.c_str(), nullptr, &sub_options, &code);
  if (s != NATS_OK)
    throw Error(cluster::jetstream_error("nats " + o.url + ": stream " + o.stream, s, static_cast<int>(code)));
  std::signal(SIGTERM, gw_subscribe_stream_on_stop);
  std::signal(SIGINT, gw_subscribe_stream_on_stop);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(o.timeout_s);
  long received = 0;
  while ((o.count == 0 || received < o.count) && !g_stop_stream) {
    if (o.timeout_s > 0 && std::chrono::steady_clock::now() >= deadline) break;
    natsMsg* msg = nullptr;
    if (natsSubscription_NextMsg(&msg, sub, 200) != NATS_OK) continue;
    const std::string body(natsMsg_GetData(msg), static_cast<std::size_t>(natsMsg_GetDataLength(msg)));
    if (o.with_topic) std::cout << natsMsg_GetSubject(msg) << ' ';
    const nlohmann::json parsed = o.text ? nlohmann::json::parse(body, nullptr, false) : nlohmann::json();
    std::cout << (parsed.is_object() ? alert_text_line(parsed) : body) << std::endl;
    natsMsg_Destroy(msg);
    ++received;
  }
  natsSubscription_Destroy(sub);
  return 0;
}

}  // namespace gw::cli
