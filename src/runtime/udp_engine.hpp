#pragma once
// The UDP engine: the runtime's implementation of ina::Effects. It drives the
// very same sans-I/O nodes as the simulator (SwitchProgram, ParameterServer,
// WorkerTransport through a host node) with real datagrams and real timers.
//
//  - One event loop (epoll) per engine, one non-blocking UDP socket, batched
//    recvmmsg / sendmmsg. Extra descriptors (control connections, eventfds,
//    signalfds) can be watched by the same loop.
//  - Segmentation offload (Linux UDP GSO/GRO, EngineConfig::offload): the
//    datagrams queued for one destination with one length leave as one
//    message with UDP_SEGMENT (up to 64 datagrams, 64 KB), and the socket
//    takes coalesced batches (UDP_GRO) that are split here at the segment
//    size. Every datagram is still one INA packet on the wire; only the
//    number of trips through the kernel's stack changes. A batch whose tail
//    did not fit the receive buffer loses that tail, counted.
//  - Time is CLOCK_MONOTONIC in picoseconds since the engine was created, so
//    nodes see the same ina::Time as in the simulator. Timers are a min-heap
//    of (time, sequence); set_timer() cannot be cancelled (nodes ignore stale
//    tokens), exactly as the node contract says.
//  - Routing mirrors the simulator's star: a Router engine hosts the switch
//    program and resolves header.dst through its address book (NodeId ->
//    IPv4 endpoint); a Host engine sends every datagram to its gateway (the
//    switch), as a host with one uplink does.
//  - Every datagram is decoded with the bounds-checked ina::decode. A datagram
//    that does not decode is counted (per DecodeError) and dropped; so is a
//    valid-looking one from an address that is not the registered address of
//    its claimed source (Router) or not the gateway (Host). Nothing a peer
//    sends can crash the engine.
//  - Datagram authentication (EngineConfig::datagram_tags, off by default;
//    runtime/datagram_tag.hpp): every datagram sent ends in an 8-byte tag
//    keyed by its job's datagram key (set_datagram_key), and one received
//    without the correct tag of its job's key is counted (rx_bad_tag) and
//    dropped, after the malformed / foreign / late checks. The tag and its
//    header bit are stripped before the node sees the packet.
//  - Fault injection in the send path: loss, duplication, reordering (the
//    datagram is held U(0, reorder_delay)) and an extra delay for packets from
//    or to a chosen node, from a seeded random stream.
//  - A Router can mark ECN-CE on every packet it receives while its socket's
//    receive backlog exceeds a threshold: the runtime analogue of the
//    simulator's queue marking, under the same rule (proto/ecn.hpp), which
//    lets the senders' AIMD windows react to a busy switch.
#include <sys/socket.h>
#include <sys/uio.h>

#include <array>
#include <deque>
#include <functional>
#include <memory>
#include <queue>
#include <unordered_map>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/rng.hpp"
#include "proto/node.hpp"
#include "runtime/datagram_tag.hpp"
#include "runtime/net.hpp"
#include "wire/packet.hpp"

namespace ina::rt {

// What a datagram carries on an Ethernet link besides its payload: its
// UDP, IPv4 and Ethernet headers.
inline constexpr uint32_t kLinkOverheadBytes = 8 + 20 + 14;

struct FaultConfig {
  double loss = 0;            // probability a datagram is dropped
  double duplicate = 0;       // probability a datagram is sent twice
  double reorder = 0;         // probability a datagram is held back ...
  Time reorder_delay = 500 * kUs;  // ... by U(0, reorder_delay)
  Time delay = 0;             // extra delay for datagrams from or to delay_node
  NodeId delay_node = kNoNode;// kNoNode: every datagram this engine sends
  uint64_t seed = 1;

