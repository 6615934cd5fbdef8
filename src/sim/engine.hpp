#pragma once
// Deterministic packet-level discrete-event simulator.
//
// Time is integer picoseconds. Every event has a key that names it
// whatever else runs: (time, node, then at one node and time: deliveries
// off in-order links by link id, reordered packets by link and that link's
// count, timers by the node's own count), so the order of a node's events
// does not depend on what other nodes do at the same time, nor on how the
// nodes are split across threads. A run is a pure function of its seed.
// A link is a FIFO output queue plus a wire: a packet's departure is
// computed arithmetically from the link's busy-until time, so crossing a
// link costs exactly one event (its arrival). Packets in flight on a link
// wait in the link's own FIFO (arrival times increase). The links' heads
// compete in a tournament (winner) tree keyed by their arrival, its leaves
// in the order of their deliveries' keys (so equal times go left first):
// delivering a head and keying the next one is one leaf-to-root pass with
// one comparison per level. Timers and reordered packets are in a 4-ary
// heap. The earlier of the two is the next event. Queue occupancy is the
// backlog; drop-tail and ECN marking act on it at enqueue. Loss,
// duplication and reordering are injected per link from the link's own
// random stream; a reordered packet leaves the FIFO and becomes its own event.
//
// Partitions (set_partitions): the nodes split into P groups, each with its
// own events, clock, counters and packet pool, run on P threads in windows
// of the least delay a packet takes between two partitions (conservative
// synchronization: no packet sent inside a window can arrive inside it).
// A link belongs to its sender's partition (queue, counters, random
// stream); a packet for another partition is posted at the end of the
// window to the receiver's link FIFO. Every node sees the same events in
// the same order as with one partition, so the results, the digest and the
// trace are the same.
//
// Ranks (set_partitions with sim::Ranks): the partitions split further over
// processes, each building the whole network and running its own share;
// a window's posts to another process's partitions travel as bytes at its
// end, and the processes agree on the next window and on a failure. After
// each run() every process sees the whole run's counters, digest, link
// counters and idleness; a node's own state only where it ran (local()).
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/rng.hpp"
#include "core/time.hpp"
#include "proto/node.hpp"
#include "sim/ranks.hpp"
#include "wire/packet.hpp"

namespace ina::sim {

inline constexpr uint32_t kNoLink = UINT32_MAX;  // a link id that names none

struct LinkParams {
  double gbps = 100;
  Time delay = 2500 * kNs;    // propagation, one way
  uint64_t queue_bytes = 1 << 20;
  uint64_t ecn_bytes = 100 * 1000;  // 0 = no marking
  double loss = 0, dup = 0, reorder = 0;
  Time reorder_delay = 5 * kUs;   // reordered packets are held ~U(0, this) extra
};

// (The counters every send updates first: they share a line with the
// serialization time in Link.)
struct LinkStats {
  uint64_t packets = 0, bytes = 0;      // delivered
  Time busy = 0;                        // total serialization time
  uint64_t ecn_marked = 0;
  uint64_t drop_queue = 0, drop_loss = 0;
  uint64_t duplicated = 0, reordered = 0;
};

// Prefetches a packet's header and payload (a 64-value payload: 5 lines).
inline void prefetch_packet(const Packet* p) {
  const char* c = reinterpret_cast<const char*>(p);
  for (size_t off = 0; off < sizeof(Packet) + 64 * sizeof(int32_t); off += 64) __builtin_prefetch(c + off, 0, 2);
}

// Packets in flight on one link in arrival order: a growable ring of
// (arrival, packet) pairs, so the next arrival time is read without touching
// the packet (which is usually not in cache yet). 24 bytes, in the link's
// first cache line.
class WireFifo {
 public:
  bool empty() const { return n_ == 0; }
  size_t size() const { return n_; }
  Time front_time() const { return buf_[head_].first; }
  Packet* front() const { return buf_[head_].second; }
  // Pops the head and prefetches what the link delivers next time: the ring
  // two lines on and the new head's packet (a packet lives on the wire for
  // thousands of events, long enough to leave the caches; with the line
  // fetched now it is in cache when it is due, after the other links' turns).
  void pop() {
    head_ = (head_ + 1) & mask_;
    --n_;
    __builtin_prefetch(&buf_[(head_ + 8) & mask_]);
    if (n_) prefetch_packet(buf_[head_].second);
  }
  void push(Time t, Packet* p) {
    if (needs_room()) make_room();
    push_with_room(t, p);
  }
  // The same in two steps: whether a push needs room first, make it (the
  // ring doubles), push.
  bool needs_room() const { return !buf_ || n_ == mask_ + 1; }
  [[gnu::noinline]] void make_room() {
    const uint32_t cap = buf_ ? 2 * (mask_ + 1) : 64;
    auto b = std::make_unique<std::pair<Time, Packet*>[]>(cap);
    for (uint32_t i = 0; i < n_; ++i) b[i] = buf_[(head_ + i) & mask_];
    buf_ = std::move(b);
    head_ = 0;
    mask_ = cap - 1;
  }
  void push_with_room(Time t, Packet* p) {
    buf_[(head_ + n_) & mask_] = {t, p};
    ++n_;
  }

