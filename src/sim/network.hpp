#pragma once
// Multi-switch packet simulation over a topo::Graph (fat-tree, dragonfly,
// leaf-spine, a topology file): the graph's nodes become simulator nodes
// with the same ids (node v of the graph is simulator node v), its links
// become pairs of simulator links, and routes are the simulator's shortest
// paths. What runs on each node is the caller's choice (make_node); a
// switch with nothing to do is a Forwarder.
//
// Placement (rack-packed, as the Rina paper's racks imply): a rack is a
// switch with hosts attached (a ToR / leaf / dragonfly router) and its
// hosts, racks in the order of their first host; the workers of job 0 take
// the hosts of the first racks in order, job 1 the next free hosts, and so
// on, so a job fills whole racks before it spills into the next one.
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "sim/engine.hpp"
#include "topo/graph.hpp"

namespace ina::sim {

// A switch without a program: forwards every packet along the routes (and
// multicast copies along the tree); a packet addressed to it is dropped.
class Forwarder final : public Node {
 public:
  void on_packet(Packet* p, Time now, Effects& fx) override;
  void on_timer(uint64_t, Time, Effects&) override {}
  uint64_t forwarded() const { return forwarded_; }
  uint64_t dropped() const { return dropped_; }

 private:
  uint64_t forwarded_ = 0, dropped_ = 0;
};

struct Rack {
  topo::NodeId tor = topo::kNoNode;  // the switch the hosts hang off
  std::vector<topo::NodeId> hosts;   // in id order
};
// The racks of g: every host must be on exactly one link, to a switch
// (std::invalid_argument naming the host otherwise).
std::vector<Rack> racks(const topo::Graph& g);

struct Placement {
  std::vector<std::vector<topo::NodeId>> jobs;  // per job: hosts by rank
  std::vector<int> rack_of;                     // per graph node: its rack index (hosts only, else -1)
};
// Rack-packed placement of jobs of the given sizes. A job larger than the
// free hosts is a std::invalid_argument naming the job, its size and the free hosts.
Placement place_rack_packed(const topo::Graph& g, const std::vector<int>& workers_per_job);
// Interleaved placement (ours, for jobs that share ToRs): racks in the same
// order, each rack's hosts dealt in turn to the jobs that still need
// workers (host 0 to job 0, host 1 to job 1, ...), so two jobs of 8 on four
// racks of 4 hosts get 2 hosts in every rack. A job's ranks follow rack
// order, so its ranks in a rack are contiguous. Too few hosts: as above.
Placement place_interleaved(const topo::Graph& g, const std::vector<int>& workers_per_job);
// The placement `policy` names (workload.placement): "interleaved", else rack-packed.
Placement place_jobs(const topo::Graph& g, const std::vector<int>& workers_per_job, const std::string& policy);

// Adds every node of g to `sim` in id order, made by make(v) (a switch
// gets is_switch = true), connects every link of g with link(l) (the
// parameters of both directions; gbps is set from the graph), and builds
// the routes. The simulator must be empty.
//
// ECN marks at switch egress ports only (Simulator::set_host_ecn), unless
// `host_ecn`: then hosts' NIC queues mark too. A NIC does not mark its own
// queue (DCTCP and DCQCN configure marking on switch ports), and a sender
// whose window exceeds the threshold would otherwise mark its own packets at
// every step's start with no other flow on the link.
void build_network(Simulator& sim, const topo::Graph& g,
                   const std::function<std::unique_ptr<Node>(topo::NodeId)>& make_node,
                   const LinkParams& link, bool host_ecn = false);

}  // namespace ina::sim
