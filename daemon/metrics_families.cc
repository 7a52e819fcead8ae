#include "daemon/metrics_families.h"

#include <fmt/format.h>

#include <cmath>
#include <initializer_list>

#include "config/config.h"

namespace gw::daemon {
namespace {

using json = nlohmann::json;
constexpr double kMsToSeconds = 1e-3;

MetricFamily family(MetricType type, std::string name, std::string help,
                    std::vector<MetricSample> samples, double scale = 1) {
  MetricFamily f;
  f.name = std::move(name);
  f.type = type;
  f.help = std::move(help);
  f.scale = scale;
  f.samples = std::move(samples);
  return f;
}

MetricFamily counter(std::string name, std::string help, std::vector<MetricSample> samples,
                     double scale = 1) {
  return family(MetricType::kCounter, std::move(name), std::move(help), std::move(samples), scale);
}

MetricFamily gauge(std::string name, std::string help, std::vector<MetricSample> samples,
                   double scale = 1) {
  return family(MetricType::kGauge, std::move(name), std::move(help), std::move(samples), scale);
}

MetricFamily optional(MetricFamily f) {
  f.optional = true;
  return f;
}

// Samples told apart by one label: {value, path} pairs.
std::vector<MetricSample> by(const std::string& label,
                             std::initializer_list<std::pair<const char*, const char*>> values) {
  std::vector<MetricSample> samples;
  for (const auto& [value, path] : values) samples.push_back({path, {{label, value}}});
  return samples;
}

// A family's one sample, without labels.
std::vector<MetricSample> leaf(const char* path) { return {MetricSample{path, {}}}; }

// Per severity (config::AlertSeverity's words): its object's keys as `kind`.
std::vector<MetricSample> by_severity_and_kind(const std::string& object_path) {
  std::vector<MetricSample> samples;
  for (const auto& [severity, word] : config::Choices<config::AlertSeverity>::values)
    samples.push_back({object_path + "/" + word + "/*", {{"severity", word}, {"kind", "*"}}});
  return samples;
}

// One labelled sample per key of the object at `object_path`.
std::vector<MetricSample> each_key(const std::string& object_path, const std::string& label) {
  return {{object_path + "/*", {{label, "*"}}}};
}

std::vector<MetricFamily> make_families() {
  return {
      // ---- ingest (daemon/ingest.h)
      counter("gaitwatch_ingest_frames_received_total",
              "Frames received, before decoding: UDP datagrams, TCP length-prefixed records and frames "
              "from the JetStream frame stream.",
              by("transport", {{"udp", "/ingest/datagrams"},
                               {"tcp", "/ingest/tcp_frames"},
                               {"stream", "/ingest/stream_frames"}})),
      counter("gaitwatch_ingest_tcp_connections_total", "TCP ingest connections accepted.",
              leaf("/ingest/tcp_connections")),
      gauge("gaitwatch_ingest_tcp_connections_open", "TCP ingest connections open now.",
            leaf("/ingest/tcp_open")),
      counter("gaitwatch_ingest_tcp_connections_closed_total",
              "TCP ingest connections the daemon closed, by reason: refused (past "
              "ingest.tcp.max_connections or the reserved descriptors) or idle (no byte for "
              "ingest.tcp.idle_timeout_s).",
              by("reason", {{"refused", "/ingest/tcp_refused"}, {"idle", "/ingest/tcp_idle_closed"}})),
      counter("gaitwatch_ingest_tcp_buffers_shrunk_total",
              "TCP connection buffers that a burst grew, given back their small size once "
              "the burst was over.",
              leaf("/ingest/tcp_buffers_shrunk")),
      counter("gaitwatch_ingest_accept_errors_total",
              "Failed TCP accepts (out of descriptors or memory); each waits before the next accept.",
              leaf("/ingest/accept_errors")),
      counter("gaitwatch_ingest_tcp_bad_lengths_total",
              "TCP records whose length prefix was 0 or above ingest.max_frame_bytes; each closed "
              "its connection.",
              leaf("/ingest/tcp_bad_length")),
      counter("gaitwatch_ingest_oversized_datagrams_total",
              "UDP datagrams larger than ingest.max_frame_bytes, dropped undecoded.",
              leaf("/ingest/oversized")),
      counter("gaitwatch_ingest_decode_errors_total",
              "Frames that failed to decode, by decoder status (docs/protocol.md).",
              each_key("/ingest/decode_errors", "status")),
      counter("gaitwatch_ingest_frames_refused_total",
              "Decoded frames refused at ingest, by reason: admission (ingest.allowed_devices, "
              "docs/protocol.md) or the device-profile checks that follow it.",
              by("reason", {{"not_allowed", "/ingest/admission/not_allowed"},
                            {"wrong_source", "/ingest/admission/wrong_source"},
                            {"missing_mac", "/ingest/admission/missing_mac"},
                            {"bad_mac", "/ingest/admission/bad_mac"},
                            {"unexpected_mac", "/ingest/admission/unexpected_mac"},
                            {"unknown_device", "/ingest/unknown_device"},
                            {"profile_mismatch", "/ingest/profile_mismatch"}})),
      counter("gaitwatch_ingest_mac_verified_frames_total",
              "Frames whose MAC verified under their device's key.",
              leaf("/ingest/admission/mac_verified")),
      counter("gaitwatch_ingest_queued_frames_total",
              "Frames handed to the queue to the pipeline thread.", leaf("/ingest/queued")),
      counter("gaitwatch_ingest_queue_dropped_frames_total",
              "Frames the full ingest queue dropped (ingest.queue_overflow).",
              leaf("/ingest/queue_dropped")),
      counter("gaitwatch_ingest_queue_refused_closed_frames_total",
              "Frames refused because the ingest queue had closed at the stop (any source).",
              leaf("/ingest/queue_refused_closed")),
      gauge("gaitwatch_ingest_queue_frames", "Frames waiting in the ingest queue.",
            leaf("/ingest/queue_depth")),
      gauge("gaitwatch_ingest_queue_high_water_frames",
            "Most frames the ingest queue has held at once since start.",
            leaf("/ingest/queue_high_water")),

      // ---- engine (pipeline/engine.h)
      gauge("gaitwatch_engine_streams", "Streams (wearer, device) the engine holds now (evicted ones excluded).",
            leaf("/engine/streams")),
      counter("gaitwatch_engine_streams_refused_total",
              "Frames that would have made a stream past ingest.max_streams, dropped.",
              leaf("/engine/streams_refused")),
      counter("gaitwatch_engine_streams_evicted_total",
              "Streams removed after ingest.stream_idle_s without a frame.",
              leaf("/engine/streams_evicted")),
      optional(gauge("gaitwatch_streams",
                     "Streams by state: online (frames arriving), stale (late), offline (quiet "
                     "longer): a wearer's sensor that went quiet shows here.",
                     by("state", {{"online", "/engine/streams_by_state/online"},
                                  {"stale", "/engine/streams_by_state/stale"},
                                  {"offline", "/engine/streams_by_state/offline"}}))),
      optional(gauge("gaitwatch_stream_oldest_frame_age_seconds",
                     "Time since the last frame of the stream that has waited longest for one.",
                     leaf("/engine/oldest_frame_age_s"))),
      counter("gaitwatch_engine_frames_accepted_total", "Frames the engine appended to a stream.",
              leaf("/engine/frames_accepted")),
      counter("gaitwatch_engine_frames_rejected_total",
              "Frames the engine rejected, by reason (unknown_device and profile_mismatch are "
              "normally caught at ingest).",
              by("reason", {{"out_of_order", "/engine/frames_out_of_order"},
                            {"unknown_device", "/engine/frames_unknown_device"},
                            {"profile_mismatch", "/engine/frames_profile_mismatch"}})),
      counter("gaitwatch_engine_stream_gaps_total",
              "Gaps in streams' frame sequences (frames missing in between).",
              leaf("/engine/gaps")),
      counter("gaitwatch_engine_missing_frames_total", "Frames missing in those gaps.",
              leaf("/engine/missing_frames")),
      counter("gaitwatch_engine_stream_restarts_total",
              "Streams that restarted (sequence or device clock went back).",
              leaf("/engine/restarts")),
      counter("gaitwatch_engine_samples_total", "Samples appended to streams.",
              leaf("/engine/samples")),
      counter("gaitwatch_engine_overrun_samples_total",
              "Samples overwritten in a stream's ring before they were searched.",
              leaf("/engine/overrun_samples")),
      counter("gaitwatch_engine_batches_total", "Search batches run.", leaf("/engine/batches")),
      counter("gaitwatch_engine_deadline_misses_total",
              "Batches that ended after search.deadline_ms.", leaf("/engine/deadline_misses")),
      counter("gaitwatch_engine_backend_windows_total", "Windows the search backend considered.",
              leaf("/engine/windows")),
      counter("gaitwatch_engine_single_dim_matches_total",
              "Matches of one pattern dim the backend reported, before phase 2 combines them.",
              leaf("/engine/single_dim_matches")),
      counter("gaitwatch_engine_alerts_total", "Detections, before de-duplication.",
              leaf("/engine/alerts")),
      counter("gaitwatch_engine_overload_streams_total",
              "Streams a batch did not search when due (search.overload_policy), by action: "
              "deferred to a later batch or their new samples shed.",
              by("action",
                 {{"deferred", "/engine/deferred_streams"}, {"shed", "/engine/shed_streams"}})),
      counter("gaitwatch_engine_due_windows_total",
              "Window end x dim pair items batches found due; each ends in one outcome of "
              "gaitwatch_engine_window_outcomes_total or in gaitwatch_engine_pending_windows.",
              leaf("/engine/due_windows")),
      counter("gaitwatch_engine_window_outcomes_total",
              "Due items by outcome: searched, shed (policy shed), dropped (policy "
              "drop_patterns) or lost (deferred, then out of reach).",
              by("outcome", {{"searched", "/engine/searched_windows"},
                             {"shed", "/engine/shed_windows"},
                             {"dropped", "/engine/dropped_windows"},
                             {"lost", "/engine/lost_windows"}})),
      gauge("gaitwatch_engine_pending_windows", "Due items deferred and still waiting.",
            leaf("/engine/pending_windows")),
      gauge("gaitwatch_engine_unfinished_windows",
            "Searched items of batches whose alerts are not out yet (search or phase 2 running).",
            leaf("/engine/unfinished_windows")),
      counter("gaitwatch_engine_alert_windows_unavailable_total",
              "Alerts stored without their window (the stream's ring no longer held it with "
              "its transforms' lead-in): such alerts cannot be marked into examples.",
              leaf("/engine/alert_windows_unavailable")),
      counter("gaitwatch_engine_alert_windows_paused_total",
              "Alerts raised without their windows because the writer was behind (they cannot be "
              "marked).",
              leaf("/engine/alert_windows_paused")),
      counter("gaitwatch_engine_alert_windows_over_budget_total",
              "Alerts raised without their windows because marks.window_budget_mb_per_s was spent "
              "(they cannot be marked).",
              leaf("/engine/alert_windows_over_budget")),
      counter("gaitwatch_engine_backend_failovers_total",
              "Search backend failures that switched the engine to the CPU backend.",
              leaf("/engine/backend_failovers")),
      counter("gaitwatch_engine_search_devices_lost_total",
              "GPUs of a multi-device search lost; their streams moved to the GPUs left.",
              leaf("/engine/search_devices_lost")),
      counter("gaitwatch_engine_unagreed_detections_total",
              "Detections of a pattern with agree dropped: a view it names had no confirmed "
              "detection within agree.within_s.",
              leaf("/engine/unagreed_detections")),
      counter("gaitwatch_engine_merged_alerts_total",
              "Alerts not raised: another pattern of the same kind alerted on the same stream "
              "within its cooldown_s.",
              leaf("/engine/merged_alerts")),
      gauge("gaitwatch_engine_cost_model_floor_seconds",
            "The batch cost model's fixed time per batch.", leaf("/engine/cost_model/floor_ms"),
            kMsToSeconds),
      gauge("gaitwatch_engine_cost_model_slope_seconds",
            "The batch cost model's time per window x dim pair item.",
            leaf("/engine/cost_model/slope_ms_per_item"), kMsToSeconds),
      gauge("gaitwatch_engine_cost_model_observations", "Batches the cost model's fit rests on.",
            leaf("/engine/cost_model/observations")),
      counter("gaitwatch_engine_cost_model_skipped_batches_total",
              "Batches the cost model did not learn from: the search backend allocated buffers "
              "for them (one-off time).",
              leaf("/engine/cost_model/skipped_batches")),
      gauge("gaitwatch_engine_cost_model_predicted_batch_seconds",
            "The cost model's prediction for the last batch.",
            leaf("/engine/cost_model/last_predicted_ms"), kMsToSeconds),
      counter("gaitwatch_engine_host_seconds_total",
              "The engine's host work per batch by stage (parts of the pipeline thread's batch "
              "time): finding what is due, laying out slices, filling them, phase 2.",
              by("stage", {{"due", "/engine/host_s/due"},
                           {"slices", "/engine/host_s/slices"},
                           {"fill", "/engine/host_s/fill"},
                           {"phase2", "/engine/host_s/phase2"}})),
      gauge("gaitwatch_engine_last_batch_seconds", "Wall time of the last search batch.",
            leaf("/engine/last_batch_ms"), kMsToSeconds),
      gauge("gaitwatch_engine_max_batch_seconds", "Longest search batch since start.",
            leaf("/engine/max_batch_ms"), kMsToSeconds),
      // The search's warm-up at the start (search.warm_up_streams; zeros when off).
      gauge("gaitwatch_engine_warm_up_seconds",
            "How long the search's warm-up before the first frame took.",
            leaf("/engine/warm_up/seconds")),
      gauge("gaitwatch_engine_warm_up_slices", "Synthetic stream x view slices warmed up for.",
            leaf("/engine/warm_up/slices")),
      gauge("gaitwatch_engine_warm_up_batches", "Synthetic batches of the warm-up.",
            leaf("/engine/warm_up/batches")),
      gauge("gaitwatch_engine_warm_up_matches",
            "Single-dimension matches of the warm-up's largest batch (discarded).",
            leaf("/engine/warm_up/matches")),
      gauge("gaitwatch_engine_warm_up_buffer_growths",
            "Buffers the search backend allocated or grew in the warm-up.",
            leaf("/engine/warm_up/buffer_growths")),
      gauge("gaitwatch_engine_warm_up_batch_seconds",
            "The warm-up's first batch (every stream's first contact) and its last.",
            by("batch",
               {{"first", "/engine/warm_up/first_ms"}, {"last", "/engine/warm_up/last_ms"}}),
            kMsToSeconds),
      // Set by the daemon beside the engine's own counters.
      optional(counter("gaitwatch_engine_stop_abandoned_total",
                       "What the stop left unsearched when daemon.stop_timeout_s ran out, by unit.",
                       by("unit", {{"frames", "/engine/stop_abandoned_frames"},
                                   {"windows", "/engine/stop_abandoned_windows"}}))),
      gauge("gaitwatch_engine_max_latency_seconds",
            "Worst batch since start: newest sample arrival to alerts ready.",
            leaf("/engine/max_latency_ms"), kMsToSeconds),

      // ---- alert writer (sinks/sink.h)
      counter("gaitwatch_sink_submitted_alerts_total",
              "Alerts handed to the writer: committed + dropped + abandoned at stop + pending.",
              leaf("/sink/submitted")),
      counter("gaitwatch_sink_committed_alerts_total", "Alerts committed to the store.",
              leaf("/sink/committed")),
      counter("gaitwatch_sink_lost_alerts_total",
              "Alerts never stored, by reason: dropped (held backlog full while commits failed, "
              "storage.max_pending_alerts) or stop (still failing at the stop deadline).",
              by("reason", {{"dropped", "/sink/store_dropped"}, {"stop", "/sink/stop_abandoned"}})),
      counter("gaitwatch_alerts_total",
              "Alerts committed to the store by severity and kind (detections and "
              "sensor_offline alerts alike).",
              by_severity_and_kind("/sink/committed_by_severity")),
      gauge("gaitwatch_sink_pending_alerts", "Alerts waiting for a commit now.",
            leaf("/sink/pending")),
      counter("gaitwatch_sink_shed_windows_total",
              "Alerts stored without their windows because the writer was behind (they cannot "
              "be marked).",
              leaf("/sink/windows_shed")),
      counter("gaitwatch_sink_published_alerts_total",
              "Alerts handed to the publisher socket (after their commit).",
              leaf("/sink/published")),
      counter("gaitwatch_sink_events_total",
              "Events (acknowledgements, sensor recoveries, ...) by outcome: committed to the "
              "audit log and published, or dropped (writer's queue full, sink stopped).",
              by("outcome", {{"committed", "/sink/events_committed"},
                             {"dropped", "/sink/events_dropped"}})),
      counter("gaitwatch_sink_wearer_device_rows_total",
              "Devices' last frames (table wearer_devices) stored by the writer, in rows.",
              leaf("/sink/wearer_devices_saved")),
      counter("gaitwatch_sink_wearer_device_save_errors_total",
              "Saves of devices' last frames that failed (their rows are kept and tried again).",
              leaf("/sink/wearer_devices_errors")),
      counter("gaitwatch_sink_transactions_total", "Store transactions committed.",
              leaf("/sink/transactions")),
      gauge("gaitwatch_sink_last_seq", "Sequence number of the last stored alert.",
            leaf("/sink/last_seq")),
      counter("gaitwatch_sink_store_errors_total", "Failed store commits (retried).",
              leaf("/sink/store_errors")),
      counter("gaitwatch_sink_checkpoints_total", "WAL checkpoints run.",
              leaf("/sink/checkpoints")),
      counter("gaitwatch_sink_wal_restarts_total",
              "WALs grown past their limit under a writer that never paused: started again "
              "(done), or not (busy: held off by an old snapshot's reader or a checkpoint, "
              "or failed; tried again).",
              by("result", {{"done", "/sink/wal_restarts"}, {"busy", "/sink/wal_restarts_busy"}})),
      counter("gaitwatch_sink_thread_seconds_total",
              "The alert writer thread's wall time by activity: transactions (rows and fsync) "
              "and publishing committed alerts.",
              by("activity", {{"commit", "/sink/commit_s"}, {"publish", "/sink/publish_s"}})),

      // ---- hash tables: de-duplication and the time-slot index
      counter("gaitwatch_table_failures_total",
              "Hash table failures that rebuilt a job on a new CPU table.",
              leaf("/table_failures")),
      gauge("gaitwatch_table_enabled",
            "Whether the table's job is on (dedup.enabled, "
            "slots.enabled).",
            by("table", {{"dedup", "/dedup/enabled"}, {"slots", "/slots/enabled"}})),
      gauge("gaitwatch_table_live_keys", "Keys in the table.",
            by("table", {{"dedup", "/dedup/live_keys"}, {"slots", "/slots/live_keys"}})),
      gauge("gaitwatch_table_pool_nodes", "Nodes the table's pool holds.",
            by("table", {{"dedup", "/dedup/pool_nodes"}, {"slots", "/slots/pool_nodes"}})),
      counter("gaitwatch_table_pool_growths_total", "Pool growths after the pool ran out.",
              by("table", {{"dedup", "/dedup/pool_growths"}, {"slots", "/slots/pool_growths"}})),
      counter("gaitwatch_table_pool_growth_seconds_total", "Wall time of those pool growths.",
              by("table", {{"dedup", "/dedup/pool_growth_s"}, {"slots", "/slots/pool_growth_s"}})),
      counter("gaitwatch_table_expired_keys_total", "Keys deleted as older than the retention.",
              by("table", {{"dedup", "/dedup/expired"}, {"slots", "/slots/expired"}})),
      counter("gaitwatch_dedup_admitted_alerts_total",
              "Detections stored and published as new events.", leaf("/dedup/admitted")),
      counter("gaitwatch_dedup_duplicate_alerts_total",
              "Detections suppressed as repeats of a recent event.", leaf("/dedup/duplicates")),
      counter("gaitwatch_slots_samples_total",
              "Samples gathered for the time-slot index (devices with status inputs).",
              leaf("/slots/samples")),
      counter("gaitwatch_slots_completed_wearer_seconds_total",
              "Wearer-seconds completed and handed to the time-slot index.",
              leaf("/slots/seconds")),
      gauge("gaitwatch_slots_pending_wearer_seconds",
            "Wearer-seconds gathered but not yet complete.", leaf("/slots/pending_seconds")),
      counter("gaitwatch_slots_dropped_samples_total",
              "Samples the slot recorder dropped, by reason: late (their second was already "
              "recorded) or out of range (wearer or second outside the key, too few channels).",
              by("reason", {{"late", "/slots/late_samples"},
                            {"out_of_range", "/slots/out_of_range_samples"}})),
      counter("gaitwatch_slots_recorded_keys_total", "Wearer-seconds inserted as new keys.",
              leaf("/slots/recorded")),
      counter("gaitwatch_slots_duplicate_keys_total",
              "Wearer-seconds already present when recorded (the first summary kept).",
              leaf("/slots/duplicates")),
      counter("gaitwatch_slots_queries_total", "Time-slot queries answered.",
              leaf("/slots/queries")),
      counter("gaitwatch_slots_searches_total", "Point searches run by time-slot queries.",
              leaf("/slots/searches")),

      // ---- raw-stream history (history/history_recorder.h; with history.enabled)
      counter("gaitwatch_history_queued_chunks_total", "Chunks queued for the history store.",
              leaf("/history/chunks_queued")),
      counter("gaitwatch_history_chunks_total",
              "Queued chunks by outcome: written, dropped (queue overflow) or failed (given up "
              "after store errors while stopping).",
              by("outcome", {{"written", "/history/chunks_written"},
                             {"dropped", "/history/chunks_dropped"},
                             {"failed", "/history/chunks_failed"}})),
      counter("gaitwatch_history_written_samples_total", "Samples in the chunks written.",
              leaf("/history/samples_written")),
      counter("gaitwatch_history_store_errors_total", "Failed history commits (retried).",
              leaf("/history/store_errors")),
      counter("gaitwatch_history_transactions_total", "History store transactions committed.",
              leaf("/history/transactions")),
      counter("gaitwatch_history_retention_deleted_chunks_total",
              "Chunks deleted as older than history.retention_hours.",
              leaf("/history/retention_deleted")),
      counter("gaitwatch_history_written_bytes_total",
              "Bytes of the chunks written: raw (float32 samples) and stored (after "
              "compression).",
              by("form", {{"raw", "/history/raw_bytes"}, {"stored", "/history/stored_bytes"}})),
      // ---- MQTT bridge (bridges/mqtt_bridge.h), when bridges.mqtt.enabled
      optional(counter("gaitwatch_bridge_mqtt_messages_total",
                       "Alerts and events for the MQTT broker by outcome: offered (handed to "
                       "the bridge), delivered (acknowledged by the broker, status and retained "
                       "wearer topics included), dropped (queue full or left at stop).",
                       by("outcome", {{"offered", "/bridges/mqtt/offered"},
                                      {"delivered", "/bridges/mqtt/delivered"},
                                      {"dropped", "/bridges/mqtt/dropped"}}))),
      optional(gauge("gaitwatch_bridge_mqtt_queued_messages",
                     "Messages waiting for the MQTT broker now.", leaf("/bridges/mqtt/queued"))),
      optional(gauge("gaitwatch_bridge_mqtt_connected",
                     "1 while the MQTT bridge is connected to its broker.",
                     leaf("/bridges/mqtt/connected"))),
      optional(counter("gaitwatch_bridge_mqtt_connects_total",
                       "Successful connections to the MQTT broker, the first included.",
                       leaf("/bridges/mqtt/connects"))),
      // ---- the JetStream paths (daemon/nats_paths.h): a worker's leases and
      // consumer (ingest.nats), the alert stream (nats.alerts_stream)
      optional(gauge("gaitwatch_nats_partitions_held", "Frame stream partitions this worker holds now.",
                     leaf("/nats/ingest/leases/held"))),
      optional(gauge("gaitwatch_nats_live_workers", "Workers with a live heartbeat in the lease bucket.",
                     leaf("/nats/ingest/leases/live_workers"))),
      optional(counter("gaitwatch_nats_lease_changes_total",
                       "Partition leases by change: claimed, released (above the fair share or at stop), "
                       "lost (a renewal refused: expired and taken by another worker).",
                       by("change", {{"claimed", "/nats/ingest/leases/claimed"},
                                     {"released", "/nats/ingest/leases/released"},
                                     {"lost", "/nats/ingest/leases/lost"}}))),
      optional(counter("gaitwatch_nats_lease_errors_total", "Lease bucket operations that failed.",
                       leaf("/nats/ingest/leases/errors"))),
      optional(counter("gaitwatch_nats_frames_consumed_total", "Frames fetched from the frame stream.",
                       leaf("/nats/ingest/consumer/frames"))),
      optional(counter("gaitwatch_nats_frame_messages_consumed_total",
                       "Messages fetched from the frame stream: a frame each, or a gateway's batch of frames.",
                       leaf("/nats/ingest/consumer/messages"))),
      optional(counter("gaitwatch_nats_frame_batches_malformed_total",
                       "Batches of frames cut short (a record's length past the message's end); the frames "
                       "before the fault were taken.",
                       leaf("/nats/ingest/consumer/malformed_batches"))),
      optional(counter("gaitwatch_nats_frame_messages_acked_total",
                       "Frame stream messages acknowledged, retain_s after their receipt.",
                       leaf("/nats/ingest/consumer/acks"))),
      optional(counter("gaitwatch_nats_consumer_errors_total",
                       "Failed fetches, consumer creations and deletions on the frame stream.",
                       leaf("/nats/ingest/consumer/errors"))),
      optional(counter("gaitwatch_nats_alerts_total",
                       "Alerts for the JetStream alert stream by outcome: published, stored, duplicate "
                       "(an id already stored), failed, dropped.",
                       by("outcome", {{"published", "/nats/alerts/published"},
                                      {"stored", "/nats/alerts/stored"},
                                      {"duplicate", "/nats/alerts/duplicates"},
                                      {"failed", "/nats/alerts/failed"},
                                      {"dropped", "/nats/alerts/dropped"}}))),
      optional(gauge("gaitwatch_nats_alerts_pending", "Alerts awaiting JetStream's acknowledgement.",
                     leaf("/nats/alerts/pending"))),
      // ---- webhook bridge (bridges/webhook.h), when bridges.webhook.enabled
      optional(counter("gaitwatch_bridge_webhook_messages_total",
                       "Alerts and events for the webhook by outcome: offered, delivered (2xx), "
                       "failed (refused, or out of attempts), dropped (queue full or left at "
                       "stop).",
                       by("outcome", {{"offered", "/bridges/webhook/offered"},
                                      {"delivered", "/bridges/webhook/delivered"},
                                      {"failed", "/bridges/webhook/failed"},
                                      {"dropped", "/bridges/webhook/dropped"}}))),
      optional(counter("gaitwatch_bridge_webhook_retries_total",
                       "Webhook requests repeated after a failure.",
                       leaf("/bridges/webhook/retries"))),
      optional(gauge("gaitwatch_bridge_webhook_queued_messages",
                     "Messages waiting for the webhook now.", leaf("/bridges/webhook/queued"))),
      // ---- the ward console (console/server.h), when console.port != 0
      optional(counter("gaitwatch_console_requests_total",
                       "Requests to the console (pages, API, streams).",
                       leaf("/console/requests"))),
      optional(counter("gaitwatch_console_responses_total", "Console answers by status class.",
                       by("class", {{"2xx", "/console/responses/2xx"},
                                    {"3xx", "/console/responses/3xx"},
                                    {"4xx", "/console/responses/4xx"},
                                    {"5xx", "/console/responses/5xx"}}))),
      optional(counter("gaitwatch_console_logins_total",
                       "Console logins by outcome: ok, failed (wrong name or password), blocked "
                       "(too many failures from the address: console.login_max_failures).",
                       by("outcome", {{"ok", "/console/logins_ok"},
                                      {"failed", "/console/logins_failed"},
                                      {"blocked", "/console/logins_blocked"}}))),
      optional(counter("gaitwatch_console_refused_total",
                       "Console requests refused: no session, a role that does not allow the "
                       "change, a change without the session's CSRF token, a connection over "
                       "console.max_connections, a stream over console.max_stream_clients.",
                       by("reason", {{"no_session", "/console/no_session"},
                                     {"forbidden", "/console/forbidden"},
                                     {"csrf", "/console/csrf_refused"},
                                     {"connections", "/console/connections_refused"},
                                     {"streams", "/console/streams_refused"}}))),
      optional(gauge("gaitwatch_console_sessions", "Console sessions open now.",
                     leaf("/console/sessions"))),
      optional(counter("gaitwatch_console_streams_opened_total",
                       "Live-update streams (server-sent events) opened by browsers.",
                       leaf("/console/streams_opened"))),
      optional(counter("gaitwatch_console_stream_dropped_total",
                       "Live-update streams closed because their browser fell behind, and "
                       "messages dropped before reaching any stream.",
                       by("what", {{"streams", "/console/streams_dropped"},
                                   {"messages", "/console/offers_dropped"}}))),
      gauge("gaitwatch_marks",
            "Carers' active marks by state: active (its example in use) or inactive because "
            "its pattern is no longer configured, its pattern's shape changed, or newer marks "
            "fill marks.max_examples_per_wearer.",
            by("state", {{"active", "/marks/active"},
                         {"pattern_missing", "/marks/inactive_pattern_missing"},
                         {"shape_changed", "/marks/inactive_shape_changed"},
                         {"over_cap", "/marks/inactive_over_cap"}})),
      counter("gaitwatch_mark_requests_total",
              "alert.mark and alert.unmark requests by outcome: marked, remarked (verdict "
              "replaced), withdrawn, refused (unknown alert or mark, no window).",
              by("outcome", {{"marked", "/marks/marked"},
                             {"remarked", "/marks/remarked"},
                             {"withdrawn", "/marks/withdrawn"},
                             {"refused", "/marks/refused"}})),
      gauge("gaitwatch_history_queue_chunks", "Chunks waiting in the history writer's queue.",
            leaf("/history/queue_depth")),

      // ---- gait from the insoles (gait/monitor.h), when gait is on
      optional(gauge("gaitwatch_gait_wearers", "Wearers whose feet the gait monitor has seen.",
                     leaf("/gait/wearers"))),
      optional(counter("gaitwatch_gait_samples_total",
                       "Samples of a wearer's feet by fate: joined (both feet at one time) or "
                       "unpaired (a foot's sample dropped without the other foot's).",
                       by("fate", {{"joined", "/gait/samples"}, {"unpaired", "/gait/unpaired_samples"}}))),
      optional(counter("gaitwatch_gait_strides_total",
                       "Strides found, and those scored against the gait pack's examples.",
                       by("what", {{"found", "/gait/strides"}, {"scored", "/gait/scored_strides"}}))),
      optional(counter("gaitwatch_gait_metric_rows_total", "Minutes of walking whose metrics were stored.",
                       leaf("/gait/minutes"))),
      optional(counter("gaitwatch_gait_dropped_frames_total",
                       "Frames whose feet's loads the gait thread's full queue dropped (the monitor "
                       "fell behind; detection is not affected).",
                       leaf("/gait/dropped_frames"))),
      optional(gauge("gaitwatch_gait_queue_frames", "Frames waiting for the gait thread.",
                     leaf("/gait/queue_depth"))),
      optional(counter("gaitwatch_gait_abnormal_bouts_total",
                       "Walking bouts whose strides looked abnormal or changed from the wearer's own "
                       "baseline (each an alert).",
                       leaf("/gait/abnormal_bouts"))),
      optional(counter("gaitwatch_gait_baselines_learned_total",
                       "Wearers whose own gait baseline was learned (the pack's gait_change rule).",
                       leaf("/gait/baselines_learned"))),
      optional(counter("gaitwatch_gait_change_scored_strides_total",
                       "Strides measured against their wearer's own baseline.",
                       leaf("/gait/change_scored_strides"))),
      optional(counter("gaitwatch_gait_hotspot_samples_total",
                       "A foot's samples fed to its pressure-hotspot tracker.",
                       leaf("/gait/hotspots/samples"))),
      optional(counter("gaitwatch_gait_hotspot_events_total",
                       "Pressure hotspots found (each a pressure_hotspot alert).",
                       leaf("/gait/hotspots/events"))),
      optional(counter("gaitwatch_gait_hotspot_resets_total",
                       "Streams whose hotspot trackers were reset by device time going back.",
                       leaf("/gait/hotspots/resets"))),
      optional(gauge("gaitwatch_gait_hotspot_trackers", "Feet the pressure-hotspot monitor tracks now.",
                     leaf("/gait/hotspots/trackers"))),

      // ---- wearers and sensor liveness (daemon/wearers.h)
      gauge("gaitwatch_wearers_registered", "Wearers in the registry.",
            leaf("/wearers/registered")),
      gauge("gaitwatch_wearer_devices",
            "Wearers' devices by the silence since their last frame: online (below "
            "wearers.stale_after_s), stale, offline (from wearers.offline_after_s until a frame).",
            by("state", {{"online", "/wearers/devices/online"},
                         {"stale", "/wearers/devices/stale"},
                         {"offline", "/wearers/devices/offline"}})),
      counter("gaitwatch_sensor_offline_alerts_total",
              "sensor_offline alerts raised: a device went offline (one per silence).",
              leaf("/wearers/offline_alerts")),
      counter("gaitwatch_sensor_recoveries_total",
              "Devices that sent again after their sensor_offline alert.",
              leaf("/wearers/recoveries")),
      counter("gaitwatch_wearers_store_errors_total",
              "Failed reads and writes of the devices' last frames in the store (retried).",
              leaf("/wearers/store_errors")),

      // ---- control interface (daemon/control.h; with control.enabled)
      counter("gaitwatch_control_requests_total", "Control requests received.",
              leaf("/control/requests")),
      counter("gaitwatch_control_errors_total", "Control error replies, by error code.",
              each_key("/control/errors", "code")),
      counter("gaitwatch_control_jobs_started_total", "Control jobs started.",
              leaf("/control/jobs_started")),
      counter("gaitwatch_control_jobs_finished_total", "Control jobs finished, however they ended.",
              leaf("/control/jobs_finished")),
      gauge("gaitwatch_control_jobs_running", "Control jobs running.",
            leaf("/control/jobs_running")),
      counter("gaitwatch_control_jobs_cancelled_client_gone_total",
              "Control jobs cancelled because their client went away.",
              leaf("/control/jobs_cancelled_client_gone")),
      counter("gaitwatch_control_dropped_messages_total",
              "Control replies dropped because the client's queue was full.",
              leaf("/control/dropped_messages")),
      gauge("gaitwatch_control_pipeline_queue_tasks",
            "Control tasks waiting for the pipeline thread.",
            leaf("/control/pipeline_queue_depth")),
      counter("gaitwatch_control_pipeline_queue_refused_total",
              "Control tasks refused because the pipeline thread's queue was full.",
              leaf("/control/pipeline_queue_refused")),
      optional(counter("gaitwatch_control_curve_connections_total",
                       "CURVE connections to the control interface by result (with "
                       "control.curve_secret_key).",
                       by("result", {{"admitted", "/control/curve_admitted"},
                                     {"refused", "/control/curve_refused"}}))),

      // ---- the pipeline thread's time (docs/interfaces.md)
      counter("gaitwatch_pipeline_thread_seconds_total",
              "The pipeline thread's wall time by part; the parts add up to its life. waiting "
              "that stops growing means the thread is the daemon's limit.",
              by("part", {{"waiting", "/pipeline_thread/waiting_s"},
                          {"frames", "/pipeline_thread/frames_s"},
                          {"batch", "/pipeline_thread/batch_s"},
                          {"after_batch", "/pipeline_thread/after_batch_s"},
                          {"other", "/pipeline_thread/other_s"}})),
      counter(
          "gaitwatch_pipeline_thread_subpart_seconds_total",
          "Parts of gaitwatch_pipeline_thread_seconds_total's parts (label within): frames "
          "into the engine, a batch's start, the alerts' way to the writer.",
          {{"/pipeline_thread/frames_engine_s", {{"part", "frames_engine"}, {"within", "frames"}}},
           {"/pipeline_thread/batch_start_s", {{"part", "batch_start"}, {"within", "batch"}}},
           {"/pipeline_thread/alerts_out_s", {{"part", "alerts_out"}, {"within", "after_batch"}}}}),

      // ---- pauses of the whole process (daemon/pause_monitor.h)
      counter("gaitwatch_process_pauses_total",
              "Times a daemon thread that only sleeps 10 ms at a time woke 50 ms or more late: the "
              "host did not run it (every core busy with the daemon's work or another's, a held "
              "virtual machine, memory reclaim, or a lock on the process's memory map).",
              leaf("/process/pauses")),
      counter("gaitwatch_process_pause_seconds_total", "Those pauses' lateness, summed.",
              leaf("/process/pause_ms_total"), 1e-3),
      gauge("gaitwatch_process_pause_max_seconds", "The longest of those pauses since the start.",
            leaf("/process/pause_ms_max"), 1e-3),
  };
}

std::vector<IgnoredCounterLeaf> make_ignored() {
  return {
      {"/latency/*",
       "quantiles of the alert latency, which gaitwatch_alert_latency_seconds exports as a "
       "histogram (histogram_quantile() gives them)"},
      {"/nats/ingest/leases/rounds", "the lease rounds run (ttl / 3 apart): a liveness detail"},
      {"/nats/ingest/leases/partitions/*", "which partitions are held: gaitwatch_nats_partitions_held counts them"},
      {"/nats/ingest/consumer/partitions", "the same as gaitwatch_nats_partitions_held once started"},
      {"/nats/ingest/consumer/started", "consumers created: gaitwatch_nats_lease_changes_total's claims"},
      {"/nats/ingest/consumer/stopped", "consumers deleted: its releases and losses"},
  };
}

std::vector<std::string> split_path(const std::string& path) {
  std::vector<std::string> tokens;
  std::size_t at = 1;  // past the leading '/'
  while (at <= path.size()) {
    const std::size_t slash = path.find('/', at);
    const std::size_t end = slash == std::string::npos ? path.size() : slash;
    tokens.push_back(path.substr(at, end - at));
    at = end + 1;
  }
  return tokens;
}

// Whether the leaf pointer `leaf` is named by `pattern` (tokens equal, a
// pattern token "*" matching any).
bool path_matches(const std::string& pattern, const std::string& leaf) {
  const auto p = split_path(pattern), l = split_path(leaf);
  if (p.size() != l.size()) return false;
  for (std::size_t i = 0; i < p.size(); ++i)
    if (p[i] != "*" && p[i] != l[i]) return false;
  return true;
}

bool is_sample_value(const json& value) { return value.is_number() || value.is_boolean(); }

bool ends_in_wildcard(const std::string& path) {
  return path.size() >= 2 && path.compare(path.size() - 2, 2, "/*") == 0;
}

const json* find(const json& root, const std::string& path) {
  const json::json_pointer pointer(path);
  return root.contains(pointer) ? &root.at(pointer) : nullptr;
}

std::string format_value(const json& value, double scale) {
  if (value.is_boolean()) return value.get<bool>() ? "1" : "0";
  if (scale == 1 && value.is_number_unsigned()) return std::to_string(value.get<std::uint64_t>());
  if (scale == 1 && value.is_number_integer()) return std::to_string(value.get<std::int64_t>());
  const double v = value.get<double>() * scale;
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  return fmt::format("{}", v);
}

std::string format_labels(const MetricLabels& labels, const std::string& key) {
  if (labels.empty()) return "";
  std::string out = "{";
  for (std::size_t i = 0; i < labels.size(); ++i) {
    const std::string& value = labels[i].second == "*" ? key : labels[i].second;
    out += fmt::format("{}{}=\"{}\"", i ? "," : "", labels[i].first, escape_label_value(value));
  }
  return out + "}";
}

}  // namespace

const std::vector<MetricFamily>& metric_families() {
  static const std::vector<MetricFamily> families = make_families();
  return families;
}

const std::vector<IgnoredCounterLeaf>& ignored_counter_leaves() {
  static const std::vector<IgnoredCounterLeaf> ignored = make_ignored();
  return ignored;
}

std::string escape_label_value(const std::string& value) {
  std::string out;
  out.reserve(value.size());
  for (const char c : value) {
    if (c == '\\')
      out += "\\\\";
    else if (c == '"')
      out += "\\\"";
    else if (c == '\n')
      out += "\\n";
    else
      out += c;
  }
  return out;
}

void render_counter_families(const json& counters, std::string& out) {
  std::string lines;
  for (const MetricFamily& f : metric_families()) {
    lines.clear();
    for (const MetricSample& sample : f.samples) {
      if (ends_in_wildcard(sample.path)) {
        const json* object = find(counters, sample.path.substr(0, sample.path.size() - 2));
        if (object == nullptr || !object->is_object()) continue;
        for (const auto& [key, value] : object->items())
          if (is_sample_value(value))
            lines += fmt::format("{}{} {}\n", f.name, format_labels(sample.labels, key),
                                 format_value(value, f.scale));
      } else if (const json* value = find(counters, sample.path);
                 value && is_sample_value(*value)) {
        lines += fmt::format("{}{} {}\n", f.name, format_labels(sample.labels, ""),
                             format_value(*value, f.scale));
      }
    }
    if (lines.empty()) continue;
    out += fmt::format("# HELP {} {}\n# TYPE {} {}\n", f.name, f.help, f.name,
                       f.type == MetricType::kCounter ? "counter" : "gauge");
    out += lines;
  }
}

std::vector<std::string> unmapped_counter_leaves(const json& counters) {
  std::vector<std::string> unmapped;
  const json flat = counters.flatten();
  for (const auto& [leaf, value] : flat.items()) {
    if (!is_sample_value(value)) continue;
    bool known = false;
    for (const MetricFamily& f : metric_families())
      for (const MetricSample& sample : f.samples) known = known || path_matches(sample.path, leaf);
    for (const IgnoredCounterLeaf& ignored : ignored_counter_leaves())
      known = known || path_matches(ignored.path, leaf);
    if (!known) unmapped.push_back(leaf);
  }
  return unmapped;
}

std::vector<std::string> missing_counter_leaves(const json& counters) {
  std::vector<std::string> missing;
  for (const MetricFamily& f : metric_families()) {
    if (f.optional) continue;
    for (const MetricSample& sample : f.samples) {
      const std::string path = ends_in_wildcard(sample.path)
                                   ? sample.path.substr(0, sample.path.size() - 2)
                                   : sample.path;
      if (find(counters, path) == nullptr) missing.push_back(path);
    }
  }
  return missing;
}

std::optional<CounterSample> sample_for_counter(const std::string& json_path) {
  for (const MetricFamily& f : metric_families())
    for (const MetricSample& sample : f.samples)
      if (path_matches(sample.path, json_path)) {
        const std::string key = json_path.substr(json_path.rfind('/') + 1);
        return CounterSample{f.name + format_labels(sample.labels, key), f.scale};
      }
  return std::nullopt;
}

json alerts_by_severity_json(
    const std::map<std::string, std::map<std::string, std::uint64_t>>& committed) {
  json out = json::object();
  for (const auto& [severity, word] : config::Choices<config::AlertSeverity>::values)
    out[word] = json::object();
  for (const auto& [severity, kinds] : committed)
    for (const auto& [kind, count] : kinds) out[severity][kind] = count;
  return out;
}

void render_build_info(const MetricLabels& labels, std::string& out) {
  out +=
      "# HELP gaitwatch_build_info The daemon's version and build; always 1.\n"
      "# TYPE gaitwatch_build_info gauge\n";
  out += fmt::format("gaitwatch_build_info{} 1\n", format_labels(labels, ""));
}

MetricLabels build_info_labels(const std::string& search_backend) {
  return {{"version", GW_VERSION},
          {"cuda", GW_CUDA_BUILT ? "true" : "false"},
          {"allocator", GW_ALLOCATOR},
          {"backend", search_backend}};
}

}  // namespace gw::daemon