  bool any() const { return loss > 0 || duplicate > 0 || reorder > 0 || delay > 0; }
  void validate() const;  // throws RuntimeError naming the bad field
  nlohmann::json to_json() const;
};

enum class EngineMode { Router, Host };


struct EngineConfig {
  EngineMode mode = EngineMode::Host;
  uint16_t payload_values = 64;    // largest payload (int32 values) of a datagram
  Endpoint bind = Endpoint::parse("127.0.0.1:0");
  Endpoint gateway;                // Host: where every datagram goes (the switch)
  FaultConfig faults;
  unsigned batch = 64;             // datagrams per recvmmsg / sendmmsg
  int socket_buffer_bytes = 4 << 20;
  size_t max_tx_queue = 1 << 16;   // datagrams waiting for socket space; beyond that they are dropped
  uint64_t ecn_backlog_bytes = 0;  // Router: mark CE above this receive backlog (0 = never)
  // UDP_SEGMENT on send and UDP_GRO on receive (see above). A kernel that
  // refuses a segmented send (a path MTU below the segment, no checksum
  // offload) gets those datagrams one by one from then on, counted.
  bool offload = true;
  size_t gro_buffer_bytes = 65536;  // receive room per message for a coalesced batch (UDP_GRO)
  // Tag every datagram sent and require the tag on every datagram received
  // (datagram_tag.hpp), with the key set_datagram_key gave the datagram's job.
  bool datagram_tags = false;
};

struct EngineStats {
  uint64_t rx_datagrams = 0, rx_bytes = 0, tx_datagrams = 0, tx_bytes = 0;
  uint64_t rx_malformed = 0;   // did not decode (see decode_errors) or was truncated
  uint64_t rx_foreign = 0;     // decoded, but not from the registered address of its source
  // Of rx_malformed and rx_foreign: from an address that is no member's (no route,
  // relay or gateway), i.e. unattributed noise rather than a member's protocol bug.
  uint64_t rx_unattributed = 0;
  uint64_t rx_late = 0;        // Router: from the address a since-cleared node id had (a finished job's late packet)
  uint64_t rx_unknown_dst = 0; // Host: addressed to no node of this engine
  uint64_t tx_unroutable = 0;  // Router: destination not in the address book
  uint64_t tx_overflow = 0;    // dropped because the send queue was full
  uint64_t tx_errors = 0;      // sendmmsg failures other than "would block"
  uint64_t fault_lost = 0, fault_duplicated = 0, fault_reordered = 0, fault_delayed = 0;
  uint64_t ecn_marked = 0, timers_fired = 0, loop_iterations = 0;
  uint64_t tx_messages = 0;       // sendmmsg messages (with offload, one carries up to 64 datagrams)
  uint64_t tx_gso_refused = 0;    // segmented sends the kernel refused (sent again one by one)
  uint64_t rx_gro_batches = 0;    // received messages that held more than one datagram
  uint64_t rx_truncated = 0;      // received messages cut short by the buffer (a datagram or a batch's tail)
  uint64_t tx_shared_copies = 0;  // multicast copies sent with another copy's encoded payload
  uint64_t rx_bad_tag = 0;        // datagram_tags: from a member's address, but without its job's correct tag
  uint64_t tx_no_key = 0;         // datagram_tags: not sent, no datagram key for its job
  uint64_t tx_tagged = 0;         // of tx_datagrams: carrying a datagram tag (all of them with datagram_tags)
  std::array<uint64_t, 10> decode_errors{};  // indexed by DecodeError

  nlohmann::json to_json() const;
};

class UdpEngine final : public Effects {
 public:
  // Binds cfg.bind, or adopts `bound` (a socket from bind_udp) if given.
  explicit UdpEngine(const EngineConfig& cfg, UniqueFd bound = {});
  ~UdpEngine() override;
  UdpEngine(const UdpEngine&) = delete;
  UdpEngine& operator=(const UdpEngine&) = delete;

  const EngineConfig& config() const { return cfg_; }
  const Endpoint& local() const { return local_; }

