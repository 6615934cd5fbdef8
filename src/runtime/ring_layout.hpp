#pragma once
// The layout of a ring job over UDP (RAR, H-AR, Rina): where every worker and
// every rack's ToR switch listens, which ranks each rack holds and which racks
// have an INA ToR. A static JSON file written by `ina run` (loopback) or by
// scripts/netns-cluster (network namespaces) and read by `ina ring-worker`
// and `ina switch --layout FILE --rack R`; nothing is hard-coded.
//
//   {"job": 1, "scheme": "rina", "payload": 64, "memory_bytes": 5000000,
//    "workers": ["127.0.0.1:40001", ...],                       (by rank)
//    "racks": [{"ranks": [0, 1, 2, 3], "ina": true, "switch": "127.0.0.1:7700"}, ...]}
//
// Racks are in ring order, each rack's ranks ascend (the lowest is Rina's
// agent) and together they are every rank once. "switch" is needed only for
// a rack whose ToR serves the job (see serving_tor()); the copy of the layout
// a switch reads at start may leave it null (the switch's own address comes
// from --listen). Node ids are static: rank r is r + 1, rack q's ToR N + 1 + q.
//
// The same layout runs ATP or DSA over racks (PS-based INA, collective PsIna;
// `ina run --scheme atp|dsa --racks R [--ina-racks LIST]`): the ToRs of the
// INA racks ("ina" absent means true here; at least one) are the INA
// switches of one aggregation tree (schemes/atp_tree.hpp), with a PS (field
// "ps", node id N + 1 + R). The first INA rack's ToR is the root: it
// aggregates its own ranks and the other INA ToRs' partial sums and sends
// them to the PS; every other INA rack's ToR aggregates its rack's ranks and
// sends to the root. A rank in a rack without INA sends straight to the PS
// (its first hop, as in the simulator's trees). Results go back down the
// tree: the PS passes each to its children (the root) and to the ranks that
// skip every switch, a switch to its children and its own ranks
// (dataplane/switch.hpp). Packets between racks go ToR to ToR: an INA
// rack's worker's datagrams all go to its ToR, the PS's to the root or to a
// rank whose first hop it is (tree_route(), ps_route()).
//
// GRID (a routed scheme) runs its plan as such a tree, flat: each "rack"
// lists the ranks whose planned aggregation node is that rack's switch (a
// rack with "ina": false, those the PS aggregates), and every switch sends
// what it aggregates straight to the PS (GRID §3.4), so every switch is a
// child of the PS. No switch relays another's packets: every node addresses
// every other directly and the network routes them (scripts/grid-netns
// builds the plan's topology and routes). Optional "rates_gbps" (trees): by
// rank, the rate each worker paces its gradient frames at (GRID's planned
// rates, on the link: with UDP, IPv4 and Ethernet headers).
//
// Rina above the ToR (§IV-D), optional "aggregation" (rina only):
//   "aggregation": [{"switch": "127.0.0.1:7800", "racks": [0, 1]}, ...]
// each an INA switch above the racks it lists (each rack under one switch at
// most; 2..64 ranks below it), node id N + 1 + R + a for entry a. Its racks'
// ranks are one group (host::merge_rina_group, at the position of its first
// rack): a rack whose ToR serves the job (serving_tor()) is a level below it
// (its ToR aggregates the rack and sends one partial up), any other rack's
// ranks send to it directly (host/rina_levels.hpp, as the simulator builds
// the BOM's groups). `ina switch --layout FILE --rack R + a` is that switch.
// A failure is not handled in such a layout (refused, as in the simulator).
//
// Optional "datagram_salt" (64 hex digits): every datagram of the job is
// tagged (runtime/datagram_tag.hpp) under datagram_key(job_key(J), salt).
// `ina run --datagram-auth` draws it for each run, as a switch does for a job
// that joins through the control plane. The salt is not secret; the key
// needs the job's credential, which never goes in the layout: each worker
// (and the PS) gets it as --key-file or INA_JOB_KEY, each ToR derives it
// from its switch key. Absent: no tags.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "host/rina_levels.hpp"
#include "host/ring.hpp"
#include "runtime/auth.hpp"
#include "runtime/net.hpp"
#include "schemes/atp_tree.hpp"
#include "schemes/registry.hpp"

namespace ina::rt {

// Whether a scheme's jobs run as a ring of workers (RAR, H-AR, Rina) in the runtime.
bool is_ring_scheme(const schemes::Scheme& s);
// Whether a layout can name it (schemes::Engine::Layout): a ring scheme, PS-based INA over racks (atp, dsa), GRID.
bool is_layout_scheme(const schemes::Scheme& s);

struct RingRack {
  std::vector<uint16_t> ranks;
  bool ina = false;                 // the rack's ToR is an INA switch (Rina, a tree)
  std::optional<Endpoint> sw;       // its `ina switch` (when it serves the job)
};

// An INA switch above racks (Rina §IV-D): the racks (indices, in the order given) and its address.
struct RingAggregation {
  std::vector<size_t> racks;
  std::optional<Endpoint> sw;       // its `ina switch` (may be null in a switch's copy, as a rack's)
};

struct RingLayout {
  uint16_t job = 1;
  std::string scheme;               // canonical registry name
  uint16_t payload = 64;
  uint64_t memory_bytes = 5'000'000;
  std::vector<Endpoint> workers;    // by rank
  std::vector<RingRack> racks;      // ring order
  std::optional<Endpoint> ps;       // PS-based INA (atp): the PS
  std::vector<RingAggregation> aggregation;  // rina: INA switches above racks
  std::optional<Key> datagram_salt; // every datagram tagged under datagram_key(job_key(job), salt)
  std::vector<double> rates_gbps;   // tree: by rank, the worker's paced rate on its link (empty: window-limited)

