#pragma once
// A Rina group above the ToR, two switch programs driven by hand
// (dataplane/rina.cpp, "Levels above the ToR"), for the dataplane tests.
#include <algorithm>
#include <memory>
#include <vector>

#include "dataplane/switch.hpp"
#include "fake_effects.hpp"
#include "schemes/registry.hpp"

namespace ina::test {

constexpr NodeId kLevel = 100, kTop = 200;

// Job 1, ranks 0..4 on nodes 1..5. One group: ranks {0, 1, 2} (agent 0),
// rank 0 sending straight to the top, ranks 1 and 2 through the level (an
// INA ToR): group bits 1 and 2. The next group is rank 3 (node 4), the
// previous one rank 4 (node 5).
struct Tree {
  Tree() {
    dp::SwitchConfig c;
    c.memory_bytes = 4 * 256ULL;
    level = schemes::find("rina").make_switch(c);
    top = schemes::find("rina").make_switch(c);
    level->set_id(kLevel);
    top->set_id(kTop);
    level->add_peer(kTop);
    top->add_peer(kLevel);
    dp::SwitchJob j;
    j.job = 1;
    j.workers = {1, 2, 3, 4, 5};
    j.region_offset = 0;
    j.region_size = 4;
    dp::SwitchJob l = j;
    l.parent = kTop;
    l.agg_mask = RankBits(0b110);
    l.rina.rack = {1, 2};
    l.rina.bits = {1, 2};
    l.rina.upstream = {0, 4};  // the agent's broadcast, then the previous group
    level->add_job(l);
    dp::SwitchJob t = j;
    t.children = {kLevel};
    t.rina.child_bits = {0b110};
    t.rina.rack = {0, 1, 2};
    t.rina.upstream = {4};
    top->add_job(t);
  }
  static Packet* make(FakeEffects& fx, PktType type, NodeId src, NodeId dst, uint8_t rank, uint64_t bits,
                      const std::vector<int32_t>& v, uint16_t flags) {
    Packet* p = fx.alloc();
    p->h = Header{};
    p->h.type = type;
    p->h.flags = flags;
    p->h.job = 1;
    p->h.src = src;
    p->h.dst = dst;
    p->h.rank = rank;
    p->h.nworkers = 5;
    p->h.psn = 7;
    p->h.bitmap = bits;
    p->h.agg_index = 4;  // onward: the next group's agent
    p->h.count = static_cast<uint16_t>(v.size());
    std::copy(v.begin(), v.end(), p->payload());
    return p;
  }
  std::vector<Sent> to(dp::SwitchProgram& sw, Packet* p) {
    sw.on_packet(p, 0, fx);
    return fx.settle("on_packet");
  }
  std::vector<Sent> to(dp::SwitchProgram& sw, const Sent& s) {
    Packet* p = make(fx, s.h.type, s.h.src, s.h.dst, s.h.rank, s.h.bitmap.lo(), s.v, s.h.flags);
    p->h = s.h;
    return to(sw, p);
  }
  FakeEffects fx;
  std::unique_ptr<dp::SwitchProgram> level, top;
};

inline std::vector<NodeId> dsts(const std::vector<Sent>& out) {
  std::vector<NodeId> d;
  for (const auto& s : out) d.push_back(s.h.dst);
  return d;
}

}  // namespace ina::test
