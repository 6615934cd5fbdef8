#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "experiment/results.hpp"
#include "experiment/scenario.hpp"

namespace fs = std::filesystem;
using namespace ina::exp;

namespace {

constexpr const char* kValid = R"(
[scenario]
name = "demo"
title = "Demo"

[topology]
hosts = 32
link_gbps = 40
ecn_kb = 50

[switch]
memory_mb = 2.5

[workload]
model = "B"
jobs = 2
workers_per_job = 4

[faults]
loss = 0.01

[run]
schemes = ["atp", "dsa"]
seeds = [3, 4]
verify = false
max_sim_ms = 500

[sweep]
key = "workload.workers_per_job"
values = [2, 4]
label = "workers"

[[series]]
name = "all-A"
"workload.model" = "A"

[[series]]
name = "mixed"
"workload.model" = "mixed"
"faults.loss" = 0.02

[output]
metrics = ["avg_jct_ms", "utilization"]
y_label = "JCT"
x_log = true
)";

// Parses `text` as demo.toml and returns the ScenarioError message ("" if none).
std::string error_of(const std::string& text) {
  try {
    parse_scenario(text, "demo.toml");
  } catch (const ScenarioError& e) {
    return e.what();
  }
  return "";
}

// The valid scenario with `line` ("key = value") set in [section]: it replaces
// the key's line if the section has one, else it is added.
std::string with(const std::string& section, const std::string& line) {
  std::string text = kValid;
  const std::string header = "\n[" + section + "]\n";
  auto start = text.find(header);
  if (start == std::string::npos) return text + header + line + "\n";
  start += header.size();
  const auto end = text.find("\n[", start);
  const std::string key = line.substr(0, line.find(' ') + 1);
  for (auto pos = start; pos < end; pos = text.find('\n', pos) + 1)
    if (text.compare(pos, key.size(), key) == 0) return text.replace(pos, text.find('\n', pos) - pos, line);
  return text.insert(start, line + "\n");
}

struct TempDir {
  fs::path path = fs::temp_directory_path() /
                  ("ina_test_" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()) + "_" +
                   ::testing::UnitTest::GetInstance()->current_test_info()->name());
  TempDir() { fs::remove_all(path); }
  ~TempDir() { fs::remove_all(path); }
};

}  // namespace

TEST(Scenario, ParsesValidFile) {
  const Scenario sc = parse_scenario(kValid, "demo.toml");
  EXPECT_EQ(sc.file, "demo.toml");
  EXPECT_EQ(sc.name, "demo");
  EXPECT_EQ(sc.title, "Demo");
  EXPECT_EQ(sc.base.hosts, 32);
  EXPECT_DOUBLE_EQ(sc.base.link_gbps, 40);
  EXPECT_DOUBLE_EQ(sc.base.ecn_kb, 50);
  EXPECT_DOUBLE_EQ(sc.base.memory_mb, 2.5);
  EXPECT_EQ(sc.base.model, "B");
  EXPECT_EQ(sc.base.jobs, 2);
  EXPECT_DOUBLE_EQ(sc.base.loss, 0.01);
  EXPECT_FALSE(sc.base.verify);
  EXPECT_DOUBLE_EQ(sc.base.max_sim_ms, 500);
  EXPECT_DOUBLE_EQ(sc.base.rtt_us, 10);  // untouched default
  EXPECT_EQ(sc.schemes, (std::vector<std::string>{"atp", "dsa"}));
  EXPECT_EQ(sc.seeds, (std::vector<uint64_t>{3, 4}));
  EXPECT_EQ(sc.sweep_key, "workload.workers_per_job");
  EXPECT_EQ(sc.sweep_values, (std::vector<std::string>{"2", "4"}));
  EXPECT_EQ(sc.x_label, "workers");
  ASSERT_EQ(sc.series.size(), 2u);
  EXPECT_EQ(sc.series[1].name, "mixed");
  EXPECT_EQ(sc.series[1].overrides.at("workload.model"), "mixed");
  EXPECT_EQ(sc.series[1].overrides.at("faults.loss"), "0.02");
  EXPECT_EQ(sc.metrics, (std::vector<std::string>{"avg_jct_ms", "utilization"}));
  EXPECT_EQ(sc.y_label, "JCT");
  EXPECT_TRUE(sc.x_log);
}

