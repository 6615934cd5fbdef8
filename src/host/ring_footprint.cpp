// The buffers a ring endpoint's compiled steps hold (ring_footprint.hpp):
// read off the steps build_steps() made, not a second copy of its rules.
#include "host/ring_footprint.hpp"

#include <algorithm>

#include "host/ring_detail.hpp"

namespace ina::host {

using ring_detail::packets;

RingFootprint RingEndpoint::footprint(uint64_t ahead, uint64_t ops) const {
  RingFootprint f;
  ahead = std::min<uint64_t>(ahead, kRecvSlots - 2);
  ops = std::max<uint64_t>(ops, 1);
  const uint64_t S = steps_.size(), R = nrecv_;
  f.receives = R;
  f.kept_values = kept_.size();
  // By receive index: its step, and the step that reads its values (S: none).
  std::vector<uint64_t> at(R, 0), reader(R, S);
  for (uint64_t k = 0; k < S; ++k) {
    const Step& s = steps_[k];
    if (s.recvs) at[static_cast<size_t>(s.ridx)] = k;
    if (s.sends) f.send_packets = std::max<uint64_t>(f.send_packets, packets(s.len, cfg_.payload_values));
    for (const int used : {s.add_recv, s.finish ? s.finish_recv : -1})
      if (used >= 0) reader[static_cast<size_t>(steps_[static_cast<size_t>(used)].ridx)] = k;
  }
  auto step_of = [&](uint64_t ord) { return ord / R * S + at[ord % R]; };
  auto read_at = [&](uint64_t ord) { return ord / R * S + reader[ord % R]; };
  auto kept = [&](uint64_t ord) { return steps_[at[ord % R]].r_keep; };
  auto len = [&](uint64_t ord) { return steps_[at[ord % R]].r_len; };
  if (R > 0) {
    // Every step of the first ops (the pattern repeats from op to op once
    // the next ops' receives are in view): the receives started by then
    // (up to the current step's own + ahead) whose reader has not ended.
    const uint64_t cur_ops = std::min<uint64_t>(ops, 2 + ahead);
    const uint64_t total = std::min<uint64_t>(ops, cur_ops + 1 + ahead) * R;
    for (uint64_t g = 0; g < cur_ops * S; ++g) {
      uint64_t floor = 0;
      while (floor < total && step_of(floor) < g) ++floor;
      uint64_t n = 0, v = 0;
      for (uint64_t o = 0; o < total && o <= floor + ahead; ++o)
        if (kept(o) && read_at(o) >= g) {
          ++n;
          v += len(o);
        }
      f.held_buffers = std::max(f.held_buffers, n);
      f.held_values = std::max(f.held_values, v);
    }
    // Slot o mod kRecvSlots keeps the largest bitmap and rack bits of the
    // receives landing in it; the pattern repeats within kRecvSlots ops.
    std::vector<uint64_t> bits(kRecvSlots, 0), parts(kRecvSlots, 0);
    for (uint64_t o = 0; o < std::min<uint64_t>(ops, kRecvSlots) * R; ++o) {
      const Step& s = steps_[at[o % R]];
      const uint64_t n = packets(s.r_len, cfg_.payload_values);
      bits[o % kRecvSlots] = std::max(bits[o % kRecvSlots], (n + 63) / 64 * 8);
      if (s.r_parts) parts[o % kRecvSlots] = std::max(parts[o % kRecvSlots], 8 * n);
    }
    for (uint64_t k = 0; k < kRecvSlots; ++k) f.slot_bytes += bits[k] + parts[k];
  }
  return f;
}

RingFootprint ring_footprint(const std::vector<RingStage>& stages, uint16_t rank, uint16_t payload_values,
                             uint64_t ahead, uint64_t ops) {
  size_t ranks = static_cast<size_t>(rank) + 1;
  for (const RingStage& st : stages)
    for (const RingGroup& g : st.groups)
      for (const uint16_t r : g.ranks) ranks = std::max<size_t>(ranks, static_cast<size_t>(r) + 1);
  RingConfig c;
  c.rank = rank;
  c.stages = stages;
  c.payload_values = payload_values;
  for (size_t r = 0; r < ranks; ++r) c.nodes.push_back(static_cast<NodeId>(r));
  return RingEndpoint(std::move(c)).footprint(ahead, ops);
}

}  // namespace ina::host
