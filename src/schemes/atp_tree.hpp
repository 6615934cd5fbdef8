#pragma once
// One aggregation tree of PS-based INA (ATP's, used by every PsIna scheme
// over several switches): the one builder the simulator's sharded PSes
// (cluster::ShardedPsCluster, a tree per shard from the topology's routes)
// and the runtime's racks (rt::RingLayout, every ToR under rack 0's) share.
//
// Every rank addresses its gradients to its first hop: an INA switch, or the
// PS itself. Every INA switch on the tree addresses its aggregates to the
// next INA switch on its own way to the PS (or to the PS): its parent. A
// switch aggregates its subtree (the ranks whose gradients reach the PS
// through it) and takes the ranks whose first hop it is directly; the
// result goes back down the same tree (dataplane/switch.hpp: SwitchJob's
// parent, agg_mask, direct_mask and children are an entry of this tree).
// Only the nodes of the tree (its INA switches and the PS) have an entry, so
// a tree costs what it holds, not the number of nodes; the lookups give
// kNoNode, 0 or {} elsewhere.
#include <cstddef>
#include <cstdint>
#include <functional>
#include <vector>

#include "wire/packet.hpp"

namespace ina::schemes {

struct AtpTree {
  struct Entry {
    NodeId node = kNoNode;
    NodeId parent = kNoNode;        // the next INA switch toward the PS, or the PS (switches only)
    RankBits subtree;               // switches: the ranks whose gradients reach the PS through it
    RankBits direct;                // the ranks whose first hop it is (the PS: the ranks that skip every switch)
    std::vector<NodeId> children;   // the INA switches whose parent it is, in the order the builder met them
  };
  NodeId ps = kNoNode;                 // the PS
  std::vector<NodeId> first;           // by rank: where its gradients go (an INA switch or the PS)
  std::vector<NodeId> switches;        // the INA switches on the tree, by id
  std::vector<Entry> entries;          // by node id

  const Entry* find(NodeId v) const;
  NodeId parent(NodeId v) const { const Entry* e = find(v); return e ? e->parent : kNoNode; }
  RankBits subtree(NodeId v) const { const Entry* e = find(v); return e ? e->subtree : RankBits{}; }
  RankBits direct(NodeId v) const { const Entry* e = find(v); return e ? e->direct : RankBits{}; }
  std::vector<NodeId> children(NodeId v) const { const Entry* e = find(v); return e ? e->children : std::vector<NodeId>{}; }
};

// Builds trees over node ids below `nodes`, one at a time: start(), a
// leaf() per rank that feeds the tree, finish(). Its scratch (a slot per
// node id) is kept across trees, so a thousand trees over a large graph cost
// what they hold.
class AtpTreeBuilder {
 public:
  // The next INA switch above INA switch `x` on its way to the PS, or the PS.
  using Up = std::function<NodeId(NodeId x)>;

  explicit AtpTreeBuilder(size_t nodes) : slot_(nodes, -1) {}

  // A tree of `ranks` ranks toward `ps`; every rank's first hop is the PS
  // until leaf() says otherwise (a rank with no leaf(), such as one on the
  // PS's own host, is in no entry's masks).
  void start(NodeId ps, size_t ranks);
  // Rank `rank`'s gradients enter the tree at `first` (an INA switch or the
  // PS). Each switch met for the first time gets its parent from `up` and
  // becomes its parent's next child, so children are in the order the
  // leaves reach them.
  void leaf(size_t rank, NodeId first, const Up& up);
  // The tree, entries and switches sorted by node id; the builder is ready for start().
  AtpTree finish();

 private:
  AtpTree::Entry& entry(NodeId v);

  std::vector<int32_t> slot_;  // by node id: its entry in the tree being built, or -1
  AtpTree t_;
};

}  // namespace ina::schemes