 private:
  std::unique_ptr<std::pair<Time, Packet*>[]> buf_;
  uint32_t head_ = 0, n_ = 0, mask_ = 0;
};

// A link's fields in the order its work reads them: the first cache line is
// what every delivery and every send reads (the wire, the receiver, the
// queue's state and thresholds, the delay), the second what a send writes
// (the serialization time it last computed and the counters), then the
// parameters as connected and the rest.
struct alignas(64) Link {
  WireFifo wire;  // in flight, in arrival order
  NodeId to = kNoNode;
  // Loss, duplication or reordering, into another partition, or watched
  // (watch_link()): a send takes transmit_faulty() (set by connect(),
  // set_partitions() and watch_link()).
  bool slow = false;
  uint32_t ser_bytes = 0;  // the last packet size serialized, and its time (ser_time; 0 B take 0 ps)
  Time busy_until = 0;
  Time queue_time = 0, ecn_time = 0;    // thresholds as backlog time
  Time delay = 0;                       // p.delay (propagation, with the hosts' delay)
  Time ser_time = 0;
  LinkStats st;
  LinkParams p;
  NodeId from = kNoNode;
  uint64_t bps = 0;
  Rng rng;
  uint32_t reordered_seq = 0;  // names this link's reordered packets (their events' key)
  int32_t watch = -1;          // its samples' index (Simulator::watch_link), or -1: not watched
};
static_assert(offsetof(Link, ser_time) == 64 && offsetof(Link, st) + offsetof(LinkStats, drop_queue) < 128,
              "a link's first line: the wire and the queue; its second: what a send writes");

// Heap events. Deliver: a lone packet (reordered); Timer: a node's timer.
enum class EvKind : uint32_t { Deliver = 0, Timer = 1 };

// The key after the time (EventKey): the node, then a class (0: delivery
// off a link's FIFO, 1: a reordered packet, 2: a timer), then within the
// class the link id, (link id, its reorder count mod 2^24), or the node's
// timer count (mod 2^46). Unique per event, whoever runs it: a link's FIFO
// delivers one packet per picosecond at most, and two reordered packets of
// one link with counts 2^24 apart left it 2^24 serializations apart (over
// 80 ms at 100 Gbit/s), far beyond any reorder delay.
inline constexpr uint32_t kMaxLinks = 1u << 22;
inline constexpr uint64_t event_tie(uint32_t node, uint64_t cls, uint64_t id) {
  return static_cast<uint64_t>(node) << 48 | cls << 46 | (id & ((uint64_t{1} << 46) - 1));
}
inline constexpr uint64_t reordered_id(uint32_t link, uint32_t count) {
  return uint64_t{link} << 24 | (count & ((1u << 24) - 1));
}

// One packet a watched link's queue was offered (Simulator::watch_link):
// what a queue trace at that port reads.
struct QueueSample {
  enum Fate : uint8_t { kSent = 0, kDropped = 1, kLost = 2 };  // kDropped: queue full; kLost: the link's random loss
  Time t;          // when it reached the queue
  Time backlog;    // the queue ahead of it, as serialization time (0: the link was idle)
  uint32_t bytes;  // on the wire
  PktType type;
  Fate fate;
  bool marked;     // ECN-marked at this queue
  uint16_t job, flags;  // flags as the packet reached the queue (this queue's mark: `marked`)
  uint32_t psn;
  uint32_t priority;  // the header's (ring packets: the step's tag, op << 8 | step code)
  NodeId src, dst;
};

struct Event {
  Time t;
  uint64_t tie;  // event_tie()
  union { Packet* pkt; uint64_t token; };
  uint32_t node;
  EvKind kind;
};
static_assert(sizeof(Event) == 32);

// One delivery or timer, as seen by the optional trace sink (tests compare
// traces event by event; the digest() folds the same events into a hash).
struct TraceRecord {
  Time t;
  NodeId node;         // the node handed the packet or the timer
  bool timer;          // false: a packet delivery
  PktType type;        // deliveries: the header fields
  uint16_t job, flags;
  uint32_t psn;
  NodeId src, dst;
  uint8_t rank;
  RankBits bitmap;
  uint64_t token;      // timers: the token
};

class Simulator;

struct Partition;

class SimEffects final : public Effects {
 public:
  SimEffects(Simulator& s, Partition& part) : sim_(s), part_(part) {}
  Packet* alloc() override;
  void send(Packet* p) override;
  void free(Packet* p) override;
  void set_timer(Time at, uint64_t token) override;
  bool multicast(Packet* p) override;
  void send_copies(Packet* p, std::span<const NodeId> to) override;  // (the pool and route() without a call per copy)
  NodeId current = kNoNode;

