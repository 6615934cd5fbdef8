// GRID control plane: topologies, the GRIA LP, R-GRIA's theorems, the
// baselines, the motivating example (Fig. 1) and `ina plan grid`.
#include <gtest/gtest.h>

#include "cli_util.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <limits>
#include <set>
#include <string>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "control/grid.hpp"
#include "core/rng.hpp"
#include "topo/graph.hpp"

namespace fs = std::filesystem;
namespace grid = ina::control::grid;
using ina::Rng;
using ina::topo::ArcId;
using ina::topo::Graph;
using ina::topo::NodeId;
using ina::topo::TopologyError;

namespace {

const std::string kFig1 = std::string(INA_SOURCE_DIR) + "/scenarios/grid/fig1.json";

// A random connected topology: `switches` switches (each programmable with
// probability 0.6, C_s ~ U(5, 60)), a random spanning tree plus a few extra
// links among them, and `hosts` hosts on random switches; link capacities
// ~ U(4, 40). Host h0 is the PS; `workers` other hosts are workers.
struct RandomCase {
  Graph g;
  ina::topo::Job job;
};

RandomCase random_case(uint64_t seed, int switches, int hosts, int workers) {
  Rng rng(seed);
  RandomCase c;
  Graph& g = c.g;
  g.name = fmt::format("random-{}", seed);
  auto gbps = [&](double lo, double hi) { return lo + (hi - lo) * rng.uniform(); };
  std::vector<NodeId> sw;
  for (int i = 0; i < switches; ++i) {
    const bool ina = rng.bernoulli(0.6);
    sw.push_back(g.add_switch(fmt::format("s{}", i), ina, ina ? gbps(5, 60) : 0));
  }
  for (int i = 1; i < switches; ++i) g.add_link(sw[i], sw[rng.below(i)], gbps(4, 40));
  for (int extra = 0; extra < switches / 2; ++extra) {
    const NodeId a = sw[rng.below(sw.size())], b = sw[rng.below(sw.size())];
    bool exists = a == b;
    for (const auto& e : g.neighbors(a)) exists = exists || e.peer == b;
    if (!exists) g.add_link(a, b, gbps(4, 40));
  }
  std::vector<NodeId> hs;
  for (int h = 0; h < hosts; ++h) {
    hs.push_back(g.add_host(fmt::format("h{}", h)));
    g.add_link(hs.back(), sw[rng.below(sw.size())], gbps(4, 40));
  }
  c.job.ps = hs[0];
  c.job.workers.assign(hs.begin() + 1, hs.begin() + 1 + workers);
  return c;
}

grid::Instance instance(const RandomCase& c, bool links = true) {
  grid::GridModel m;
  m.enforce_links = links;
  return grid::Instance(c.g, c.job, m);
}

// The best lambda for an integral assignment, in closed form. With every
// worker pinned, raising all rates to a common lambda (and y_s = lambda for
// every used switch) is optimal, and each constraint caps lambda at
// capacity / (number of rate streams sharing it).
double closed_form_lambda(const grid::Instance& inst, const std::vector<size_t>& node) {
  const Graph& g = inst.graph();
  const size_t S = inst.num_switches();
  std::vector<int> at(inst.num_nodes(), 0);
  for (const size_t a : node) ++at[a];
  std::vector<int> arc_streams(g.num_arcs(), 0);
  double lambda = inst.max_rate();                                      // (1b): r <= T
  for (size_t n = 0; n < node.size(); ++n)
    for (const ArcId a : *inst.route(n, node[n])) ++arc_streams[a];
  int ps_streams = at[inst.ps_index()];
  for (size_t s = 0; s < S; ++s) {
    if (at[s] == 0) continue;
    lambda = std::min(lambda, inst.capacity(s) / at[s]);                // (1e)
    ++ps_streams;                                                       // y_s = lambda
    for (const ArcId a : inst.uplink(s)) ++arc_streams[a];
  }
  lambda = std::min(lambda, inst.ps_ingress() / ps_streams);            // (1f)
  if (inst.model().enforce_links)
    for (ArcId a = 0; a < g.num_arcs(); ++a)
      if (arc_streams[a] > 0) lambda = std::min(lambda, g.arc_gbps(a) / arc_streams[a]);
  return lambda;
}

// Calls f for every assignment of workers to reachable aggregation nodes.
template <class F>
void for_each_assignment(const grid::Instance& inst, F&& f) {
  std::vector<size_t> node(inst.num_workers(), 0);
  auto reachable = [&](size_t n, size_t a) { return inst.route(n, a) != nullptr; };
  for (size_t n = 0; n < node.size(); ++n)
    while (!reachable(n, node[n])) ++node[n];
  for (;;) {
    f(node);
    size_t n = 0;
    for (; n < node.size(); ++n) {
      do ++node[n];
      while (node[n] < inst.num_nodes() && !reachable(n, node[n]));
      if (node[n] < inst.num_nodes()) break;
      node[n] = 0;
      while (!reachable(n, node[n])) ++node[n];
    }
    if (n == node.size()) return;
  }
}

void expect_no_violation(const grid::Plan& p) {
  EXPECT_TRUE(p.violations.empty()) << p.scheme << ": " << p.violations.size() << " violations, first "
                                    << p.violations.front().name << " x" << p.violations.front().factor;
}

using ina_test::CliResult;
CliResult ina_cli(const std::string& args) { return ina_test::run_ina(args); }
fs::path temp_dir(const std::string& name) { return ina_test::fresh_dir("grid_" + name); }
void write(const fs::path& p, const std::string& text) { ina_test::write_file(p, text); }

}  // namespace