  // Nodes are not owned; their ids must be set. A Router hosts exactly one.
  void add_node(Node& n);
  // Router: a node attached to the switch node through an internal port (a
  // switch CPU beside the pipeline): what the switch node sends to its id is
  // handed to it, and everything it sends goes to the switch node, neither
  // through the socket nor the fault injection. Delivered in order, after the
  // callback that sent it returns (never re-entrantly). At most one.
  void attach(Node& n);
  // Router address book.
  void set_route(NodeId id, const Endpoint& to);
  void clear_route(NodeId id);
  // Router: the multicast group of `job`, its members by rank (a job's
  // workers). A node's Effects::multicast(p) of a packet of that job then
  // goes to each member (or those in p->mcast) from one encoding: the copies
  // share its payload bytes and differ in their header's destination. No
  // group, or fault injection on (each copy meets its own faults): false, and
  // the node sends unicast copies.
  void set_group(uint16_t job, std::vector<NodeId> members);
  void clear_group(uint16_t job);
  // Router: datagrams from `from` are accepted whatever source they claim: a
  // switch that relays its hosts' packets (Rina's ToR forwards a rack's sum
  // and the agent's broadcast with the sender's id), as a Host trusts its gateway.
  void add_relay(const Endpoint& from);
  // Router: the switch's egress ports as a switch's queues see them, for
  // networks whose links mark no ECN themselves (the emulated cluster's
  // kernel has no marking qdisc). A datagram to `dst` joins the backlog of
  // dst's port (set_egress_port), or of the port every other destination
  // shares (set_egress_default: the uplink), drained at the port's rate;
  // one that finds more than `ecn_bytes` there leaves marked CE
  // (proto/ecn.hpp), as a switch's egress queue above its threshold marks.
  // A rate of 0 marks nothing on that port; ecn_bytes 0 none at all.
  void set_egress_port(NodeId dst, double gbps);
  void set_egress_default(double gbps);
  void set_egress_ecn(uint64_t ecn_bytes);
  // With datagram_tags: the key of `job`'s datagrams (both directions).
  // Without a key, the job's datagrams are neither sent (tx_no_key) nor
  // accepted (rx_bad_tag).
  void set_datagram_key(uint16_t job, const DatagramKey& k);
  void clear_datagram_key(uint16_t job);

  // Other descriptors served by this loop. The handler gets the epoll events.
  using FdHandler = std::function<void(uint32_t events)>;
  void watch(int fd, uint32_t events, FdHandler handler);
  void rewatch(int fd, uint32_t events);
  void unwatch(int fd);

  // Calls on_start of every node (once).
  void start();
  // One loop iteration: waits for I/O at most `max_wait` (less if a timer is
  // due sooner), then handles every ready datagram and descriptor, fires due
  // timers, releases delayed datagrams and flushes the send queue.
  void poll(Time max_wait);
  // Time of the last clock reading (updated around every wait and batch).
  Time now() const { return now_; }

  // Runs f(now, effects) in the context of node n (its sends and timers are
  // attributed to n), then flushes. For owners that act outside a callback,
  // e.g. to submit work to a worker transport.
  template <typename F>
  void invoke(Node& n, F&& f) {
    Node* prev = current_;
    current_ = &n;
    now_ = clock();
    f(now_, static_cast<Effects&>(*this));
    current_ = prev;
    flush_tx();
  }

  // Effects.
  Packet* alloc() override { return pool_.get(); }
  void send(Packet* p) override;
  void free(Packet* p) override { pool_.put(p); }
  void set_timer(Time at, uint64_t token) override;
  bool multicast(Packet* p) override;

  const EngineStats& stats() const { return st_; }
  size_t packets_in_use() const { return pool_.in_use(); }
  size_t pending_timers() const { return timers_.size(); }

 private:
  struct Timer {
    Time at;
    uint64_t seq;
    Node* node;
    uint64_t token;
    bool operator>(const Timer& o) const { return at > o.at || (at == o.at && seq > o.seq); }
  };
  struct Delayed {
    Time at;
    uint64_t seq;
    Packet* p;
    sockaddr_in to;
    bool operator>(const Delayed& o) const { return at > o.at || (at == o.at && seq > o.seq); }
  };
  struct Route {
    sockaddr_in sa{};
    bool valid = false;
    bool retired = false;  // cleared; sa is the address it had
  };
  struct TxItem {
    sockaddr_in to;
    uint32_t len;
    bool sent = false;  // with offload, items leave grouped by destination, so not always in queue order
    // The item whose slot holds this datagram's payload: itself, or (a
    // multicast copy) the first copy's; then this slot holds the header only.
    uint32_t payload_of = 0;
  };
  // A control buffer for one message's UDP_SEGMENT / UDP_GRO ancillary data.
  union Cmsg {
    char buf[kUdpCmsgBytes];
    cmsghdr align;
  };