 private:
  Simulator& sim_;
  Partition& part_;
};

// Tournament (winner) tree over links, one per partition over the links
// into its nodes, one leaf per link at the link's place in the order of
// its deliveries' ties (Simulator::leaf_of_, Partition::link_at): two
// deliveries at one time go in leaf order, so a leaf's key is its wire
// head's arrival alone (kNever: empty), 8 bytes. win[n] for 1 <= n < leaves
// is the leaf with the least key below tree node n (the leftmost of equal
// ones) and win[leaves + i] = i, so the root win[1] is the next link
// delivery and re-keying a leaf compares its new key with the sibling's
// winner once per level.

// A packet for another partition, posted at the end of a window.
struct Posted {
  Time arrival;
  Packet* pkt;
  uint32_t link;
  uint32_t count;    // a reordered packet's: its link's count (reordered_id)
  bool in_order;     // onto the link's FIFO; else a heap event
};

// One partition's share of a run (all of it with one partition): the
// events of its nodes (timers, reordered packets, the links into them),
// its clock and counters, the packets it allocates and frees.
struct Partition {
  Partition(Simulator& s, uint16_t payload_capacity, uint16_t index) : pool(payload_capacity), fx(s, *this), index(index) {}
  std::vector<Time> key = std::vector<Time>(1, kNever);  // by leaf: its link's wire head's arrival (no link yet: empty)
  std::vector<uint32_t> win = std::vector<uint32_t>(2);
  std::vector<Packet*> head = std::vector<Packet*>(1);  // by leaf: its link's wire head (what to prefetch)
  // By leaf: its link. The links into this partition's nodes, in the order
  // of their deliveries' ties (event_tie(to, 0, link)), padded to `leaves`.
  std::vector<uint32_t> link_at = std::vector<uint32_t>(1);
  size_t leaves = 1;
  std::vector<Event> heap;
  Time now = 0;
  uint64_t events = 0, hops = 0, misrouted = 0;
  double busy_s = 0;  // wall time in run_window() (several partitions only)
  PacketPool pool;
  SimEffects fx;
  uint16_t index;
  std::vector<std::vector<Posted>> outbox;  // by receiving partition
  std::vector<Posted> inbox;                // posted by other processes' partitions (ranks)
  std::vector<TraceRecord> trace;           // with several partitions: merged into the sink after run()
};

class Simulator {
 public:
  // header_bytes: modelled bytes on the wire besides the payload values.
  Simulator(uint64_t seed, uint16_t payload_capacity, uint32_t header_bytes = 50, uint32_t min_packet_bytes = 64);
  ~Simulator();