// ---- Topologies --------------------------------------------------------------

TEST(GridTopology, GeneratorsMatchThePaper) {
  const Graph ft4 = ina::topo::fat_tree(4);
  EXPECT_EQ(ft4.switches().size(), 20u);
  EXPECT_EQ(ft4.hosts().size(), 16u);
  EXPECT_EQ(ft4.links().size(), 16u + 16u + 16u);

  const Graph ft = ina::topo::fat_tree_paper();  // §6.3: 32 edge + 32 aggregation + 16 core, 192 servers
  EXPECT_EQ(ft.switches().size(), 80u);
  EXPECT_EQ(ft.hosts().size(), 192u);
  EXPECT_EQ(ft.tor_switches().size(), 32u);
  const Graph ls = ina::topo::leaf_spine_paper();  // 30 spines + 30 leaves, 500 servers
  EXPECT_EQ(ls.switches().size(), 60u);
  EXPECT_EQ(ls.hosts().size(), 500u);
  EXPECT_EQ(ls.links().size(), 900u + 500u);
  for (const NodeId leaf : ls.tor_switches()) {
    size_t hosts = 0;
    for (const auto& e : ls.neighbors(leaf)) hosts += ls.is_host(e.peer);
    EXPECT_TRUE(hosts == 16 || hosts == 17) << hosts;
  }
  for (const auto& l : ls.links()) EXPECT_EQ(l.gbps, 100);
}

TEST(GridTopology, ShortestPathsDoNotTransitHosts) {
  const Graph g = ina::topo::fat_tree(4);
  const ina::topo::Routing r(g);
  const NodeId h0 = g.at("h0", "t"), h1 = g.at("h1", "t"), h15 = g.at("h15", "t");
  EXPECT_EQ(r.hops(h0, h1), 2);   // same edge switch
  EXPECT_EQ(r.hops(h0, h15), 6);  // another pod: edge, agg, core, agg, edge
  const auto path = r.path(h0, h15);
  ASSERT_EQ(path.size(), 6u);
  NodeId at = h0;
  for (const ArcId a : path) {
    EXPECT_EQ(g.arc_from(a), at);
    at = g.arc_to(a);
    if (at != h15) {
      EXPECT_FALSE(g.is_host(at));
    }
  }
  EXPECT_EQ(at, h15);
  EXPECT_EQ(r.path(h0, h15), path) << "deterministic";
  // ECMP-style spreading: flows from one edge switch to other pods use several cores.
  std::set<NodeId> cores;
  for (int h = 4; h < 16; ++h) cores.insert(g.arc_to(r.path(h0, g.at(fmt::format("h{}", h), "t"))[2]));
  EXPECT_GT(cores.size(), 1u);
}

TEST(GridTopology, InaDeploymentIsSeededAndWithinRange) {
  Graph g = ina::topo::fat_tree_paper();
  ina::topo::InaDeployment d;
  ina::topo::parse_ina_where("random:0.2", d);
  ina::topo::deploy_ina(g, d, 7);
  const auto chosen = g.ina_switches();
  EXPECT_EQ(chosen.size(), 16u);  // 20 % of 80
  for (const NodeId s : chosen) {
    EXPECT_GE(g.node(s).capacity_gbps, 100);
    EXPECT_LE(g.node(s).capacity_gbps, 3200);
  }
  Graph again = ina::topo::fat_tree_paper();
  ina::topo::deploy_ina(again, d, 7);
  EXPECT_EQ(again.ina_switches(), chosen);
  ina::topo::deploy_ina(again, d, 8);
  EXPECT_NE(again.ina_switches(), chosen);
  d.where = ina::topo::InaDeployment::Where::Tor;
  ina::topo::deploy_ina(g, d, 7);
  EXPECT_EQ(g.ina_switches(), g.tor_switches());
  EXPECT_THROW(ina::topo::parse_ina_where("random:1.5", d), TopologyError);
  EXPECT_THROW(ina::topo::parse_ina_where("spines", d), TopologyError);
}

