// Ring plans (identical at every rank): the stages each rank runs, and
// what a plan implies for one rank (its upstream, its steps per op).
#include <algorithm>
#include <stdexcept>

#include <fmt/format.h>

#include "host/ring.hpp"

namespace ina::host {

namespace {

RingGroup solo(uint16_t r) { return RingGroup{{r}, kNoNode}; }

}  // namespace

std::vector<std::vector<RingStage>> plan_rar(size_t n, uint64_t elems) {
  if (n == 0 || n > kMaxRingWorkers) throw std::invalid_argument(fmt::format("ring: {} workers (1..255)", n));
  RingStage st;
  st.len = elems;
  for (size_t r = 0; r < n; ++r) st.groups.push_back(solo(static_cast<uint16_t>(r)));
  return std::vector<std::vector<RingStage>>(n, std::vector<RingStage>{st});
}

std::vector<std::vector<RingStage>> plan_rina(const std::vector<std::vector<uint16_t>>& racks,
                                              const std::vector<NodeId>& tors, uint64_t elems) {
  if (racks.size() != tors.size()) throw std::invalid_argument("rina: one ToR entry per rack");
  RingStage st;
  st.len = elems;
  size_t n = 0;
  for (size_t r = 0; r < racks.size(); ++r) {
    auto ranks = racks[r];
    if (ranks.empty()) throw std::invalid_argument(fmt::format("rina: rack {} has no ranks", r));
    std::sort(ranks.begin(), ranks.end());
    n += ranks.size();
    if (tors[r] != kNoNode && ranks.size() >= 2) {
      if (ranks.size() > 64) throw std::invalid_argument(fmt::format("rina: rack {} has {} ranks (at most 64)", r, ranks.size()));
      st.groups.push_back(RingGroup{ranks, tors[r]});
    } else {
      for (uint16_t k : ranks) st.groups.push_back(solo(k));
    }
  }
  if (n == 0 || n > kMaxRingWorkers) throw std::invalid_argument(fmt::format("rina: {} workers (1..255)", n));
  std::vector<bool> seen(n, false);
  for (const auto& rk : racks)
    for (uint16_t k : rk) {
      if (k >= n || seen[k]) throw std::invalid_argument(fmt::format("rina: the racks do not partition ranks 0..{}", n - 1));
      seen[k] = true;
    }
  return std::vector<std::vector<RingStage>>(n, std::vector<RingStage>{st});
}

void merge_rina_group(std::vector<std::vector<RingStage>>& plan, std::vector<uint16_t> ranks, NodeId top,
                      std::vector<NodeId> entry) {
  if (ranks.size() < 2 || ranks.size() > 64 || entry.size() != ranks.size() || top == kNoNode)
    throw std::invalid_argument(fmt::format("rina: a merged group needs 2..64 ranks, one entry each and a top switch"));
  if (!std::is_sorted(ranks.begin(), ranks.end()))
    throw std::invalid_argument("rina: a merged group's ranks must ascend (agent first)");
  auto inside = [&](uint16_t r) { return std::binary_search(ranks.begin(), ranks.end(), r); };
  for (auto& stages : plan)
    for (auto& st : stages) {
      std::vector<RingGroup> out;
      bool placed = false;
      for (auto& g : st.groups) {
        const size_t in = static_cast<size_t>(std::count_if(g.ranks.begin(), g.ranks.end(), inside));
        if (in == 0) {
          out.push_back(std::move(g));
          continue;
        }
        if (in != g.ranks.size())
          throw std::invalid_argument(fmt::format("rina: a group with rank {} is only partly in the merged group", g.ranks[0]));
        if (!placed) out.push_back(RingGroup{ranks, top, entry});
        placed = true;
      }
      st.groups = std::move(out);
    }
}

std::vector<std::vector<RingStage>> plan_hierarchical(const std::vector<std::vector<uint16_t>>& racks, uint64_t elems) {
  if (racks.empty()) throw std::invalid_argument("h-ar: no racks");
  const size_t k = racks[0].size();
  size_t n = 0;
  for (size_t r = 0; r < racks.size(); ++r) {
    if (racks[r].size() != k)
      throw std::invalid_argument(fmt::format(
          "h-ar needs the same number of workers in every rack (rack 0 has {}, rack {} has {})", k, r, racks[r].size()));
    n += k;
  }
  if (n > kMaxRingWorkers) throw std::invalid_argument(fmt::format("h-ar: {} workers (1..255)", n));
  std::vector<std::vector<RingStage>> out(n);
  for (size_t r = 0; r < racks.size(); ++r) {
    RingStage in_rack;
    in_rack.len = elems;
    for (uint16_t x : racks[r]) in_rack.groups.push_back(solo(x));
    for (size_t p = 0; p < k; ++p) {
      // Position p keeps rack shard (p + 1) mod k after the ReduceScatter.
      const size_t c = (p + 1) % k;
      RingStage across;
      across.off = shard_begin(in_rack, c);
      across.len = shard_begin(in_rack, c + 1) - across.off;
      for (const auto& other : racks) across.groups.push_back(solo(other[p]));
      RingStage rs = in_rack, ag = in_rack;
      rs.kind = RingStage::Kind::ReduceScatter;
      ag.kind = RingStage::Kind::AllGather;
      out[racks[r][p]] = {rs, across, ag};
    }
  }
  return out;
}

std::vector<uint16_t> upstream_of(const std::vector<RingStage>& stages, uint16_t rank) {
  for (const auto& st : stages) {
    const size_t G = st.groups.size();
    for (size_t i = 0; i < G; ++i) {
      const auto& g = st.groups[i];
      if (g.ina() && std::find(g.ranks.begin(), g.ranks.end(), rank) != g.ranks.end())
        return G > 1 ? st.groups[(i + G - 1) % G].ranks : std::vector<uint16_t>{};
    }
  }
  return {};
}

uint64_t ring_steps(const std::vector<RingStage>& stages, uint16_t rank) {
  uint64_t n = 0;
  for (const auto& st : stages) {
    const size_t G = st.groups.size();
    for (const auto& g : st.groups) {
      if (std::find(g.ranks.begin(), g.ranks.end(), rank) == g.ranks.end()) continue;
      const bool sr = st.kind != RingStage::Kind::AllGather, ag = st.kind != RingStage::Kind::ReduceScatter;
      if (g.ina()) n += (sr ? G : 0) + (ag ? std::max<size_t>(G - 1, 1) : 0);
      else n += (sr ? G - 1 : 0) + (ag ? G - 1 : 0);
    }
  }
  return n;
}

}  // namespace ina::host