  // Topology. Node ids are dense, in order of addition. The simulator owns nodes.
  NodeId add_node(std::unique_ptr<Node> n, bool is_switch);
  // ECN: links out of a switch mark every packet above their ecn_bytes
  // (the rule both engines share: proto/ecn.hpp); links out of a host
  // (its NIC's queue) never do unless this is set before connect() (a NIC
  // does not mark its own queue: DCTCP and DCQCN mark at switch ports).
  void set_host_ecn(bool on) { host_ecn_ = on; }
  // End-host latency: every packet spends `d` inside the
  // host that sends it (application to NIC) and `d` inside the host that
  // receives it (NIC to application), as a pure delay that limits no rate.
  // Set before connect(): links out of a host and into a host get `d` more
  // propagation delay each. A constant delay before a FIFO queue delays its
  // departures by the same constant, so charging the sender's share after
  // its NIC queue instead of before changes no time the hosts see. 0: none.
  void set_host_delay(Time d) { host_delay_ = d; }
  // Two unidirectional links a->b and b->a; returns the id of a->b (b->a is +1).
  uint32_t connect(NodeId a, NodeId b, const LinkParams& ab, const LinkParams& ba);
  // Shortest-path routes (by hop count; hosts never transit): for every
  // switch s and destination d, ALL links out of s that start a shortest path
  // to d, in link-id order. route() picks one per flow, at index
  // ecmp_index(p.src, p.dst, s, count) (core/ecmp.hpp, the same choice as
  // topo::Routing), so one (src, dst) flow always takes one path and flows
  // spread over equal-cost paths; with one candidate there is no hashing.
  // Multicast trees take the first candidate (the lowest link id) at every
  // switch, for every member. Call after the last connect().
  void build_routes();
  // The candidate next-hop links of switch `sw` towards `dst`, in link-id
  // order (empty: no route, `dst` == `sw`, `sw` a host, or no build_routes()).
  // Valid until the next build_routes().
  std::span<const uint32_t> next_hops(NodeId sw, NodeId dst) const;

  template <typename T>
  T& node(NodeId id) { return static_cast<T&>(*nodes_[id]); }
  Node& node(NodeId id) { return *nodes_[id]; }
  size_t node_count() const { return nodes_.size(); }
  bool is_switch(NodeId id) const { return is_switch_[id]; }
  Link& link(uint32_t id) { return links_[id]; }
  const Link& link(uint32_t id) const { return links_[id]; }
  size_t link_count() const { return links_.size(); }
  // The link leaving host `h` (its only one).
  uint32_t uplink(NodeId h) const { return host_link_[h]; }

  // Multicast group `group` (a job id): its members, in rank order. Packets a
  // node multicasts to the group are replicated along the shortest-path tree.
  void set_multicast_group(uint16_t group, std::vector<NodeId> members);