// Every malformed file is rejected with the file, the field and the value.
TEST(GridTopology, MalformedFilesAreRejectedWithFileFieldAndValue) {
  auto error_of = [](const std::string& text) {
    try {
      ina::topo::parse_topology_json(text, "bad.json");
    } catch (const TopologyError& e) {
      return std::string(e.what());
    }
    return std::string("(accepted)");
  };
  const std::string nodes = R"("nodes": [{"name": "S", "kind": "switch", "ina": true, "capacity_gbps": 9},
                                          {"name": "A", "kind": "host"}, {"name": "B", "kind": "host"}])";
  auto has = [](const std::string& msg, std::initializer_list<const char*> parts) {
    for (const char* p : parts)
      if (msg.find(p) == std::string::npos) return ::testing::AssertionFailure() << "'" << p << "' not in: " << msg;
    return ::testing::AssertionSuccess();
  };
  EXPECT_TRUE(has(error_of("{" + nodes + R"(, "links": [{"a": "A", "b": "Q", "gbps": 3}]})"),
                  {"bad.json", "links[0].b", "unknown node", "\"Q\""}));
  EXPECT_TRUE(has(error_of("{" + nodes + R"(, "links": [{"a": "A", "b": "S", "gbps": 0}]})"),
                  {"bad.json", "links[0].gbps", "> 0", "0"}));
  EXPECT_TRUE(has(error_of(R"({"nodes": [{"name": "S", "kind": "switch", "ina": true, "capacity_gbps": -9}], "links": []})"),
                  {"bad.json", "nodes[0].capacity_gbps", "> 0", "-9"}));
  EXPECT_TRUE(has(error_of(R"({"nodes": [{"name": "S", "kind": "switch", "ina": true}], "links": []})"),
                  {"bad.json", "nodes[0].capacity_gbps", "required"}));
  EXPECT_TRUE(has(error_of(R"({"nodes": [{"name": "A", "kind": "host"}, {"name": "A", "kind": "host"}], "links": []})"),
                  {"bad.json", "nodes[1].name", "duplicate", "\"A\""}));
  EXPECT_TRUE(has(error_of(R"({"nodes": [{"name": "A", "kind": "host", "colour": 1}], "links": []})"),
                  {"bad.json", "nodes[0].colour", "unknown key"}));
  EXPECT_TRUE(has(error_of("{" + nodes + R"(, "links": [{"a": "A", "b": "S", "gbps": 3}, {"a": "S", "b": "A", "gbps": 3}]})"),
                  {"bad.json", "links[1]", "duplicate link"}));
  EXPECT_TRUE(has(error_of("{" + nodes + R"(, "links": [{"a": "A", "b": "S", "gbps": 3}],
                                        "job": {"ps": "B", "workers": ["A"]}})"),
                  {"bad.json", "job", "unreachable", "'B'", "'A'"}));
  EXPECT_TRUE(has(error_of("{" + nodes + R"(, "links": [{"a": "A", "b": "S", "gbps": 3}, {"a": "B", "b": "S", "gbps": 3}],
                                        "job": {"ps": "B", "workers": ["A", "Z"]}})"),
                  {"bad.json", "job.workers[1]", "unknown node", "\"Z\""}));
  EXPECT_TRUE(has(error_of("{\"nodes\": ["), {"bad.json", "JSON syntax error"}));
  EXPECT_THROW(ina::topo::load_topology_file("/no/such/topology.json"), TopologyError);
}

TEST(GridTopology, UnreachablePsIsRejectedByThePlanner) {
  Graph g;
  const NodeId s1 = g.add_switch("s1", true, 10), s2 = g.add_switch("s2", true, 10);
  const NodeId ps = g.add_host("ps"), w = g.add_host("w");
  g.add_link(w, s1, 10);
  g.add_link(ps, s2, 10);
  ina::topo::Job job{ps, {w}};
  try {
    grid::Instance inst(g, job);
    FAIL() << "accepted an unreachable PS";
  } catch (const TopologyError& e) {
    EXPECT_NE(std::string(e.what()).find("unreachable"), std::string::npos) << e.what();
  }
  EXPECT_THROW(g.add_link(w, s1, 5), TopologyError);   // duplicate
  EXPECT_THROW(g.add_link(s1, s2, -1), TopologyError);  // capacity <= 0
  EXPECT_THROW(g.add_host("w"), TopologyError);         // duplicate name
  EXPECT_THROW(g.at("nope", "worker"), TopologyError);  // unknown node
}

