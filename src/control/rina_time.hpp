#pragma once
// Time model of one allreduce (Rina paper §III-A with the BOM's bandwidth
// sharing, §III-B): how long one synchronization of S bytes per worker takes
// for PS, PS-based INA (ATP), RAR, H-AR and Rina on a topo::Graph, so the
// BOM's throughput can be set beside the packet simulator's
// (exp::run_collective: the same placement, routes and transports).
//
// A collective is a chain of dependent steps. Each step is a set of
// concurrent transfers; a transfer is one sender's shard of P packets over
// a set of arcs (a path; through a Rina ToR: member -> ToR -> next group;
// a multicast: the union of its paths, every arc counted once).
// RAR, H-AR: the step takes as long as its slowest transfer, and the
// collective the sum of its steps (NCCL's per-step barrier, §III-A; with
// identical transfers the simulator's RingEndpoint, which waits per worker,
// is paced the same).
// Rina: a dependency graph over the workers, as the simulator's endpoints
// (host/ring_step_compiler.cpp) run it (with no INA group its steps are
// RAR's, and so is its model). A worker's step starts when its previous step is
// done: its own send fully acknowledged and its incoming shard fully
// received (its last packet's arrival: the transfer's end minus the
// acknowledgement's way back). So an INA rack's AllGather step s + 1, sent
// by another member, starts when shard s has arrived, not when step s's
// sender has its acknowledgement; a member that already holds the shards
// sends at once, beside the others. Transfers share an arc for as long as
// they overlap in time (the load a transfer sees on an arc is 1 + the
// others' overlap with its time on the wire, over that time; the schedule
// and the loads are iterated to a fixed point). Workers finish at different
// times (on the testbed with only tor0 INA, the agent when its broadcast is
// acknowledged, the autonomous worker after the rack a quarter later); `gbps` is, as the simulator's
// throughput (exp::CollectiveResult), the mean over workers of
// 8 S / that worker's completion.
//
// One transfer of P packets of b wire bytes (payload + header):
//  - rate r = min over its arcs of capacity / (transfers of the step on the
//    arc; Rina: the time-weighted load above) (BOM, Lemma 1: equal shares),
//    and at most the INA pacing rate of a Rina ToR (ina_gbps);
//  - RAR, H-AR: each packet's acknowledgement (ack_bytes) crosses the
//    reverse arcs and takes its bytes of their capacity: an arc carrying one
//    transfer's packets and another's acknowledgements gives the packets
//    b / (b + ack_bytes) of it (306 B packets: 82.7 %; the simulator's
//    in-rack H-AR steps on the testbed take 2957 us, not the 2444 us of the
//    packets alone). The acknowledgements start a round trip after the
//    first packet, so they count for 1 - R / (the transfer's sending time
//    without them) of it: none for a shard sent within a round trip;
//  - R = the first packet's round trip: per link of the path, store and
//    forward of one packet (b / capacity) plus the propagation delay, and
//    back per link an acknowledgement (ack_bytes / capacity + delay);
//  - a window of W packets (window_kb, the transport's initial window): if
//    W b / r >= R the window covers the pipe and the transfer takes
//    (P - 1) b / r + R; otherwise it sends W packets per round trip. RAR
//    and H-AR carry each sender's window from step to step, as the
//    endpoints do, round by round as Rina's transfers below: it grows by a
//    packet a round trip and halves on an echo from its bottleneck port (a
//    switch's egress marks), where the step's transfers through that port
//    queue alike. They carry the sender's round trip too: a step's first
//    round is paced over the round trip of the sender's previous step's
//    last round (standing for the endpoint's srtt before any of this
//    step's samples), and what it sends faster than the port serves waits
//    there (the burst, for ECN);
//  - Rina's transport (host::RinaTransport, as the simulator's endpoints):
//    "paper": a Rina rack's ScatterReduce is paced at ina_gbps, 0 meaning
//    host::kRinaFullSpeedGbps (20); each INA rack worker's first AllGather
//    send (the agent's broadcast, each member's first forward) starts from
//    one packet and doubles per round trip (§IV-C "starts from zero", slow
//    start) until the window covers the pipe; a member's later AllGather
//    send goes on with the window its previous send ended with. Every ring
//    sender's packets are spaced at its window's rate over the round trip
//    (host::window_pace_gbps), no closer than its share, and its window
//    grows no further than it covers its link's rate (the NIC's; a paced
//    ScatterReduce's, ina_gbps) over the round trip, as the endpoint's
//    growth ceiling (host::window_covering).
//    "aimd": paced only if ina_gbps > 0; only the agent's broadcast is
//    slow-started; later sends use the window;
//  - a Rina ScatterReduce step starts with the agent's pull (agent -> ToR
//    -> members, two links of an acknowledgement-sized packet) before the
//    members' packets reach the ToR.
//
// Steps per collective (G groups, N workers, racks of k workers):
//  - RAR: 2 (N - 1) steps of S / N, worker i -> worker i + 1;
//  - H-AR: k - 1 in-rack steps of S / k, 2 (R - 1) steps of S / (k R)
//    among the R ranks of the same position in each rack (k such rings at
//    once), k - 1 in-rack AllGather steps of S / k (every rack the same k);
//  - Rina (the paper's Fig. 7 / Fig. 8 behaviour, as host/ring.hpp; the
//    groups of rina_throughput, Aggregation::Tree, as the simulator runs
//    them; a group above the ToR (§IV-D) moves its ScatterReduce up its
//    tree, Group::hops, and its AllGather copies down the same hops, one
//    transmission per hop: an arc several hops cross carries that many
//    copies of the transfer, in its own rate and in the others' load): G - 1
//    ScatterReduce steps of S / G (an INA rack: every member -> ToR, one
//    aggregate on to the next group's agent; an autonomous worker: to the
//    next group), one more step for INA racks (members -> ToR -> their
//    agent: the rack's own shard), and G - 1 AllGather steps. AllGather
//    step s of a group sends to the next group's entry: an INA rack's ToR,
//    which copies the shard to every member and acknowledges once for the
//    rack (so the round trip is the slowest member's), or the autonomous
//    worker. An INA rack's step 0 is its agent's complete shard through its
//    own ToR, copied to the rack's other members and on to the next group
//    (one multicast); step s >= 1 is sent by member s mod k of the rack
//    (k members in job order), each step its own set of transfers. 2G - 1
//    steps with an INA rack, 2 (G - 1) without;
//  - PS (co-located, sharded: the PS of shard k on the host of rank k, as
//    exp::run_collective) and PS-based INA: one round. Every worker's
//    S / N to each other PS along the shard's tree (ATP: to the first INA
//    switch on its shortest path, which sends one aggregate on to the
//    next INA switch or the PS, Lemma 2), the result back down the same
//    tree by multicast (each arc once per shard; the PS's own copies along
//    its multicast tree, the first equal-cost next hop at each switch, as
//    the simulator replicates: topo::Routing::tree_path). The round takes the
//    busiest arc's bytes / capacity (the transports of all shards keep it
//    busy: a fluid model) plus the longest worker -> PS -> worker latency.
//    A busiest arc out of a switch marks ECN; the streams through it halve
//    together, and it is busy a share of the time: with the pipe P its
//    capacity x that latency and the threshold K = ecn_kb below it,
//    3/4 (P + K)^2 / (P^2 + P K + K^2) (their summed window cycles between
//    (P + K) / 2 and P + K; 3/4 with no threshold, the synchronized
//    sawtooth), otherwise 1; bandwidth_s stays bytes / capacity.
//    With ina_gbps > 0 and a shard's tree through an INA switch, every
//    transport is paced at ina_gbps / (N - 1), as cluster::ShardedPsCluster
//    paces them: the round takes at least a shard's wire bytes at that rate.
//
// Straggler term (Eq. 1): before each send a worker waits
// ~ N(k / N, sigma^2); a step whose n senders all wait costs
// k / N + sigma * E[max of n standard normals] more (exact expectation by
// quadrature, not the asymptotic sqrt(2 ln n); the truncation at zero is
// ignored, so sigma should be small against k / N or k = 0 with sigma
// small against the step). n = N for RAR, H-AR and Rina's ScatterReduce
// steps (every member sends to the ToR), G for Rina's AllGather steps.
// This is the barrier model of §III-A; a ring without a global barrier
// (each worker waits only for its neighbour) lets part of the delays
// overlap, so it is an upper bound there.
//
// Rina's queues (the dependency graph's flows, transfer by transfer and
// round trip by round trip, iterated with the sharing above): a port's
// queue is what the transfers crossing it keep in flight beyond its
// bandwidth-delay product: a transfer bottlenecked there its bytes in
// flight (its bottleneck: the first arc of each of its ways whose share
// sets its rate; its sender's own link if that is one; at a copying switch
// each branch's port, with copies x its packets; a paced sender holds the
// excess itself), one crossing a switch's port off its bottleneck at most
// its rate over its round trip per copy (two AllGather broadcasts that
// meet at a ToR's port down to a rack member queue there, each below its
// share). Other transfers meet that queue as delay (bytes / capacity) on
// their ways: in their round trips, their
// acknowledgements and the agent's pull. E.g. an autonomous worker's
// fixed window into a group above the ToR whose top copies every packet 4
// times: a quarter of a port, 143 KB waiting in the spine's ports, behind
// which the group's ScatterReduce step's pull or last acknowledgements
// come down (leaf-spine, INA spine0: that step 45 us against 37). A
// switch's port marks ECN above ecn_kb (the simulator's threshold; ports of
// switches only; the first to pass it of a transfer's ports off its
// bottleneck and its bottleneck, where several tie the one the others load
// most): the echo comes back a round trip later and halves the sender's
// window there (once a round trip; slow start ends; additive
// increase after), and the window a sender ends a transfer with is the one
// its next transfer starts with (an autonomous worker halved by its first
// fan-out sends its next shards at half the window). A slow-start round is
// clocked by the acknowledgements: they come back at the rate the port
// serves the transfer (what the others' bytes in flight leave free, at least
// its share, at most its rate alone), two packets leave per acknowledgement
// (no faster than the sender's link, nor its window's pace), and what
// arrives beyond the port's rate waits there (the burst, a queue with the
// others' for delay and ECN).
// An echo comes back a round trip after the mark, not before the threshold's
// delay; the hold-off after a halving is the round trip of the round the echo
// came in.
// The transports are assumed loss-free; PS's fluid round has no queueing
// delay and its streams halve in step (docs/results/rina_bom.md); RAR's
// and H-AR's windows halve on ECN but meet no queue of others, nor the one
// a receiving host's own window keeps at its NIC, which the
// acknowledgements it sends wait behind (the simulator's ceiling follows
// the smoothed round trip, which that queue lengthens). Under the aimd
// transport the simulator's unpaced ring workers queue their windows at
// their own NICs, which the model ignores (H-AR's inter-rack rings on the
// testbed then run their shared link at ~85 % of what it gives).
#include <cstdint>
#include <vector>