  // Splits the nodes into partitions (run on as many threads, or on
  // set_threads()'s):
  // `part_of[node]` in [0, P) for every node (P = 1: one, the default). Call
  // after the last connect() and before run(). The least time a packet
  // takes between two partitions is the window; results do not depend on
  // the split, only the speed does.
  // With `ranks` (size R > 1, P >= R): partition p runs in process
  // p * R / P; this process runs its own (on as many threads, or on
  // set_threads()'s) and trades
  // with the others through `ranks`, which must outlive the runs. Every
  // process makes the same calls: set-up, run(), call().
  void set_partitions(const std::vector<uint16_t>& part_of, Ranks* ranks = nullptr);
  // The threads this process's partitions run on (0, the default: one
  // each). A thread runs its share (partitions i, i + T, ...) one after
  // another in every window: on fewer threads than partitions each
  // window's work stays within a partition's nodes, links and packets,
  // which on a large topology keeps more of it in cache. Results do not
  // depend on it.
  void set_threads(unsigned threads) { threads_ = threads; }
  // The process that runs partition p of `parts` over `ranks` processes.
  static unsigned rank_of_partition(size_t p, size_t parts, unsigned ranks) {
    return static_cast<unsigned>(p * ranks / parts);
  }
  static constexpr size_t kMaxPartitions = 256;
  size_t partitions() const { return parts_.size(); }
  // Whether node `n` runs in this process (always without ranks): only
  // these nodes' state is the run's.
  bool local(NodeId n) const { return !ranks_ || part_rank_[node_part_[n]] == ranks_->rank(); }
  // The least time a packet takes from one partition to another (kNever with one partition).
  Time lookahead() const { return lookahead_; }
  // Windows run with several partitions (synchronization rounds), and the
  // CPU time of the threads run() started besides its caller's.
  uint64_t windows() const { return windows_; }
  double helper_cpu_s() const { return helper_cpu_s_; }
  // Per partition: its events and the wall time its thread spent running
  // windows (the rest of the run it waited at the barriers).
  struct PartitionLoad {
    uint64_t events = 0;
    double busy_s = 0;
  };
  std::vector<PartitionLoad> partition_loads() const;

  // Runs until no event is left or the next one is after `until`. A node
  // that throws ends the run with its exception: the nodes' state may then
  // be read and the simulator destroyed, not run again.
  void run(Time until = kNever);
  // The control plane acting on node `n` at `at` (after run(at): no event
  // is due before it): `f` gets the node's effects, as a timer would (with
  // ranks: in the process that runs `n`; the others only move the clock).
  void call(NodeId n, Time at, const std::function<void(Effects&)>& f);
  Time now() const;
  // No timer or reordered packet left to run (packets may be on the links).
  bool idle() const;
  // No event of any kind left: idle() and no packet on any link.
  bool quiet() const;

  // The first partition's pool (setup and tests allocate from it); packets
  // in use are counted over every partition's by packets_in_use().
  PacketPool& pool() { return parts_.front()->pool; }
  size_t packets_in_use() const;
  uint32_t wire_bytes(const Packet& p) const { return wire_bytes(p.h.count); }
  // A packet of `count` values on the wire: header, values, at least a minimum frame.
  uint32_t wire_bytes(uint16_t count) const {
    const uint32_t b = header_bytes_ + 4u * count;
    return b < min_packet_bytes_ ? min_packet_bytes_ : b;
  }

  uint64_t events() const;
  uint64_t hops() const;
  uint64_t timer_events() const { return events() - hops(); }
  uint64_t misrouted() const;
  // A hash of every delivery and timer: each node's own in its order, then
  // the nodes' in id order.
  uint64_t digest() const;
  // Appends every delivery and timer to `sink` from now on (nullptr: off).
  void set_trace(std::vector<TraceRecord>* sink) { trace_ = sink; }
  // Instrumentation: called with each packet a link's random loss drops,
  // before it is freed (empty: off). It must not change the run. With
  // several partitions, calls are serialized and come in no set order.
  void set_loss_observer(std::function<void(const Packet&)> f) { loss_observer_ = std::move(f); }

  // Records every packet offered to link `link`'s queue at times in
  // [from, to) (link_samples()). It changes no event: a watched link sends
  // through the path of a link with faults, which draws nothing when it has
  // none. A duplicate the link's faults make is not sampled. Call after the
  // last connect() and before run(); with ranks, only the process that runs
  // the link's sender has its samples. Watching a link again sets its window.
  void watch_link(uint32_t link, Time from = 0, Time to = kNever);
  // Link `link`'s samples, in the order its queue was offered them (empty if
  // it is not watched).
  const std::vector<QueueSample>& link_samples(uint32_t link) const;

