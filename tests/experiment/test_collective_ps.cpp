// The PS collectives on multi-switch topologies (experiment/collective_ps):
// co-located sharded PSes with plain forwarding (`ps`) and PS-based INA along
// each shard's tree of INA switches (`atp`). Every run must give the exact
// sum at every worker and leave nothing behind; the byte counts into the
// PSes are derived by hand from Lemma 2 of the Rina paper (an INA switch and
// its children act as one worker).
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <algorithm>
#include <functional>
#include <memory>
#include <string>

#include "cluster_fixture.hpp"
#include "experiment/collective_ps.hpp"
#include "schemes/registry.hpp"
#include "cluster/cluster.hpp"
#include "sim/network.hpp"
#include "topo/graph.hpp"

using namespace ina;
using exp::detail::PsFamilyDetail;
using exp::detail::PsFamilyHooks;

namespace {

enum class Ina { None, Some, All };
const char* to_string(Ina i) { return i == Ina::None ? "no INA" : i == Ina::Some ? "some INA" : "all INA"; }

bool named(const topo::Graph& g, topo::NodeId v, const std::string& name) { return g.node(v).name == name; }

// fat-tree k = 4, 2 hosts per edge switch: edge0..7 (ids 0-7), agg0..7, core0..3, hosts h0..h15 (h0, h1 on edge0, ...).
// Some INA: the even edge switches, agg1 and agg2, core0 (every level, some racks without an INA ToR).
topo::Graph fat_tree(Ina ina) {
  topo::Graph g = *topo::generate("fat-tree:4");
  for (topo::NodeId v : g.switches()) {
    const std::string& n = g.node(v).name;
    const bool some = n == "edge0" || n == "edge2" || n == "edge4" || n == "edge6" || n == "agg1" || n == "agg2" ||
                      n == "core0";
    if (ina == Ina::All || (ina == Ina::Some && some)) g.set_ina(v, true, 100);
  }
  return g;
}

// One edge switch made programmable, the rest plain.
topo::Graph fat_tree_with(const std::string& ina_switch) {
  topo::Graph g = *topo::generate("fat-tree:4");
  g.set_ina(g.at(ina_switch, "test"), true, 100);
  return g;
}

exp::CollectiveSettings small(double values) {
  exp::CollectiveSettings s;
  s.gradient_mb = values * 4 / (1024.0 * 1024.0);  // `values` int32 values per worker
  return s;
}

struct Outcome {
  exp::CollectiveResult r;
  PsFamilyDetail d;
};

Outcome run(const topo::Graph& g, const char* scheme, int workers, exp::CollectiveSettings s, const PsFamilyHooks& hooks = {}) {
  s.workers_per_job = {workers};
  const sim::Placement pl = sim::place_rack_packed(g, {workers});
  Outcome out;
  out.r = exp::detail::run_ps_family(g, schemes::find(scheme), pl, s, hooks, &out.d);
  return out;
}

// What every run must show: finished, exact, nothing left anywhere, nothing refused.
void expect_clean(const Outcome& x) {
  EXPECT_TRUE(x.r.ok) << x.r.problems;
  EXPECT_EQ(x.r.verify_errors, 0u);
  EXPECT_EQ(x.d.aggregators_left, 0u);
  EXPECT_EQ(x.d.misrouted, 0u);
  for (size_t k = 0; k < x.d.ps_entries.size(); ++k) EXPECT_EQ(x.d.ps_entries[k], 0u) << "PS " << k;
  for (const auto& ps : x.d.ps) EXPECT_EQ(ps.malformed + ps.foreign, 0u);
  for (const auto& [id, st] : x.d.switches) EXPECT_EQ(st.malformed + st.foreign(), 0u) << "switch " << id;
  for (const auto& shards : x.d.worker)
    for (const auto& w : shards) EXPECT_EQ(w.malformed + w.foreign, 0u);
}

uint64_t ps_data_in(const Outcome& x, size_t k) { return x.d.ps.at(k).data_in; }
uint64_t collisions(const Outcome& x) {
  uint64_t c = 0;
  for (const auto& [id, st] : x.d.switches) c += st.collisions;
  return c;
}

// Wraps a node; drops the first packet it sends that `pick` selects.
class DropOneSent final : public Node {
 public:
  DropOneSent(std::unique_ptr<Node> inner, std::function<bool(const Packet&)> pick)
      : inner_(std::move(inner)), pick_(std::move(pick)) {}
  void on_start(Time now, Effects& fx) override {
    inner_->set_id(id());
    Fx f(*this, fx);
    inner_->on_start(now, f);
  }
  void on_packet(Packet* p, Time now, Effects& fx) override {
    Fx f(*this, fx);
    inner_->on_packet(p, now, f);
  }
  void on_timer(uint64_t t, Time now, Effects& fx) override {
    Fx f(*this, fx);
    inner_->on_timer(t, now, f);
  }
  uint64_t dropped() const { return dropped_; }

 private:
  class Fx final : public Effects {
   public:
    Fx(DropOneSent& n, Effects& base) : n_(n), base_(base) {}
    Packet* alloc() override { return base_.alloc(); }
    void free(Packet* p) override { base_.free(p); }
    void set_timer(Time at, uint64_t t) override { base_.set_timer(at, t); }
    bool multicast(Packet* p) override { return base_.multicast(p); }
    void send(Packet* p) override {
      if (n_.dropped_ == 0 && n_.pick_(*p)) {
        ++n_.dropped_;
        base_.free(p);
        return;
      }
      base_.send(p);
    }

