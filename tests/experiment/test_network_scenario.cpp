// Scenario files on multi-switch topologies (experiment/network_point.hpp):
// topology kinds, switch.ina and its percent rule, per-switch memory, the
// scheme/topology dispatch of `ina sim`, and bad input naming file, field
// and value.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "experiment/network_point.hpp"
#include "experiment/runner.hpp"
#include "experiment/scenario.hpp"
#include "schemes/registry.hpp"

namespace ina::exp {
namespace {

// A small network scenario: the 2-rack testbed, one 64 KiB allreduce.
std::string net(const std::string& extra, const std::string& kind = "testbed") {
  return "[topology]\nkind = \"" + kind +
         "\"\n[workload]\njobs = 1\nmodel = \"ResNet50\"\ngradient_mb = 0.0625\n[run]\nschemes = [\"rina\"]\n" + extra;
}

std::string error_of(const std::string& text) {
  try {
    parse_scenario(text, "net.toml");
  } catch (const ScenarioError& e) {
    return e.what();
  }
  return "(no error)";
}

// `text` appended to [topology] / [switch] / ... of net(): TOML allows a
// table only once, so the cases re-open none of them.
TEST(NetworkScenario, BadInputNamesFileFieldAndValue) {
  struct Case {
    std::string text, field, value, why;
  };
  const std::vector<Case> cases = {
      {net("[switch]\nina = \"edge0,edge99\"\n", "fat-tree"), "switch.ina", "edge0,edge99", "unknown switch 'edge99'"},
      {net("[switch]\nina = \"h3\"\n", "fat-tree"), "switch.ina", "h3", "is a host"},
      {"[topology]\nkind = \"dragonfly\"\ndragonfly = \"4,12,2\"\n[workload]\njobs = 1\nmodel = \"ResNet50\"\n"
       "[run]\nschemes = [\"rar\"]\n",
       "topology.dragonfly", "4,12,2", "a*h"},
      {"[topology]\nkind = \"dragonfly\"\ndragonfly = \"4,9\"\n[workload]\njobs = 1\nmodel = \"ResNet50\"\n"
       "[run]\nschemes = [\"rar\"]\n",
       "topology.dragonfly", "4,9", "three integers"},
      {"[topology]\nkind = \"fat-tree\"\n[workload]\njobs = 1\nworkers = 17\nmodel = \"ResNet50\"\n"
       "[run]\nschemes = [\"rar\"]\n",
       "workload.workers", "(value: 17)", "16 hosts"},
      {net("[switch]\nina = \"percent:150\"\n"), "switch.ina", "percent:150", "0 <= P <= 100"},
      {net("[switch]\nina_percent = 150\n"), "switch.ina_percent", "150", "must be in [-1, 100]"},
      {net("[switch]\nina = \"planner:3\"\n"), "switch.ina", "planner:3", "0 <= N <= 2"},
      {net("[switch]\nmemory_mb_per_switch = \"tor0=2,tor9=1\"\n"), "switch.memory_mb_per_switch", "tor0=2,tor9=1",
       "'tor9' is not a switch"},
      {net("", "torus"), "topology.kind", "(value: torus)", "must be one of"},
      {net("", "file"), "topology.file", "\"\"", "needs a JSON topology file"},
      // A star scheme on a network topology, and a collective on the star.
      {"[topology]\nkind = \"fat-tree\"\n[workload]\njobs = 1\nmodel = \"ResNet50\"\n[run]\nschemes = [\"switchml\"]\n",
       "run.schemes", "(value: switchml)", "only on the star"},
      {"[run]\nschemes = [\"rar\"]\n", "run.schemes", "(value: rar)", "only on multi-switch topologies"},
      {"[topology]\nkind = \"testbed\"\n[workload]\njobs = 1\n[run]\nschemes = [\"rar\"]\n", "workload.model",
       "(value: A)", "needs a DNN"},
      {"[topology]\nkind = \"dragonfly\"\ndragonfly = \"8,9,4\"\n[workload]\njobs = 1\nmodel = \"VGG16\"\n[run]\n"
       "schemes = [\"rina\", \"atp\"]\n",
       "workload.workers", "(value: 0)", "at most 128 workers (dragonfly:8,9,4 has 288 hosts"},
      {"[topology]\nkind = \"testbed\"\n[workload]\nmodel = \"VGG16\"\n[run]\nschemes = [\"rar\"]\n",
       "workload.jobs", "(value: 8)", "one job"},
      // Star-only transport settings are refused, not ignored.
      {net("[transport]\nmin_rto_us = 5000\n"), "transport.min_rto_us", "5000", "star simulator only"},
      {net("profile = \"runtime\"\n"), "run.profile", "runtime", "star simulator only"},
      // The ring's step barrier: ring schemes on network kinds only.
      {"[topology]\nkind = \"testbed\"\n[workload]\njobs = 1\ngradient_mb = 0.0625\nstep_barrier = true\n"
       "[run]\nschemes = [\"rar\", \"atp\"]\n",
       "workload.step_barrier", "true", "atp has no ring steps"},
      {"[workload]\nstep_barrier = true\n[run]\nschemes = [\"atp\"]\n", "workload.step_barrier", "true",
       "not topology.kind = \"star\""},
      // NIC marking (the model before switch-port-only ECN) on multi-switch kinds only.
      {"[topology]\nhost_ecn = true\n", "topology.host_ecn", "true", "applies to multi-switch topologies"},
      // A fat-tree's racks, and one simulation on several threads: multi-switch kinds only.
      {"[topology]\nkind = \"testbed\"\nhosts_per_edge = 4\n[workload]\njobs = 1\nmodel = \"ResNet50\"\n"
       "[run]\nschemes = [\"rar\"]\n",
       "topology.hosts_per_edge", "(value: 4)", "sizes a fat-tree's racks, not topology.kind = \"testbed\""},
      {"[topology]\nkind = \"fat-tree\"\nhosts_per_edge = 65\n", "topology.hosts_per_edge", "65", "[0, 64]"},
      {"[run]\nthreads = 2\nschemes = [\"atp\"]\n", "run.threads", "(value: 2)", "splits a multi-switch topology"},
      {"[topology]\nkind = \"testbed\"\n[workload]\njobs = 1\nmodel = \"ResNet50\"\nrina_ag_relay = \"leader\"\n"
       "[run]\nschemes = [\"rina\"]\n",
       "workload.rina_ag_relay", "leader", "must be one of"},
      {"[workload]\nrina_ag_relay = \"agent\"\n[run]\nschemes = [\"atp\"]\n", "workload.rina_ag_relay", "agent",
       "not topology.kind = \"star\""},
      {"[workload]\nrina_allgather_start = \"rack\"\n[run]\nschemes = [\"atp\"]\n", "workload.rina_allgather_start",
       "rack", "not topology.kind = \"star\""},
      {"[workload]\nrina_transport = \"aimd\"\n[run]\nschemes = [\"atp\"]\n", "workload.rina_transport", "aimd",
       "not topology.kind = \"star\""},
      {"[run]\nschemes = [\"atp\"]\nstep_records = \"out/steps\"\n", "run.step_records", "out/steps",
       "not topology.kind = \"star\""},
      {"[topology]\nkind = \"testbed\"\n[workload]\njobs = 1\nmodel = \"ResNet50\"\nrina_ag_relay = \"agent\"\n"
       "[run]\nschemes = [\"rar\", \"atp\"]\n",
       "workload.rina_ag_relay", "agent", "run.schemes has no rina"},
      {"[transport]\nring_min_rto_us = 1000\n[run]\nschemes = [\"atp\"]\n", "transport.ring_min_rto_us", "1000",
       "not topology.kind = \"star\""},
      // Queue traces: network runs, named links of the topology, with a directory and a window.
      {"[run]\nschemes = [\"atp\"]\nqueue_trace = \"out/q\"\nqueue_trace_links = \"h0->tor0\"\n", "run.queue_trace",
       "out/q", "not topology.kind = \"star\""},
      {"[topology]\nkind = \"testbed\"\n[workload]\njobs = 1\ngradient_mb = 0.0625\n[run]\nschemes = [\"rar\"]\n"
       "queue_trace = \"out/q\"\nqueue_trace_links = \"h0->tor9\"\n",
       "run.queue_trace_links", "h0->tor9", "has no node 'tor9'"},
      {"[topology]\nkind = \"testbed\"\n[workload]\njobs = 1\ngradient_mb = 0.0625\n[run]\nschemes = [\"rar\"]\n"
       "queue_trace = \"out/q\"\nqueue_trace_links = \"h0->h1\"\n",
       "run.queue_trace_links", "h0->h1", "no link joins h0 and h1"},
      {"[topology]\nkind = \"testbed\"\n[workload]\njobs = 1\ngradient_mb = 0.0625\n[run]\nschemes = [\"rar\"]\n"
       "queue_trace = \"out/q\"\nqueue_trace_links = \"tor0->h0, tor0 -> h0\"\n",
       "run.queue_trace_links", "tor0->h0", "named twice"},
      {"[topology]\nkind = \"testbed\"\n[workload]\njobs = 1\ngradient_mb = 0.0625\n[run]\nschemes = [\"rar\"]\n"
       "queue_trace = \"out/q\"\n",
       "run.queue_trace_links", "(value: \"\")", "needs the links to trace"},
      {"[topology]\nkind = \"testbed\"\n[workload]\njobs = 1\ngradient_mb = 0.0625\n[run]\nschemes = [\"rar\"]\n"
       "queue_trace_links = \"tor0->h0\"\n",
       "run.queue_trace_links", "tor0->h0", "needs run.queue_trace"},
      {"[topology]\nkind = \"testbed\"\n[workload]\njobs = 1\ngradient_mb = 0.0625\n[run]\nschemes = [\"rar\"]\n"
       "queue_trace = \"out/q\"\nqueue_trace_links = \"tor0->h0\"\nqueue_trace_from_ms = 2\nqueue_trace_to_ms = 1\n",
       "run.queue_trace_to_ms", "(value: 1)", "ends the trace before it starts"},
      {"[topology]\nkind = \"testbed\"\n[workload]\njobs = 1\ngradient_mb = 0.0625\n[transport]\n"
       "ring_min_rto_us = 1000\n[run]\nschemes = [\"rar\", \"atp\"]\n",
       "transport.ring_min_rto_us", "1000", "atp has no ring endpoints"},
  };
  for (const Case& c : cases) {
    const std::string msg = error_of(c.text);
    SCOPED_TRACE(c.field + " -> " + msg);
    EXPECT_EQ(msg.rfind("net.toml", 0), 0u);
    EXPECT_NE(msg.find("field '" + c.field + "'"), std::string::npos);
    EXPECT_NE(msg.find(c.value), std::string::npos);
    EXPECT_NE(msg.find(c.why), std::string::npos);
  }
}

TEST(NetworkScenario, FileTopologyIsRelativeToTheScenario) {
  // scenarios/grid/testbed.json from a scenario file in scenarios/grid/.
  const std::string text = net("[switch]\nina = \"S1,S2\"\n", "file") + "";
  std::string with_file = text;
  with_file.replace(with_file.find("kind = \"file\""), 13, "kind = \"file\"\nfile = \"testbed.json\"");
  const Scenario sc = parse_scenario(with_file, std::string(INA_SOURCE_DIR) + "/scenarios/grid/x.toml");
  const auto pts = expand(sc);
  ASSERT_EQ(pts.size(), 1u);
  const NetworkRun run = network_run(pts[0].settings, schemes::find("atp"), 1, "t");
  EXPECT_EQ(run.graph.name, "grid-testbed");
  EXPECT_EQ(run.ina.size(), 2u);
  EXPECT_EQ(run.graph.ina_switches().size(), 2u);  // the file's three INA flags are replaced by switch.ina
}

// workload.rina_ag_relay reaches the collective's settings (the endpoints'
// RingConfig::agent_relays: Ring.RinaAgentAloneRelaysEveryAllGatherShard).
TEST(NetworkScenario, RinaAgRelayReachesTheCollective) {
  for (const std::string v : {"members", "agent"}) {
    const Scenario sc = parse_scenario(
        "[topology]\nkind = \"testbed\"\n[workload]\njobs = 1\nmodel = \"ResNet50\"\nrina_ag_relay = \"" + v +
            "\"\n[run]\nschemes = [\"rina\"]\n",
        "net.toml");
    const auto pts = expand(sc);
    ASSERT_EQ(pts.size(), 1u);
    EXPECT_EQ(network_run(pts[0].settings, schemes::find("rina"), 1, "t").settings.rina_ag_relay, v);
  }
}

// transport.ring_min_rto_us reaches the collective's settings (the ring
// endpoints' RingConfig::min_rto, collective_ring.cpp).
TEST(NetworkScenario, RingMinRtoReachesTheCollective) {
  const Scenario sc = parse_scenario(
      "[topology]\nkind = \"testbed\"\n[workload]\njobs = 1\nmodel = \"ResNet50\"\n[transport]\n"
      "ring_min_rto_us = 1500\n[run]\nschemes = [\"rar\"]\n",
      "net.toml");
  const auto pts = expand(sc);
  ASSERT_EQ(pts.size(), 1u);
  EXPECT_EQ(network_run(pts[0].settings, schemes::find("rar"), 1, "t").settings.ring_min_rto_us, 1500);
}

// The ring-order variant of Fig. 11 on the dragonfly: its JSON beside it,
// 72 workers in the file's host order (the file's first host is rank 0),
// the planner's order (racks with most workers first: the 36 routers in
// node order, g0r0 first).
TEST(NetworkScenario, RinaDragonflyRingOrderVariantLoadsItsTopology) {
  const Scenario sc = load_scenario_file(std::string(INA_SOURCE_DIR) +
                                         "/scenarios/rina/variant/fig11_dragonfly_ring_order.toml");
  const auto pts = expand(sc);
  ASSERT_EQ(pts.size(), 10u);
  const Point& p = pts[1];  // 4 INA routers
  EXPECT_EQ(p.settings.ina_count, 4);
  const NetworkRun run = network_run(p.settings, schemes::find("rina"), 1, "t");
  EXPECT_EQ(run.graph.name, "dragonfly-4-9-2-ring-order");
  EXPECT_EQ(run.graph.hosts().size(), 72u);
  EXPECT_EQ(run.graph.node(run.graph.hosts().front()).name, "g0r3h0");
  std::vector<std::string> ina;
  for (const auto v : run.ina) ina.push_back(run.graph.node(v).name);
  EXPECT_EQ(ina, (std::vector<std::string>{"g0r0", "g0r1", "g0r2", "g0r3"}));
}

// The paper's "50 %" (§VI-B): 6 INA switches for ATP and 4 for Rina on the
// k = 4 fat-tree, 18 for both on the dragonfly 4,9,2; 100 % is every switch.
TEST(NetworkScenario, PercentRuleGivesThePapersCounts) {
  struct Case {
    const char* kind;
    const char* scheme;
    double percent;
    size_t count;
  };
  const Case cases[] = {
      {"fat-tree", "atp", 50, 6},  {"fat-tree", "rina", 50, 4},   {"dragonfly", "atp", 50, 18},
      {"dragonfly", "rina", 50, 18}, {"fat-tree", "atp", 100, 20}, {"fat-tree", "rina", 100, 20},
      {"fat-tree", "atp", 0, 0},
  };
  for (const Case& c : cases) {
    Settings s;
    s.topology_kind = c.kind;
    s.ina_percent = c.percent;
    const auto g = build_topology(s, "t");
    const auto ina = select_ina(s, g, job_workers(s, g, "t"), schemes::find(c.scheme), "t");
    EXPECT_EQ(ina.size(), c.count) << c.kind << " " << c.scheme << " " << c.percent;
  }
  // Both are prefixes of the planner's order, which starts with the ToRs.
  Settings s;
  s.topology_kind = "fat-tree";
  s.ina_percent = 50;
  const auto g = build_topology(s, "t");
  const auto tors = g.tor_switches();
  for (const char* scheme : {"rina", "atp"})
    for (const auto v : select_ina(s, g, job_workers(s, g, "t"), schemes::find(scheme), "t"))
      EXPECT_NE(std::find(tors.begin(), tors.end(), v), tors.end()) << scheme << " " << g.node(v).name;
}

// Fig. 10's fat-tree at 50 % INA under the paper's settings (ResNet50 at
// 1/64, INA at 20 Gbps): the INA racks' members are paced at 20 Gbps, the
// autonomous workers send at 100 Gbps and run several steps ahead of the
// agents they send to, past those receivers' buffers. Nothing is lost, so
// nothing may wait for a timeout: the receivers refuse (kBusy) and resume
// their senders. Without the refusal the same run has hundreds of RTOs.
TEST(NetworkScenario, PacedRinaRacksRefuseRanksAheadWithoutTimeouts) {
  Settings s;
  s.topology_kind = "fat-tree";
  s.jobs = 1;
  s.model = "ResNet50";
  s.gradient_scale = 1.0 / 64;
  s.ina_percent = 50;
  s.ina_gbps = 20;
  s.max_sim_ms = 2000;
  const RunOutput r = run_point(s, "rina", 1);
  ASSERT_TRUE(r.ok) << r.problems;
  EXPECT_EQ(r.metrics.at("verify_errors"), 0);
  EXPECT_EQ(r.metrics.at("queue_drops"), 0);
  EXPECT_EQ(r.metrics.at("refused_packets"), 1040) << "the case this test is for: receivers refusing ranks ahead";
  EXPECT_EQ(r.metrics.at("timeouts"), 0);
  EXPECT_EQ(r.metrics.at("retransmits"), 0);
  // The per-link counters (runs.json "links") add up to the run's totals.
  double marks = 0;
  for (const auto& l : r.marked_links) {
    EXPECT_NE(l.link.find("->"), std::string::npos) << l.link;
    EXPECT_GT(l.ecn_marks + l.queue_drops, 0u) << l.link;
    marks += static_cast<double>(l.ecn_marks);
  }
  EXPECT_GT(marks, 0) << "no marks: the counters were not exercised";
  EXPECT_EQ(marks, r.metrics.at("ecn_marks_switch") + r.metrics.at("ecn_marks_host"));
}

Settings testbed(const std::string& ina) {
  Settings s;
  s.topology_kind = "testbed";
  s.jobs = 1;
  s.model = "ResNet50";
  s.gradient_mb = 0.0625;
  s.ina = ina;
  s.max_sim_ms = 2000;
  return s;
}

// Through the scenario layer: Rina with no INA switch is RAR (steps and
// bytes per worker), and with both ToRs INA it takes 2(G-1) = 2 ring steps.
TEST(NetworkScenario, RinaWithoutInaIsRarThroughTheScenarioLayer) {
  const RunOutput rar = run_point(testbed("none"), "rar", 1);
  const RunOutput none = run_point(testbed("none"), "rina", 1);
  const RunOutput both = run_point(testbed("all"), "rina", 1);
  ASSERT_TRUE(rar.ok && none.ok && both.ok) << rar.problems << none.problems << both.problems;
  EXPECT_EQ(none.metrics.at("steps"), rar.metrics.at("steps"));
  EXPECT_EQ(none.metrics.at("steps"), 14);
  EXPECT_EQ(none.metrics.at("bytes_per_worker"), rar.metrics.at("bytes_per_worker"));
  EXPECT_EQ(both.metrics.at("ina_switches"), 2);
  EXPECT_EQ(both.metrics.at("workers"), 8);
  EXPECT_LT(both.metrics.at("bytes_per_worker"), rar.metrics.at("bytes_per_worker"));
}

// switch.memory_mb_per_switch reaches the switch: one ToR with room for a
// few aggregators throttles Rina's region (§V: one contiguous region per
// job, the same at every ToR: less than half the throughput) and ATP's
// aggregators at that switch (collisions go to the PS: slower).
TEST(NetworkScenario, PerSwitchMemoryReachesTheSwitches) {
  for (const auto& [scheme, factor] : {std::pair{"rina", 0.5}, std::pair{"atp", 0.95}}) {
    Settings roomy = testbed("all");
    Settings tight = roomy;
    tight.memory_mb_per_switch = "tor1=0.001";  // 4 aggregators of 256 B
    const RunOutput a = run_point(roomy, scheme, 1);
    const RunOutput b = run_point(tight, scheme, 1);
    ASSERT_TRUE(a.ok && b.ok) << scheme << ": " << a.problems << b.problems;
    EXPECT_LT(b.metrics.at("throughput_gbps"), factor * a.metrics.at("throughput_gbps")) << scheme;
  }
}

}  // namespace
}  // namespace ina::exp
