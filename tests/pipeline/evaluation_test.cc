// LabelledEvent-level scoring: events from labels and files, precision/recall/latency,
// nDCG@k, and the leave-one-episode-out folds and their scoring.
#include "pipeline/evaluation.h"

#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>

namespace fs = std::filesystem;
using gw::pipeline::LabelledEvent;
using gw::pipeline::ScoredAlert;

TEST_CASE("events are the runs of a label", "[eval]") {
  const auto events = gw::pipeline::events_from_labels({0, 2, 2, 1, 2, 1, 1, 2, 2, 2}, 2);
  REQUIRE(events.size() == 3);
  CHECK(events[0].start == 1);
  CHECK(events[0].end == 3);
  CHECK(events[1].start == 4);
  CHECK(events[1].end == 5);
  CHECK(events[2].start == 7);
  CHECK(events[2].end == 10);
}

TEST_CASE("an events file: header, comments, commas and mistakes that name the line", "[eval]") {
  const fs::path file = fs::temp_directory_path() / ("gw_events_" + std::to_string(::getpid()));
  std::ofstream(file) << "start end\n# a comment\n500, 700\n\n100 200  # trailing\n";
  const auto events = gw::pipeline::read_events(file.string());
  REQUIRE(events.size() == 2);
  CHECK(events[0].start == 100);  // sorted
  CHECK(events[1].end == 700);
  std::ofstream(file) << "100 200\n300 abc\n";
  CHECK_THROWS_WITH(gw::pipeline::read_events(file.string()), Catch::Contains(":2:"));
  std::ofstream(file) << "300 200\n";
  CHECK_THROWS_WITH(gw::pipeline::read_events(file.string()), Catch::Contains("START < END"));
  fs::remove(file);
}

TEST_CASE("nDCG@k of binary relevance", "[eval]") {
  CHECK(gw::pipeline::ndcg_at({true, true, false}, 3, 2) == Approx(1.0));
  // One relevant result at rank 2 of an ideal with one: (1/log2 3) / 1.
  CHECK(gw::pipeline::ndcg_at({false, true}, 2, 1) == Approx(1.0 / std::log2(3.0)));
  CHECK(gw::pipeline::ndcg_at({false, false}, 2, 1) == 0.0);
  CHECK(gw::pipeline::ndcg_at({}, 20, 0) == 0.0);
  // Only the first k count.
  CHECK(gw::pipeline::ndcg_at({false, true}, 1, 1) == 0.0);
}

TEST_CASE("alerts against events: detected, true and false alerts, latency", "[eval]") {
  const std::vector<LabelledEvent> events = {{1000, 1500}, {3000, 3100}, {6000, 6400}};
  // Rate 100 Hz, tolerance 1 s = 100 samples.
  const std::vector<ScoredAlert> alerts = {
      {1100, 1200, 2, 3.0},  // on event 0, 2 s after onset
      {1300, 1400, 2, 4.0},  // a second alert on event 0
      {3150, 3190, 1, 1.0},  // after event 1 ends at 3100, within 1 s: on it
      {4000, 4100, 2, 2.0},  // on nothing: false
      {5800, 5899, 2, 5.0},  // ends 101 samples before event 2 starts: false
  };
  const auto s = gw::pipeline::score_alerts(alerts, events, 100, 100.0, 20);
  CHECK(s.events == 3);
  CHECK(s.detected == 2);
  CHECK(s.true_alerts == 3);
  CHECK(s.false_alerts == 2);
  CHECK(s.precision == Approx(0.6));
  CHECK(s.recall == Approx(2.0 / 3));
  CHECK(s.median_latency_s == Approx((2.0 + 1.9) / 2));  // event 0: 1200-1000; event 1: 3190-3000
  REQUIRE(s.missed.size() == 1);
  CHECK(s.missed[0].start == 6000);
  // Ranked by dims then distance: (2,2.0) F, (2,3.0) T, (2,4.0) T, (2,5.0) F, (1,1.0) T; ideal 3.
  const double dcg = 1 / std::log2(3.0) + 1 / std::log2(4.0) + 1 / std::log2(6.0);
  const double ideal = 1 + 1 / std::log2(3.0) + 1 / std::log2(4.0);
  CHECK(s.ndcg == Approx(dcg / ideal));
  const auto j = s.to_json();
  for (const char* key : {"pattern", "kind", "events", "detected", "false_alerts", "precision",
                          "recall", "median_latency_s"})
    CHECK(j.contains(key));
}