   private:
    DropOneSent& n_;
    Effects& base_;
  };
  std::unique_ptr<Node> inner_;
  std::function<bool(const Packet&)> pick_;
  uint64_t dropped_ = 0;
};

// Hooks that wrap graph node `v` in a DropOneSent with `pick`; `dropper` is set to it.
PsFamilyHooks drop_first_sent(topo::NodeId v, std::function<bool(const Packet&)> pick, DropOneSent*& dropper) {
  PsFamilyHooks hooks;
  hooks.wrap = [v, pick = std::move(pick), &dropper](topo::NodeId u, std::unique_ptr<Node> n) -> std::unique_ptr<Node> {
    if (u != v) return n;
    auto w = std::make_unique<DropOneSent>(std::move(n), pick);
    dropper = w.get();
    return w;
  };
  return hooks;
}

}  // namespace

// The tree of one shard, by hand: 4 workers, h0 h1 on edge0 and h2 h3 on
// edge1 (pod 0), every switch INA. Shard 0's PS is h0: rank 1 reaches it
// through edge0; ranks 2 and 3 through edge1, one of pod 0's aggregation
// switches, then edge0. So edge1 owes {2,3}, the aggregation switch {2,3},
// edge0 {1,2,3}, and the PS's only child is edge0.
TEST(PsCollective, ShardTreeFollowsTheWayToThePs) {
  const topo::Graph g = fat_tree(Ina::All);
  const auto pl = sim::place_rack_packed(g, {4});
  std::vector<NodeId> workers(pl.jobs[0].begin(), pl.jobs[0].end());
  const cluster::ShardedPsCluster cl(g, workers, true);
  const cluster::ShardTree& t = cl.tree(0);
  const NodeId edge0 = 0, edge1 = 1;
  ASSERT_TRUE(named(g, edge0, "edge0") && named(g, edge1, "edge1"));
  EXPECT_EQ(t.ps, workers[0]);
  EXPECT_EQ(t.first, (std::vector<NodeId>{workers[0], edge0, edge1, edge1}));
  const NodeId agg = t.parent(edge1);
  EXPECT_TRUE(named(g, agg, "agg0") || named(g, agg, "agg1")) << g.node(agg).name;
  EXPECT_EQ(t.parent(agg), edge0);
  EXPECT_EQ(t.parent(edge0), workers[0]);
  EXPECT_EQ(t.subtree(edge1), 0b1100u);
  EXPECT_EQ(t.subtree(agg), 0b1100u);
  EXPECT_EQ(t.subtree(edge0), 0b1110u);
  EXPECT_EQ(t.direct(edge0), 0b0010u);
  EXPECT_EQ(t.direct(edge1), 0b1100u);
  EXPECT_EQ(t.direct(workers[0]), 0u);
  EXPECT_EQ(t.children(workers[0]), std::vector<NodeId>{edge0});
  EXPECT_EQ(t.children(edge0), std::vector<NodeId>{agg});
  EXPECT_EQ(t.children(agg), std::vector<NodeId>{edge1});
  EXPECT_EQ(t.switches.size(), 3u);
  // Without INA every worker sends to the PS.
  const cluster::ShardedPsCluster plain(g, workers, false);
  EXPECT_EQ(plain.tree(0).first, (std::vector<NodeId>(4, workers[0])));
  EXPECT_EQ(plain.tree(0).direct(workers[0]), 0b1110u);
  EXPECT_TRUE(plain.tree(0).switches.empty());
}

// The tree-level tests' job 1 at switch 10: workers 1..4 by rank, PS on
// node 1; switch 10 owes ranks {1,2,3}: rank 1 (node 2) sends to it
// directly, child switch 21 sends the aggregate of {2,3}; its parent is switch 20.
static dp::SwitchJob tree_level_job() {
  dp::SwitchJob j;
  j.job = 1;
  j.workers = {1, 2, 3, 4};
  j.ps = 1;
  j.parent = 20;
  j.children = {21};
  j.agg_mask = 0b1110;
  j.direct_mask = 0b0010;
  return j;
}

// The result of job 1's task 5, from `from` to switch 10.
static Packet* tree_level_result(test::FakeEffects& fx, NodeId from) {
  Packet* r = fx.alloc();
  r->h.type = PktType::Ack;
  r->h.flags = flag::kResult;
  r->h.job = 1;
  r->h.psn = 5;
  r->h.nworkers = 4;
  r->h.bitmap = 0b1111;
  r->h.src = from;
  r->h.dst = 10;
  r->h.count = 64;
  return r;
}