// ---- Motivating example (Fig. 1) -----------------------------------------------

TEST(GridFig1, GeryonAtpGridGiveThePapersMinimumRates) {
  const auto file = ina::topo::load_topology_file(kFig1);
  ASSERT_TRUE(file.job);
  const auto job = ina::topo::resolve_job(file.graph, *file.job, kFig1);
  const grid::Instance inst(file.graph, job);
  const auto geryon = grid::plan_geryon(inst);
  const auto atp = grid::plan_atp(inst);
  const auto switchml = grid::plan_switchml(inst);
  EXPECT_NEAR(geryon.lambda_gbps, 1.0, 1e-9);
  // The paper prints 2.43: 9/4 = 2.25 at S1 plus 0.75/4 = 0.1875 of L1's spare
  // bandwidth (printed as 0.18), i.e. 2.4375.
  EXPECT_NEAR(atp.lambda_gbps, 2.4375, 1e-9);
  EXPECT_NEAR(switchml.lambda_gbps, 2.25, 1e-9);
  for (const auto* p : {&geryon, &atp, &switchml}) expect_no_violation(*p);
  // ATP: W1-W4 aggregate 2.25 at S1 and overflow 0.1875 to S3.
  const auto& w1 = atp.workers[0];
  ASSERT_EQ(w1.shares.size(), 2u);
  EXPECT_EQ(file.graph.node(w1.shares[0].node).name, "S1");
  EXPECT_NEAR(w1.shares[0].gbps, 2.25, 1e-9);
  EXPECT_EQ(file.graph.node(w1.shares[1].node).name, "S3");
  EXPECT_NEAR(w1.shares[1].gbps, 0.1875, 1e-9);

  for (uint64_t seed = 1; seed <= 5; ++seed) {
    const auto g = grid::plan_grid(inst, seed);
    EXPECT_NEAR(g.lambda_gbps, 3.0, 1e-9) << seed;
    EXPECT_NEAR(*g.lp_lambda_gbps, 3.0, 1e-9) << seed;
  }
  // Fig. 1(c), the integral optimum, is 3 Gbps and violates nothing; CBC finds it.
  const auto exact = grid::plan_grid_exact(inst, 100000);
  EXPECT_NEAR(exact.lambda_gbps, 3.0, 1e-9);
  EXPECT_NEAR(*exact.lambda_bound_gbps, 3.0, 1e-9);
  expect_no_violation(exact);
  const auto idx = [&](const char* n) { return *inst.index_of(file.graph.at(n, "test")); };
  const std::vector<size_t> fig1c = {idx("S1"), idx("S1"), idx("S1"), idx("S2"),
                                     idx("S2"), idx("S2"), idx("S3"), idx("S3")};
  EXPECT_NEAR(closed_form_lambda(inst, fig1c), 3.0, 1e-12);
  grid::LpOptions pinned;
  pinned.fixed = fig1c;
  EXPECT_NEAR(grid::solve_gria_lp(inst, pinned).lambda, 3.0, 1e-9);
}

// ---- R-GRIA theorems -------------------------------------------------------------