TEST_CASE("cross-validated scoring counts each fold on its own event", "[eval]") {
  const std::vector<LabelledEvent> events = {{1000, 1500}, {3000, 3500}};
  // Fold 0 (scores event 0): finds event 0, event 1 (its training event, not
  // counted) and two false alerts. Fold 1 finds nothing of event 1, one false.
  const std::vector<std::vector<ScoredAlert>> folds = {
      {{1100, 1200, 1, 1.0}, {3100, 3200, 1, 0.5}, {8000, 8100, 1, 2.0}, {9000, 9100, 1, 3.0}},
      {{1100, 1200, 1, 1.0}, {8000, 8100, 1, 2.0}}};
  const auto s = gw::pipeline::score_cross_validated(folds, events, 100, 100.0, 20);
  CHECK(s.detected == 1);
  CHECK(s.recall == Approx(0.5));
  CHECK(s.true_alerts == 1);
  CHECK(s.false_alerts == Approx((2 + 1) / 2.0));
  CHECK(s.precision == Approx(1 / 2.5));
  CHECK(s.median_latency_s == Approx(2.0));
  REQUIRE(s.missed.size() == 1);
  CHECK(s.missed[0].start == 3000);
  // Fold 0 ranks its true alert first (nDCG 1), fold 1 has none (0).
  CHECK(s.ndcg == Approx(0.5));
}

TEST_CASE("leave-one-episode-out drops the positives cut from each event", "[eval]") {
  gw::config::PatternConfig p;
  p.name = "fog";
  auto example = [](const std::string& file, std::int64_t start, bool negative) {
    gw::config::PatternExample e;
    e.negative = negative;
    e.source = gw::config::ExampleSource{file, "daphnet", start, start + 100};
    return e;
  };
  p.examples = {example("/data/a.txt", 1050, false), example("/data/a.txt", 1200, false),
                example("/data/a.txt", 3050, false), example("/data/b.txt", 5050, false),
                example("/data/a.txt", 1100, true)};
  const std::vector<LabelledEvent> events = {{1000, 1500}, {3000, 3500}, {5000, 5500}};
  const auto folds = gw::pipeline::leave_one_episode_out(p, "/data/a.txt", events);
  REQUIRE(folds.fold_of_event == std::vector<int>{0, 1, -1});  // event 2: no example from a.txt
  REQUIRE(folds.patterns.size() == 2);
  CHECK(folds.patterns[0].name == "fog@cv0");
  // Fold 0 keeps 3050 (positive), 5050 (other file) and the negative.
  REQUIRE(folds.patterns[0].examples.size() == 3);
  CHECK(folds.patterns[0].examples[0].source->start == 3050);
  CHECK(folds.patterns[0].examples[2].negative);
  CHECK(folds.patterns[1].examples.size() == 4);
  CHECK(folds.left_without_positives == 0);
}

TEST_CASE("an example belongs to every event its transforms' lead-in reads", "[eval]") {
  gw::config::PatternConfig p;
  p.name = "fog";
  gw::config::PatternExample after;  // cut right after a short event, reading it as lead-in
  after.source = gw::config::ExampleSource{"/data/a.txt", "daphnet", 1600, 1700};
  after.lead_in = 191;
  p.examples = {after};
  const auto folds =
      gw::pipeline::leave_one_episode_out(p, "/data/a.txt", {{1000, 1500}, {1800, 1900}});
  // 1600 - 191 = 1409 < 1500: it belongs to event 0, not to event 1.
  CHECK(folds.fold_of_event == std::vector<int>{0, -1});
  CHECK(folds.left_without_positives == 1);
}