  // Sends `p` from node `from` as its effects would (set-up and tests).
  void route(NodeId from, Packet* p);
  // Used by SimEffects.
  [[gnu::always_inline]] inline void route(Partition& P, NodeId from, Packet* p);
  void schedule_timer(Partition& P, NodeId n, Time at, uint64_t token);
  bool multicast_from(Partition& P, NodeId from, Packet* p);

 private:
  static void push(Partition& P, const Event& e);
  static Event pop(Partition& P);
  [[gnu::always_inline]] inline void transmit(Partition& P, uint32_t link_id, Packet* p);  // (inlined into the send paths)
  [[gnu::noinline]] void transmit_faulty(Partition& P, uint32_t link_id, Packet* p);  // a slow link (Link::slow)
  [[gnu::noinline]] void transmit_slow(Partition& P, uint32_t link_id, Packet* p);    // the rest of transmit()'s cases
  Time admit(Partition& P, Link& l, Packet* p);
  [[gnu::always_inline]] inline bool serialize(Partition& P, Link& l, Packet* p);  // admit() for a packet of the link's ser_bytes
  [[gnu::noinline, gnu::cold]] static void set_ser_bytes(Link& l, uint32_t bytes);  // the serialization time of `bytes`
  void size_link(Link& l, const Packet& p) const;  // set_ser_bytes() for p's size, if it differs
  void enqueue_on_wire(Partition& P, uint32_t link_id, Packet* p, Time arrival, bool in_order);
  // Onto the link's FIFO, or a reordered packet (its link's `count`) onto
  // the heap, of P (the link's receiving partition).
  void place(Partition& P, uint32_t link_id, Packet* p, Time arrival, bool in_order, uint32_t count);
  // Where P's events are traced: the sink, or P's own buffer (merged after run()).
  std::vector<TraceRecord>& trace_sink(Partition& P) { return parts_.size() > 1 ? P.trace : *trace_; }
  [[gnu::always_inline]] inline void deliver(Partition& P, NodeId to, Packet* p);  // (inlined into run_window())
  void key_link(Partition& P, uint32_t link_id);  // re-keys a link from its wire head, updates the path
  [[gnu::always_inline]] inline void key_leaf(Partition& P, uint32_t leaf, const Link& l);  // the same by leaf, inlined into run_window()
  [[gnu::always_inline]] inline void set_leaf(Partition& P, uint32_t leaf, const Link& l);  // its key and head alone (no pass)
  // run_window()'s deliveries at P.now off leaves first, first + 1, ...,
  // the first (its link l0, its packet p0) already popped.
  [[gnu::noinline]] void run_same_time(Partition& P, uint32_t first, Link& l0, Packet* p0);
  // By link: its leaf in its receiver's partition's tree (made with the
  // trees; Partition::link_at is the inverse).
  std::vector<uint32_t> leaf_of_;
  // The tournament trees over the links, made again for every local
  // partition. connect() only marks them stale (a tree per connect() would
  // make building a network quadratic in its links); whatever may send
  // next (run(), call(), set_partitions()) makes them first.
  void build_trees();
  void ensure_trees() {
    if (trees_stale_) build_trees();
  }
  // Runs P's events before `limit` and not after `until`.
  void run_window(Partition& P, Time limit, Time until);
  void run_partitioned(Time until);
  void start_nodes();
  void take_posted(Partition& P);  // the packets other partitions posted to P, onto its links and heap
  // Ranks: posts to other processes' partitions go as bytes, theirs to ours
  // come into our partitions' inboxes (every process at once).
  void trade_posts();
  // Ranks: every process's counters, digests, link counters and idleness
  // after a run (every process at once); `cpu_s` this process's run time.
  void share_totals(double cpu_s);
  Time next_time(const Partition& P) const;
  void balance_pools();
  Partition& part_of(NodeId n) { return *parts_[node_part_[n]]; }
  uint64_t sum(uint64_t Partition::*counter) const;  // over the partitions