  Time clock() const { return monotonic_now() - epoch_; }
  void on_readable();
  void handle_message(const ::mmsghdr& m, std::byte* data, bool mark_ecn);
  // `data` is the receive buffer: a tagged datagram's header bit is cleared there before it is decoded.
  void handle_datagram(std::byte* data, size_t len, const sockaddr_in& from, DecodeError forced, bool mark_ecn);
  const DatagramKey* key_of(uint16_t job) const;
  uint64_t receive_backlog() const;
  // Encodes p as the next queued datagram; returns its index, or -1 if the
  // queue was full (counted). flush: send once `batch` datagrams wait.
  long enqueue_tx(const Packet& p, const sockaddr_in& to, bool flush = true);
  void enqueue_copy(size_t of, NodeId dst, const sockaddr_in& to);
  long next_tx_slot();
  void flush_tx();
  size_t build_tx(size_t max_segments);
  void deliver_local();
  void fire_timers();
  void release_delayed();
  Node* node_for(NodeId dst) const;

  EngineConfig cfg_;
  UniqueFd sock_, epoll_;
  Endpoint local_;
  Time epoch_;
  Time now_ = 0;
  PacketPool pool_;
  Rng fault_rng_;
  size_t slot_bytes_;
  std::vector<Node*> nodes_;
  Node* current_ = nullptr;
  Node* attached_ = nullptr;
  std::deque<std::pair<Node*, Packet*>> internal_;  // internal-port packets not yet delivered
  bool started_ = false;
  std::vector<Route> routes_;
  std::vector<sockaddr_in> relays_;
  // Router: every address a route (current or retired) or relay names, with its count;
  // what handle_datagram attributes refused datagrams by.
  std::unordered_map<uint64_t, uint32_t> member_addrs_;
  bool from_member(const sockaddr_in& from) const;
  std::unordered_map<int, std::shared_ptr<FdHandler>> watches_;

  std::priority_queue<Timer, std::vector<Timer>, std::greater<Timer>> timers_;
  std::priority_queue<Delayed, std::vector<Delayed>, std::greater<Delayed>> delayed_;
  uint64_t seq_ = 0;

  // Receive batch.
  // Not zero-filled: with UDP_GRO the slots are 64 KB each, and only the pages
  // datagrams land in are ever touched (resident).
  std::unique_ptr<std::byte[]> rxbuf_;
  std::vector<sockaddr_in> rxaddr_;
  std::vector<::mmsghdr> rxmsg_;
  std::vector<::iovec> rxiov_;
  std::vector<Cmsg> rxctl_;
  size_t rx_slot_bytes_ = 0;
  bool gro_ = false;   // the socket takes coalesced batches
  size_t gso_max_ = 0; // longest datagram sent segmented (0: none); lowered when the kernel refuses
  // Send queue: encoded datagrams from tx_head_ on.
  std::vector<std::byte> txbuf_;
  std::vector<TxItem> txq_;
  size_t tx_head_ = 0;
  bool tx_blocked_ = false;
  std::vector<::mmsghdr> txmsg_;
  std::vector<::iovec> txiov_;      // batch x kMaxSegments x 2 (a shared-payload copy takes two)
  std::vector<uint32_t> txitem_;    // the queue items of the messages, in order
  std::vector<uint32_t> txfirst_;   // each message's first entry of txitem_, and one past the last
  std::vector<Cmsg> txctl_;
  std::vector<std::pair<sockaddr_in, std::vector<uint32_t>>> txgroups_;  // pending items by destination (reused)
  std::unordered_map<uint16_t, std::vector<NodeId>> groups_;  // multicast groups by job
  std::unordered_map<uint16_t, DatagramKey> tag_keys_;        // datagram_tags: keys by job
  size_t tag_bytes_ = 0;                                      // kTagBytes with datagram_tags, else 0
  SipHash24 mcast_state_{0, 0};  // the payload state of the multicast datagram being copied (enqueue_copy)
  bool mcast_ecn_ = false;       // that datagram's CE before its own port's mark
  // Emulated egress ports (set_egress_port): [0] the default port.
  struct Egress {
    double bytes_per_s = 0;
    double backlog = 0;  // bytes
    Time at = 0;         // when `backlog` was last drained
  };
  std::vector<Egress> egress_{Egress{}};
  std::vector<int32_t> egress_of_;  // by destination node id: its port in egress_ (0: the default)
  uint64_t egress_ecn_ = 0;
  bool egress_congested(NodeId dst, size_t datagram_bytes);

  EngineStats st_;
};

}  // namespace ina::rt