// Theorems 1, 2, 3 and 7 over random topologies and seeds; the rounded plan's
// reported loads are the ones its assignment implies (Theorems 5-6's report).
TEST(GridRgria, TheoremsHoldOverRandomTopologiesAndSeeds) {
  int cases = 0;
  for (uint64_t topo_seed = 1; topo_seed <= 12; ++topo_seed) {
    const RandomCase c = random_case(topo_seed, 3 + static_cast<int>(topo_seed % 5), 14, 10);
    for (const bool links : {true, false}) {
      const grid::Instance inst = instance(c, links);
      const grid::LpSolution lp = grid::solve_gria_lp(inst);
      ASSERT_GT(lp.lambda, 0);
      for (uint64_t seed = 1; seed <= 6; ++seed) {
        const grid::Plan p = grid::round_gria(inst, lp, seed);
        ++cases;
        ASSERT_EQ(p.workers.size(), inst.num_workers());
        std::vector<double> load(inst.num_switches(), 0), y(inst.num_switches(), 0);
        double ps_load = 0;
        for (size_t n = 0; n < p.workers.size(); ++n) {
          const auto& w = p.workers[n];
          EXPECT_EQ(w.worker, inst.worker(n));
          // Theorem 1: exactly one aggregation node.
          ASSERT_EQ(w.shares.size(), 1u);
          EXPECT_EQ(w.shares[0].node, w.node);
          // Line 8: rate = sum_s r~_n^s; Theorem 2: rate <= T.
          double sum = 0;
          for (const double r : lp.r[n]) sum += r;
          EXPECT_NEAR(w.rate_gbps, sum, 1e-9);
          EXPECT_LE(w.rate_gbps, inst.max_rate() * (1 + 1e-9));
          const auto a = inst.index_of(w.node);
          ASSERT_TRUE(a);
          if (*a == inst.ps_index()) {
            ps_load += w.rate_gbps;
            continue;
          }
          load[*a] += w.rate_gbps;
          y[*a] = std::max(y[*a], w.rate_gbps);
        }
        for (size_t s = 0; s < inst.num_switches(); ++s) {
          // Theorem 3: every worker's rate <= y_s of its switch (y_s = their max).
          EXPECT_NEAR(p.switches[s].y_gbps, y[s], 1e-12);
          EXPECT_NEAR(p.switches[s].load_gbps, load[s], 1e-9);
          EXPECT_NEAR(p.switches[s].factor, load[s] / inst.capacity(s), 1e-12);
          ps_load += y[s];
        }
        for (const auto& w : p.workers)
          if (auto a = inst.index_of(w.node); *a != inst.ps_index()) {
            EXPECT_LE(w.rate_gbps, p.switches[*a].y_gbps);
          }
        EXPECT_NEAR(p.ps_load_gbps, ps_load, 1e-9);
        EXPECT_NEAR(p.ps_factor, ps_load / inst.ps_ingress(), 1e-12);
        // Theorem 7: lambda after rounding = the LP's lambda.
        EXPECT_NEAR(p.lambda_gbps, lp.lambda, 1e-7 * std::max(1.0, lp.lambda));
        EXPECT_NEAR(*p.lp_lambda_gbps, lp.lambda, 0);
        // Violations list exactly the resources above capacity.
        size_t over = p.ps_factor > 1 + 1e-6;
        for (const auto& s : p.switches) over += s.factor > 1 + 1e-6;
        size_t listed = 0;
        for (const auto& v : p.violations) listed += v.kind != grid::Violation::Kind::Link;
        EXPECT_EQ(listed, over);
      }
    }
  }
  EXPECT_EQ(cases, 12 * 2 * 6);
}

TEST(GridRgria, RoundingIsDeterministicForASeedAndUnbiased) {
  const RandomCase c = random_case(42, 5, 12, 8);
  const grid::Instance inst = instance(c);
  const grid::LpSolution lp = grid::solve_gria_lp(inst);
  auto nodes = [](const grid::Plan& p) {
    std::vector<NodeId> v;
    for (const auto& w : p.workers) v.push_back(w.node);
    return v;
  };
  EXPECT_EQ(nodes(grid::plan_grid(inst, 9)), nodes(grid::plan_grid(inst, 9)));
  // Eq. (3)-(4): E[delta_s] = sum_n r~_n^s. Average the loads over many
  // seeds; allow 5 standard deviations of the mean.
  const int rounds = 4000;
  std::vector<double> mean(inst.num_nodes(), 0), expect(inst.num_nodes(), 0), var(inst.num_nodes(), 0);
  for (size_t n = 0; n < inst.num_workers(); ++n) {
    double rate = 0;
    for (const double r : lp.r[n]) rate += r;
    for (size_t a = 0; a < inst.num_nodes(); ++a) {
      expect[a] += lp.r[n][a];
      const double p = rate > 0 ? lp.r[n][a] / rate : 0;
      var[a] += rate * rate * p * (1 - p);
    }
  }
  bool distinct = false;
  const auto first = nodes(grid::round_gria(inst, lp, 1));
  for (int k = 1; k <= rounds; ++k) {
    const auto p = grid::round_gria(inst, lp, static_cast<uint64_t>(k));
    distinct = distinct || nodes(p) != first;
    for (const auto& w : p.workers) mean[*inst.index_of(w.node)] += w.rate_gbps / rounds;
  }
  for (size_t a = 0; a < inst.num_nodes(); ++a)
    EXPECT_NEAR(mean[a], expect[a], 5 * std::sqrt(var[a] / rounds) + 1e-9) << inst.node_name(a);
  EXPECT_TRUE(distinct || lp.lambda == 0) << "different seeds should give different roundings";
}

// ---- The LP against exhaustive search ----------------------------------------------

