// gaitwatch: the command-line companion of gaitwatchd.
//   replay     send a recording to the daemon as wire frames
//   subscribe  print published alerts
//   search     offline top-K search of a recording by example or template
//   hits       list stored hits
//   detect     run the daemon's detector offline over a recording
//   eval       score the detector on an annotated recording
//   plot       draw a recording's detections, or one detection, with gnuplot
//   status     a running daemon's counters            (control interface)
//   slots      when a wearer had a status in a zone   (control interface)
//   alerts     stored alerts with seq > N              (control interface)
//   mark       mark an alert false/true, list or withdraw marks (control interface)
//   wearer     add, change, list or remove wearers; sensors' liveness (control interface)
//   user       add, change or remove the console's users (the store's file)
//   alert      acknowledge, resolve, show or list alerts   (control interface)
//   events     the audit log: acknowledgements, escalations, marks, ... (control interface)
//   control    any control request, messages as JSON  (control interface)
//   pattern    export a pattern's examples as template files
//   gait       gait cycles, metrics and abnormal gait of insole recordings
//   history    fill, inspect or export a raw-stream history file (search
//              searches one with --history)
// Exit codes: 0 done (also --help, --version), 1 the command failed, 2 a
// usage error (daemon/cli/usage.h).
#include <CLI/CLI.hpp>

#include "daemon/cli/cli.h"
#include "daemon/cli/usage.h"

int main(int argc, char** argv) {
  CLI::App app{"gaitwatch - tools for the gaitwatchd detector"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "gaitwatch 0.1.0");
  int exit_code = 0;
  gw::cli::add_replay(app, exit_code);
  gw::cli::add_subscribe(app, exit_code);
  gw::cli::add_keygen(app, exit_code);
  gw::cli::add_search(app, exit_code);
  gw::cli::add_hits(app, exit_code);
  gw::cli::add_detect(app, exit_code);
  gw::cli::add_eval(app, exit_code);
  gw::cli::add_train(app, exit_code);
  gw::cli::add_plot(app, exit_code);
  gw::cli::add_control_commands(app, exit_code);
  gw::cli::add_mark(app, exit_code);
  gw::cli::add_wearer(app, exit_code);
  gw::cli::add_user(app, exit_code);
  gw::cli::add_alert(app, exit_code);
  gw::cli::add_events(app, exit_code);
  gw::cli::add_history(app, exit_code);
  gw::cli::add_pattern(app, exit_code);
  gw::cli::add_gait(app, exit_code);
  if (const auto code = gw::cli::parse_command_line(app, argc, argv)) return *code;
  return exit_code;
}
