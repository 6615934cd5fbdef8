#pragma once
// What the tests of split runs share (test_partition.cpp: threads;
// test_ranks.cpp: processes): a fat-tree run whose traffic crosses every
// split, and two nodes, one that sends a packet every microsecond and one
// that throws on the third it receives.
#include <stdexcept>

#include "experiment/scenario.hpp"
#include "proto/node.hpp"

namespace ina::test {

// Two jobs of 8 on a k = 4 fat-tree, each job in every pod.
inline exp::Settings fat_tree_two_jobs() {
  exp::Settings s;
  s.topology_kind = "fat-tree";
  s.k = 4;
  s.ina = "tors";
  s.jobs = 2;
  s.workers = 8;
  s.gradient_mb = 0.25;
  s.placement = "interleaved";  // each job in every pod: its traffic crosses the partitions
  return s;
}

// One job of 8 (rack-packed) whose rank 2 fails in the second of three
// ops (Rina, RAR: the survivors restart op 1).
inline exp::Settings ring_failure_in_op_1() {
  exp::Settings s = fat_tree_two_jobs();
  s.jobs = 1;
  s.placement = "rack-packed";
  s.gradient_mb = 0.05;
  s.iterations = 3;
  s.fail_rank = 2;
  s.fail_at_ms = 0.55;
  return s;
}

// Every microsecond, a packet of three values (7 i + its PSN) to `to`.
struct EveryMicrosecond final : Node {
  NodeId to;
  explicit EveryMicrosecond(NodeId t) : to(t) {}
  void on_start(Time now, Effects& fx) override { fx.set_timer(now + 1 * kUs, 0); }
  void on_timer(uint64_t, Time now, Effects& fx) override {
    Packet* p = fx.alloc();
    p->h.dst = to;
    p->h.count = 3;
    for (int i = 0; i < 3; ++i) p->payload()[i] = 7 * i + static_cast<int>(p->h.psn);
    fx.send(p);
    fx.set_timer(now + 1 * kUs, 0);
  }
  void on_packet(Packet* p, Time, Effects& fx) override { fx.free(p); }
};

// Throws "the third packet" on its third.
struct ThrowsOnTheThird final : Node {
  int seen = 0;
  int last_value = -1;  // the last packet's third value
  void on_timer(uint64_t, Time, Effects&) override {}
  void on_packet(Packet* p, Time, Effects& fx) override {
    last_value = p->h.count == 3 ? p->payload()[2] : -1;
    fx.free(p);
    if (++seen == 3) throw std::runtime_error("the third packet");
  }
};

}  // namespace ina::test
