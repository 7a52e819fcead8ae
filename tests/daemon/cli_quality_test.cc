// Integration: `gaitwatch eval` (with and without --cv) and `gaitwatch plot`
// as processes, on a recording whose events and expected counts are known by
// construction: noise at 100 Hz with shape A planted at events 0 and 2, shape
// B at event 1, and shape A once more outside every event (a decoy). The
// pattern's positive examples are cut from events 0 (A) and 1 (B).
#include <unistd.h>

#include <catch2/catch.hpp>

#include <cstdlib>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <nlohmann/json.hpp>
#include <random>
#include <set>
#include <sstream>

#include "tests/daemon/json_lines.h"
#include "tests/daemon/process.h"

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

const std::string kTool = std::string(GW_BINARY_DIR) + "/daemon/gaitwatch";
constexpr int kSamples = 6000;
constexpr int kShape = 50;
constexpr int kEventAt[3] = {1000, 2500, 4000};
constexpr int kDecoyAt = 5200;

double shape(bool b, int s) {
  const double x = static_cast<double>(s) / kShape;
  return b ? std::tanh(10 * (x - 0.5)) : std::sin(2 * M_PI * 2 * x);
}

struct Recording {
  fs::path dir;
  Recording() {
    dir = fs::temp_directory_path() / ("gw_cli_quality_" + std::to_string(::getpid()));
    fs::create_directories(dir);
    std::mt19937 rng(5);
    std::normal_distribution<double> noise(0, 1);
    std::vector<double> v(kSamples);
    for (auto& x : v) x = noise(rng);
    auto plant = [&](int at, bool b) {
      for (int s = 0; s < kShape; ++s)
        v[static_cast<std::size_t>(at + s)] = 5 * shape(b, s) + 0.01 * noise(rng);
    };
    plant(kEventAt[0], false);
    plant(kEventAt[1], true);
    plant(kEventAt[2], false);
    plant(kDecoyAt, false);
    std::ofstream csv(dir / "rec.csv");
    csv << "v\n" << std::setprecision(9);
    for (const double x : v) csv << x << "\n";
    // Events: a little wider than the planted shapes, as annotators mark them.
    std::ofstream events(dir / "events.txt");
    events << "start end\n";
    for (const int at : kEventAt) events << at - 20 << " " << at + kShape + 20 << "\n";
    std::ofstream(dir / "gaitwatch.yaml")
        << "devices:\n"
           "  - {id: 1, name: one, kind: generic, sample_rate_hz: 100, channels: [v]}\n"
           "search: {backend: cpu, threads: 2}\n"
           // A small ring: offline batches of many frames must still fit.
           "ingest: {ring_capacity_samples: 200}\n"
           "patterns:\n"
           "  - name: shapes\n"
           "    kind: other\n"
           "    device: one\n"
           "    channels: [v]\n"
           "    threshold: 1.0\n"
           "    cooldown_s: 10\n"
           "    examples:\n"
           "      - {file: rec.csv, format: csv, start: 1000, end: 1050}\n"
           "      - {file: rec.csv, format: csv, start: 2500, end: 2550}\n";
  }
  ~Recording() { fs::remove_all(dir); }
  std::vector<std::string> args(const std::string& command) const {
    return {kTool,      command,
            "--config", (dir / "gaitwatch.yaml").string(),
            "--file",   (dir / "rec.csv").string(),
            "--format", "csv"};
  }
};

json eval(const Recording& rec, std::vector<std::string> extra) {
  auto argv = rec.args("eval");
  argv.insert(argv.end(), {"--events", (rec.dir / "events.txt").string(), "--json"});
  argv.insert(argv.end(), extra.begin(), extra.end());
  const auto r = gw::test::run_process(argv, rec.dir, "eval", std::chrono::seconds(60));
  INFO(r.err);
  REQUIRE(r.code == 0);
  return json::parse(r.out);
}

}  // namespace

