#pragma once
// A Rina group above the ToR (§IV-D): the tree of switches that aggregates
// it, from its hops (a rank to the switch it sends to, a switch to the one
// above it), as every switch of it is given the job (dataplane/rina.hpp:
// the top, and the levels below it), and each rank's entry switch
// (RingGroup::entry). The one construction the simulator (the BOM's groups,
// experiment/collective_ring.cpp) and the runtime's layouts
// (rt::RingLayout's "aggregation") share.
#include <cstdint>
#include <vector>

#include "dataplane/switch.hpp"
#include "host/ring.hpp"

namespace ina::host {

// One switch's entry for the group: its top, or a level below it.
struct RinaLevel {
  NodeId sw = kNoNode;
  NodeId parent = kNoNode;        // a level: the switch above
  std::vector<uint16_t> rack;     // the top: the group's ranks; a level: the ranks sending to it (ascending)
  std::vector<uint8_t> bits;      // a level: each rack rank's bit in the group
  std::vector<NodeId> children;   // levels below it
  std::vector<uint64_t> child_bits;
  RankBits subtree;               // a level: the job ranks below it (SwitchJob::agg_mask)
  uint16_t top_agent = 0;         // the group's agent (lowest rank)
};

// A hop of the group's tree: from rank `rank` (from_rank) or from switch
// `from`, to switch `to`. Hops come leaves first: a switch's hop up follows
// every hop into it.
struct RinaHop {
  bool from_rank = false;
  uint16_t rank = 0;
  NodeId from = kNoNode;
  NodeId to = kNoNode;
};

struct RinaGroupTree {
  std::vector<uint16_t> ranks;    // ascending (the agent first)
  NodeId top = kNoNode;
  std::vector<NodeId> entry;      // by position in ranks: the switch the rank sends to
  std::vector<RinaLevel> levels;  // the top first, then the levels in the order the hops name them
};

// The group of `ranks` (any order) under `top`, from its hops (leaves first).
RinaGroupTree rina_group_tree(std::vector<uint16_t> ranks, NodeId top, const std::vector<RinaHop>& hops);

// Switch l.sw's entry for the job whose plan (every rank's stages, with the
// group merged: merge_rina_group) is `plan`: fills sj's rack, parent,
// aggregation mask, children, child bits, a level's bits, and the upstream
// rows (a level's: the group's agent first).
void rina_level_job(const RinaLevel& l, const std::vector<std::vector<RingStage>>& plan, dp::SwitchJob& sj);

}  // namespace ina::host