// ATP's program as one level of a tree (job 1 above), driven directly.
TEST(PsCollective, AtpTreeLevelAggregatesItsSubtreeAndFreesOnTheResult) {
  using test::FakeEffects;
  FakeEffects fx;
  dp::SwitchConfig c;
  c.memory_bytes = 64 * 256;
  auto sw = schemes::find("atp").make_switch(c);
  sw->set_id(10);
  sw->add_job(tree_level_job());
  sw->add_peer(20);
  sw->add_peer(21);
  const auto g1 = test::ramp(64, 7, 3), g23 = test::ramp(64, -50, 2);
  auto data = [&](uint16_t flags) { return test::make_data(fx, 1, 5, 1, 4, 2, g1, 0, flags, 10); };
  // Rank 1 reserves; the child's aggregate completes what 10 owes: one aggregate goes up.
  sw->on_packet(data(0), 0, fx);
  EXPECT_TRUE(fx.sent.empty());
  Packet* part = test::make_data(fx, 1, 5, 2, 4, 21, g23, 0, flag::kPartial, 10);
  part->h.bitmap = 0b1100;
  sw->on_packet(part, 0, fx);
  auto out = fx.take();
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].h.dst, 20);
  EXPECT_EQ(out[0].h.src, 10);
  EXPECT_EQ(out[0].h.bitmap, 0b1110u);
  EXPECT_TRUE(out[0].h.has(flag::kPartial));
  EXPECT_EQ(out[0].v, test::add(g1, g23));
  EXPECT_EQ(sw->occupied(), 1u) << "held until the result passes";
  // A late copy of rank 1's packet: the aggregate holds it already.
  sw->on_packet(data(0), 0, fx);
  EXPECT_TRUE(fx.take().empty());
  // The result from the parent: the aggregator is freed, one copy to the
  // child switch, one to rank 1 (unicast: this engine has no multicast).
  auto result = [&](NodeId from) { return tree_level_result(fx, from); };
  sw->on_packet(result(20), 0, fx);
  out = fx.take();
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[0].h.dst, 21);
  EXPECT_EQ(out[1].h.dst, 2);
  for (const auto& o : out) {
    EXPECT_EQ(o.h.type, PktType::Ack);
    EXPECT_EQ(o.h.src, 10);
    EXPECT_TRUE(o.h.has(flag::kResult));
  }
  EXPECT_EQ(sw->occupied(), 0u);
  // Another late copy, after the result: dropped, nothing reserved.
  sw->on_packet(data(0), 0, fx);
  EXPECT_TRUE(fx.take().empty());
  EXPECT_EQ(sw->occupied(), 0u);
  // A retransmission never reserves: it goes up to the parent.
  sw->on_packet(data(flag::kResend), 0, fx);
  out = fx.take();
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].h.dst, 20);
  EXPECT_EQ(sw->occupied(), 0u);
  const dp::SwitchStats& st = sw->stats();
  EXPECT_EQ(st.completed, 1u);
  EXPECT_EQ(st.duplicates, 1u);
  EXPECT_EQ(st.stale, 1u);
  EXPECT_EQ(st.tree_results, 1u);
  EXPECT_EQ(st.released_by_ack, 1u);
  EXPECT_EQ(st.to_ps, 2u);
  EXPECT_EQ(st.malformed + st.foreign(), 0u);
  // Refused: a result from a child, an aggregate from a non-switch, one of ranks 10 does not owe.
  sw->on_packet(result(21), 0, fx);
  Packet* stranger = test::make_data(fx, 1, 6, 2, 4, 99, g23, 0, flag::kPartial, 10);
  stranger->h.bitmap = 0b1100;
  sw->on_packet(stranger, 0, fx);
  Packet* too_much = test::make_data(fx, 1, 6, 0, 4, 21, g23, 0, flag::kPartial, 10);
  too_much->h.bitmap = 0b0101;
  sw->on_packet(too_much, 0, fx);
  EXPECT_TRUE(fx.take().empty());
  EXPECT_EQ(st.foreign_ack, 1u);
  EXPECT_EQ(st.foreign_data, 2u);
  EXPECT_EQ(fx.pool.in_use(), 0u);
}