#include "control/rina_bom.hpp"
#include "host/ring.hpp"
#include "schemes/collective.hpp"
#include "topo/graph.hpp"

namespace ina::control::rina {

struct TimeParams {
  double gradient_mb = 4;        // per worker: MiB of int32 values (exp::CollectiveSettings)
  uint32_t payload_values = 64;  // values per packet
  uint32_t header_bytes = 50;
  uint32_t ack_bytes = 64;       // acknowledgement / pull on the wire (the simulator's minimum packet)
  double link_delay_us = 1;      // propagation per link
  double window_kb = 60;         // transport window (the ring's initial window)
  double ecn_kb = 100;           // Rina: a switch port marks ECN above this backlog (KB of 1000 B; 0: never)
  double ina_gbps = 0;           // Rina: members' rate to the ToR (0: see rina_transport); PS-based INA: each host's rate over the trees
  host::RinaTransport rina_transport = host::RinaTransport::Paper;
  double straggler_sigma_us = 0;  // Eq. 1: per-send delay ~ N(k / N, sigma^2)
  double straggler_k_us = 0;
};

struct TimeResult {
  double seconds = 0;      // one allreduce (Rina: the last worker's completion)
  double gbps = 0;         // per worker: 8 * gradient payload bytes / seconds (Rina: mean over workers of 8 S / worker_s)
  double transfer_s = 0;   // sum over steps of the slowest transfer (Rina: the last worker's chain)
  double bandwidth_s = 0;  // the part of transfer_s that is (packets - 1) * b / rate (PS: busiest arc's bytes / capacity)
  double straggler_s = 0;  // expected straggler delay (Eq. 1 term)
  int steps = 0;           // dependent steps (the chain)
  int groups = 0;          // ring schemes: members of the outer ring (RAR: N; H-AR: racks; Rina: G)
  std::vector<double> worker_s;  // Rina: each worker's completion (in `workers` order); empty otherwise
  // Rina: per worker (in `workers` order), the window (packets) each of its
  // sends starts with, in its steps' order (host::RingStepRecord::cwnd).
  std::vector<std::vector<double>> send_windows;
  // Rina: rounds of the schedule <-> link-sharing fixed point, and whether it
  // converged within its 200 rounds: loads and carried windows moved
  // < 1e-6, or (settled) after the 200 the last 8 rounds' completions lie
  // within 1e-5 of each other (`sharing_spread`: their (max - min) / max;
  // 0 before 8 rounds). Either way the last round's schedule is the
  // result. If neither, each worker's completion is its mean over the last
  // `sharing_mean_rounds` (100) rounds, and worker_s, seconds (the latest
  // of those means) and gbps (the workers' rates at them) follow from
  // them; callers must say so, with the spread; send_windows stay the
  // last round's. The spread is of the latest worker's completion, round
  // by round.
  int sharing_rounds = 0;
  bool sharing_converged = true;
  double sharing_spread = 0;
  int sharing_mean_rounds = 0;  // 0: the last round's schedule
};

// The rate Rina's members pace their ScatterReduce to the ToR at (Gbps; 0: not paced).
double rina_pace_gbps(const TimeParams& p);

// Throws BomError for a bad job (as the BOM), a collective it has no model
// for (None), bad parameters, or H-AR with unequal racks.
TimeResult allreduce_time(const topo::Graph& g, const std::vector<topo::NodeId>& workers,
                          const std::vector<topo::NodeId>& ina, schemes::Collective c, const TimeParams& p);

// E[max of n iid N(0, 1)] (n >= 1; 0 for n = 1), by numerical integration.
double expected_max_normal(int n);

}  // namespace ina::control::rina