// On small instances: (i) pinning the LP's x to any integral assignment
// gives the closed-form best lambda for it, in both the literal Eq. (1) and
// the projected form; (ii) the relaxation is an upper bound on the best
// integral assignment found by exhaustive search; (iii) both forms of the
// relaxation have the same optimum; (iv) CBC's integral optimum (grid-exact)
// equals the exhaustive one.
TEST(GridLp, MatchesExhaustiveSearchOnSmallInstances) {
  int assignments = 0;
  for (uint64_t seed = 100; seed < 112; ++seed) {
    const RandomCase c = random_case(seed, 2 + static_cast<int>(seed % 2), 6, 3 + static_cast<int>(seed % 2));
    for (const bool links : {true, false}) {
      const grid::Instance inst = instance(c, links);
      double best = 0;
      int checked = 0;
      for_each_assignment(inst, [&](const std::vector<size_t>& node) {
        const double closed = closed_form_lambda(inst, node);
        best = std::max(best, closed);
        // Pinned LPs are slower to build than the closed form; check a spread of them.
        if (++checked % 3 != 1) return;
        grid::LpOptions opt;
        opt.fixed = node;
        EXPECT_NEAR(grid::solve_gria_lp(inst, opt).lambda, closed, 1e-7 * std::max(1.0, closed));
        opt.literal = true;
        EXPECT_NEAR(grid::solve_gria_lp(inst, opt).lambda, closed, 1e-7 * std::max(1.0, closed));
        ++assignments;
      });
      const double relaxed = grid::solve_gria_lp(inst).lambda;
      grid::LpOptions literal;
      literal.literal = true;
      EXPECT_NEAR(grid::solve_gria_lp(inst, literal).lambda, relaxed, 1e-7 * std::max(1.0, relaxed));
      EXPECT_GE(relaxed, best * (1 - 1e-9)) << "the relaxation bounds every integral assignment";
      EXPECT_GT(best, 0);
      // CBC on the integral problem finds the exhaustive optimum.
      const grid::ExactSolution exact = grid::solve_gria_exact(inst, 100000);
      EXPECT_TRUE(exact.optimal);
      EXPECT_NEAR(exact.lambda, best, 1e-6 * std::max(1.0, best));
      EXPECT_NEAR(closed_form_lambda(inst, exact.node), best, 1e-6 * std::max(1.0, best));
    }
  }
  EXPECT_GT(assignments, 200);
}

// ---- Baselines and feasible rates --------------------------------------------------

TEST(GridBaselines, RespectEveryCapacityAndFollowTheirRoutingRule) {
  for (uint64_t seed = 1; seed <= 10; ++seed) {
    const RandomCase c = random_case(seed, 6, 16, 12);
    const grid::Instance inst = instance(c);
    const auto geryon = grid::plan_geryon(inst);
    const auto atp = grid::plan_atp(inst);
    const auto switchml = grid::plan_switchml(inst);
    for (const auto* p : {&geryon, &atp, &switchml}) {
      expect_no_violation(*p);
      EXPECT_LE(p->max_link_factor, 1 + 1e-6);
      EXPECT_GT(p->lambda_gbps, 0);
    }
    for (const auto& w : geryon.workers) EXPECT_EQ(w.node, inst.ps());
    EXPECT_EQ(geryon.switch_agg_gbps, 0);
    for (size_t n = 0; n < inst.num_workers(); ++n) {
      // SwitchML: the ToR (first hop) if programmable, else the PS.
      const NodeId tor = c.g.arc_to(inst.routing().path(inst.worker(n), inst.ps()).front());
      EXPECT_EQ(switchml.workers[n].node, c.g.is_ina(tor) ? tor : inst.ps());
      ASSERT_EQ(switchml.workers[n].shares.size(), 1u);
      // ATP: only nodes on the default path, in path order.
      const auto path = inst.routing().path(inst.worker(n), inst.ps());
      std::vector<NodeId> on_path;
      for (const ArcId a : path) on_path.push_back(c.g.arc_to(a));
      size_t pos = 0;
      for (const auto& s : atp.workers[n].shares) {
        auto it = std::find(on_path.begin() + static_cast<std::ptrdiff_t>(pos), on_path.end(), s.node);
        ASSERT_NE(it, on_path.end()) << "ATP share off the default path";
        pos = static_cast<size_t>(it - on_path.begin());
      }
    }
    // The rounded GRID plan, at feasible rates, violates nothing either.
    const auto f = grid::feasible_rates(inst, grid::plan_grid(inst, seed));
    expect_no_violation(f);
    EXPECT_LE(f.lambda_gbps, *f.lp_lambda_gbps * (1 + 1e-9));
  }
}