// DSA's program as one level of a tree, driven directly (job 1 as in the
// ATP test above; one aggregator, so every task meets at index 0). Job 2
// (workers 5, 6; PS on 5) has its own tree level here: rank 1 (node 6)
// sends to this switch, its parent is switch 30. Unlike ATP, a completed
// subtree frees the aggregator at once; what goes up (an aggregate, an
// evicted partial, a lost compare) goes to the job's parent, not its PS.
TEST(PsCollective, DsaTreeLevelSendsEverythingUpToTheJobsParent) {
  using test::FakeEffects;
  FakeEffects fx;
  dp::SwitchConfig c;
  c.memory_bytes = 256;  // one aggregator of 64 values
  auto sw = schemes::find("dsa").make_switch(c);
  sw->set_id(10);
  sw->add_job(tree_level_job());
  dp::SwitchJob j2;
  j2.job = 2;
  j2.workers = {5, 6};
  j2.ps = 5;
  j2.parent = 30;
  j2.agg_mask = 0b10;
  j2.direct_mask = 0b10;
  sw->add_job(j2);
  for (NodeId peer : {20, 21, 30}) sw->add_peer(peer);
  const auto g1 = test::ramp(64, 7, 3), g23 = test::ramp(64, -50, 2), g2 = test::ramp(64, 1000, -1);
  auto job1 = [&](uint32_t psn, uint32_t prio, uint16_t flags = 0) {
    return test::make_data(fx, 1, psn, 1, 4, 2, g1, prio, flags, 10);
  };
  auto job2 = [&](uint32_t psn, uint32_t prio) { return test::make_data(fx, 2, psn, 1, 2, 6, g2, prio, 0, 10); };
  // Rank 1 reserves; the child's aggregate completes the subtree: it goes up and the aggregator is free.
  sw->on_packet(job1(5, 10), 0, fx);
  Packet* part = test::make_data(fx, 1, 5, 2, 4, 21, g23, 0, flag::kPartial, 10);
  part->h.bitmap = 0b1100;
  sw->on_packet(part, 0, fx);
  auto out = fx.take();
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].h.dst, 20);
  EXPECT_EQ(out[0].h.src, 10);
  EXPECT_EQ(out[0].h.type, PktType::Data);
  EXPECT_EQ(out[0].h.bitmap, 0b1110u);
  EXPECT_EQ(out[0].v, test::add(g1, g23));
  EXPECT_EQ(sw->occupied(), 0u) << "DSA holds nothing for the result";
  // A late copy before the result reserves; the result passing frees it and goes down.
  sw->on_packet(job1(5, 10), 0, fx);
  EXPECT_EQ(sw->occupied(), 1u);
  sw->on_packet(tree_level_result(fx, 20), 0, fx);
  out = fx.take();
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[0].h.dst, 21);
  EXPECT_EQ(out[1].h.dst, 2);
  EXPECT_EQ(sw->occupied(), 0u);
  // A late copy after the result: dropped, nothing reserved.
  sw->on_packet(job1(5, 10), 0, fx);
  EXPECT_TRUE(fx.take().empty());
  EXPECT_EQ(sw->occupied(), 0u);
  // Job 2's packet of higher priority preempts job 1's partial: the partial
  // goes to job 1's parent, job 2's one-rank subtree completes at once and
  // goes to job 2's parent.
  sw->on_packet(job1(6, 10), 0, fx);
  sw->on_packet(job2(9, 100), 0, fx);
  out = fx.take();
  ASSERT_EQ(out.size(), 2u);
  const auto& up2 = out[0].h.job == 2 ? out[0] : out[1];
  const auto& evicted = out[0].h.job == 1 ? out[0] : out[1];
  EXPECT_EQ(up2.h.dst, 30);
  EXPECT_EQ(up2.h.psn, 9u);
  EXPECT_EQ(up2.h.bitmap, 0b10u);
  EXPECT_EQ(up2.v, g2);
  EXPECT_EQ(evicted.h.dst, 20);
  EXPECT_EQ(evicted.h.psn, 6u);
  EXPECT_TRUE(evicted.h.has(flag::kEvicted));
  EXPECT_EQ(evicted.h.bitmap, 0b0010u);
  EXPECT_EQ(evicted.v, g1);
  EXPECT_EQ(sw->occupied(), 0u);
  // A packet of lower priority loses the compare: up to its parent, the holder's priority halved.
  sw->on_packet(job1(7, 10), 0, fx);
  sw->on_packet(job2(10, 1), 0, fx);
  out = fx.take();
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].h.dst, 30);
  EXPECT_TRUE(out[0].h.has(flag::kCollision));
  EXPECT_EQ(sw->occupied(), 1u);
  const dp::SwitchStats& st = sw->stats();
  EXPECT_EQ(st.completed, 2u);
  EXPECT_EQ(st.stale, 1u);
  EXPECT_EQ(st.released_by_ack, 1u);
  EXPECT_EQ(st.preempt_won, 1u);
  EXPECT_EQ(st.preempt_lost, 1u);
  EXPECT_EQ(st.downgrades, 1u);
  EXPECT_EQ(st.to_ps, 4u);
  EXPECT_EQ(st.malformed + st.foreign(), 0u);
  EXPECT_EQ(fx.pool.in_use(), 0u);
}

// fat-tree k = 4, 8 and 16 workers, ps, atp and dsa with all, some and no INA
// switches: exact at every worker, nothing left, no retransmission (no
// loss). Each shard is 4 packets. With every switch INA, each PS gets
// exactly two packets per packet of its shard: its own worker's (on the
// host) and one aggregate from its ToR (its only child); with plain PS, one
// from each of the N workers.
TEST(PsCollective, ExactOnFatTreeWithAllSomeOrNoInaSwitches) {
  struct Case {
    const char* scheme;
    Ina ina;
  };
  for (const Case c : {Case{"ps", Ina::All}, Case{"atp", Ina::All}, Case{"atp", Ina::Some}, Case{"atp", Ina::None},
                       Case{"dsa", Ina::All}, Case{"dsa", Ina::Some}})
    for (int n : {8, 16}) {
      SCOPED_TRACE(std::string(c.scheme) + " " + to_string(c.ina) + " " + std::to_string(n) + " workers");
      const topo::Graph g = fat_tree(c.ina);
      const uint64_t packets = 4;  // per shard
      const Outcome x = run(g, c.scheme, n, small(static_cast<double>(n * 64 * packets)));
      expect_clean(x);
      EXPECT_EQ(x.r.retransmits, 0u);
      ASSERT_EQ(x.d.ps.size(), static_cast<size_t>(n));
      EXPECT_EQ(collisions(x), 0u);
      const bool ps_only = std::string(c.scheme) == "ps" || c.ina == Ina::None;
      for (int k = 0; k < n; ++k) {
        EXPECT_EQ(x.d.ps[k].completions, packets) << "PS " << k;
        if (ps_only) {
          EXPECT_EQ(ps_data_in(x, k), packets * n) << "PS " << k;
        }
        if (c.ina == Ina::All && !ps_only) {
          EXPECT_EQ(ps_data_in(x, k), packets * 2) << "PS " << k;
        }
      }
      if (std::string(c.scheme) == "ps") {
        EXPECT_TRUE(x.d.switches.empty()) << "ps runs no switch program";
      }
    }
}