TEST_CASE("eval scores every event, and --cv scores each with a pattern built without it",
          "[integration]") {
  Recording rec;
  const json all = eval(rec, {});
  CHECK(all["pattern"] == "shapes");
  CHECK(all["events"] == 3);
  CHECK(all["detected"] == 3);
  CHECK(all["true_alerts"] == 3);
  CHECK(all["false_alerts"] == 1);  // the decoy
  CHECK(all["precision"].get<double>() == Approx(0.75));
  CHECK(all["recall"].get<double>() == Approx(1.0));
  CHECK(all["median_latency_s"].get<double>() ==
        Approx(0.69).margin(0.02));  // onset - 0.2 s + 0.49 s

  // The batch size changes nothing, even with batches far beyond the ring.
  CHECK(eval(rec, {"--batch-frames", "1"}) == all);
  CHECK(eval(rec, {"--batch-frames", "300"}) == all);

  // LabelledEvent 0 (A) is scored by the pattern with only example B: missed; event 1
  // (B) by the pattern with only A: missed; event 2 has no example: the full
  // pattern finds it. False alerts: the decoy, for the two folds that hold A.
  const json cv = eval(rec, {"--cv"});
  CHECK(cv["events"] == 3);
  CHECK(cv["detected"] == 1);
  CHECK(cv["true_alerts"] == 1);
  CHECK(cv["false_alerts"].get<double>() == Approx(2.0 / 3));
  CHECK(cv["precision"].get<double>() == Approx(1 / (1 + 2.0 / 3)));
  CHECK(cv["cv_folds"] == 2);
}

TEST_CASE("eval without annotations asks for an events file", "[integration]") {
  Recording rec;
  const auto r = gw::test::run_process(rec.args("eval"), rec.dir, "eval", std::chrono::seconds(60));
  CHECK(r.code == 1);
  CHECK_THAT(r.err, Catch::Contains("--events"));
}

TEST_CASE("plot draws the overview and one detection as SVG", "[integration]") {
  // `gaitwatch plot` drives gnuplot; scripts/install-deps.sh installs it. Only
  // machines that cannot install packages (the GPU runner) lack it.
  if (std::system("command -v gnuplot >/dev/null 2>&1") != 0) {
    WARN("skipped: gnuplot is not installed (scripts/install-deps.sh installs gnuplot-nox)");
    return;
  }
  Recording rec;
  auto overview = rec.args("plot");
  overview.insert(overview.end(), {"--events", (rec.dir / "events.txt").string(), "--out",
                                   (rec.dir / "overview.svg").string()});
  auto r = gw::test::run_process(overview, rec.dir, "plot", std::chrono::seconds(60));
  INFO(r.err);
  REQUIRE(r.code == 0);
  const std::string svg = gw::test::read_file(rec.dir / "overview.svg");
  CHECK(svg.find("<svg") != std::string::npos);
  CHECK(svg.find("pattern shapes (4 alerts") != std::string::npos);

  auto detail = rec.args("plot");
  detail.insert(detail.end(), {"--alert", "1", "--out", (rec.dir / "alert.svg").string()});
  r = gw::test::run_process(detail, rec.dir, "plot_alert", std::chrono::seconds(60));
  INFO(r.err);
  REQUIRE(r.code == 0);
  const std::string alert_svg = gw::test::read_file(rec.dir / "alert.svg");
  CHECK(alert_svg.find("warping path") != std::string::npos);
  CHECK(alert_svg.find("example 1") != std::string::npos);  // event 1 is shape B, example 1

  auto missing = rec.args("plot");
  missing.insert(missing.end(), {"--alert", "9", "--out", (rec.dir / "none.svg").string()});
  r = gw::test::run_process(missing, rec.dir, "plot_missing", std::chrono::seconds(60));
  CHECK(r.code == 1);
  CHECK_THAT(r.err, Catch::Contains("raised 4 alerts"));
}