TEST_CASE("a template cut from the evaluated recording is found there, lead-in included",
          "[eval]") {
  gw::sensors::Recording rec;
  rec.source = "/data/a.csv";
  rec.sample_rate_hz = 100;
  rec.channel_names = {"x", "y"};
  for (int s = 0; s < 3000; ++s) {
    rec.values.push_back(static_cast<float>((s * 7919) % 101));  // repeats only every 101
    rec.values.push_back(static_cast<float>((s * 104729) % 997));
  }
  gw::config::PatternConfig p;
  p.name = "shape";
  p.channels = {"y", "x"};  // the pattern's order, not the recording's
  p.length = 40;
  auto cut = [&](std::size_t first, bool negative) {
    gw::config::PatternExample e;
    e.negative = negative;
    e.template_file = "/patterns/t.csv";
    e.lead_in = 10;
    const std::size_t rows = 50;
    for (const std::size_t column : {std::size_t{1}, std::size_t{0}})
      for (std::size_t s = 0; s < rows; ++s) e.raw.push_back(rec.at(first + s, column));
    return e;
  };
  gw::config::PatternExample elsewhere = cut(1000, false);
  elsewhere.raw[60] += 1;  // one value differs: not from this recording
  gw::config::PatternExample window;
  window.source = gw::config::ExampleSource{"/data/b.txt", "daphnet", 200, 240};
  p.examples = {cut(1000, false), elsewhere, cut(2500, true), window};

  const auto located = gw::pipeline::locate_template_examples(p, rec, "/data/a.csv", "csv");
  REQUIRE(located.examples.size() == 4);
  REQUIRE(located.examples[0].source.has_value());
  CHECK(located.examples[0].source->file == "/data/a.csv");
  CHECK(located.examples[0].source->format == "csv");
  CHECK(located.examples[0].source->start == 1010);  // after the 10 lead-in rows
  CHECK(located.examples[0].source->end == 1050);
  CHECK(located.examples[0].raw == p.examples[0].raw);
  CHECK_FALSE(located.examples[1].source.has_value());
  REQUIRE(located.examples[2].source.has_value());
  CHECK(located.examples[2].source->start == 2510);
  CHECK(located.examples[3].source->file == "/data/b.txt");  // windows stay as they are

  // Located, the template is left out of the fold of the event it was cut from.
  const auto folds = gw::pipeline::leave_one_episode_out(located, "/data/a.csv", {{1000, 1100}});
  CHECK(folds.fold_of_event == std::vector<int>{0});
  CHECK(folds.patterns.at(0).examples.size() == 3);
}

TEST_CASE("recording and subject from file names", "[eval]") {
  using gw::pipeline::recording_name;
  const auto daphnet = recording_name("data/daphnet/S02R01.txt");
  CHECK(daphnet.recording == "S02R01");
  CHECK(daphnet.subject == "S02");
  CHECK(daphnet.known);
  const auto fall = recording_name("/x/F03_SA01_R01.txt.gz");
  CHECK(fall.recording == "F03_SA01_R01");
  CHECK(fall.subject == "SA01");
  CHECK(fall.activity == "F03");
  const auto walk = recording_name("GaPt03_01.txt.gz");
  CHECK(walk.recording == "GaPt03_01");
  CHECK(walk.subject == "GaPt03");
  // A template exported from a recording's window names that recording.
  const auto exported = recording_name("patterns/fog/positive_01_S03R02_20797.csv");
  CHECK(exported.recording == "S03R02");
  CHECK(exported.subject == "S03");
  const auto other = recording_name("/tmp/ward7_bed3.csv.gz");
  CHECK(other.recording == "ward7_bed3");
  CHECK(other.subject == "ward7_bed3");
  CHECK_FALSE(other.known);
}

