#include "host/ring_failover.hpp"

#include <algorithm>
#include <stdexcept>

#include <fmt/format.h>

namespace ina::host {

RingFailover ring_failover(const RingMembership& m, const std::vector<uint16_t>& failed, const std::vector<size_t>& ops,
                           const RingPlanner& plan) {
  const size_t n = m.nodes.size();
  if (ops.size() != n) throw std::invalid_argument(fmt::format("ring failover: {} ops for {} ranks", ops.size(), n));
  if (m.racks.size() != m.tors.size())
    throw std::invalid_argument(fmt::format("ring failover: {} racks but {} ToRs", m.racks.size(), m.tors.size()));
  if (m.epoch == UINT8_MAX) throw std::invalid_argument("ring failover: the membership epoch would wrap (255 failures)");
  std::vector<bool> dead(n, false);
  for (uint16_t f : failed) {
    if (f >= n) throw std::invalid_argument(fmt::format("ring failover: rank {} failed, but the job has ranks 0..{}", f, n - 1));
    dead[f] = true;
  }
  RingFailover out;
  out.new_rank.assign(n, -1);
  for (size_t r = 0; r < n; ++r)
    if (!dead[r]) {
      out.new_rank[r] = static_cast<int>(out.survivors.size());
      out.survivors.push_back(static_cast<uint16_t>(r));
      out.next.nodes.push_back(m.nodes[r]);
    }
  if (out.survivors.size() < 2)
    throw std::invalid_argument(fmt::format("ring failover: {} of {} ranks survive; a ring needs two", out.survivors.size(), n));
  out.next.epoch = static_cast<uint8_t>(m.epoch + 1);
  for (size_t q = 0; q < m.racks.size(); ++q) {
    std::vector<uint16_t> rk;
    for (uint16_t r : m.racks[q])
      if (!dead[r]) rk.push_back(static_cast<uint16_t>(out.new_rank[r]));
    if (rk.empty()) continue;
    out.next.racks.push_back(rk);
    out.next.tors.push_back(dead[m.racks[q][0]] ? kNoNode : m.tors[q]);  // without its agent the rack falls back to RAR
  }
  out.plan = plan(out.survivors.size(), out.next.racks, out.next.tors);
  out.restart_op = SIZE_MAX;
  for (uint16_t r : out.survivors) out.restart_op = std::min(out.restart_op, ops[r]);
  for (size_t q = 0; q < m.racks.size(); ++q) {
    if (m.tors[q] == kNoNode || m.racks[q].size() < 2) continue;
    RingTorJob t;
    t.tor = m.tors[q];
    if (std::any_of(out.tors.begin(), out.tors.end(), [&](const RingTorJob& o) { return o.tor == t.tor; })) continue;
    for (size_t k = 0; k < out.next.racks.size(); ++k)
      if (out.next.tors[k] == t.tor && out.next.racks[k].size() >= 2) t.rack = out.next.racks[k];
    if (!t.rack.empty()) t.upstream = upstream_of(out.plan[t.rack[0]], t.rack[0]);
    out.tors.push_back(std::move(t));
  }
  return out;
}

}  // namespace ina::host