namespace {

// Three people's recordings: alice and carol make shape A, bob shape B, each
// once at sample 1000 in its own noise (the annotated event); the pattern has
// one example cut from each. Alice makes shape A twice more, unannotated
// (at 2000 and 2500) with a ripple: false alerts.
struct People {
  fs::path dir;
  People() {
    dir = fs::temp_directory_path() / ("gw_cli_people_" + std::to_string(::getpid()));
    fs::create_directories(dir);
    const std::pair<const char*, bool> people[] = {{"alice", false}, {"bob", true}, {"carol", false}};
    unsigned seed = 11;
    for (const auto& [name, b] : people) {
      std::mt19937 rng(seed++);
      std::normal_distribution<double> noise(0, 1);
      std::ofstream csv(dir / (std::string(name) + ".csv"));
      csv << "v\n" << std::setprecision(9);
      for (int s = 0; s < 3000; ++s) {
        int at = 1000;
        if (std::string(name) == "alice" && s >= 2000) at = s >= 2500 ? 2500 : 2000;
        const bool in_shape = s >= at && s < at + kShape;
        // The repeats differ from A by a ripple: near enough to A to alert,
        // far nearer to each other.
        const double ripple =
            at == 1000 ? 0.0 : 0.5 * std::sin(2 * M_PI * 5 * (s - at) / static_cast<double>(kShape));
        csv << (in_shape ? 5 * shape(b, s - at) + ripple + 0.01 * noise(rng) : noise(rng)) << "\n";
      }
      std::ofstream(dir / (std::string(name) + ".events")) << "980 1070\n";
    }
    std::ofstream(dir / "gaitwatch.yaml")
        << "devices:\n"
           "  - {id: 1, name: one, kind: generic, sample_rate_hz: 100, channels: [v]}\n"
           "search: {backend: cpu, threads: 2}\n"
           "patterns:\n"
           "  - name: shapes\n"
           "    device: one\n"
           "    channels: [v]\n"
           "    threshold: 1.0\n"
           "    examples:\n"
           "      - {file: alice.csv, format: csv, start: 1000, end: 1050}\n"
           "      - {file: bob.csv, format: csv, start: 1000, end: 1050}\n"
           "      - {file: carol.csv, format: csv, start: 1000, end: 1050}\n";
  }
  ~People() { if (!std::getenv("GW_KEEP")) fs::remove_all(dir); }
  json eval(std::vector<std::string> extra) const {
    std::vector<std::string> argv = {kTool, "eval", "--config", (dir / "gaitwatch.yaml").string(),
                                     "--format", "csv", "--json"};
    for (const char* name : {"alice", "bob"}) {
      const std::string file = (dir / (std::string(name) + ".csv")).string();
      argv.insert(argv.end(), {"--file", file, "--events",
                               file + "=" + (dir / (std::string(name) + ".events")).string()});
    }
    argv.insert(argv.end(), extra.begin(), extra.end());
    const auto r = gw::test::run_process(argv, dir, "eval", std::chrono::seconds(60));
    INFO(r.err);
    REQUIRE(r.code == 0);
    return json::parse(r.out);
  }
};

json subject_row(const json& result, const std::string& subject) {
  for (const auto& row : result["subjects"])
    if (row["subject"] == subject) return row;
  FAIL("no row for " << subject);
  return {};
}

}  // namespace

TEST_CASE("eval --loso scores each subject without exactly its own examples", "[integration]") {
  const People people;
  // With every example in the library each person's event is found: memory.
  const json all = people.eval({});
  CHECK(all["events"] == 2);
  CHECK(all["detected"] == 2);
  CHECK(all["true_alerts"].is_number_integer());
  CHECK(subject_row(all, "alice")["examples_left_out"] == 0);

  // Leave-one-subject-out: alice's shape A is still found through carol's
  // example; bob's shape B had only bob's own example, so it is missed.
  const json loso = people.eval({"--loso"});
  CHECK(loso["leave_out"] == "subject");
  CHECK(loso["events"] == 2);
  CHECK(loso["detected"] == 1);
  const json alice = subject_row(loso, "alice");
  const json bob = subject_row(loso, "bob");
  CHECK(alice["examples_left_out"] == 1);
  CHECK(bob["examples_left_out"] == 1);
  CHECK(alice["detected"] == 1);
  CHECK(bob["detected"] == 0);

  // --subject FILE=ID regroups recordings: bob counted as carol leaves out
  // carol's example instead of bob's, and then bob's own shape is found.
  const json renamed = people.eval({"--loso", "--subject", "bob.csv=carol"});
  CHECK(subject_row(renamed, "carol")["detected"] == 1);
}

