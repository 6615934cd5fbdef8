// What a person reads of the results: numbers in tables, metric labels,
// scheme colours, and the gnuplot scripts behind the PNGs.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "cli_util.hpp"
#include "control/grid.hpp"
#include "experiment/format.hpp"
#include "experiment/plot_style.hpp"
#include "experiment/results.hpp"
#include "schemes/registry.hpp"

namespace fs = std::filesystem;
using namespace ina::exp;

namespace {

struct TempDir {
  fs::path path = fs::temp_directory_path() /
                  ("ina_test_fmt_" + std::to_string(::getpid()) + "_" +
                   ::testing::UnitTest::GetInstance()->current_test_info()->name());
  TempDir() {
    fs::remove_all(path);
    fs::create_directories(path);
  }
  ~TempDir() { fs::remove_all(path); }
};

std::string slurp(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), {});
}

bool has(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

}  // namespace

TEST(Format, FixedNotationFourSignificantDigitsNoNoise) {
  EXPECT_EQ(format_number(1.5252916520000002), "1.525");
  EXPECT_EQ(format_number(12345.0), "12345");  // thousands plain, the integer part kept whole
  EXPECT_EQ(format_number(1e4), "10000");      // not 1e+04
  EXPECT_EQ(format_number(1e-7), "0.0000001");
  EXPECT_EQ(format_number(0), "0");
  EXPECT_EQ(format_number(-0.0), "0");
  EXPECT_EQ(format_number(0.1 + 0.2), "0.3");  // 0.30000000000000004
  EXPECT_EQ(format_number(2.0), "2");
  EXPECT_EQ(format_number(-2.5), "-2.5");
  EXPECT_EQ(format_number(999.96), "1000");
  EXPECT_EQ(format_number(0.000123456), "0.0001235");
  EXPECT_EQ(format_number(123456789.0), "123456789");
  EXPECT_EQ(format_number(1.5e-12), "1.5e-12");
  EXPECT_EQ(format_number(2e15), "2e+15");
  EXPECT_EQ(format_number(std::nan("")), "nan");
  EXPECT_EQ(format_number(-std::numeric_limits<double>::infinity()), "-inf");
  EXPECT_EQ(format_number(3.14159265, 2), "3.1");
  EXPECT_EQ(format_number(3.14159265, 0), "3");
}

TEST(Format, TablesUseTheFormatterForCellsAndX) {
  const std::vector<Record> records = {
      {"", "atp", 0.1 + 0.2, 1, {{"m", 1e4}}},
      {"", "dsa", 0.1 + 0.2, 1, {{"m", 1.5252916520000002}}},
  };
  const std::string t = format_table(records, "m", "loss");
  EXPECT_EQ(t, "loss    atp    dsa\n 0.3  10000  1.525\n") << t;
}

TEST(Format, TablesForEveryMetric) {
  const std::vector<Record> records = {
      {"", "atp", 8, 1, {{"avg_jct_ms", 2.5}, {"utilization", 0.5}, {"retransmits", 7}}},
      {"", "dsa", 8, 1, {{"avg_jct_ms", 2}, {"utilization", 0.75}, {"retransmits", 0}}},
  };
  // The scenario's metrics first, in its order, then every other one by name.
  EXPECT_EQ(metric_names(records, {"utilization", "absent"}),
            (std::vector<std::string>{"utilization", "avg_jct_ms", "retransmits"}));
  const std::string t = format_tables(records, {"avg_jct_ms", "utilization"}, "jobs");
  EXPECT_EQ(t,
            "average JCT (ms) [avg_jct_ms] by jobs and scheme:\n"
            "jobs  atp  dsa\n"
            "   8  2.5    2\n"
            "\n"
            "utilization (aggregation throughput / link rate) [utilization] by jobs and scheme:\n"
            "jobs  atp   dsa\n"
            "   8  0.5  0.75\n")
      << t;
}

