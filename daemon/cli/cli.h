// The gaitwatch command-line tool: one function per subcommand, each
// registering its flags on a CLI11 subcommand and returning its exit code.
// Errors are reported as "gaitwatch <cmd>: message" on stderr with exit 1.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "config/config.h"
#include "daemon/cli/usage.h"
#include "sinks/alert.h"
#include "pipeline/detector.h"
#include "sensors/frame.h"
#include "sensors/framing.h"
#include "sensors/recording.h"

namespace gw::cli {

// While alive, Ctrl-C (SIGINT) only sets a flag that long requests poll to
// cancel themselves; the previous handler comes back on destruction. One at
// a time per process.
class InterruptScope {
 public:
  InterruptScope();
  ~InterruptScope();
  InterruptScope(const InterruptScope&) = delete;
  InterruptScope& operator=(const InterruptScope&) = delete;
  static bool interrupted();

 private:
  void (*previous_)(int);
};

// The format a recording's file name implies, a trailing ".gz" (any case)
// set aside: csv for *.csv; daphnet for the Daphnet dataset's S<NN>R<NN>.txt;
// gaitpdb for PhysioNet gaitpdb's {Ga,Ju,Si}{Co,Pt}<NN>_<NN>.txt; sisfall for
// SisFall's <D|F><NN>_<SA|SE><NN>_R<NN>.txt. Empty for any other name
// (--format is then required). Whether the file is compressed is decided by
// its bytes when it is read (sensors/recording.h), not by its name.
std::string format_from_file_name(const std::string& file);

// The channels a device of `kind` takes by default from a recording of
// `format` that has more channels than the device and lacks the device's
// channel names. The table: sisfall on accelerometer_3 -> adxl_x, adxl_y,
// adxl_z. Empty when the table has no entry.
std::vector<std::string> default_device_channels(const std::string& format,
                                                 sensors::DeviceKind kind);

// `rec` (read with `format`) as `device` takes it:
//   1. channels, unless `channels_chosen` (--columns was given, which always
//      wins): when the recording has a channel named like each of the
//      device's channels, those, in the device's order; else, when it has
//      more channels than the device, default_device_channels(format, kind)
//      if there are any, renamed to the device's channel names; else the
//      recording's channels unchanged (a count that does not fit is
//      reported where it is used);
//   2. rate: when the recording's rate differs from device.sample_rate_hz,
//      sensors::resample to it, saying so in one line on stderr
//      ("resampled 200 Hz -> 100 Hz for device 'accelerometer'").
// Sample indices of the result (--start, --end, example ranges) count at the
// device's rate. Throws gw::Error.
sensors::Recording fit_to_device(sensors::Recording rec, const std::string& format,
                                 const config::DeviceProfile& device, bool channels_chosen);

// How a recording is read: --file, --format and the csv options.
struct RecordingSource {
  std::string file;
  std::string format;       // empty: format_from_file_name(file)
  std::string columns;      // comma-separated names or indices; empty = all
  char delimiter = ',';
  int header_lines = 1;
  int time_column = -1;
  double time_scale = 1.0;
  double scale = 1.0;
  double rate_hz = 0;       // 0 = the format's rate (csv/values: 100 Hz)
  // --file is required unless `file_required` is false (the command then
  // checks it where it needs a file). With `many_files`, --file may be given
  // several times and fills that list instead of `file`.
  void add_flags(CLI::App& cmd, bool with_columns = true, bool file_required = true,
                 std::vector<std::string>* many_files = nullptr);
  // The format `file` is read with: --format, else the one its name implies;
  // throws UsageError when neither says.
  std::string format_for(const std::string& file) const;
  // The recording as the file holds it (--columns applied); throws gw::Error.
  sensors::Recording read() const;
  // The recording as `device` takes it: fit_to_device(read(), ...), with
  // --columns counting as channels chosen. Throws gw::Error.
  sensors::Recording read_for(const config::DeviceProfile& device) const;
};

std::vector<std::string> split_list(const std::string& comma_separated);

// The config file client commands read the daemon's endpoints from:
// `explicit_path` when given, else the installed config
// (GW_INSTALLED_CONFIG, SYSCONFDIR/gaitwatch/gaitwatch.yaml) when it exists,
// else empty (the built-in defaults of config/config.h).
std::string client_config_path(const std::string& explicit_path);
// The server's public key file next to its secret key file (NAME.key ->
// NAME.pub), as `gaitwatch keygen` writes them.
std::string public_key_file_of(const std::string& secret_key_file);

// A running daemon's control interface as the CLI reaches it (daemon/cli/control.cc):
// flags --endpoint, --timeout, --server-key, --key, each name after `prefix`
// (e.g. "control-" for --control-endpoint), and --config unless the command
// has its own.
struct ControlTarget {
  std::string endpoint;    // empty: from the config (resolve())
  double timeout_s = 10;
  std::string server_key;  // the daemon's control .pub file: CURVE on
  std::string key;         // this client's .key file (authorized on the daemon)
  std::string config;      // --config: the daemon's config file
  void add_flags(CLI::App& cmd, const std::string& prefix = "", bool with_config_flag = true);
  // The endpoint to use: --endpoint when given; else control.endpoint of
  // client_config_path(config) (resolved as the daemon resolves it), with
  // the server key of its control.curve_secret_key when --server-key is not
  // given; else the built-in default. Throws gw::Error for a config that does
  // not load or has the control interface off.
  ControlTarget resolved() const;
};

// A stored alert as fetched: its record, and its body exactly as the daemon
// published it (with the readable members the record lacks).
struct FetchedAlert {
  pipeline::Alert alert;
  nlohmann::json body;
};
// Stored alerts with seq > `after` (of one wearer if >= 0, one pattern if
// not empty), oldest first, fetched in pages through `alerts.since`; at most
// `limit` (0 = all). `last_seq`: the store's newest seq. Throws gw::Error.
std::vector<FetchedAlert> fetch_alerts(const ControlTarget& target, std::uint64_t after,
                                          long limit = 0, long wearer = -1,
                                          const std::string& pattern = "",
                                          std::uint64_t* last_seq = nullptr);

// Recordings cut into wire frames (sensors/framing.h).
using sensors::frames_from_recording;
sensors::DeviceKind parse_device_kind(const std::string& name);
int default_frame_samples(double rate_hz);

// How `detect`, `eval` and `plot` drive the daemon's engine over a recording.
struct OfflineRun {
  std::string device;  // profile name; empty = the config's first device
  std::uint32_t wearer = 1;
  int frame_samples = 0;   // 0 = default_frame_samples(rate)
  int batch_frames = 1;    // frames per search batch (alerts do not depend on it: the
                           // per-pair match cap and the ring grow with the batch)
  std::int64_t start = 0;  // recording sample index of the stream's sample 0
  std::int64_t end = -1;   // exclusive; -1 = the recording's end
  bool int16 = false;      // quantise like replay --int16
  std::optional<config::BackendKind> backend;  // overrides search.backend when set
  bool no_dedup = false;   // skip alert de-duplication (on when dedup.enabled, as in the daemon)
  void add_flags(CLI::App& cmd);
  const config::DeviceProfile& device_of(const config::Config& cfg) const;  // throws gw::Error
  // Feeds the recording's frames to a fresh Engine, calling `on_alerts` after
  // every batch with the alerts the daemon would publish (de-duplicated as
  // the config says, unless no_dedup); returns the engine's final counters.
  // Throws gw::Error.
  nlohmann::json run(config::Config cfg, const sensors::Recording& rec,
                     const std::function<void(std::vector<pipeline::Alert>)>& on_alerts) const;
  // When set, run() records the decisions of every tracker and hands the
  // trace of the run's wearer and device for each config pattern (config
  // order) to this at the end (`gaitwatch train`).
  std::function<void(std::vector<std::vector<pipeline::PatternTracker::TracedDecision>>)>
      on_decision_traces;
};

// Registers what every command that runs the engine over a recording takes:
// --config, the recording flags and the OfflineRun flags.
void add_engine_flags(CLI::App& cmd, std::string& config_path, RecordingSource& source,
                      OfflineRun& run);

// Runs `body` when the subcommand is chosen: its return value becomes the
// exit code; an exception is reported as "gaitwatch <name>: message" on stderr
// with exit code 1, except a UsageError (and any CLI::ParseError), which goes
// on to parse_command_line (exit 2).
void on_run(CLI::App& cmd, int& exit_code, std::function<int()> body);

// Unix time now, in seconds.
double unix_time_now();
// "YYYY-MM-DD HH:MM:SS" of a unix time, in local time. Times users type are
// parsed by gw::parse_time_text (common/time_text.h).
std::string local_time_text(double unix_s);

// Who runs the command, for the `by` of what a carer does: $USER, else the
// account's name, else "uid N".
std::string login_name();
// A published message's time `at_key` (unix s) as "2026-11-28 07:12:03 CET"
// in the message's `zone` (the site's), or this machine's zone when the
// message names none this machine knows; "?" without the time.
std::string readable_time_text(const nlohmann::json& message, const char* at_key);

// The table `gaitwatch hits`, `gaitwatch alerts` and `gaitwatch detect` print:
// the header line (on stdout, flushed), one row per alert (no newline), and
// both together.
void print_hits_header(bool with_marks = false);
std::string hit_row(const pipeline::Alert& hit);

// The shortest text that reads back as exactly `value` (integers stay
// integers; 0.05, not 0.050000000000000003).
std::string exact_text(float value);
std::string exact_text(double value);

// An example's baseline as a config item's `baseline:` value: `{learn_s: ..,
// statistic: .., scale: .., [active_above: ..,] center: [..], spread: [..]}`,
// the values exact as floats, so that a config reading it back normalises the
// template exactly as the engine did.
std::string baseline_yaml(const config::NormaliseConfig& normalise,
                          const config::ChannelBaseline& baseline);

// An example as an item of a pattern's `examples:` or `negatives:`:
// `{template: PATH[, subject: S][, baseline: {..}]}`, the subject when not
// empty, the baseline (baseline_yaml) when given, then `  # FILE:START:END`
// when the example is a window of a recording.
std::string example_item_yaml(const std::string& template_path, const std::string& subject,
                              const config::ChannelBaseline* baseline,
                              const config::NormaliseConfig& normalise,
                              const std::optional<config::ExampleSource>& source);

// A pattern example as a template CSV: a header of the pattern's channels,
// then the lead-in rows and the window, each value written so that it reads
// back as the same float. Throws gw::Error when the file cannot be written.
void write_template_csv(const std::string& file, const config::PatternConfig& pattern,
                        const config::PatternExample& example);

// The table `gaitwatch hits` and `gaitwatch alerts` print; with `marks`
// (the active marks' verdicts by seq, HitStore::verdicts), a mark column.
void print_hits_table(const std::vector<pipeline::Alert>& hits,
                      const std::map<std::uint64_t, pipeline::MarkVerdict>* marks = nullptr);

void add_replay(CLI::App& app, int& exit_code);
void add_subscribe(CLI::App& app, int& exit_code);
// subscribe --nats: the alerts of a JetStream alert stream (cluster/alert_publisher.h),
// read with an ordered consumer; each stored alert once, in stream order.
struct AlertStreamSubscription {
  std::string url;
  std::string stream = "GW_ALERTS";
  std::string subject = "gw.alerts";
  bool from_start = false;  // every stored alert, not only new ones
  long count = 0;           // 0 = no limit
  double timeout_s = 0;     // 0 = none
  bool text = false;
  bool with_topic = false;  // the subject before each line
};
// Throws gw::Error when NATS or the stream cannot be reached, and in a build
// without libnats (daemon/cli/subscribe_nats_unavailable.cc).
int subscribe_alert_stream(const AlertStreamSubscription& subscription);
void add_keygen(CLI::App& app, int& exit_code);
void add_search(CLI::App& app, int& exit_code);
void add_hits(CLI::App& app, int& exit_code);
void add_detect(CLI::App& app, int& exit_code);
void add_eval(CLI::App& app, int& exit_code);
void add_train(CLI::App& app, int& exit_code);
void add_plot(CLI::App& app, int& exit_code);
// status, slots, alerts and control: requests to a running daemon.
void add_control_commands(CLI::App& app, int& exit_code);
void add_history(CLI::App& app, int& exit_code);
// mark: carers' marks of alerts through a running daemon (daemon/cli/mark.cc).
void add_mark(CLI::App& app, int& exit_code);
// wearer: the wearer registry and sensor liveness through a running daemon
// (daemon/cli/wearer.cc).
void add_wearer(CLI::App& app, int& exit_code);
// user: the console's users, in the store's file (daemon/cli/user.cc).
void add_user(CLI::App& app, int& exit_code);
// alert ack|resolve|show|list and events: the alert lifecycle through a
// running daemon (daemon/cli/alert.cc).
void add_alert(CLI::App& app, int& exit_code);
void add_events(CLI::App& app, int& exit_code);
// One readable line of a published alert or event:
//   2026-11-28 07:12:03 CET  CRITICAL  fall  wearer 17  seq 42  fall_turn_impact
//   2026-11-28 07:13:10 CET  acknowledged by ana  seq 42  wearer 17
// Times in the message's zone (readable_time_text); the wearer's name
// instead of the number when the message has `wearer_name`.
std::string alert_text_line(const nlohmann::json& alert);
std::string event_text_line(const nlohmann::json& event);
// pattern export: a pattern's examples as template files (daemon/cli/pattern.cc).
void add_pattern(CLI::App& app, int& exit_code);
void add_gait(CLI::App& app, int& exit_code);

// One request to a running daemon's control interface (daemon/control_client.h,
// docs/interfaces.md): returns the final message; `on_message` sees the
// others (accepted, progress). Ctrl-C while a job runs cancels the job.
// Throws gw::Error when nothing arrives within timeout_s.
nlohmann::json control_request(const ControlTarget& target, const std::string& cmd,
                               const nlohmann::json& args,
                               const std::function<void(const nlohmann::json&)>& on_message = {});
// The result of a final message, or gw::Error with the daemon's error message and code.
nlohmann::json control_result(const nlohmann::json& final);

// `gaitwatch search --history FILE ...`: the history search (daemon/cli/history.cc).
// With `daemon` set, the running daemon's control interface searches its own
// history instead (history.search), with the same flags.
struct HistorySearchOptions {
  std::string history;   // the history store file
  std::string config;    // empty = the config_path the daemon recorded in the file
  std::string pattern;   // a pattern of the config ...
  std::string example;   // ... or FILE:START:END, read like the recording flags
  std::string device;    // profile of --example; empty = the config's first device
  std::string wearers;   // comma-separated; empty = all
  std::string from, to;  // seconds of device time or ISO 8601 UTC; empty = open
  std::size_t slice_samples = std::size_t{1} << 18;
  bool daemon = false;
  ControlTarget control{"", 60, "", "", ""};  // with daemon: its control interface
};
// The flags `search` shares between its two modes.
struct SearchFlags {
  RecordingSource source;
  double band = 0.1;
  bool znorm = false;
  int nr = 0;
  int top = 10;
  config::BackendKind backend = config::BackendKind::kAuto;
  int threads = 0;
  double alpha = 1.0;
  bool json = false;
};
// Runs the history search; `flags` carry --example's format and columns,
// band, znorm, nr, alpha, top, backend, threads and json.
int run_history_search(const HistorySearchOptions& history, const SearchFlags& flags);
// "F:START:END" -> (F, START, END); throws gw::Error naming the flag.
void parse_example_spec(const std::string& spec, std::string& file, std::size_t& start,
                        std::size_t& end);

}  // namespace gw::cli
