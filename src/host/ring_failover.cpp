#include "host/ring_failover.hpp"

#include <algorithm>
#include <stdexcept>

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace ina::host {

std::vector<NodeId> serving_tors(const RingMembership& m) {
  if (!m.serving.empty()) return m.serving;
  std::vector<NodeId> v;
  for (size_t q = 0; q < m.racks.size() && q < m.tors.size(); ++q)
    if (m.tors[q] != kNoNode && m.racks[q].size() >= 2 && std::find(v.begin(), v.end(), m.tors[q]) == v.end())
      v.push_back(m.tors[q]);
  return v;
}

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
  out.next.serving = serving_tors(m);
  for (NodeId tor : out.next.serving) {
    RingTorJob t;
    t.tor = tor;
    for (size_t k = 0; k < out.next.racks.size(); ++k)
      if (out.next.tors[k] == t.tor && out.next.racks[k].size() >= 2) t.rack = out.next.racks[k];
    if (!t.rack.empty()) t.upstream = upstream_of(out.plan[t.rack[0]], t.rack[0]);
    out.tors.push_back(std::move(t));
  }
  return out;
}

std::string membership_problem(const RingMembership& cur, const std::vector<uint16_t>& members, const RingMembership& next,
                               const std::vector<uint16_t>& survivors, size_t restart_op, size_t ops) {
  const size_t n = survivors.size();
  if (n < 2) return fmt::format("field 'survivors' = [{}]: a ring needs two", fmt::join(survivors, ", "));
  for (size_t i = 0; i < n; ++i) {
    if (i && survivors[i] <= survivors[i - 1])
      return fmt::format("field 'survivors' = [{}]: must ascend", fmt::join(survivors, ", "));
    if (std::find(members.begin(), members.end(), survivors[i]) == members.end())
      return fmt::format("field 'survivors': rank {} is not a member (members [{}])", survivors[i], fmt::join(members, ", "));
  }
  if (next.nodes.size() != n)
    return fmt::format("field 'nodes' has {} entries for {} survivors", next.nodes.size(), n);
  for (size_t i = 0; i < n; ++i) {
    const auto k = static_cast<size_t>(std::find(members.begin(), members.end(), survivors[i]) - members.begin());
    if (k >= cur.nodes.size() || next.nodes[i] != cur.nodes[k])
      return fmt::format("field 'nodes': entry {} is node {}, but survivor {} is node {}", i, next.nodes[i], survivors[i],
                         k < cur.nodes.size() ? cur.nodes[k] : kNoNode);
  }
  std::vector<bool> seen(n, false);
  for (size_t q = 0; q < next.racks.size(); ++q) {
    const auto& rk = next.racks[q];
    if (rk.empty()) return fmt::format("field 'racks': racks[{}] is empty", q);
    for (size_t i = 0; i < rk.size(); ++i) {
      if (rk[i] >= n) return fmt::format("field 'racks': racks[{}] names rank {}, beyond the {} survivors", q, rk[i], n);
      if (i && rk[i] <= rk[i - 1]) return fmt::format("field 'racks': racks[{}] = [{}] must ascend", q, fmt::join(rk, ", "));
      if (seen[rk[i]]) return fmt::format("field 'racks': rank {} is in two racks (again in racks[{}])", rk[i], q);
      seen[rk[i]] = true;
    }
  }
  for (size_t r = 0; r < n; ++r)
    if (!seen[r]) return fmt::format("field 'racks': rank {} is in no rack", r);
  if (next.tors.size() != next.racks.size())
    return fmt::format("field 'tors' has {} entries for {} racks", next.tors.size(), next.racks.size());
  for (size_t q = 0; q < next.tors.size(); ++q)
    if (next.tors[q] != kNoNode && std::find(cur.tors.begin(), cur.tors.end(), next.tors[q]) == cur.tors.end())
      return fmt::format("field 'tors': tors[{}] = {} is not a ToR of the job", q, next.tors[q]);
  const auto held = serving_tors(cur);
  if (next.serving != held)
    return fmt::format("field 'serving' = [{}]: the ToRs holding the job are [{}]", fmt::join(next.serving, ", "),
                       fmt::join(held, ", "));
  if (restart_op > ops)  // == ops: every survivor had finished (the failed rank crashed at its end)
    return fmt::format("field 'restart_op' = {}: the job runs ops 0..{} ({}: none to redo)", restart_op, ops - 1, ops);
  return "";
}

}  // namespace ina::host

namespace ina::host {

FailureAgreement::FailureAgreement(uint16_t me, Time detect, std::vector<uint16_t> members)
    : me_(me), detect_(detect), members_(std::move(members)) {
  if (detect_ <= 0) throw std::invalid_argument(fmt::format("failure agreement: detection time {} ps must be positive", detect_));
  if (std::find(members_.begin(), members_.end(), me_) == members_.end())
    throw std::invalid_argument(fmt::format("failure agreement: rank {} is not a member", me_));
}

bool FailureAgreement::suspected(uint16_t r) const {
  return std::find(suspects_.begin(), suspects_.end(), r) != suspects_.end();
}

uint16_t FailureAgreement::control() const {
  for (uint16_t r : members_)
    if (!suspected(r)) return r;
  return me_;
}

bool FailureAgreement::observe(Time now, const std::vector<Beat>& beats) {
  const bool stalled = looked_ && now - *looked_ > detect_ / 2;
  looked_ = now;
  std::vector<uint16_t> st;
  for (const Beat& b : beats) {
    if (b.rank == me_ || std::find(members_.begin(), members_.end(), b.rank) == members_.end()) continue;
    auto it = seen_.find(b.rank);
    if (b.done || it == seen_.end() || it->second.count != b.count || stalled) {
      seen_[b.rank] = {b.count, now};
    } else if (now - it->second.at >= detect_) {
      st.push_back(b.rank);
    }
  }
  std::sort(st.begin(), st.end());
  if (st.size() * 2 > members_.size() - 1) st.clear();
  if (st == suspects_) return false;
  for (uint16_t r : suspects_)
    if (!std::binary_search(st.begin(), st.end(), r)) ++withdrawn_;
  suspects_ = std::move(st);
  return true;
}

FailureAgreement::Decision FailureAgreement::decide(const std::map<uint16_t, Published>& published, size_t my_op) const {
  Decision d;
  d.ops.assign(members_.size(), 0);
  for (size_t k = 0; k < members_.size(); ++k) {
    const uint16_t r = members_[k];
    if (suspected(r)) {
      d.failed.push_back(static_cast<uint16_t>(k));
      continue;
    }
    if (r == me_) {
      d.ops[k] = my_op;
      continue;
    }
    const auto it = published.find(r);
    if (it == published.end() || it->second.suspects != suspects_) {
      d.waiting.push_back(r);
      continue;
    }
    d.ops[k] = it->second.op;
  }
  d.act = !suspects_.empty() && is_control() && d.waiting.empty();
  return d;
}

void FailureAgreement::adopt(std::vector<uint16_t> survivors) {
  if (std::find(survivors.begin(), survivors.end(), me_) == survivors.end())
    throw std::invalid_argument(fmt::format("failure agreement: rank {} is not among the survivors", me_));
  members_ = std::move(survivors);
  suspects_.clear();
  seen_.clear();
  looked_.reset();
}

}  // namespace ina::host