  size_t n() const { return workers.size(); }
  const schemes::Scheme& scheme_info() const { return schemes::find(scheme); }
  static NodeId worker_id(size_t rank) { return static_cast<NodeId>(rank + 1); }
  NodeId tor_id(size_t rack) const { return static_cast<NodeId>(n() + 1 + rack); }
  NodeId ps_id() const { return static_cast<NodeId>(n() + 1 + racks.size()); }
  bool tree() const;                // PS-based INA over racks (atp, dsa), or a routed plan's flat tree (grid)
  bool routed() const;              // GRID: a flat tree, every node addressed directly
  // The switches of the layout by index: rack q's ToR (q < R), then aggregation[s - R].
  size_t switch_count() const { return racks.size() + aggregation.size(); }
  NodeId switch_id(size_t s) const { return static_cast<NodeId>(n() + 1 + s); }
  const std::optional<Endpoint>& switch_addr(size_t s) const;
  bool serving_switch(size_t s) const;  // a serving ToR, or a switch above racks
  // Rina above the ToR: each aggregation entry's group, its entries and its
  // switches' levels (host::rina_group_tree), in the order of "aggregation".
  std::vector<host::RinaGroupTree> rina_groups() const;
  // Whether rack q is under a switch above (its ranks are in a group above the ToR).
  bool under_aggregation(size_t rack) const;
  size_t rack_of(size_t rank) const;
  // Tree: the aggregation tree (schemes/atp_tree.hpp): a rank's first hop
  // is its rack's ToR if that rack is INA, else the PS; the root's (the
  // first INA rack's ToR) parent is the PS, every other INA ToR's is the root.
  // Rack q's ToR's entry in its program's job table (parent, subtree and
  // direct ranks, children; q must be INA), and where that ToR sends packets
  // for node `id`: its own rack's workers directly, the PS directly from the
  // root and through the root from the others, a worker of another INA rack
  // through that rack's ToR (a rank whose first hop is the PS gets nothing
  // from a switch: its own address). ps_route(): where the PS sends them: a
  // rank whose first hop is the PS directly, anything else to the root.
  schemes::AtpTree atp_tree() const;
  struct TreeJob {
    NodeId parent = kNoNode;
    RankBits agg_mask, direct_mask;
    std::vector<NodeId> children;
  };
  TreeJob tree_job(size_t rack) const;
  size_t root_rack() const;         // tree: the first INA rack
  // Routed: every node's own address, but the PS reaches a rank through its
  // planned switch (a rank's engine hears only its first hop).
  Endpoint tree_route(size_t rack, NodeId id) const;
  Endpoint ps_route(NodeId id) const;
  Endpoint address(NodeId id) const;  // node `id`'s own address (a rank, a rack's switch, the PS)
  // Tree: the other racks whose ToRs rack q's ToR relays packets with (their
  // senders' ids: every other INA rack; routed: none), and the switches that
  // send the PS packets of other senders (its children on the tree).
  std::vector<size_t> relay_racks(size_t rack) const;
  std::vector<Endpoint> ps_relays() const;
  // Rack q's ToR aggregates for this job: an INA rack of a tree, or of a Rina job with at least two ranks.
  bool serving_tor(size_t rack) const;
  // Aggregators the job has in a serving ToR (its whole memory): memory / (4 * payload).
  uint32_t region() const { return static_cast<uint32_t>(memory_bytes / (4ULL * payload)); }
  // Every rank's stages (host::plan_rar / plan_hierarchical / plan_rina by
  // the scheme's collective), with the groups above the ToR merged in.
  std::vector<std::vector<host::RingStage>> plan(uint64_t elems) const;

  nlohmann::json to_json() const;
  // Validates everything; errors name `where` (the file), the field and the value.
  // need_switches: every serving ToR must have its "switch" address.
  static RingLayout from_json(const nlohmann::json& j, const std::string& where, bool need_switches);
  static RingLayout read(const std::string& path, bool need_switches);
  void write(const std::string& path) const;
};

// n workers in `racks` equal racks of consecutive ranks; `ina_racks` (rack
// indices) have an INA ToR. Throws RuntimeError naming --racks / --ina-racks
// and the value when racks do not divide n or a rack index does not exist.
std::vector<RingRack> split_racks(size_t n, unsigned racks, const std::vector<unsigned>& ina_racks);

// A list of rack numbers like "0,1" (distinct); throws RuntimeError naming `flag` and the bad entry.
std::vector<unsigned> parse_rack_list(const std::string& flag, const std::string& text);

}  // namespace ina::rt
