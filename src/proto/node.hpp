#pragma once
// The sans-I/O node contract. Every protocol endpoint (switch program, worker
// transport, PS, agents) implements Node; engines (the discrete-event
// simulator, the UDP runtime) implement Effects. A node never touches a socket
// or a clock: it is handed a packet or a timer and the current time, and it
// answers through Effects.
//
// Ownership: on_packet hands the node a packet it now owns; the node must
// either send() it on or free() it. Packets from alloc() are owned by the
// node until sent or freed. Engines count outstanding packets, and tests
// assert that none leak.
//
// Timers: set_timer(at, token) asks for one on_timer(token) call at time
// `at`. Timers cannot be cancelled; nodes ignore stale tokens (they keep a
// generation or deadline and check it), which keeps engines simple and fast.
#include <cstdint>
#include <span>

#include "core/time.hpp"
#include "wire/packet.hpp"

namespace ina {

class Effects {
 public:
  virtual ~Effects() = default;
  virtual Packet* alloc() = 0;
  // Sends toward p->h.dst (a node id); the engine routes. p->h.src is set by the node.
  virtual void send(Packet* p) = 0;
  virtual void free(Packet* p) = 0;
  virtual void set_timer(Time at, uint64_t token) = 0;
  // Replicates p to every member of multicast group p->h.job along the
  // engine's distribution tree (one copy per branch, split at the last
  // common switch). Returns false, leaving p with the caller, if the engine
  // has no tree for the group: the caller then sends one unicast copy per member.
  virtual bool multicast(Packet* p) { return false; }
  // One unicast per node of `to` (not empty), sent in this order: a copy
  // (p's header and its p->h.count values, the copy's dst that node) to
  // each of to[1], to[2], ..., then p itself to to[0]. An engine may do it
  // in one pass; this is the same through alloc() and send().
  virtual void send_copies(Packet* p, std::span<const NodeId> to) {
    for (size_t r = 1; r < to.size(); ++r) {
      Packet* c = alloc();
      c->h = p->h;
      copy_values(c->payload(), p->payload(), p->h.count);
      c->h.dst = to[r];
      send(c);
    }
    p->h.dst = to[0];
    send(p);
  }
};

class Node {
 public:
  virtual ~Node() = default;
  virtual void on_packet(Packet* p, Time now, Effects& fx) = 0;
  virtual void on_timer(uint64_t token, Time now, Effects& fx) = 0;
  // Called once by the engine before any event, at time `now`.
  virtual void on_start(Time now, Effects& fx) {}

  NodeId id() const { return id_; }
  void set_id(NodeId id) { id_ = id; }

 private:
  NodeId id_ = kNoNode;
};

}  // namespace ina