// The repeats of a marked movement no longer alert: the negative cut from the
// first outlives the positive matches of each later one.
TEST_CASE("eval --simulate-marks: a marked false alert's window stops its repeats",
          "[integration]") {
  const People people;
  const json all = people.eval({});
  CHECK(subject_row(all, "alice")["false_alerts"] == 2);
  const json marked = people.eval({"--simulate-marks", "1"});
  const json m = subject_row(marked, "alice")["simulated_marks"];
  REQUIRE(m["marks"] == 1);
  REQUIRE(m["false_alerts_after_without_marks"] == 1);
  // Bob had no false alert to mark.
  REQUIRE(subject_row(marked, "bob")["simulated_marks"]["marks"] == 0);
  CHECK(m["false_alerts_after_with_marks"] == 0);
}

// Hard negatives from a normalised pattern: the mined items carry the subject
// and the baseline each window was normalised with, so that a config taking
// them back loads (a normalised template without a baseline is refused),
// no longer alerts on exactly those windows, and --loso leaves them out with
// their subject.
TEST_CASE("eval --mine-negatives writes items with subject and baseline that a config takes",
          "[integration]") {
  const People people;
  const fs::path config = people.dir / "gaitwatch.yaml";
  std::string text = gw::test::read_file(config);
  const std::string examples = "    examples:\n";
  REQUIRE(text.find(examples) != std::string::npos);
  text.insert(text.find(examples),
              "    transforms: [{kind: lowpass, cutoff_hz: 40}]\n"
              "    normalise: {learn_s: 3, statistic: median, scale: none}\n");
  std::ofstream(config, std::ios::trunc) << text;
  // Alert ends on alice's recording, as `detect` reports them.
  const auto alert_ends = [&] {
    const auto r = gw::test::run_process({kTool, "detect", "--config", config.string(), "--file",
                                          (people.dir / "alice.csv").string(), "--format", "csv",
                                          "--json"},
                                         people.dir, "detect", std::chrono::seconds(60));
    INFO(r.err);
    REQUIRE(r.code == 0);
    std::set<std::int64_t> ends;
    std::istringstream lines(r.out);
    for (std::string line; std::getline(lines, line);)
      if (!line.empty() && line[0] == '{') ends.insert(json::parse(line).at("end_index").get<std::int64_t>());
    return ends;
  };

  const fs::path mined = people.dir / "mined";
  const json before = people.eval({"--mine-negatives", mined.string()});
  REQUIRE(subject_row(before, "alice")["false_alerts"] == 2);
  const json loso_before = people.eval({"--loso"});
  const std::set<std::int64_t> ends_before = alert_ends();
  std::istringstream in(gw::test::read_file(mined / "shapes_hard.yaml"));
  std::vector<std::string> items;
  std::vector<std::int64_t> mined_ends;
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("- {template: ", 0) != 0) continue;
    CHECK_THAT(line, Catch::Contains("subject: alice"));
    CHECK_THAT(line, Catch::Contains("baseline: {learn_s: 3, statistic: median, scale: none, center: ["));
    const std::string name = line.substr(13, line.find(',') - 13);
    CHECK(fs::is_regular_file(mined / name));
    items.push_back(line.substr(13));
    // "# alice.csv:START:END": the window's last sample is END - 1.
    mined_ends.push_back(std::stoll(line.substr(line.rfind(':') + 1)) - 1);
  }
  REQUIRE(items.size() == 2);
  for (const std::int64_t end : mined_ends) CHECK(ends_before.count(end) == 1);

  // The same config with the mined items as negatives (paths from the
  // config's folder, as scripts/packs/fog_candidates.py --extra-neg writes them).
  std::string with_negatives = text + "    negatives:\n";
  for (const std::string& item : items) with_negatives += "      - {template: mined/" + item + "\n";
  std::ofstream(config, std::ios::trunc) << with_negatives;
  const std::set<std::int64_t> ends_after = alert_ends();
  for (const std::int64_t end : mined_ends) CHECK(ends_after.count(end) == 0);
  const json after = people.eval({});
  CHECK(subject_row(after, "alice")["detected"] == 1);
  CHECK(subject_row(after, "bob")["detected"] == 1);
  // Scoring alice leaves her own mined windows out with her example.
  const json loso = people.eval({"--loso"});
  CHECK(subject_row(loso, "alice")["examples_left_out"] ==
        subject_row(loso_before, "alice")["examples_left_out"].get<int>() + 2);
  CHECK(subject_row(loso, "alice")["false_alerts"] == subject_row(loso_before, "alice")["false_alerts"]);
  CHECK(subject_row(loso, "alice")["detected"] == subject_row(loso_before, "alice")["detected"]);
}