TEST_CASE("leaving out a subject drops exactly that subject's examples", "[eval]") {
  gw::config::PatternConfig pattern;
  pattern.name = "p";
  auto example = [](bool negative, const std::string& file, bool window,
                    const std::string& subject = "") {
    gw::config::PatternExample e;
    e.negative = negative;
    if (window) e.source = gw::config::ExampleSource{file, "daphnet", 100, 228};
    else e.template_file = file;
    e.subject = subject;
    return e;
  };
  pattern.examples = {example(false, "data/S02R01.txt", true),
                      example(false, "fog/positive_02_S03R02_20797.csv", false),
                      example(true, "fog/negative_01_S02R02_4000.csv", false),
                      example(true, "fog/negative_02_S03R03_9000.csv", false),
                      example(false, "mine.csv", false, "S03"),  // subject: overrides the name
                      example(true, "misc.csv", false)};
  using gw::pipeline::LeaveOut;
  int left = -1;
  const auto without_s03 = gw::pipeline::without_group(pattern, LeaveOut::kSubject, "S03", &left);
  CHECK(left == 3);
  REQUIRE(without_s03.examples.size() == 3);
  CHECK(without_s03.name == "p");
  CHECK(without_s03.examples[0].source->file == "data/S02R01.txt");
  CHECK(without_s03.examples[1].template_file == "fog/negative_01_S02R02_4000.csv");
  CHECK(without_s03.examples[2].template_file == "misc.csv");
  const auto without_s02 = gw::pipeline::without_group(pattern, LeaveOut::kSubject, "S02", &left);
  CHECK(left == 2);
  CHECK(without_s02.examples.size() == 4);
  // By recording: only the scored recording's examples go.
  const auto without_r = gw::pipeline::without_group(pattern, LeaveOut::kRecording, "S02R02", &left);
  CHECK(left == 1);
  CHECK(without_r.examples.size() == 5);
  const auto nothing = gw::pipeline::without_group(pattern, LeaveOut::kNothing, "S02", &left);
  CHECK(left == 0);
  CHECK(nothing.examples.size() == pattern.examples.size());
}

TEST_CASE("pooled scores sum counts and take the median over all detections", "[eval]") {
  gw::pipeline::Score a, b;
  a.events = 2;
  a.detected = 2;
  a.true_alerts = 3;
  a.false_alerts = 1;
  a.latencies_s = {1.0, 3.0};
  a.hours = 0.5;
  b.events = 3;
  b.detected = 1;
  b.true_alerts = 1;
  b.false_alerts = 3;
  b.latencies_s = {2.0};
  b.hours = 1.5;
  const auto p = gw::pipeline::pooled_score({a, b});
  CHECK(p.events == 5);
  CHECK(p.detected == 3);
  CHECK(p.true_alerts == 4);
  CHECK(p.false_alerts == 4);
  CHECK(p.precision == Approx(0.5));
  CHECK(p.recall == Approx(0.6));
  CHECK(p.median_latency_s == Approx(2.0));
  const auto j = p.to_json();
  CHECK(j["true_alerts"].is_number_integer());
  CHECK(j["false_alerts_per_hour"].get<double>() == Approx(2.0));
}

TEST_CASE("trials: fall recall and false alerts per everyday trial, by activity", "[eval]") {
  const auto s = gw::pipeline::summarize_trials({{"F01_SA01_R01", "SA01", "F01", true, 1},
                                                 {"F02_SA01_R01", "SA01", "F02", true, 0},
                                                 {"D19_SA01_R01", "SA01", "D19", false, 2},
                                                 {"D19_SE01_R01", "SE01", "D19", false, 0},
                                                 {"D01_SE01_R01", "SE01", "D01", false, 0}});
  CHECK(s.fall_trials == 2);
  CHECK(s.fall_trials_detected == 1);
  CHECK(s.fall_recall == Approx(0.5));
  CHECK(s.everyday_trials == 3);
  CHECK(s.everyday_alerts == 2);
  CHECK(s.false_alerts_per_everyday_trial == Approx(2.0 / 3));
  REQUIRE(s.activities.size() == 4);
  CHECK(s.activities[0].activity == "D01");
  CHECK(s.activities[1].activity == "D19");
  CHECK(s.activities[1].trials == 2);
  CHECK(s.activities[1].trials_alerted == 1);
  CHECK(s.activities[1].alerts == 2);
}