// The same under 1 % loss, 1 % duplication and 1 % reordering on every
// link: still exact, and nothing leaks (no aggregator, PS entry or packet).
TEST(PsCollective, ExactUnderLossDuplicationAndReordering) {
  struct Case {
    const char* scheme;
    Ina ina;
  };
  for (const Case c : {Case{"ps", Ina::None}, Case{"atp", Ina::All}, Case{"atp", Ina::Some}, Case{"atp", Ina::None},
                       Case{"dsa", Ina::All}, Case{"dsa", Ina::Some}})
    for (int n : {8, 16})
      for (uint64_t seed : {1, 2, 3}) {
        SCOPED_TRACE(std::string(c.scheme) + " " + to_string(c.ina) + " " + std::to_string(n) + " workers, seed " +
                     std::to_string(seed));
        exp::CollectiveSettings s = small(static_cast<double>(n * 64 * 8));
        s.loss = s.dup = s.reorder = 0.01;
        s.seed = seed;
        uint64_t lost = 0, duplicated = 0, reordered = 0;
        PsFamilyHooks hooks;
        hooks.inspect = [&](sim::Simulator& sim) {
          for (size_t l = 0; l < sim.link_count(); ++l) {
            lost += sim.link(static_cast<uint32_t>(l)).st.drop_loss;
            duplicated += sim.link(static_cast<uint32_t>(l)).st.duplicated;
            reordered += sim.link(static_cast<uint32_t>(l)).st.reordered;
          }
        };
        const Outcome x = run(fat_tree(c.ina), c.scheme, n, s, hooks);
        // Preconditions: the faults were there to recover from.
        ASSERT_GT(lost, 0u);
        ASSERT_GT(duplicated, 0u);
        ASSERT_GT(reordered, 0u);
        expect_clean(x);
      }
}

// Lemma 2, by hand. 4 workers: h0 h1 on edge0, h2 h3 on edge1; each shard
// is 2 packets of 64 values (306 B). Into PS k's host arrive its shard's
// gradients (the own worker's stays on the host) and one copy of each result
// of the 3 other shards, 2 packets each (6 x 306 B), nothing else.
//  - ps: 3 workers x 2 packets = 6 gradients: (6 + 6) x 306 = 3672 B.
//  - atp, every switch INA: the PS's ToR is its only child, one aggregate
//    per packet: (2 + 6) x 306 = 2448 B.
//  - atp, only edge1 INA: PS 0 (h0) gets rank 1's gradient straight (edge0
//    forwards) and one aggregate of {2,3} from edge1: (4 + 6) x 306 = 3060 B;
//    PS 1 likewise; PS 2 (h2, under edge1) gets one aggregate of {0,1,3}
//    from edge1, its only child: 2448 B; PS 3 likewise.
TEST(PsCollective, BytesIntoEachPsAreWhatLemma2Predicts) {
  const exp::CollectiveSettings s = small(4 * 128);
  const Outcome ps = run(fat_tree(Ina::All), "ps", 4, s);
  const Outcome all = run(fat_tree(Ina::All), "atp", 4, s);
  const Outcome edge1 = run(fat_tree_with("edge1"), "atp", 4, s);
  for (const Outcome* x : {&ps, &all, &edge1}) expect_clean(*x);
  EXPECT_EQ(ps.d.ps_link_in_bytes, (std::vector<uint64_t>{3672, 3672, 3672, 3672}));
  EXPECT_EQ(all.d.ps_link_in_bytes, (std::vector<uint64_t>{2448, 2448, 2448, 2448}));
  EXPECT_EQ(edge1.d.ps_link_in_bytes, (std::vector<uint64_t>{3060, 3060, 2448, 2448}));
  // The PS's own count: the own worker's 2 packets plus what came in.
  for (size_t k = 0; k < 4; ++k) {
    EXPECT_EQ(ps_data_in(ps, k), 2u + 6u);
    EXPECT_EQ(ps_data_in(all, k), 2u + 2u);
    EXPECT_EQ(ps_data_in(edge1, k), k < 2 ? 2u + 4u : 2u + 2u);
  }
  // Every aggregate the PS got under full INA held the 3 other ranks: the PS
  // only ever added its own worker's packet to it.
  for (const auto& st : all.d.ps) EXPECT_EQ(st.completions, 2u);
}

// atp with no INA switch is ps: the same nodes, the same packets, the same run.
TEST(PsCollective, AtpWithoutInaSwitchesIsPs) {
  const topo::Graph g = fat_tree(Ina::None);
  const exp::CollectiveSettings s = small(16 * 64 * 3);
  const Outcome ps = run(g, "ps", 16, s);
  const Outcome atp = run(g, "atp", 16, s);
  expect_clean(ps);
  expect_clean(atp);
  EXPECT_EQ(atp.d.ps_link_in_bytes, ps.d.ps_link_in_bytes);
  for (size_t k = 0; k < 16; ++k) EXPECT_EQ(ps_data_in(atp, k), ps_data_in(ps, k));
  EXPECT_EQ(atp.d.host_sent_bytes, ps.d.host_sent_bytes);
  EXPECT_EQ(atp.r.events, ps.r.events);
  EXPECT_EQ(atp.r.sync_ms, ps.r.sync_ms);
  EXPECT_TRUE(atp.d.switches.empty());
}