// gaitwatch train on the same people: the decision file it writes, a config
// that uses it, and --evaluate scoring each subject as eval --loso does.
TEST_CASE("train writes a learned decision that eval and the config take", "[integration]") {
  const People people;
  const std::string decision = (people.dir / "decision.yaml").string();
  std::vector<std::string> argv = {kTool, "train", "--config",
                                   (people.dir / "gaitwatch.yaml").string(), "--format", "csv",
                                   "--out", decision, "--step-s", "0.05"};
  for (const char* name : {"alice", "bob", "carol"}) {
    const std::string file = (people.dir / (std::string(name) + ".csv")).string();
    argv.insert(argv.end(), {"--file", file, "--events",
                             file + "=" + (people.dir / (std::string(name) + ".events")).string()});
  }
  auto r = gw::test::run_process(argv, people.dir, "train", std::chrono::seconds(60));
  INFO(r.err);
  REQUIRE(r.code == 0);
  CHECK_THAT(r.err, Catch::Contains("wrote " + decision));
  const std::string text = gw::test::read_file(decision);
  CHECK_THAT(text, Catch::Contains("rule: logistic"));
  CHECK_THAT(text, Catch::Contains("leave_out: subject"));

  // The pattern with the decision: each person's own event is nearest to an
  // example (the others' or its own); noise is near none: the event alerts.
  std::string config = gw::test::read_file(people.dir / "gaitwatch.yaml");
  config += "    decision: {learned: decision.yaml}\n";
  std::ofstream(people.dir / "learned.yaml") << config;
  std::vector<std::string> eval = {kTool, "eval", "--config", (people.dir / "learned.yaml").string(),
                                   "--format", "csv", "--json", "--file",
                                   (people.dir / "bob.csv").string(), "--events",
                                   (people.dir / "bob.events").string()};
  r = gw::test::run_process(eval, people.dir, "eval_learned", std::chrono::seconds(60));
  INFO(r.err);
  REQUIRE(r.code == 0);
  const json scored = json::parse(r.out);
  CHECK(scored["detected"] == 1);
  CHECK(scored["false_alerts"] == 0);

  // --evaluate: bob's shape B has no example but bob's own, so without it
  // bob's event is missed, as in eval --loso; alice's is found.
  argv.push_back("--evaluate");
  argv.push_back("--json");
  r = gw::test::run_process(argv, people.dir, "train_evaluate", std::chrono::seconds(60));
  INFO(r.err);
  REQUIRE(r.code == 0);
  const json held_out = json::parse(r.out);
  CHECK(held_out["leave_out"] == "subject");
  CHECK(subject_row(held_out, "bob")["detected"] == 0);
  CHECK(subject_row(held_out, "alice")["detected"] == 1);

  // Without --out the pattern must name its decision file.
  argv = {kTool, "train", "--config", (people.dir / "gaitwatch.yaml").string(), "--format", "csv",
          "--file", (people.dir / "bob.csv").string(), "--events", (people.dir / "bob.events").string()};
  r = gw::test::run_process(argv, people.dir, "train_no_out", std::chrono::seconds(60));
  CHECK(r.code == 2);
  CHECK_THAT(r.err, Catch::Contains("--out FILE is needed"));
}

