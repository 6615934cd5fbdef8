#pragma once
// How a simulation's nodes split across threads (Simulator::set_partitions):
// by racks. Hosts are grouped by the switch their one link goes to (their
// ToR), racks in the order of their ToR's id, and consecutive racks fill
// the partitions with as even a count of hosts as whole racks allow; a ToR
// goes with its rack. With `busy` (the hosts that run something), only
// those count: a rack of idle hosts costs memory and no events, so a few
// jobs on a large fabric split by their hosts, not the fabric's, and the
// racks without a busy host then go one at a time to the partition with
// the fewest nodes (their memory spreads). Every other switch joins the
// partition most of its neighbours are in (nearest first: aggregation
// switches, then the cores; a tie goes to the partition that has the
// fewest nodes so far, then the lowest). On a fat-tree that keeps a pod together and spreads the cores.
// The split changes no result (engine.hpp), only how much crosses threads.
// Racks of very different sizes can leave a partition with no rack (it then
// holds only switches, or nothing: its thread idles).
#include <cstdint>
#include <span>
#include <vector>

#include "sim/engine.hpp"
#include "topo/graph.hpp"

namespace ina::sim {

// `parts` in [1, 65535]; fewer partitions when there are fewer racks.
std::vector<uint16_t> partition_by_racks(Simulator& sim, unsigned parts, std::span<const NodeId> busy = {});
// The same split of the network sim::build_network makes of `g` (node ids
// are g's), before it is built: a process that runs only its own nodes
// (Simulator::set_partitions with ranks) builds the others as RemoteNode.
std::vector<uint16_t> partition_by_racks(const topo::Graph& g, unsigned parts, std::span<const NodeId> busy = {});
// By node: whether it runs in this process when `part_of` is split over
// `ranks` (Simulator::set_partitions; all of them without ranks).
std::vector<bool> local_nodes(const std::vector<uint16_t>& part_of, const Ranks* ranks);

}  // namespace ina::sim
