#include "schemes/atp_tree.hpp"

#include <algorithm>
#include <stdexcept>

namespace ina::schemes {

const AtpTree::Entry* AtpTree::find(NodeId v) const {
  const auto it = std::lower_bound(entries.begin(), entries.end(), v,
                                   [](const Entry& e, NodeId n) { return e.node < n; });
  return it != entries.end() && it->node == v ? &*it : nullptr;
}

AtpTree::Entry& AtpTreeBuilder::entry(NodeId v) {
  if (v >= slot_.size()) throw std::out_of_range("AtpTreeBuilder: node id beyond the builder's nodes");
  if (slot_[v] < 0) {
    slot_[v] = static_cast<int32_t>(t_.entries.size());
    t_.entries.emplace_back().node = v;
  }
  return t_.entries[static_cast<size_t>(slot_[v])];
}

void AtpTreeBuilder::start(NodeId ps, size_t ranks) {
  t_ = AtpTree{};
  t_.ps = ps;
  t_.first.assign(ranks, ps);
  entry(ps);
}

void AtpTreeBuilder::leaf(size_t rank, NodeId first, const Up& up) {
  const RankBits bit = RankBits::bit(static_cast<unsigned>(rank));
  NodeId x = first;
  t_.first.at(rank) = x;
  entry(x).direct |= bit;
  while (x != t_.ps) {
    entry(x).subtree |= bit;
    if (entry(x).parent == kNoNode) {
      const NodeId parent = up(x);
      entry(x).parent = parent;
      entry(parent).children.push_back(x);
      t_.switches.push_back(x);
    }
    x = entry(x).parent;
  }
}

AtpTree AtpTreeBuilder::finish() {
  for (const auto& e : t_.entries) slot_[e.node] = -1;
  std::sort(t_.switches.begin(), t_.switches.end());
  std::sort(t_.entries.begin(), t_.entries.end(), [](const auto& x, const auto& y) { return x.node < y.node; });
  AtpTree out = std::move(t_);
  t_ = AtpTree{};
  return out;
}

}  // namespace ina::schemes