// Two published patterns of one kind on trial-labelled files (SisFall names),
// each catching a different fall: eval adds a row for the kind, in which a
// trial is alerted when either pattern alerted and every alert on an
// everyday trial is a false alert.
TEST_CASE("eval on trials: a kind with two patterns is scored as any of them", "[integration]") {
  const fs::path dir = fs::temp_directory_path() / ("gw_cli_kinds_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  std::mt19937 rng(21);
  std::normal_distribution<double> noise(0, 1);
  // Shape A in fall F01, shape B in fall F02, shape A in everyday trial D01
  // (a false alert of the A pattern), nothing in D02; a library file holds
  // one of each shape.
  auto write = [&](const std::string& name, int a_at, int b_at) {
    std::ofstream csv(dir / name);
    csv << "v\n" << std::setprecision(9);
    for (int s = 0; s < 1500; ++s) {
      double v = noise(rng);
      if (s >= a_at && s < a_at + kShape) v = 5 * shape(false, s - a_at) + 0.01 * noise(rng);
      if (s >= b_at && s < b_at + kShape) v = 5 * shape(true, s - b_at) + 0.01 * noise(rng);
      csv << v << "\n";
    }
  };
  write("F01_SA01_R01.csv", 600, -1000);
  write("F02_SA01_R01.csv", -1000, 600);
  write("D01_SA01_R01.csv", 900, -1000);
  write("D02_SA01_R01.csv", -1000, -1000);
  write("library.csv", 200, 800);
  std::ofstream(dir / "gaitwatch.yaml")
      << "devices:\n"
         "  - {id: 1, name: one, kind: generic, sample_rate_hz: 100, channels: [v]}\n"
         "search: {backend: cpu, threads: 2}\n"
         "patterns:\n"
         "  - {name: shape_a, kind: fall, device: one, channels: [v], threshold: 1.0, cooldown_s: 10,\n"
         "     examples: [{file: library.csv, format: csv, start: 200, end: 250}]}\n"
         "  - {name: shape_b, kind: fall, device: one, channels: [v], threshold: 1.0, cooldown_s: 10,\n"
         "     examples: [{file: library.csv, format: csv, start: 800, end: 850}]}\n";
  std::vector<std::string> argv = {kTool, "eval", "--config", (dir / "gaitwatch.yaml").string(),
                                   "--format", "csv", "--json"};
  for (const char* trial : {"F01_SA01_R01.csv", "F02_SA01_R01.csv", "D01_SA01_R01.csv", "D02_SA01_R01.csv"})
    argv.insert(argv.end(), {"--file", (dir / trial).string()});
  const auto r = gw::test::run_process(argv, dir, "eval", std::chrono::seconds(60));
  INFO(r.err << r.out);
  REQUIRE(r.code == 0);
  const std::vector<json> rows = gw::test::json_lines(r.out);
  REQUIRE(rows.size() == 3);  // one per pattern, then the kind's
  for (int p = 0; p < 2; ++p) {
    INFO(rows[p].dump());
    CHECK(rows[p]["trials"]["fall_trials_detected"] == 1);
  }
  CHECK(rows[0]["pattern"] == "shape_a");
  CHECK(rows[0]["trials"]["everyday_alerts"] == 1);
  CHECK(rows[1]["trials"]["everyday_alerts"] == 0);
  const json& kind = rows[2];
  INFO(kind.dump());
  CHECK(kind["kind"] == "fall");
  CHECK(kind["patterns"] == json::array({"shape_a", "shape_b"}));
  CHECK(kind["trials"]["fall_trials"] == 2);
  CHECK(kind["trials"]["fall_trials_detected"] == 2);
  CHECK(kind["trials"]["everyday_trials"] == 2);
  CHECK(kind["trials"]["everyday_alerts"] == 1);
  CHECK(kind["subjects"].at(0)["subject"] == "SA01");
  if (!std::getenv("GW_KEEP")) fs::remove_all(dir);
}

// `gaitwatch pattern export` of a pattern whose baseline is learned from
// active samples only: each template carries that baseline, active_above
// included, and a config of the templates alerts exactly as the recording
// windows they came from (the wearer is still for its first seconds, so a
// baseline learned from every sample would differ). The recording's name
// says whose it is (Daphnet's rule), and so does each item: the templates'
// names do not.
TEST_CASE("pattern export keeps a baseline learned from active samples", "[integration]") {
  const fs::path dir = fs::temp_directory_path() / ("gw_export_gated_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  {
    std::mt19937 rng(8);
    std::normal_distribution<double> noise(0, 0.5);
    std::ofstream csv(dir / "S05R01.csv");
    csv << "a\n" << std::setprecision(9);
    for (int s = 0; s < 2000; ++s) {
      double x = s < 400 ? 0.01 * noise(rng) : 25 + noise(rng);
      for (const int at : {900, 1600})
        if (s >= at && s < at + 40) x += 30 * std::sin(M_PI * (s - at) / 40.0);
      csv << x << "\n";
    }
  }
  const std::string head =
      "devices:\n"
      "  - {id: 1, name: one, kind: generic, sample_rate_hz: 100, channels: [a]}\n"
      "search: {backend: cpu, threads: 1}\n"
      "patterns:\n"
      "  - name: bump\n"
      "    kind: other\n"
      "    device: one\n"
      "    channels: [a]\n"
      "    transforms: [{kind: lowpass, cutoff_hz: 20}]\n"
      "    znorm: false\n"
      "    threshold: 12\n"
      "    cooldown_s: 1\n"
      "    normalise: {learn_s: 3, statistic: median, scale: none, active_above: 5}\n";
  std::ofstream(dir / "windows.yaml")
      << head << "    examples:\n      - {file: S05R01.csv, format: csv, start: 900, end: 940}\n";
  const auto exported = gw::test::run_process(
      {kTool, "pattern", "export", "--config", (dir / "windows.yaml").string(), "--pattern", "bump",
       "--out", (dir / "templates").string()},
      dir, "export", std::chrono::seconds(60));
  INFO(exported.err);
  REQUIRE(exported.code == 0);
  REQUIRE_THAT(exported.out, Catch::Contains("active_above: 5, center: ["));
  CHECK_THAT(exported.out, Catch::Contains(", subject: S05, baseline: {"));
  std::ofstream(dir / "templates.yaml") << head << exported.out;  // its `examples:` list
  const auto detect = [&](const char* config) {
    const auto r = gw::test::run_process(
        {kTool, "detect", "--config", (dir / config).string(), "--file",
         (dir / "S05R01.csv").string(), "--format", "csv", "--json"},
        dir, "detect", std::chrono::seconds(60));
    INFO(r.err);
    REQUIRE(r.code == 0);
    std::vector<std::pair<std::int64_t, double>> alerts;  // end index, distance
    std::istringstream lines(r.out);
    for (std::string line; std::getline(lines, line);) {
      if (line.empty() || line[0] != '{') continue;
      const json a = json::parse(line);
      alerts.emplace_back(a.at("end_index").get<std::int64_t>(), a.at("distance").get<double>());
    }
    return alerts;
  };
  const auto from_windows = detect("windows.yaml");
  // Both plants, the one the example was cut from and the repeat.
  REQUIRE(from_windows.size() == 2);
  CHECK(detect("templates.yaml") == from_windows);
  fs::remove_all(dir);
}
