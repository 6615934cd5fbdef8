// Golden traces: a tiny scenario per scheme (SwitchML, ATP, DSA, GRID; two
// jobs of 3 and 2 workers, a few packets, one targeted drop) run in the
// simulator with its trace sink on, compared event by event (every delivery
// and timer: time, node, type, job, PSN, src -> dst, rank, bitmap, flags)
// with the committed trace under tests/golden/<scheme>.trace (and Rina's
// ring collective on a small topology, rina_paper.trace). Any change of
// protocol behaviour, timing or event order shows up as the first differing
// line.
//
// Each is run a second time with its nodes split across three threads
// (sim::Simulator::set_partitions, node i in partition i mod 3, so every
// link crosses): the trace must be the committed one, event by event.
//
// After an intended behaviour change, regenerate the traces and review the diff:
//   INA_UPDATE_GOLDEN=1 ./build/ina_tests --gtest_filter='GoldenTrace.*'
//   git diff tests/golden/
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <functional>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "cluster_fixture.hpp"
#include "experiment/collective.hpp"
#include "topo/graph.hpp"

namespace ina::test {
namespace {

const char* type_name(PktType t) {
  switch (t) {
    case PktType::Data: return "Data";
    case PktType::Ack: return "Ack";
    case PktType::Fetch: return "Fetch";
    case PktType::FetchReply: return "FetchReply";
    case PktType::GradRequest: return "GradRequest";
    case PktType::Reminder: return "Reminder";
    case PktType::RateSync: return "RateSync";
    case PktType::RingData: return "RingData";
    case PktType::RingAck: return "RingAck";
    case PktType::RingPull: return "RingPull";
    case PktType::RingBarrier: return "RingBarrier";
    case PktType::KvData: return "KvData";
    case PktType::KvAck: return "KvAck";
    case PktType::KvResult: return "KvResult";
  }
  return "?";
}

std::vector<std::string> render(const std::vector<sim::TraceRecord>& trace) {
  std::vector<std::string> out;
  out.reserve(trace.size());
  for (const auto& r : trace) {
    std::ostringstream o;
    o << r.t << " n" << r.node << ' ';
    if (r.timer) {
      o << "timer token=0x" << std::hex << r.token;
    } else {
      o << type_name(r.type) << " job=" << r.job << " psn=" << r.psn << ' ' << r.src << "->";
      if (r.dst == kMulticast) o << "mcast";
      else o << r.dst;
      o << " rank=" << int{r.rank} << std::hex << " bm=0x" << r.bitmap.lo() << " fl=0x" << r.flags;
    }
    out.push_back(o.str());
  }
  return out;
}

std::string golden_path(const std::string& name) {
  return std::string(INA_SOURCE_DIR) + "/tests/golden/" + name + ".trace";
}

// Compares `got` with the committed trace (or rewrites it with INA_UPDATE_GOLDEN=1).
void compare_with_golden(const std::string& name, const std::vector<std::string>& got) {
  ASSERT_LE(got.size(), 600u) << "keep golden traces short";
  const std::string path = golden_path(name);
  const char* update = std::getenv("INA_UPDATE_GOLDEN");
  if (update && std::string(update) == "1") {
    std::ofstream f(path);
    ASSERT_TRUE(f) << "cannot write " << path;
    for (const auto& l : got) f << l << '\n';
    std::cout << "[golden] wrote " << got.size() << " lines to " << path << '\n';
    return;
  }
  std::ifstream f(path);
  ASSERT_TRUE(f) << "no golden trace at " << path << " (generate it with INA_UPDATE_GOLDEN=1)";
  std::vector<std::string> want;
  for (std::string l; std::getline(f, l);) want.push_back(l);
  const size_t n = std::min(want.size(), got.size());
  for (size_t i = 0; i < n; ++i)
    if (want[i] != got[i]) {
      ADD_FAILURE() << name << ": first difference at event " << i << " (line " << i + 1 << ")\n  want: " << want[i]
                    << "\n  got:  " << got[i];
      return;
    }
  EXPECT_EQ(got.size(), want.size()) << name << ": traces agree on the first " << n << " events, then "
                                     << (got.size() > n ? "got has more: " + got[n] : "want has more: " + want[n]);
}

// Drops the nth packet of `type` for `psn` delivered to node `at`.
ClusterConfig with_drop(ClusterConfig c, NodeId at, PktType type, uint32_t psn, std::vector<DropNth*>* drops,
                        int nth = 1) {
  c.wrap_host = [=](NodeId id, std::unique_ptr<Node> n) -> std::unique_ptr<Node> {
    if (id != at) return n;
    auto d = std::make_unique<DropNth>(std::move(n), [=](const Header& h) { return h.type == type && h.psn == psn; },
                                       nth);
    drops->push_back(d.get());
    return d;
  };
  return c;
}

ClusterConfig tiny(const std::string& scheme, uint64_t aggregators) {
  ClusterConfig c;
  c.scheme = scheme;
  c.workers_per_job = {3, 2};           // nodes: switch 0, job 1: 1-3, job 2: 4-5, PSs 6-7
  c.ops = {{150, 64}, {100}};           // job 1: psn 0-2, 3; job 2: psn 0-1
  c.job_start = {0, 2 * kUs};
  c.rank_stagger = 300 * kNs;
  c.aggregators = aggregators;
  c.seed = 7;
  return c;
}

// Runs c (one targeted drop, registered in `drops` when the cluster is
// built), checks every node, that exactly that packet was dropped, runs
// `extra` on the cluster, and compares the trace with tests/golden/<name>.trace.
// Node i in partition i mod `parts`.
std::vector<uint16_t> round_robin(size_t nodes, unsigned parts) {
  std::vector<uint16_t> p(nodes);
  for (size_t i = 0; i < nodes; ++i) p[i] = static_cast<uint16_t>(i % parts);
  return p;
}

void expect_golden(const std::string& name, const ClusterConfig& c, const std::vector<DropNth*>& drops,
                   const std::function<void(Cluster&)>& extra = {}) {
  const bool updating = std::getenv("INA_UPDATE_GOLDEN") && std::string(std::getenv("INA_UPDATE_GOLDEN")) == "1";
  for (const unsigned parts : {1u, 3u}) {
    if (parts > 1 && updating) break;
    SCOPED_TRACE(fmt::format("{} partition(s)", parts));
    std::vector<DropNth*> own;
    ClusterConfig cc = c;
    if (parts > 1) {  // the same drop, counted anew
      const auto wrap = c.wrap_host;
      cc.wrap_host = [wrap, &own](NodeId id, std::unique_ptr<Node> n) -> std::unique_ptr<Node> {
        auto w = wrap(id, std::move(n));
        if (auto* d = dynamic_cast<DropNth*>(w.get())) own.push_back(d);
        return w;
      };
    }
    Cluster cl(cc);
    if (parts > 1) cl.sim.set_partitions(round_robin(cl.sim.node_count(), parts));
    std::vector<sim::TraceRecord> trace;
    cl.sim.set_trace(&trace);
    ASSERT_TRUE(cl.run(1 * kSec));
    cl.check_all(name);
    const auto& d = parts > 1 ? own : drops;
    ASSERT_EQ(d.size(), 1u);
    EXPECT_EQ(d[0]->dropped, 1);
    if (extra) extra(cl);
    compare_with_golden(name, render(trace));
  }
}

// SwitchML, 4 slots per job (2 per pool): the result Ack of psn 1 to job 1
// rank 2 is lost; its retransmission is served from the slot's kept result,
// and the window cap holds rank 2's psn 3 back until then.
TEST(GoldenTrace, SwitchML) {
  std::vector<DropNth*> drops;
  expect_golden("switchml", with_drop(tiny("switchml", 8), 3, PktType::Ack, 1, &drops), drops, [](Cluster& cl) {
    // Served from kept results: rank 2's own psn 1, and psn 3 for ranks 0 and
    // 1, which timed out while rank 2 was held back by the window cap.
    EXPECT_EQ(cl.sw->stats().resend_served, 3u);
  });
}

// ATP, 4 shared aggregators (collisions between the jobs): job 1 rank 0
// loses psn 2's result multicast by the PS.
TEST(GoldenTrace, Atp) {
  std::vector<DropNth*> drops;
  expect_golden("atp", with_drop(tiny("atp", 4), 1, PktType::Ack, 2, &drops), drops);
}

// DSA, 4 shared aggregators, job 1 above job 2 in priority: job 2 rank 1
// loses psn 0's result.
TEST(GoldenTrace, Dsa) {
  std::vector<DropNth*> drops;
  ClusterConfig c = tiny("dsa", 4);
  c.job_priority = {1u << 10, 1u << 4};
  expect_golden("dsa", with_drop(c, 5, PktType::Ack, 0, &drops), drops);
}

// GRID on a star: job 1's three ranks aggregate at the switch, job 2's rank 0
// at the switch and rank 1 at the PS (its fragments addressed to the PS);
// 2 memory units, so the jobs collide (rate syncs). Job 1 rank 1 loses the
// result of psn 1.
void grid_golden(unsigned parts) {
  SCOPED_TRACE(fmt::format("{} partition(s)", parts));
  const cluster::StarPlan plan = cluster::plan_star({3, 2}, true);
  sim::Simulator s(7, 64);
  dp::SwitchConfig swc;
  swc.memory_bytes = 2 * 256;
  swc.payload_values = 64;
  auto sw_owned = schemes::find("grid").make_switch(swc);
  dp::SwitchProgram* sw = sw_owned.get();
  s.add_node(std::move(sw_owned), true);
  const std::vector<uint64_t> mask = {0b111, 0b01};
  const std::vector<uint64_t> elems = {150, 100};
  std::vector<std::vector<std::shared_ptr<host::VectorTensor>>> tensors(2);
  std::vector<std::vector<int32_t>> expected(2);
  std::vector<host::WorkerNode*> workers;
  DropNth* drop = nullptr;
  for (size_t j = 0; j < 2; ++j) {
    const auto& job = plan.jobs[j];
    dp::SwitchJob sj;
    sj.job = job.id;
    sj.workers = job.workers;
    sj.ps = job.ps;
    sj.agg_mask = mask[j];
    sw->add_job(sj);
    expected[j].assign(elems[j], 0);
    for (size_t r = 0; r < job.workers.size(); ++r) {
      std::vector<int32_t> g(elems[j]);
      for (size_t k = 0; k < g.size(); ++k) g[k] = static_cast<int32_t>(1000 * j + 100 * r + k) - 150;
      for (size_t k = 0; k < g.size(); ++k) expected[j][k] += g[k];
      tensors[j].push_back(std::make_shared<host::VectorTensor>(std::move(g)));
      host::WorkerConfig w;
      w.job = job.id;
      w.rank = static_cast<uint8_t>(r);
      w.nworkers = static_cast<uint8_t>(job.workers.size());
      w.self = job.workers[r];
      w.aggregator = (mask[j] >> r & 1) ? plan.sw : job.ps;
      w.switches = {plan.sw};  // results reach every worker from the switch
      w.ps = job.ps;
      w.init_window = 16;
      auto node = std::make_unique<host::WorkerNode>(w, static_cast<Time>(j * 2000 + r * 300) * kNs);
      node->submit(tensors[j][r], elems[j]);
      workers.push_back(node.get());
      std::unique_ptr<Node> n = std::move(node);
      if (job.workers[r] == 2) {
        n->set_id(2);
        auto d = std::make_unique<DropNth>(std::move(n), [](const Header& h) { return h.type == PktType::Ack && h.psn == 1; });
        drop = d.get();
        n = std::move(d);
      }
      ASSERT_EQ(s.add_node(std::move(n), false), job.workers[r]);
    }
  }
  std::vector<host::ParameterServer*> servers;
  for (const auto& job : plan.jobs) {
    host::PsConfig pc;
    pc.job = job.id;
    pc.workers = job.workers;
    pc.sw = plan.sw;
    auto ps = std::make_unique<host::ParameterServer>(pc);
    servers.push_back(ps.get());
    ASSERT_EQ(s.add_node(std::move(ps), false), job.ps);
  }
  sim::LinkParams lp;
  lp.delay = 1 * kUs;
  cluster::wire_star(s, plan, lp, lp);
  if (parts > 1) s.set_partitions(round_robin(s.node_count(), parts));
  std::vector<sim::TraceRecord> trace;
  s.set_trace(&trace);
  s.run(1 * kSec);
  ASSERT_TRUE(s.idle());
  for (auto* w : workers) EXPECT_EQ(w->completed(), 1u);
  for (size_t j = 0; j < 2; ++j)
    for (const auto& t : tensors[j]) EXPECT_EQ(t->result, expected[j]);
  for (auto* p : servers) EXPECT_EQ(p->entries(), 0u);
  EXPECT_EQ(s.packets_in_use(), 0u);
  ASSERT_NE(drop, nullptr);
  EXPECT_EQ(drop->dropped, 1);
  compare_with_golden("grid", render(trace));
}

TEST(GoldenTrace, Grid) {
  grid_golden(1);
  if (!(std::getenv("INA_UPDATE_GOLDEN") && std::string(std::getenv("INA_UPDATE_GOLDEN")) == "1")) grid_golden(3);
}

// Rina under its default transport (host::RinaTransport::Paper): the
// testbed (scenarios/rina/testbed.json) with tor0 INA, 6 workers, 0.0015
// MiB each (G = 3 groups: tor0's rack of 4, then h4 and h5 autonomous;
// shards of 2 packets). The rack's ScatterReduce is paced at 20 Gbps (122.4 ns a
// packet) and each rack worker's first AllGather send starts from one
// packet. A run of the packet simulator (exp::run_collective), not a
// Cluster; again on two threads (a rack each: sim::partition_by_racks).
// Regenerate as the others.
TEST(GoldenTrace, RinaPaper) {
  topo::Graph g = topo::load_topology_file(std::string(INA_SOURCE_DIR) + "/scenarios/rina/testbed.json").graph;
  for (const topo::NodeId s : g.switches()) g.set_ina(s, g.node(s).name == "tor0", g.node(s).name == "tor0" ? 100 : 0);
  exp::CollectiveSettings s;
  s.workers_per_job = {6};
  s.gradient_mb = 0.0015;
  s.max_sim_ms = 100;
  ASSERT_EQ(s.rina_transport, "paper");  // the default
  const bool updating = std::getenv("INA_UPDATE_GOLDEN") && std::string(std::getenv("INA_UPDATE_GOLDEN")) == "1";
  for (const unsigned threads : {1u, 2u}) {
    if (threads > 1 && updating) break;
    SCOPED_TRACE(fmt::format("{} thread(s)", threads));
    std::vector<sim::TraceRecord> trace;
    s.trace = &trace;
    s.threads = threads;
    const exp::CollectiveResult r = exp::run_collective(g, "rina", s);
    ASSERT_TRUE(r.ok) << r.problems;
    EXPECT_EQ(r.steps, 2u * 3 - 1);
    EXPECT_EQ(trace.size(), r.events);
    if (threads > 1) {
      EXPECT_GT(r.windows, 0u) << "the run must have been partitioned";
    }
    compare_with_golden("rina_paper", render(trace));
  }
}

// The trace sink sees exactly what digest() folds: one record per delivery
// (hops) and per timer, and switching it on changes nothing.
// Catches: a sink that skips reordered deliveries (heap events) or timers,
// or one whose bookkeeping perturbs the run.
TEST(GoldenTrace, SinkRecordsEveryEventAndDoesNotPerturbTheRun) {
  ClusterConfig c = tiny("dsa", 4);
  c.faults.loss = 0.05;
  c.faults.dup = 0.05;
  c.faults.reorder = 0.2;
  Cluster plain(c), traced(c);
  std::vector<sim::TraceRecord> trace;
  traced.sim.set_trace(&trace);
  ASSERT_TRUE(plain.run(1 * kSec));
  ASSERT_TRUE(traced.run(1 * kSec));
  EXPECT_EQ(plain.sim.digest(), traced.sim.digest());
  EXPECT_EQ(trace.size(), traced.sim.events());
  size_t timers = 0;
  for (const auto& r : trace) timers += r.timer;
  EXPECT_EQ(timers, traced.sim.timer_events());
  uint64_t reordered = 0;
  for (size_t l = 0; l < traced.sim.link_count(); ++l) reordered += traced.sim.link(static_cast<uint32_t>(l)).st.reordered;
  EXPECT_GT(reordered, 0u)
      << "the scenario must exercise reordered (heap) deliveries";
}

}  // namespace
}  // namespace ina::test