TEST(PlotStyle, MetricLabelsFromTheNameAndATable) {
  EXPECT_EQ(metric_label("throughput_gbps"), "throughput (Gbit/s)");
  EXPECT_EQ(metric_label("job4_jct_ms"), "job 4 JCT (ms)");
  EXPECT_EQ(metric_label("avg_jct_ms"), "average JCT (ms)");
  EXPECT_EQ(metric_label("job12_throughput_gbps"), "job 12 throughput (Gbit/s)");
  EXPECT_EQ(metric_label("job0_sync_ms"), "job 0 sync time (ms)");
  EXPECT_EQ(metric_label("feasible_switch_agg_gbps"), "feasible switch aggregation (Gbit/s)");
  EXPECT_EQ(metric_label("agg_throughput_gbps"), "aggregation throughput (Gbit/s)");
  EXPECT_EQ(metric_label("ct_bti_s"), "CT-BTI (s)");
  EXPECT_EQ(metric_label("solve_s"), "solve (s)");
  EXPECT_EQ(metric_label("gradient_mb"), "gradient (MB)");
  EXPECT_EQ(metric_label("ecn_marks_switch"), "ECN marks switch");
  EXPECT_EQ(metric_label("hops"), "hops");
  EXPECT_EQ(metric_label("s"), "s");        // a lone unit word is a name, not a unit
  EXPECT_EQ(metric_label("jobs"), "jobs");  // not "job s"
}

TEST(PlotStyle, EverySchemeHasItsOwnFixedColour) {
  std::vector<std::string> names;
  for (const auto& s : ina::schemes::all()) names.push_back(s.name);
  for (const auto& n : ina::control::grid::scheme_names())
    if (std::find(names.begin(), names.end(), n) == names.end()) names.push_back(n);
  std::set<std::string> in_table;
  for (const auto& [n, st] : scheme_palette()) in_table.insert(n);
  std::map<std::string, std::string> owner;  // colour -> scheme
  for (const auto& n : names) {
    EXPECT_TRUE(in_table.count(n)) << n << " has no entry of its own in the palette";
    const SchemeStyle st = scheme_style(n);
    ASSERT_EQ(st.colour.size(), 7u) << n;
    const auto [it, fresh] = owner.emplace(st.colour, n);
    EXPECT_TRUE(fresh) << n << " and " << it->second << " share " << st.colour;
  }
  // The pairs a reader could not tell apart before.
  EXPECT_NE(scheme_style("atp").colour, scheme_style("h-ar").colour);
  EXPECT_NE(scheme_style("switchml").colour, scheme_style("geryon").colour);
  // P4INC-AOI's schedulers: distinct among themselves; a -max variant looks like its base.
  std::set<std::string> aoi;
  for (const char* v : {"INC-TW", "INC-FCFS", "noINC-TW", "noINC-FCFS", "MILP", "noINC-MILP", "INC-TW-NoRecon"})
    EXPECT_TRUE(aoi.insert(scheme_style(v).colour).second) << v;
  EXPECT_EQ(scheme_style("INC-TW-need").colour, scheme_style("INC-TW").colour);
  EXPECT_TRUE(scheme_style("INC-TW-need").dashed);
  EXPECT_FALSE(scheme_style("INC-TW").dashed);
  // A name without an entry: a reserve colour, the same every time.
  EXPECT_EQ(scheme_style("not-a-scheme").colour, scheme_style("not-a-scheme").colour);
}

// A scenario for plotting alone, its sweep over `key`.
static Scenario plot_scenario(const std::string& key) {
  Scenario sc;
  sc.file = "t.toml";
  sc.name = "t";
  sc.sweep_key = key;
  return sc;
}