TEST(GridPlan, LargeTopologiesPlanQuickly) {
  Graph g = ina::topo::leaf_spine_paper();
  ina::topo::deploy_ina(g, {}, 3);
  ina::topo::Job job;
  job.ps = g.hosts().back();
  job.workers = ina::topo::place_workers(g, job.ps, 30, ina::topo::Placement::Random, 3);
  const grid::Instance inst(g, job);
  // Every plan covers the 30 workers; a baseline's claimed rate is the one
  // its routes can carry; GRID's rounded plan, at its feasible rates, beats
  // every fixed-path baseline (GRID §6: 33.3 vs 5 Gbps here). Catches a
  // planner that drops workers, over-claims a baseline's rate, or a GRID
  // rounding that loses the benefit of routing.
  double best_baseline = 0;
  for (const std::string scheme : {"atp", "switchml", "geryon"}) {
    const auto p = grid::plan_scheme(inst, scheme, 3);
    EXPECT_EQ(p.workers.size(), 30u) << scheme;
    expect_no_violation(p);
    const auto f = grid::feasible_rates(inst, p);
    EXPECT_NEAR(f.lambda_gbps, p.lambda_gbps, 1e-9 * p.lambda_gbps) << scheme;
    best_baseline = std::max(best_baseline, f.lambda_gbps);
  }
  const auto gp = grid::plan_scheme(inst, "grid", 3);
  EXPECT_EQ(gp.workers.size(), 30u);
  const auto gf = grid::feasible_rates(inst, gp);
  expect_no_violation(gf);
  EXPECT_GT(gf.lambda_gbps, 2 * best_baseline);
  EXPECT_THROW(grid::plan_scheme(inst, "ecmp", 1), grid::PlanError);
}

// ---- CLI ---------------------------------------------------------------------------

TEST(GridCli, JsonOutputParsesAndCarriesThePlan) {
  for (const auto& [scheme, lambda] : {std::pair{"grid", 3.0}, {"atp", 2.4375}, {"switchml", 2.25}, {"geryon", 1.0}, {"grid-exact", 3.0}}) {
    const auto r = ina_cli("plan grid --topology " + kFig1 + " --scheme " + scheme + " --json");
    ASSERT_EQ(r.status, 0) << r.output;
    const auto j = nlohmann::json::parse(r.output);
    EXPECT_EQ(j["scheme"], scheme);
    EXPECT_NEAR(j["lambda_gbps"].get<double>(), lambda, 1e-9);
    ASSERT_EQ(j["workers"].size(), 8u);
    for (const auto& w : j["workers"]) {
      EXPECT_TRUE(w["worker"].is_string());
      EXPECT_TRUE(w["node"].is_string());
      EXPECT_GT(w["rate_gbps"].get<double>(), 0);
    }
    EXPECT_TRUE(j["violations"].is_array());
    EXPECT_EQ(j["switches"].size(), 3u);
  }
  const auto r = ina_cli("plan grid --topology fat-tree:4 --ps h0 --random 6 --seed 2 --programmable all --json");
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_EQ(nlohmann::json::parse(r.output)["workers"].size(), 6u);
  const auto text = ina_cli("plan grid --topology " + kFig1 + " --workers W1,W5 --ps PS --scheme atp");
  ASSERT_EQ(text.status, 0) << text.output;
  EXPECT_NE(text.output.find("lambda (minimum sending rate) 3.0000 Gbps"), std::string::npos) << text.output;
}

TEST(GridCli, BadInputExitsWith2AndAClearMessage) {
  const auto d = temp_dir("cli");
  write(d / "t.json", R"({"nodes": [{"name": "A", "kind": "host"}], "links": [{"a": "A", "b": "X", "gbps": 1}]})");
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"plan grid --topology " + (d / "t.json").string() + " --ps A --workers A", "links[0].b"},
      {"plan grid --topology " + (d / "none.json").string() + " --ps A --workers B", "no such file"},
      {"plan grid --topology " + kFig1 + " --scheme ecmp", "unknown scheme 'ecmp'"},
      {"plan grid --topology " + kFig1 + " --ps Q", "unknown node 'Q'"},
      {"plan grid --topology " + kFig1 + " --workers W1,W1", "listed twice"},
      {"plan grid --topology " + kFig1 + " --workers W1 --random 2", "not both"},
      {"plan grid --topology " + kFig1 + " --programmable all", "generated topologies"},
      {"plan grid --topology fat-tree:4 --ps h0 --workers 16", "cannot place 16 workers"},
      {"plan grid --topology fat-tree:5 --ps h0 --random 2", "even"},
      {"plan grid --topology fat-tree:4 --ps h0 --random 99", "cannot place 99 workers"},
      {"plan grid --topology fat-tree:4 --ps h0 --random 3 --programmable random:2", "random:2"},
  };
  for (const auto& [args, needle] : cases) {
    const auto r = ina_cli(args);
    EXPECT_EQ(r.status, 2) << args << "\n" << r.output;
    EXPECT_NE(r.output.find(needle), std::string::npos) << args << "\n" << r.output;
  }
}