TEST(Scenario, EmptyFileGivesDefaults) {
  const Scenario sc = parse_scenario("", "empty.toml");
  EXPECT_EQ(sc.base.hosts, 64);
  EXPECT_EQ(sc.schemes, (std::vector<std::string>{"switchml", "atp", "dsa"}));
  ASSERT_EQ(expand(sc).size(), 1u);
  EXPECT_EQ(expand(sc)[0].x, 0);
}

TEST(Scenario, ErrorsNameFileFieldAndValue) {
  struct Case {
    std::string text, field, value;
  };
  const std::vector<Case> cases = {
      {with("topology", "colour = 3"), "topology.colour", "(value: 3)"},                // unknown key
      {with("network", "mtu = 1500"), "'network'", "mtu = 1500"},                       // unknown section
      {with("topology", "link_gbps = -5"), "topology.link_gbps", "must be in [0.001, 100000] (Gbps: 1 Mbps to 100 Tbps) (value: -5)"},
      {with("topology", "hosts = \"many\""), "topology.hosts", "expected an integer, got string (value: many)"},
      {with("workload", "jobs = 9"), "workload.jobs", "9 jobs x"},                      // workers > hosts
      {with("run", "schemes = [\"dsa\", \"sharp\"]"), "run.schemes", "(value: sharp)"},
      {with("switch", "payload_bytes = 258"), "switch.payload_bytes", "multiple of 4"},
      {with("workload", "model = \"C\""), "workload.model", "(value: C)"},
      {with("faults", "dup = 1.5"), "faults.dup", "must be in [0, 1] (value: 1.5)"},
      {with("topology", "kind = \"torus\""), "topology.kind", "(value: torus)"},
      {with("run", "verify = 1"), "run.verify", "expected a boolean"},
      {with("run", "seeds = []"), "run.seeds", "must not be empty"},
      {with("topology", "ecn_kb = 2048"), "topology.ecn_kb", "(value: 2048)"},
      {with("workload", "eq1_priority = \"layer\""), "workload.eq1_priority", "(value: layer)"},
  };
  for (const Case& c : cases) {
    const std::string msg = error_of(c.text);
    SCOPED_TRACE(c.field + " -> " + msg);
    EXPECT_NE(msg.find("demo.toml"), std::string::npos);
    EXPECT_NE(msg.find(c.field), std::string::npos);
    EXPECT_NE(msg.find(c.value), std::string::npos);
  }
}

TEST(Scenario, ExactMessageForNegativeBandwidth) {
  EXPECT_EQ(error_of("[topology]\nlink_gbps = -5\n"),
            "demo.toml: field 'topology.link_gbps': must be in [0.001, 100000] (Gbps: 1 Mbps to 100 Tbps) (value: -5)");
}

// DSA's Eq. 1 granularity means nothing to a sparse run: refused there,
// not ignored.
TEST(Scenario, Eq1PriorityInASparseRunIsRefused) {
  EXPECT_EQ(error_of("[workload]\nsparse_model = \"ncf\"\neq1_priority = \"packet\"\n"),
            "demo.toml: field 'workload.eq1_priority': applies to the dense schemes (DSA's Eq. 1), not a sparse run "
            "(value: packet)");
}

// The multi-switch collectives' settings mean nothing to a sparse run either;
// the refusal names the value given.
TEST(Scenario, RingSettingsInASparseRunAreRefused) {
  const std::string sparse = "[workload]\njobs = 1\nsparse_model = \"ncf\"\n";
  const std::string zebra = "[run]\nschemes = [\"zebra\"]\n";
  EXPECT_EQ(error_of(sparse + "rina_ag_relay = \"agent\"\n" + zebra),
            "demo.toml: field 'workload.rina_ag_relay': does not apply to sparse workloads (workload.sparse_model) "
            "(value: agent)");
  EXPECT_EQ(error_of(sparse + "rina_transport = \"aimd\"\n" + zebra),
            "demo.toml: field 'workload.rina_transport': does not apply to sparse workloads (workload.sparse_model) "
            "(value: aimd)");
  EXPECT_EQ(error_of(sparse + zebra + "step_records = \"out/steps\"\n"),
            "demo.toml: field 'run.step_records': does not apply to sparse workloads (workload.sparse_model) "
            "(value: out/steps)");
  EXPECT_EQ(error_of(sparse + zebra + "queue_trace = \"out/q\"\nqueue_trace_links = \"h0->tor0\"\n"),
            "demo.toml: field 'run.queue_trace': does not apply to sparse workloads (workload.sparse_model) "
            "(value: out/q)");
  EXPECT_EQ(error_of(sparse + "[transport]\nring_min_rto_us = 1000\n" + zebra),
            "demo.toml: field 'transport.ring_min_rto_us': does not apply to sparse workloads (workload.sparse_model) "
            "(value: 1000)");
}