  std::vector<std::unique_ptr<Partition>> parts_;
  std::vector<uint16_t> node_part_;  // per node
  Ranks* ranks_ = nullptr;
  std::vector<uint16_t> part_rank_ = {0};  // per partition: the process that runs it
  std::vector<Partition*> local_;          // the partitions this process runs
  size_t remote_in_use_ = 0;               // ranks: packets other processes hold
  bool remote_busy_ = false, remote_wires_ = false;  // ranks: others' events left (heap; links)
  Time lookahead_ = kNever;
  uint64_t windows_ = 0;
  unsigned threads_ = 0;  // 0: one per local partition
  double helper_cpu_s_ = 0;
  std::mutex observer_mu_;
  uint16_t payload_capacity_;
  uint32_t header_bytes_, min_packet_bytes_;
  uint64_t seed_;
  std::vector<std::unique_ptr<Node>> nodes_;
  std::vector<bool> is_switch_;
  bool host_ecn_ = false;
  Time host_delay_ = 0;
  std::vector<Link> links_;
  std::vector<uint32_t> host_link_;            // per node: its uplink (hosts)
  std::vector<std::vector<uint32_t>> out_links_;
  // Routes, flat: route_[col_[d] * route_rows_ + row_[s]] for node d and
  // switch s is UINT32_MAX (no route), a link id (the only candidate), or
  // kManyHops | o: the candidates are ecmp_[o + 1 .. o + ecmp_[o]]. Candidate
  // sets are interned, so the table costs 4 bytes per pair of switches, as
  // one next hop would. A host's column is its switch's (col_): every
  // other switch reaches it as it reaches that switch, which takes the
  // host's own link (down_link_; its entry in the column is "no route", as
  // a switch has none to itself). So the table does not grow with the
  // hosts, and every switch hop reads it (a 1024-host fat-tree's is
  // 0.4 MB; one over every node would be 1.7 MB).
  static constexpr uint32_t kNoRow = UINT32_MAX;
  static constexpr uint32_t kManyHops = 0x80000000u;
  std::vector<uint32_t> row_;        // per node: its row (switches, once routed) or kNoRow
  std::vector<uint32_t> col_;        // per node: its column's row (a host: its switch's), or kNoRow
  std::vector<uint32_t> down_link_;  // per node: the link from a host's switch to it
  std::vector<uint32_t> route_;
  // The entry for switch row `row` towards `dst` (< route_n_), or nullptr.
  const uint32_t* route_entry(uint32_t row, NodeId dst) const {
    const uint32_t c = col_[dst];
    if (c == kNoRow) return nullptr;
    const uint32_t* e = &route_[c * route_rows_ + row];
    return *e == kNoLink && c == row ? &down_link_[dst] : e;
  }
  std::vector<uint32_t> ecmp_;
  size_t route_n_ = 0, route_rows_ = 0;  // nodes and switches when the routes were built
  uint32_t first_hop(NodeId sw, NodeId dst) const;  // multicast: the first candidate, or UINT32_MAX
  std::vector<std::vector<NodeId>> groups_;     // by group id
  // A switch's multicast split of a group: for the members `pending`, the
  // next-hop links in order of first member, each with its members.
  struct McastSplit {
    bool valid = false;
    RankBits pending;
    std::vector<std::pair<uint32_t, RankBits>> branches;
  };
  // By switch row, the splits of the groups that switch multicast to (made
  // on first use by the switch's own partition; cleared when groups or
  // routes change). A map per switch: a switch splits few of many groups.
  std::vector<std::unordered_map<uint16_t, McastSplit>> mcast_;
  McastSplit& mcast_split(uint16_t group, uint32_t row) { return mcast_[row][group]; }
  void size_mcast();  // an empty map per switch row
  std::function<void(const Packet&)> loss_observer_;
  struct Watched {
    Time from, to;
    std::vector<QueueSample> samples;  // filled by the link's sender's partition
  };
  std::vector<Watched> watched_;  // by Link::watch
  std::vector<uint64_t> node_digest_;  // per node: the hash of its own events
  std::vector<uint64_t> timer_count_;  // per node: timers set (their events' key)
  bool started_ = false;
  bool trees_stale_ = false;  // links added since build_trees()
  std::vector<TraceRecord>* trace_ = nullptr;
};

}  // namespace ina::sim