// One aggregate dropped on its way up, and the recovery that follows. 3
// workers: h0 h1 on edge0, h2 on edge1; one packet per shard; every switch
// INA. Shard 0 (PS on h0): rank 1 -> edge0, rank 2 -> edge1 -> agg -> edge0
// -> PS. edge1's aggregate {2} of shard 0 is dropped as it leaves edge1.
// The PS's reminder timeout is set far out (50 ms) so that only the
// workers' retransmissions recover, at their 1 ms RTO, all at once:
//  - rank 0's copy reaches its PS on the host: a duplicate of {0};
//  - rank 1's reaches edge0, which holds {1}: a duplicate there, and being
//    a retransmission it flushes {1} up to the PS and frees the aggregator;
//  - rank 2's reaches edge1, which completed {2} and still holds it: it
//    sends the aggregate up again; the aggregation switch and edge0 hold
//    nothing for it any more (retransmissions never reserve) and pass it on;
//  - the PS completes {0} + {1} + {2} and the result goes down the tree.
TEST(PsCollective, RecoversFromOneDroppedAggregate) {
  const topo::Graph g = fat_tree(Ina::All);
  const NodeId edge0 = 0, edge1 = 1;
  DropOneSent* dropper = nullptr;
  PsFamilyHooks hooks = drop_first_sent(
      edge1,
      [](const Packet& p) {
        return p.h.type == PktType::Data && p.h.job == 1 && p.h.psn == 0 && p.h.has(flag::kPartial);
      },
      dropper);
  hooks.ps = [](host::PsConfig& p) { p.min_timeout = 50 * kMs; };
  const Outcome x = run(g, "atp", 3, small(3 * 64), hooks);
  ASSERT_NE(dropper, nullptr);
  EXPECT_EQ(dropper->dropped(), 1u);
  expect_clean(x);
  // Every worker timed out once on shard 0, and only there.
  EXPECT_EQ(x.r.retransmits, 3u);
  for (size_t r = 0; r < 3; ++r)
    for (size_t k = 0; k < 3; ++k) {
      EXPECT_EQ(x.d.worker[r][k].timeouts, k == 0 ? 1u : 0u) << "rank " << r << " shard " << k;
      EXPECT_EQ(x.d.worker[r][k].reminders, 0u);
    }
  // PS 0: rank 0's packet and its copy, edge0's flush of {1}, edge1's {2}; one completion.
  const host::PsStats& p0 = x.d.ps[0];
  EXPECT_EQ(p0.data_in, 4u);
  EXPECT_EQ(p0.duplicates, 1u);
  EXPECT_EQ(p0.completions, 1u);
  EXPECT_EQ(p0.timeout_reminders + p0.worker_reminders + p0.conflicts, 0u);
  auto stats = [&](NodeId v) {
    for (const auto& [id, st] : x.d.switches)
      if (id == v) return st;
    ADD_FAILURE() << "no switch " << v;
    return dp::SwitchStats{};
  };
  // edge1 aggregates for every shard ({2} for shards 0 and 1, {0,1} for
  // shard 2, whose PS it serves): 3 completions, each sent up once, plus
  // shard 0's second sending; each held until its result passed.
  const dp::SwitchStats e1 = stats(edge1);
  EXPECT_EQ(e1.completed, 3u);
  EXPECT_EQ(e1.to_ps, 4u);
  EXPECT_EQ(e1.released_by_ack, 3u);
  // edge0 completes shards 1 ({0,2}) and 2 ({0,1}); for shard 0 it saw
  // rank 1's copy as a duplicate, flushed {1}, and passed {2} on.
  const dp::SwitchStats e0 = stats(edge0);
  EXPECT_EQ(e0.completed, 2u);
  EXPECT_EQ(e0.duplicates, 1u);
  EXPECT_EQ(e0.to_ps, 4u);
  EXPECT_EQ(e0.released_by_ack, 2u);
}

// Several iterations with compute time between them: every iteration's
// allreduce completes exactly once per task at each PS (3 iterations x 2
// packets per shard), and an iteration lasts its compute time and more.
TEST(PsCollective, IterationsWithComputeTime) {
  exp::CollectiveSettings s = small(8 * 64 * 2);
  s.iterations = 3;
  s.compute_ms = 0.05;
  for (const char* scheme : {"ps", "atp"}) {
    SCOPED_TRACE(scheme);
    const Outcome x = run(fat_tree(Ina::All), scheme, 8, s);
    expect_clean(x);
    EXPECT_EQ(x.r.retransmits, 0u);
    for (const auto& st : x.d.ps) EXPECT_EQ(st.completions, 3u * 2u);
    EXPECT_GT(x.r.iteration_ms, s.compute_ms);  // compute, then an allreduce
  }
}

// Other topologies: dragonfly (4, 9, 2), leaf-spine, a topology file.
TEST(PsCollective, ExactOnDragonflyLeafSpineAndAFile) {
  topo::Graph df = *topo::generate("dragonfly:4,9,2");
  topo::Graph ls = topo::leaf_spine(2, 4, 16);
  for (topo::Graph* g : {&df, &ls})
    for (topo::NodeId v : g->switches()) g->set_ina(v, true, 100);
  topo::Graph file = topo::load_topology_file(std::string(INA_SOURCE_DIR) + "/scenarios/grid/testbed.json").graph;
  struct Case {
    const topo::Graph* g;
    int n;
  };
  for (const Case c : {Case{&df, 16}, Case{&ls, 16}, Case{&file, 9}})
    for (const char* scheme : {"ps", "atp"}) {
      SCOPED_TRACE(c.g->name + " " + scheme);
      const Outcome x = run(*c.g, scheme, c.n, small(c.n * 64 * 2));
      expect_clean(x);
      EXPECT_EQ(x.r.retransmits, 0u);
    }
}

