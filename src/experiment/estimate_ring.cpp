#include "experiment/estimate_ring.hpp"

#include <algorithm>
#include <array>

namespace ina::exp {
namespace {

// host::RingEndpoint's receive slots (ring.hpp, kRecvSlots).
constexpr uint64_t kSlots = 8;
// host::RingEndpoint::Send per packet: acked (8), first_tx, last_tx, deadline (8 each), retx (2).
constexpr uint64_t kSendRecordBytes = 34;

struct Receive {
  uint64_t len = 0;   // values
  bool keep = false;  // its values are stored (RingEndpoint::Step::r_keep)
  bool parts = false; // from a Rina ToR: rack bits per packet
};

uint64_t packets(uint64_t len, uint16_t width) { return (len + width - 1) / width; }

// One rank's receives per op in order, its kept span and its largest send
// (values), as ring_step_compiler.cpp lays out the steps.
struct RankSteps {
  std::vector<Receive> recvs;
  uint64_t kept = 0;
  uint64_t largest_send = 0;
};

RankSteps rank_steps(const std::vector<host::RingStage>& stages, uint16_t me) {
  RankSteps out;
  uint64_t kept_lo = UINT64_MAX, kept_hi = 0;
  for (const host::RingStage& st : stages) {
    const size_t G = st.groups.size();
    size_t q = G;
    for (size_t i = 0; i < G && q == G; ++i)
      if (std::find(st.groups[i].ranks.begin(), st.groups[i].ranks.end(), me) != st.groups[i].ranks.end()) q = i;
    if (q == G) continue;  // (the endpoint refuses such a plan)
    const host::RingGroup& mine = st.groups[q];
    const host::RingGroup& prev = st.groups[(q + G - 1) % G];
    const bool ina = mine.ina(), agent = ina && mine.ranks[0] == me;
    const bool sr = st.kind != host::RingStage::Kind::AllGather, ag = st.kind != host::RingStage::Kind::ReduceScatter;
    auto shard = [&](size_t c) {
      c %= G;
      return host::shard_begin(st, c + 1) - host::shard_begin(st, c);
    };
    auto keep_range = [&](size_t c) {
      c %= G;
      kept_lo = std::min(kept_lo, host::shard_begin(st, c));
      kept_hi = std::max(kept_hi, host::shard_begin(st, c + 1));
    };
    auto send = [&](uint64_t len) { out.largest_send = std::max(out.largest_send, len); };
    if (sr) {
      for (size_t s = 0; s + 1 < G; ++s) {
        send(shard(q + G - s));
        if (!ina || agent) out.recvs.push_back({shard(q + 2 * G - 1 - s), true, prev.ina()});
      }
      if (ina) {
        send(shard(q + 1));
        if (agent) out.recvs.push_back({shard(q + 1), false, true});
      }
      keep_range(q + 1);
    }
    if (ag) {
      keep_range(q + 1);
      const size_t k = mine.ranks.size();
      size_t pos = 0;
      while (mine.ranks[pos] != me) ++pos;
      if (ina && !agent) out.recvs.push_back({shard(q + 1), false, false});
      const size_t nsteps = ina ? std::max<size_t>(G - 1, 1) : G - 1;
      for (size_t s = 0; s < nsteps; ++s) {
        if (s % k == pos) send(shard(q + 1 + G - s));
        if (G > 1) out.recvs.push_back({shard(q + G - s), s + 1 < G - 1 && (s + 1) % k == pos, false});
      }
    }
  }
  if (kept_lo < kept_hi) out.kept = kept_hi - kept_lo;
  return out;
}

}  // namespace

RingBuffers ring_buffers(const std::vector<std::vector<host::RingStage>>& plan, uint64_t iterations,
                         uint16_t payload_values) {
  RingBuffers b;
  const uint16_t width = std::max<uint16_t>(1, payload_values);
  for (size_t rank = 0; rank < plan.size(); ++rank) {
    const RankSteps r = rank_steps(plan[rank], static_cast<uint16_t>(rank));
    const uint64_t nrecv = r.recvs.size();
    // Slot of receive i of op o: (o * nrecv + i) mod kSlots; the pattern repeats within kSlots ops.
    std::array<uint64_t, kSlots> vals{}, pkts{}, parts{};
    for (uint64_t o = 0; o < std::min<uint64_t>(std::max<uint64_t>(iterations, 1), kSlots); ++o)
      for (uint64_t i = 0; i < nrecv; ++i) {
        const Receive& x = r.recvs[i];
        const size_t slot = (o * nrecv + i) % kSlots;
        const uint64_t n = packets(x.len, width);
        pkts[slot] = std::max(pkts[slot], n);
        if (x.keep) vals[slot] = std::max(vals[slot], x.len);
        if (x.parts) parts[slot] = std::max(parts[slot], n);
      }
    for (size_t s = 0; s < kSlots; ++s) {
      b.values += 4 * vals[s];
      b.records += (pkts[s] + 63) / 64 * 8 + 8 * parts[s];
    }
    b.values += 4 * r.kept;
    b.records += kSendRecordBytes * packets(r.largest_send, width);
  }
  return b;
}

}  // namespace ina::exp