// Nor does it mean anything to a run without DSA.
TEST(Scenario, Eq1PriorityWithoutDsaIsRefused) {
  EXPECT_EQ(error_of("[workload]\neq1_priority = \"packet\"\n[run]\nschemes = [\"atp\", \"switchml\"]\n"),
            "demo.toml: field 'workload.eq1_priority': applies to a scheme computing DSA's Eq. 1, and run.schemes has "
            "none (value: packet)");
  EXPECT_EQ(error_of("[workload]\neq1_priority = \"packet\"\n[run]\nschemes = [\"atp\", \"dsa\"]\n"), "");
}

TEST(Scenario, TooManyWorkersNamesBothFields) {
  const std::string msg = error_of("[topology]\nhosts = 16\n[workload]\njobs = 3\nworkers_per_job = 8\n");
  EXPECT_EQ(msg,
            "demo.toml: field 'workload.jobs': 3 jobs x 8 workers need 24 hosts but topology.hosts is 16 "
            "(value: 3)");
}

TEST(Scenario, BadSweepValueNamesSweepAndValue) {
  std::string text = kValid;
  text.replace(text.find("values = [2, 4]"), 15, "values = [2, 65]");
  const std::string msg = error_of(text);
  EXPECT_NE(msg.find("demo.toml [series 'all-A', sweep workload.workers_per_job = 65]"), std::string::npos) << msg;
  EXPECT_NE(msg.find("field 'workload.workers_per_job': must be in [1, 64] (value: 65)"), std::string::npos)
      << msg;

  const std::string not_numeric = error_of("[sweep]\nkey = \"workload.model\"\nvalues = [\"A\", \"B\"]\n");
  EXPECT_NE(not_numeric.find("field 'sweep.values': must be numeric"), std::string::npos) << not_numeric;
  EXPECT_NE(not_numeric.find("(value: A)"), std::string::npos) << not_numeric;

  const std::string bad_key = error_of("[sweep]\nkey = \"workload.colour\"\nvalues = [1]\n");
  EXPECT_NE(bad_key.find("field 'sweep.key': not a settings key (value: workload.colour)"), std::string::npos)
      << bad_key;
  EXPECT_NE(error_of("[sweep]\nvalues = [1]\n").find("sweep.key"), std::string::npos);
}

TEST(Scenario, SeriesErrorsNameTheSeries) {
  const std::string msg = error_of(kValid + std::string("[[series]]\nname = \"big\"\n\"workload.jobs\" = 50\n"));
  EXPECT_EQ(msg.rfind("demo.toml [series 'big', sweep workload.workers_per_job = 2]: field 'workload.jobs': 50 jobs", 0),
            0u)
      << msg;
  const std::string typed = error_of("[[series]]\nname = \"x\"\n\"workload.jobs\" = \"2\"\n");
  EXPECT_NE(typed.find("expected an integer, got string (value: 2)"), std::string::npos) << typed;
  const std::string unknown = error_of("[[series]]\nname = \"x\"\n\"run.schemes\" = [\"dsa\"]\n");
  EXPECT_NE(unknown.find("field 'run.schemes': unknown key"), std::string::npos) << unknown;
  EXPECT_NE(error_of("[[series]]\n\"workload.model\" = \"A\"\n").find("series.name"), std::string::npos);
}

TEST(Scenario, SyntaxErrorNamesFileAndLine) {
  const std::string msg = error_of("[topology]\nhosts = 4\nlink_gbps = = 5\n");
  EXPECT_EQ(msg.rfind("demo.toml:3:", 0), 0u) << msg;
  EXPECT_NE(msg.find("syntax error"), std::string::npos) << msg;
}