// ATP over aggregation trees whose shards collide in the switches' shared
// pools (0.25 MiB per worker, the simulator's 5 MiB pools, every ToR INA):
// nothing is lost, so no worker may wait for a retransmission timeout.
// Catches: a task split by a collision (a rank's packet went around an
// aggregator that the task's other packets reserved later) waiting for the
// RTO; without the switch's bypass records, 8, 96 and 64 retransmissions on
// these three trees.
TEST(PsCollective, AtpTasksSplitByCollisionsInATreeNeedNoTimeout) {
  topo::Graph testbed =
      topo::load_topology_file(std::string(INA_SOURCE_DIR) + "/scenarios/rina/testbed.json").graph;
  topo::Graph leaf_spine =
      topo::load_topology_file(std::string(INA_SOURCE_DIR) + "/scenarios/rina/leaf-spine-2x4x4.json").graph;
  topo::Graph ft = *topo::generate("fat-tree:4");
  for (topo::Graph* g : {&testbed, &leaf_spine, &ft})
    for (topo::NodeId v : g->switches()) {
      const std::string& n = g->node(v).name;
      g->set_ina(v, n.rfind("tor", 0) == 0 || n.rfind("leaf", 0) == 0 || n.rfind("edge", 0) == 0, 100);
    }
  struct Case {
    const topo::Graph* g;
    int n;
  };
  for (const Case c : {Case{&testbed, 8}, Case{&leaf_spine, 16}, Case{&ft, 16}}) {
    SCOPED_TRACE(c.g->name);
    exp::CollectiveSettings s;
    s.gradient_mb = 0.25;
    const Outcome x = run(*c.g, "atp", c.n, s);
    expect_clean(x);
    EXPECT_GT(collisions(x), 0u) << "no collision: the case this test is for did not occur";
    uint64_t overwritten = 0;
    for (const auto& [id, st] : x.d.switches) overwritten += st.bypass_overwritten;
    EXPECT_EQ(overwritten, 0u);
    EXPECT_EQ(x.r.retransmits, 0u);
    EXPECT_EQ(x.r.timeouts, 0u);
  }
}

// Jobs beyond 64 workers (worker bitmaps are RankBits, 128 ranks): the
// dragonfly 4,9,2 with every one of its 72 hosts a worker, every router INA
// (ATP) or none (PS). Ranks 64-71 live in the bitmaps' second word; a PS or
// switch that lost them would never complete a task, and the run would end
// unfinished or inexact.
TEST(PsCollective, SeventyTwoWorkersOnTheDragonflyAreExact) {
  topo::Graph df = *topo::generate("dragonfly:4,9,2");
  const topo::Graph plain = df;
  for (topo::NodeId v : df.switches()) df.set_ina(v, true, 100);
  ASSERT_EQ(df.hosts().size(), 72u);
  for (const char* scheme : {"ps", "atp"}) {
    SCOPED_TRACE(scheme);
    const Outcome x = run(std::string(scheme) == "ps" ? plain : df, scheme, 72, small(72 * 64));
    expect_clean(x);
    ASSERT_EQ(x.d.ps.size(), 72u);
    for (size_t k = 0; k < 72; ++k) EXPECT_EQ(x.d.ps[k].completions, 1u) << "PS " << k;
  }
  // The first packet rank 70 sends to PS 3 is lost: PS 3 holds the other 71
  // ranks' gradients (and no switch holds anything: no INA), so only rank
  // 70's retransmission can complete it.
  const NodeId h70 = static_cast<NodeId>(sim::place_rack_packed(plain, {72}).jobs[0][70]);
  DropOneSent* dropper = nullptr;
  const PsFamilyHooks hooks = drop_first_sent(
      h70,
      [](const Packet& p) {
        return p.h.type == PktType::Data && p.h.rank == 70 && p.h.job == cluster::ShardedPsCluster::job_of(3);
      },
      dropper);
  const Outcome x = run(plain, "ps", 72, small(72 * 64), hooks);
  ASSERT_NE(dropper, nullptr);
  EXPECT_EQ(dropper->dropped(), 1u);
  expect_clean(x);
  // The 71 other gradients wait at PS 3 past every worker's RTO: each of the
  // 72 ranks times out once, on shard 3 only, and rank 70's resend (a bit
  // of the second word) completes the task once from gradients; the later
  // resends carry the result they already hold (known results).
  EXPECT_EQ(x.r.retransmits, 72u);
  for (size_t r = 0; r < 72; ++r)
    for (size_t k = 0; k < 72; ++k) ASSERT_EQ(x.d.worker[r][k].timeouts, k == 3 ? 1u : 0u) << "rank " << r << " shard " << k;
  for (size_t k = 0; k < 72; ++k) {
    if (k != 3) {
      EXPECT_EQ(x.d.ps[k].completions, 1u) << "PS " << k;
    }
  }
  EXPECT_EQ(x.d.ps[3].completions - x.d.ps[3].known_results, 1u);
}

// The simulator: a link's duplicate of a multicast packet serves the same
// members as the original (it once served all of them, and a result sent
// by one INA switch came back to it up the tree). Hosts a (on switch s1), b
// and c (on s2); every packet on s1 -> s2 is duplicated; a multicast for c
// alone must reach c twice and nobody else.
TEST(PsCollective, SimulatorDuplicateOfAMulticastKeepsItsMembers) {
  struct Count final : public Node {
    void on_packet(Packet* p, Time, Effects& fx) override {
      ++got;
      fx.free(p);
    }
    void on_timer(uint64_t, Time, Effects&) override {}
    int got = 0;
  };
  sim::Simulator sim(1, 64);
  const NodeId s1 = sim.add_node(std::make_unique<sim::Forwarder>(), true);
  const NodeId s2 = sim.add_node(std::make_unique<sim::Forwarder>(), true);
  std::vector<NodeId> hosts;
  for (int i = 0; i < 3; ++i) hosts.push_back(sim.add_node(std::make_unique<Count>(), false));
  sim::LinkParams plain, dup;
  dup.dup = 1;
  sim.connect(s1, s2, dup, plain);
  sim.connect(hosts[0], s1, plain, plain);
  sim.connect(hosts[1], s2, plain, plain);
  sim.connect(hosts[2], s2, plain, plain);
  sim.build_routes();
  sim.set_multicast_group(1, hosts);
  Packet* p = sim.pool().get();
  p->h.type = PktType::Ack;
  p->h.job = 1;
  p->h.dst = kMulticast;
  p->mcast = 0b100;  // c only
  sim.route(hosts[0], p);
  sim.run();
  EXPECT_EQ(sim.node<Count>(hosts[0]).got, 0);
  EXPECT_EQ(sim.node<Count>(hosts[1]).got, 0);
  EXPECT_EQ(sim.node<Count>(hosts[2]).got, 2);
  EXPECT_EQ(sim.packets_in_use(), 0u);
}

