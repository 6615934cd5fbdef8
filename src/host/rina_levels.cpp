#include "host/rina_levels.hpp"

#include <algorithm>
#include <map>

namespace ina::host {

RinaGroupTree rina_group_tree(std::vector<uint16_t> ranks, NodeId top, const std::vector<RinaHop>& hops) {
  std::sort(ranks.begin(), ranks.end());
  auto bit = [&](uint16_t r) { return static_cast<uint8_t>(std::lower_bound(ranks.begin(), ranks.end(), r) - ranks.begin()); };
  RinaGroupTree t;
  t.top = top;
  t.entry.assign(ranks.size(), top);
  // Each switch of the group's tree: its level (the top first).
  std::vector<RinaLevel>& lv = t.levels;
  lv.push_back(RinaLevel{top, kNoNode, ranks, {}, {}, {}, {}});
  auto level = [&](NodeId sw) -> RinaLevel& {
    for (auto& l : lv)
      if (l.sw == sw) return l;
    lv.push_back(RinaLevel{sw, kNoNode, {}, {}, {}, {}, {}});
    return lv.back();
  };
  std::map<NodeId, uint64_t> below;  // group bits under each switch (hops come leaves first)
  std::map<NodeId, RankBits> below_ranks;
  for (const RinaHop& h : hops) {
    if (h.from_rank) {
      const uint16_t r = h.rank;
      t.entry[bit(r)] = h.to;
      below[h.to] |= 1ULL << bit(r);
      below_ranks[h.to] |= RankBits::bit(r);
      if (h.to != top) {
        RinaLevel& l = level(h.to);
        l.rack.push_back(r);
        l.bits.push_back(bit(r));
      }
    } else {
      level(h.from).parent = h.to;
      level(h.from).subtree = below_ranks[h.from];
      RinaLevel& up = level(h.to);
      up.children.push_back(h.from);
      up.child_bits.push_back(below[h.from]);
      below[h.to] |= below[h.from];
      below_ranks[h.to] |= below_ranks[h.from];
    }
  }
  for (auto& l : lv) l.top_agent = ranks[0];
  for (auto& l : lv) {  // ranks ascend in a level's rack (their bits with them)
    if (l.parent == kNoNode) continue;
    std::vector<std::pair<uint16_t, uint8_t>> rb;
    for (size_t i = 0; i < l.bits.size(); ++i) rb.push_back({l.rack[i], l.bits[i]});
    std::sort(rb.begin(), rb.end());
    for (size_t i = 0; i < rb.size(); ++i) {
      l.rack[i] = rb[i].first;
      l.bits[i] = rb[i].second;
    }
  }
  t.ranks = std::move(ranks);
  return t;
}

void rina_level_job(const RinaLevel& l, const std::vector<std::vector<RingStage>>& plan, dp::SwitchJob& sj) {
  sj.rina.rack = l.rack;
  sj.parent = l.parent;
  sj.agg_mask = l.subtree;
  sj.children = l.children;
  sj.rina.child_bits = l.child_bits;
  // The group's top (no parent) has the agent first in its rack.
  const uint16_t agent = l.parent != kNoNode ? l.top_agent : l.rack[0];
  sj.rina.upstream = upstream_of(plan[agent], agent);
  if (l.parent != kNoNode) {
    sj.rina.bits = l.bits;
    sj.rina.upstream.insert(sj.rina.upstream.begin(), agent);  // a level's rows: the agent's broadcast first
  }
}

}  // namespace ina::host