// The gnuplot scripts: a scheme's colour is the same in every plot, each
// title names its metric, the key sits below the plot, the second metric's
// axis has its own label, and whole-number axes get whole-number tics.
TEST(PlotStyle, GnuplotScriptsLabelsColoursKeyAndIntegerTics) {
  TempDir tmp;
  Scenario sc = plot_scenario("workload.workers_per_job");
  sc.title = "Sweep";
  sc.schemes = {"atp", "h-ar"};
  sc.x_label = "workers";
  sc.metrics = {"throughput_gbps", "retransmits"};
  sc.y_label = "throughput per worker (Gbps)";
  std::vector<Record> records;
  for (const std::string scheme : {"atp", "h-ar"})
    for (double x : {2.0, 4.0, 8.0})
      records.push_back({"", scheme, x, 1, {{"throughput_gbps", 0.1 * x + 0.05}, {"retransmits", x / 2}}});
  write_results(tmp.path.string(), sc, records);
  const std::string a = slurp(tmp.path / "throughput_gbps.gp"), b = slurp(tmp.path / "retransmits.gp");
  for (const std::string* gp : {&a, &b}) {
    EXPECT_TRUE(has(*gp, "lc rgb \"" + scheme_style("atp").colour + "\"")) << *gp;
    EXPECT_TRUE(has(*gp, "lc rgb \"" + scheme_style("h-ar").colour + "\"")) << *gp;
    EXPECT_TRUE(has(*gp, "set key below")) << *gp;
    EXPECT_TRUE(has(*gp, "set xtics (2, 4, 8)\n")) << *gp;  // workers: at the swept values, no 2.5
  }
  EXPECT_TRUE(has(a, "title \"Sweep: throughput (Gbit/s)\"")) << a;
  EXPECT_TRUE(has(b, "title \"Sweep: retransmits\"")) << b;
  EXPECT_TRUE(has(a, "set ylabel \"throughput per worker (Gbps)\"")) << a;  // output.y_label: the first metric's
  EXPECT_TRUE(has(b, "set ylabel \"retransmits\"")) << b;
  EXPECT_FALSE(has(a, "set ytics")) << a;                 // fractional values: gnuplot's own tics
  EXPECT_TRUE(has(b, "set ytics 1\n")) << b;               // counts 1..4: one per whole number
  EXPECT_TRUE(fs::file_size(tmp.path / "retransmits.png") > 1000);

  // Many whole-number x values: a whole-number step instead of one tic per value.
  records.clear();
  for (int x = 1; x <= 40; ++x) records.push_back({"", "atp", static_cast<double>(x), 1, {{"retransmits", 3}}});
  plot_metric((tmp.path / "many.png").string(), sc, records, "retransmits");
  const std::string c = slurp(tmp.path / "many.gp");
  EXPECT_TRUE(has(c, "set xtics 5\n")) << c;
  EXPECT_TRUE(has(c, "set format x \"%.0f\"")) << c;
}

// The key's layout: two entries of 15 characters a row fit a panel, two of
// 17 do not. Ten of 17 then take ten rows, and the canvas grows by 18 px a
// row beyond four (440 + 6 x 18), so the plot keeps its height.
TEST(PlotStyle, KeyRowsFitTheNamesAndGrowTheCanvas) {
  TempDir tmp;
  const Scenario sc = plot_scenario("x");
  auto gp_of = [&](size_t names, size_t chars) {
    std::vector<Record> records;
    for (size_t i = 0; i < names; ++i) {
      std::string n = std::to_string(i);
      n.insert(0, chars - n.size(), 's');
      for (double x : {1.0, 2.0}) records.push_back({"", n, x, 1, {{"m", x}}});
    }
    plot_metric((tmp.path / "k.png").string(), sc, records, "m");
    return slurp(tmp.path / "k.gp");
  };
  const std::string two = gp_of(8, 15), one = gp_of(10, 17);
  EXPECT_TRUE(has(two, "maxcols 2\nset bmargin 8\n")) << two;
  EXPECT_TRUE(has(two, "size 480,440\n")) << two;
  EXPECT_TRUE(has(one, "maxcols 1\nset bmargin 14\n")) << one;
  EXPECT_TRUE(has(one, "size 480,548\n")) << one;
}

// `ina sim` prints a table for every metric of output.metrics, not only the
// first; --all-metrics adds every other metric the runs have.
TEST(Format, SimPrintsEveryMetricOfTheScenario) {
  TempDir tmp;
  ina_test::write_file(tmp.path / "s.toml", R"(
[scenario]
name = "t"
[workload]
jobs = 1
workers_per_job = 2
partition_mb = 0.01
[run]
schemes = ["atp", "dsa"]
[output]
metrics = ["avg_jct_ms", "retransmits"]
)");
  auto r = ina_test::run_ina("sim --quiet " + (tmp.path / "s.toml").string());
  ASSERT_EQ(r.status, 0) << r.output;
  // No sweep: no x column (every run's x would be 0).
  EXPECT_TRUE(has(r.output, "average JCT (ms) [avg_jct_ms] by scheme:\n   atp     dsa\n")) << r.output;
  EXPECT_TRUE(has(r.output, "\nretransmits by scheme:\natp  dsa\n  0    0\n")) << r.output;
  EXPECT_FALSE(has(r.output, "[utilization]")) << r.output;
  r = ina_test::run_ina("sim --quiet --all-metrics " + (tmp.path / "s.toml").string());
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_TRUE(has(r.output, "utilization (aggregation throughput / link rate) [utilization] by scheme:")) << r.output;
  EXPECT_LT(r.output.find("[avg_jct_ms]"), r.output.find("[ps_completions]")) << r.output;  // the scenario's first
}