TEST(PsCollective, RefusesWhatItCannotRun) {
  const topo::Graph g = fat_tree(Ina::All);
  exp::CollectiveSettings s = small(3);  // fewer values than shards
  s.workers_per_job = {4};
  EXPECT_THROW(exp::detail::run_ps_family(g, schemes::find("ps"), sim::place_rack_packed(g, {4}), s),
               std::invalid_argument);
  s = small(1024);
  s.workers_per_job = {4, 4};
  sim::Placement twice = sim::place_rack_packed(g, {4, 4});
  twice.jobs[1][0] = twice.jobs[0][0];  // one host in two jobs
  try {
    exp::detail::run_ps_family(g, schemes::find("atp"), twice, s);
    ADD_FAILURE() << "a host in two jobs ran";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find(fmt::format("host {} is in two jobs", twice.jobs[0][0])), std::string::npos)
        << e.what();
  }
}

static Outcome run_jobs(const topo::Graph& g, const char* scheme, const sim::Placement& pl, exp::CollectiveSettings s) {
  s.workers_per_job.clear();
  for (const auto& j : pl.jobs) s.workers_per_job.push_back(static_cast<int>(j.size()));
  Outcome out;
  out.r = exp::detail::run_ps_family(g, schemes::find(scheme), pl, s, {}, &out.d);
  return out;
}

// Two jobs of 4 on a k = 4 fat-tree, every switch INA: job 0 fills pod 0 and
// job 1 pod 1, so no link and no switch carries both. Each job then runs as
// if it were alone, to the nanosecond and to the hop: the shards of job 1
// are jobs 5-8 to the switches instead of 1-4, which changes nothing while
// no task collides (asserted). Each PS gets two packets per packet of its
// shard, as with one job (Lemma 2).
TEST(PsCollective, TwoJobsInTheirOwnPodsRunAsIfAlone) {
  const topo::Graph g = fat_tree(Ina::All);
  const sim::Placement both = sim::place_rack_packed(g, {4, 4});
  sim::Placement first, second;
  first.jobs = {both.jobs[0]};
  second.jobs = {both.jobs[1]};
  const uint64_t packets = 6;
  const exp::CollectiveSettings s = small(4.0 * 64 * packets);
  for (const char* scheme : {"atp", "dsa"}) {
    SCOPED_TRACE(scheme);
    const Outcome two = run_jobs(g, scheme, both, s);
    const Outcome a = run_jobs(g, scheme, first, s), b = run_jobs(g, scheme, second, s);
    expect_clean(two);
    ASSERT_EQ(collisions(two) + collisions(a) + collisions(b), 0u);
    ASSERT_EQ(two.r.job_sync_ms.size(), 2u);
    EXPECT_EQ(two.r.job_sync_ms[0], a.r.sync_ms);
    EXPECT_EQ(two.r.job_sync_ms[1], b.r.sync_ms);
    EXPECT_EQ(two.r.hops, a.r.hops + b.r.hops);
    ASSERT_EQ(two.d.ps.size(), 8u);
    for (size_t k = 0; k < 8; ++k) {
      EXPECT_EQ(two.d.ps[k].completions, packets) << "PS " << k;
      EXPECT_EQ(ps_data_in(two, k), packets * 2) << "PS " << k;
    }
  }
}

// Two jobs of 8 interleaved on a k = 4 fat-tree whose ToRs are INA (each
// ToR serves one worker of each job) with 16 aggregators per ToR: the jobs'
// shards fight over the ToRs' memory (ATP: first come first served; DSA:
// Eq. 1 priorities preempt), with and without 1 % loss, duplication and
// reordering. Every worker of both jobs ends with its own job's exact sum
// (the jobs' gradients differ), nothing is left anywhere, and nobody
// refuses a packet (a packet of the other job at a PS or worker would be).
TEST(PsCollective, JobsSharingToRsAreExactUnderAtpAndDsa) {
  topo::Graph g = *topo::generate("fat-tree:4");
  for (topo::NodeId v : g.tor_switches()) g.set_ina(v, true, 100);
  const sim::Placement pl = sim::place_interleaved(g, {8, 8});
  for (const char* scheme : {"atp", "dsa"})
    for (const double faults : {0.0, 0.01}) {
      SCOPED_TRACE(std::string(scheme) + (faults > 0 ? " with faults" : ""));
      exp::CollectiveSettings s = small(8.0 * 64 * 8);
      s.memory_mb = 16 * 256 / (1024.0 * 1024.0);
      s.loss = s.dup = s.reorder = faults;
      s.seed = 3;
      const Outcome x = run_jobs(g, scheme, pl, s);
      expect_clean(x);
      ASSERT_EQ(x.r.job_sync_ms.size(), 2u);
      // Preconditions: the jobs did contend for the ToRs.
      ASSERT_GT(x.r.collisions, 0u);
      if (std::string(scheme) == "dsa") {
        ASSERT_GT(x.r.evictions, 0u);
      }
    }
}