TEST(Scenario, MissingFileNamesPath) {
  try {
    load_scenario_file("/nonexistent/nowhere.toml");
    FAIL() << "no error";
  } catch (const ScenarioError& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent/nowhere.toml"), std::string::npos);
  }
}

TEST(Scenario, ExpandAppliesSeriesThenSweep) {
  const auto points = expand(parse_scenario(kValid, "demo.toml"));
  ASSERT_EQ(points.size(), 4u);  // 2 series x 2 sweep values
  EXPECT_EQ(points[0].series, "all-A");
  EXPECT_EQ(points[0].x, 2);
  EXPECT_EQ(points[0].settings.workers_per_job, 2);
  EXPECT_EQ(points[0].settings.model, "A");
  EXPECT_DOUBLE_EQ(points[0].settings.loss, 0.01);
  EXPECT_EQ(points[3].series, "mixed");
  EXPECT_EQ(points[3].x, 4);
  EXPECT_EQ(points[3].settings.workers_per_job, 4);
  EXPECT_EQ(points[3].settings.model, "mixed");
  EXPECT_DOUBLE_EQ(points[3].settings.loss, 0.02);
  EXPECT_EQ(points[3].settings.hosts, 32);  // base values carry through
}

TEST(Scenario, SweepOverridesSeries) {
  Scenario sc;
  sc.file = "mem.toml";
  sc.series = {{"s", {{"switch.memory_mb", "1"}}}};
  sc.sweep_key = "switch.memory_mb";
  sc.sweep_values = {"0.5", "8"};
  const auto points = expand(sc);
  ASSERT_EQ(points.size(), 2u);
  EXPECT_DOUBLE_EQ(points[0].settings.memory_mb, 0.5);
  EXPECT_DOUBLE_EQ(points[1].x, 8);
}