TEST(GridCli, SweepWritesResultsAndRejectsUnknownKeys) {
  const auto d = temp_dir("sweep");
  write(d / "s.toml", R"(
[scenario]
name = "tiny"
title = "tiny sweep"
[topology]
kind = "fat-tree:4"
programmable = "all"
capacity_gbps = [100, 400]
[job]
ps = "last"
[run]
schemes = ["grid", "atp"]
seeds = [1, 2]
[sweep]
workers = [2, 4]
[output]
metrics = ["avg_rate_gbps"]
[[series]]
name = "tor"
"topology.programmable" = "tor"
[[series]]
name = "all"
)");
  const auto out = d / "out";
  auto r = ina_cli("plan grid-sweep " + (d / "s.toml").string() + " --out " + out.string());
  ASSERT_EQ(r.status, 0) << r.output;
  const auto results = nlohmann::json::parse(std::ifstream(out / "results.json"));
  ASSERT_EQ(results.size(), 2u * 2u * 2u);  // series x schemes x worker counts, seeds averaged
  for (const auto& rec : results) {
    EXPECT_EQ(rec["seeds"], 2);
    EXPECT_GT(rec["avg_rate_gbps"].get<double>(), 0);
    EXPECT_TRUE(rec.contains("feasible_min_rate_gbps"));
  }
  EXPECT_TRUE(fs::exists(out / "results.csv"));
  EXPECT_TRUE(fs::exists(out / "avg_rate_gbps.png"));

  write(d / "bad.toml", "[topology]\nkind = \"fat-tree:4\"\ncolour = 3\n[sweep]\nworkers = [2]\n");
  r = ina_cli("plan grid-sweep " + (d / "bad.toml").string());
  EXPECT_EQ(r.status, 2) << r.output;
  EXPECT_NE(r.output.find("topology.colour"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("bad.toml"), std::string::npos) << r.output;
  // topology.multicast_results, on the line of
  // GridMulticast.*: PS - S1 - S2, W1 on S1, W2 on S2 (programmable), 10 Gbps
  // links. The exact plan sends 10 Gbps; with the results planned on S1->S2
  // beside W1's gradient it gets 5. ATP (both to the PS through S1) is 5 either way.
  write(d / "line.json",
        R"({"name": "line", "link_gbps": 10,
 "nodes": [{"name": "S1", "kind": "switch"}, {"name": "S2", "kind": "switch", "ina": true, "capacity_gbps": 100},
           {"name": "PS", "kind": "host"}, {"name": "W1", "kind": "host"}, {"name": "W2", "kind": "host"}],
 "links": [{"a": "PS", "b": "S1"}, {"a": "S1", "b": "S2"}, {"a": "W1", "b": "S1"}, {"a": "W2", "b": "S2"}]})");
  write(d / "mc.toml", "[topology]\nkind = \"line.json\"\n[job]\nps = \"PS\"\n[run]\nschemes = [\"grid-exact\", \"atp\"]\n"
                       "[sweep]\nworkers = [2]\n[output]\nmetrics = [\"avg_rate_gbps\"]\n"
                       "[[series]]\nname = \"plain\"\n[[series]]\nname = \"multicast\"\n"
                       "\"topology.multicast_results\" = true\n");
  r = ina_cli("plan grid-sweep " + (d / "mc.toml").string() + " --out " + (d / "mc").string());
  ASSERT_EQ(r.status, 0) << r.output;
  const auto mc = nlohmann::json::parse(std::ifstream(d / "mc" / "results.json"));
  std::map<std::pair<std::string, std::string>, double> rate;
  for (const auto& rec : mc) rate[{rec["series"].get<std::string>(), rec["scheme"].get<std::string>()}] = rec["avg_rate_gbps"];
  ASSERT_EQ(rate.size(), 4u);
  EXPECT_NEAR(rate.at({"plain", "grid-exact"}), 10, 1e-9);
  EXPECT_NEAR(rate.at({"multicast", "grid-exact"}), 5, 1e-9);
  EXPECT_NEAR(rate.at({"plain", "atp"}), 5, 1e-9);
  EXPECT_NEAR(rate.at({"multicast", "atp"}), 5, 1e-9);
  write(d / "mc_bad.toml", "[topology]\nkind = \"fat-tree:4\"\nmulticast_results = 3\n[sweep]\nworkers = [2]\n");
  r = ina_cli("plan grid-sweep " + (d / "mc_bad.toml").string());
  EXPECT_EQ(r.status, 2) << r.output;
  EXPECT_NE(r.output.find("topology.multicast_results"), std::string::npos) << r.output;
  write(d / "bad2.toml", "[sweep]\nworkers = [2]\n[[series]]\nname = \"x\"\n\"job.placement\" = \"spread\"\n");
  r = ina_cli("plan grid-sweep " + (d / "bad2.toml").string());
  EXPECT_EQ(r.status, 2) << r.output;
  EXPECT_NE(r.output.find("job.placement"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("spread"), std::string::npos) << r.output;
}
