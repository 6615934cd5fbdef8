#pragma once
// DSA's compare at an aggregator another task holds (DSA §III-B): the one
// rule of preemption and downgrading, used by the DSA pool (dsa.cpp) and by
// a Rina ToR whose memory is a DSA pool (rina.cpp, RingMemory::PoolDsa).
//
// Each aggregator has a priority register: the priority its task holds it
// with. A packet of another task compares its priority with the register:
//  - it wins: the packet's task takes the aggregator (a swap, so a second
//    pipeline pass) and the register holds the packet's priority; the
//    evicted partial goes on carrying the priority it was held with;
//  - it loses: it goes on unaggregated and the register is halved
//    (downgrading), so a long-held aggregator yields after log2(held / pkt)
//    lost compares.
// What goes where (the PS, the parent, the next ring node) and which packets
// may compare at all (retransmissions, quotas, pinned aggregators) is the
// caller's: this is only the compare and the register.
#include <cstdint>

#include "core/rng.hpp"
#include "dataplane/switch.hpp"

namespace ina::dp {

// Whether a packet of priority `pkt` wins an aggregator held with `held`:
// DSA's strict compare (a tie keeps the holder), or Fig. 11's strawmen:
// always, or a fair coin (one draw from `rng`; the priorities are not read).
inline bool dsa_wins(PreemptMode mode, uint32_t pkt, uint32_t held, Rng& rng) {
  switch (mode) {
    case PreemptMode::Priority: return pkt > held;
    case PreemptMode::Always: return true;
    case PreemptMode::Coin: return rng.bernoulli(0.5);
  }
  return false;
}

struct DsaCompare {
  bool won = false;
  uint32_t evicted = 0;  // won: the priority the evicted task held the aggregator with
};

// The compare at an aggregator whose priority register is `held`, applied:
// won, the register takes `pkt` (counted in preempt_won and, for the swap's
// second pass, resubmits); lost, the register is halved (preempt_lost, downgrades).
inline DsaCompare dsa_compare(PreemptMode mode, uint32_t& held, uint32_t pkt, Rng& rng, SwitchStats& st) {
  if (dsa_wins(mode, pkt, held, rng)) {
    ++st.preempt_won;
    ++st.resubmits;
    const DsaCompare c{true, held};
    held = pkt;
    return c;
  }
  ++st.preempt_lost;
  ++st.downgrades;
  held >>= 1;
  return {};
}

}  // namespace ina::dp