TEST(Scenario, ApplySetting) {
  Settings s;
  apply_setting(s, "topology.hosts", "128", "--set");
  apply_setting(s, "faults.reorder", "0.25", "--set");
  apply_setting(s, "run.verify", "false", "--set");
  apply_setting(s, "workload.model", "mixed", "--set");
  apply_setting(s, "topology.rtt_us", "7", "--set");
  EXPECT_EQ(s.hosts, 128);
  EXPECT_DOUBLE_EQ(s.reorder, 0.25);
  EXPECT_FALSE(s.verify);
  EXPECT_EQ(s.model, "mixed");
  EXPECT_DOUBLE_EQ(s.rtt_us, 7);

  auto error = [&](const std::string& key, const std::string& value) {
    try {
      apply_setting(s, key, value, "--set");
    } catch (const ScenarioError& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  EXPECT_EQ(error("topology.hosts", "12x"), "--set: field 'topology.hosts': expected an integer (value: 12x)");
  EXPECT_EQ(error("topology.hosts", "5000"), "--set: field 'topology.hosts': must be in [1, 4096] (value: 5000)");
  EXPECT_EQ(error("faults.loss", "nan"), "--set: field 'faults.loss': must be finite (value: nan)");
  EXPECT_NE(error("topology.colour", "red").find("unknown key"), std::string::npos);
  EXPECT_NE(error("nosuch.key", "1").find("unknown section [nosuch]"), std::string::npos);
  EXPECT_EQ(s.hosts, 128);  // failed settings leave the value alone
}

TEST(Scenario, Validate) {
  Settings s;
  EXPECT_NO_THROW(validate(s, "x"));
  s.jobs = 9;
  EXPECT_THROW(validate(s, "x"), ScenarioError);
  s.jobs = 1;
  s.ecn_kb = s.queue_kb + 1;
  EXPECT_THROW(validate(s, "x"), ScenarioError);
}

// The named variant with the paper's megabytes read as decimal: 5 000 000
// bytes of memory, partitions of 4 000 000 (DNN A) and 2 000 000 (DNN B).
TEST(Scenario, DsaFig8DecimalMegabytesVariant) {
  const Scenario sc = load_scenario_file(
      (fs::path(INA_SOURCE_DIR) / "scenarios" / "dsa" / "variant" / "fig8_decimal_mb.toml").string());
  const auto points = expand(sc);
  ASSERT_EQ(points.size(), 16u);  // all-A and all-B, 1..8 jobs
  for (const auto& p : points) {
    EXPECT_DOUBLE_EQ(p.settings.memory_mb * 1024 * 1024, 5e6);
    const double partition_bytes = p.settings.partition_mb * 1024 * 1024;
    EXPECT_DOUBLE_EQ(partition_bytes, p.settings.model == "A" ? 4e6 : 2e6) << p.settings.model;
  }
}

TEST(Scenario, DsaScenariosLoadAndExpand) {
  const fs::path dir = fs::path(INA_SOURCE_DIR) / "scenarios" / "dsa";
  const std::map<std::string, size_t> expected_points = {
      {"fig8.toml", 24}, {"fig9.toml", 12}, {"fig10.toml", 2},
      {"fig11.toml", 2}, {"loss.toml", 5},  {"loss_ps.toml", 5}, {"memory.toml", 12},
      {"calibrate.toml", 15}, {"split_join.toml", 16}};
  size_t files = 0;
  for (const auto& entry : fs::directory_iterator(dir)) {
    if (entry.path().extension() != ".toml") continue;
    ++files;
    SCOPED_TRACE(entry.path().string());
    Scenario sc;
    ASSERT_NO_THROW(sc = load_scenario_file(entry.path().string()));
    const auto points = expand(sc);
    EXPECT_FALSE(points.empty());
    EXPECT_EQ(sc.seeds, (std::vector<uint64_t>{1, 2}));
    for (const auto& p : points) {
      EXPECT_EQ(p.settings.hosts, 64);
      EXPECT_DOUBLE_EQ(p.settings.link_gbps, 100);
      EXPECT_DOUBLE_EQ(p.settings.rtt_us, 10);
      if (sc.sweep_key != "switch.memory_mb") {
        EXPECT_DOUBLE_EQ(p.settings.memory_mb, 5);
      }
      EXPECT_EQ(p.settings.payload_bytes + p.settings.header_bytes, 306);
      EXPECT_DOUBLE_EQ(p.settings.queue_kb, 1024);
      EXPECT_DOUBLE_EQ(p.settings.ecn_kb, 100);
      EXPECT_EQ(p.settings.eq1_priority, "tensor");  // §V: "a tensor's priority"
    }
    auto it = expected_points.find(entry.path().filename().string());
    if (it != expected_points.end()) {
      EXPECT_EQ(points.size(), it->second);
    }
  }
  EXPECT_GE(files, expected_points.size());
  // The calibrated overlay applies to every one of them.
  for (const auto& [name, n] : expected_points) {
    SCOPED_TRACE(name);
    const Scenario c = load_overlay_file(load_scenario_file((dir / name).string()),
                                         (dir / "overlay" / "calibrated.toml").string());
    EXPECT_EQ(expand(c).size(), n);
    EXPECT_EQ(c.name.substr(c.name.size() - 11), "-calibrated");
  }

  const Scenario ps = load_scenario_file((dir / "loss_ps.toml").string());
  EXPECT_EQ(ps.schemes, (std::vector<std::string>{"atp", "dsa"}));
  EXPECT_DOUBLE_EQ(expand(ps).back().settings.ps_loss, 0.01);
}

TEST(Results, AverageOverSeeds) {
  const std::vector<Record> per_seed = {
      {"s", "dsa", 1, 1, {{"avg_jct_ms", 10}, {"utilization", 0.5}}},
      {"s", "atp", 1, 1, {{"avg_jct_ms", 7}}},
      {"s", "dsa", 1, 1, {{"avg_jct_ms", 20}, {"utilization", 0.7}}},
      {"s", "dsa", 2, 1, {{"avg_jct_ms", 5}}},
      {"s", "dsa", 1, 2, {{"avg_jct_ms", 30}}},  // already an average of 2 seeds
  };
  const auto avg = average_over_seeds(per_seed);
  ASSERT_EQ(avg.size(), 3u);
  EXPECT_EQ(avg[0].scheme, "dsa");
  EXPECT_EQ(avg[0].x, 1);
  EXPECT_EQ(avg[0].seeds, 4);
  EXPECT_DOUBLE_EQ(avg[0].metrics.at("avg_jct_ms"), (10 + 20 + 2 * 30) / 4.0);
  EXPECT_DOUBLE_EQ(avg[0].metrics.at("utilization"), 0.6);
  EXPECT_EQ(avg[1].scheme, "atp");
  EXPECT_DOUBLE_EQ(avg[1].metrics.at("avg_jct_ms"), 7);
  EXPECT_EQ(avg[2].x, 2);
  EXPECT_EQ(avg[2].seeds, 1);
}

TEST(Results, FormatTable) {
  const std::vector<Record> records = {
      {"A", "dsa", 2, 1, {{"avg_jct_ms", 1.5}}},
      {"A", "atp", 2, 1, {{"avg_jct_ms", 2.25}}},
      {"A", "dsa", 1, 1, {{"avg_jct_ms", 1}}},
      {"B", "dsa", 1, 1, {{"utilization", 0.5}}},
  };
  const std::string table = format_table(records, "avg_jct_ms");
  std::istringstream lines(table);
  std::string header, row1, row2, extra;
  std::getline(lines, header);
  std::getline(lines, row1);
  std::getline(lines, row2);
  EXPECT_FALSE(std::getline(lines, extra));  // series B has no avg_jct_ms
  EXPECT_NE(header.find("series"), std::string::npos);
  EXPECT_LT(header.find("dsa"), header.find("atp"));
  EXPECT_NE(row1.find("1"), std::string::npos);
  EXPECT_NE(row1.find("-"), std::string::npos);  // no atp record at x = 1
  EXPECT_NE(row2.find("2.25"), std::string::npos);
  EXPECT_EQ(header.size(), row1.size());
}

// A metric of output.metrics that no record has (samples_per_s for a scaled
// gradient) gets no PNG, and the results and the other plots are written.
TEST(Results, AMetricNoRecordHasGetsNoPlot) {
  TempDir tmp;
  Scenario sc = parse_scenario(kValid, "demo.toml");
  sc.metrics = {"avg_jct_ms", "samples_per_s"};
  const std::vector<Record> records = {{"all-A", "atp", 2.0, 1, {{"avg_jct_ms", 3.0}}}};
  const auto files = write_results((tmp.path / "out").string(), sc, records);
  ASSERT_EQ(files.size(), 3u);
  EXPECT_TRUE(fs::exists(tmp.path / "out" / "avg_jct_ms.png"));
  EXPECT_FALSE(fs::exists(tmp.path / "out" / "samples_per_s.png"));
  EXPECT_TRUE(fs::exists(tmp.path / "out" / "results.csv"));
}

TEST(Results, WritesJsonCsvAndPng) {
  TempDir tmp;
  Scenario sc = parse_scenario(kValid, "demo.toml");
  std::vector<Record> records;
  for (const std::string series : {"all-A", "mixed"})
    for (const std::string scheme : {"atp", "dsa"})
      for (double x : {2.0, 4.0})
        records.push_back({series, scheme, x, 2, {{"avg_jct_ms", x * (scheme == "dsa" ? 1.0 : 1.5)}}});
  records[0].metrics["utilization"] = 0.75;

  const auto files = write_results((tmp.path / "out").string(), sc, records);
  ASSERT_EQ(files.size(), 4u);  // json, csv, one PNG per metric
  for (const auto& f : files) EXPECT_TRUE(fs::exists(f)) << f;

  std::ifstream json_in(tmp.path / "out" / "results.json");
  const auto json = nlohmann::json::parse(json_in);
  ASSERT_TRUE(json.is_array());
  ASSERT_EQ(json.size(), records.size());
  EXPECT_EQ(json[0]["series"], "all-A");
  EXPECT_EQ(json[0]["scheme"], "atp");
  EXPECT_EQ(json[0]["x"], 2.0);
  EXPECT_EQ(json[0]["seeds"], 2);
  EXPECT_DOUBLE_EQ(json[0]["avg_jct_ms"].get<double>(), 3.0);
  EXPECT_DOUBLE_EQ(json[0]["utilization"].get<double>(), 0.75);
  EXPECT_FALSE(json[1].contains("utilization"));

  std::ifstream csv_in(tmp.path / "out" / "results.csv");
  std::string header, first, second;
  std::getline(csv_in, header);
  std::getline(csv_in, first);
  std::getline(csv_in, second);
  EXPECT_EQ(header, "series,scheme,x,seeds,avg_jct_ms,utilization");
  EXPECT_EQ(first, "all-A,atp,2,2,3,0.75");
  EXPECT_EQ(second, "all-A,atp,4,2,6,");

  for (const std::string metric : {"avg_jct_ms", "utilization"}) {
    const fs::path png = tmp.path / "out" / (metric + ".png");
    ASSERT_TRUE(fs::exists(png));
    EXPECT_GT(fs::file_size(png), 1000u);
    std::ifstream in(png, std::ios::binary);
    char magic[4] = {};
    in.read(magic, 4);
    EXPECT_EQ(std::string(magic + 1, 3), "PNG");
    EXPECT_TRUE(fs::exists(tmp.path / "out" / (metric + ".gp")));
    EXPECT_TRUE(fs::exists(tmp.path / "out" / (metric + ".dat")));
  }
}

TEST(Results, PlotWithoutSweepAndErrors) {
  TempDir tmp;
  fs::create_directories(tmp.path);
  const Scenario sc = load_scenario_file((fs::path(INA_SOURCE_DIR) / "scenarios/dsa/fig10.toml").string());
  std::vector<Record> records;
  for (const std::string series : {"DNN A", "DNN B"})
    for (const auto& scheme : sc.schemes) records.push_back({series, scheme, 0, 2, {{"utilization", 0.8}}});
  const std::string png = (tmp.path / "utilization.png").string();
  plot_metric(png, sc, records, "utilization");
  EXPECT_GT(fs::file_size(png), 1000u);
  EXPECT_THROW(plot_metric(png, sc, records, "avg_jct_ms"), std::runtime_error);  // nothing to plot
}

TEST(Results, GnuplotFailureIsReported) {
  TempDir tmp;
  fs::create_directories(tmp.path);
  Scenario sc;
  sc.sweep_key = "faults.loss";
  sc.x_log = true;  // x = 0 has no place on a log axis: gnuplot rejects the range
  try {
    plot_metric((tmp.path / "m.png").string(), sc, {{"", "dsa", 0, 1, {{"m", 1}}}}, "m");
    FAIL() << "no error";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("exit status 1"), std::string::npos) << e.what();
  }
  EXPECT_TRUE(fs::exists(tmp.path / "m.gp"));
}

TEST(Scenario, KeepSeriesRunsTheNamedOnesInTheFilesOrder) {
  const char* toml =
      "[run]\nschemes = [\"atp\"]\n"
      "[[series]]\nname = \"a\"\n\"workload.jobs\" = 1\n"
      "[[series]]\nname = \"b c\"\n\"workload.jobs\" = 2\n"
      "[[series]]\nname = \"d\"\n\"workload.jobs\" = 3\n";
  auto sc = ina::exp::parse_scenario(toml, "s.toml");
  ina::exp::keep_series(sc, {"d", "b c"});
  ASSERT_EQ(sc.series.size(), 2u);
  EXPECT_EQ(sc.series[0].name, "b c");
  EXPECT_EQ(sc.series[1].name, "d");
  const auto pts = ina::exp::expand(sc);
  ASSERT_EQ(pts.size(), 2u);
  EXPECT_EQ(pts[0].settings.jobs, 2);
  EXPECT_EQ(pts[1].settings.jobs, 3);
  // No name: every series.
  auto all = ina::exp::parse_scenario(toml, "s.toml");
  ina::exp::keep_series(all, {});
  EXPECT_EQ(all.series.size(), 3u);
}

TEST(Scenario, KeepSeriesNamesTheFileAndItsSeriesForAnUnknownName) {
  const char* toml = "[[series]]\nname = \"a\"\n[[series]]\nname = \"b\"\n";
  auto sc = ina::exp::parse_scenario(toml, "s.toml");
  try {
    ina::exp::keep_series(sc, {"a", "z"});
    FAIL() << "no error";
  } catch (const ina::exp::ScenarioError& e) {
    EXPECT_STREQ(e.what(), "s.toml: --series 'z': no such series (the file has 'a', 'b')");
  }
  EXPECT_EQ(sc.series.size(), 2u) << "unchanged";
  auto none = ina::exp::parse_scenario("", "e.toml");
  try {
    ina::exp::keep_series(none, {"a"});
    FAIL() << "no error";
  } catch (const ina::exp::ScenarioError& e) {
    EXPECT_STREQ(e.what(), "e.toml: --series 'a': no such series (the file has none: no [[series]] table)");
  }
}
