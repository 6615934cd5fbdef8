#pragma once
// The ECN marking rule of both engines: a congested queue marks CE
// (flag::kEcn) on every packet it admits, whatever the packet's type. The
// simulator's queue is a link's backlog above its ECN threshold
// (sim::Simulator::admit), the runtime's the switch process's socket
// receive backlog above ecn_backlog_bytes (rt::UdpEngine, Router mode) and,
// where the links mark nothing (the emulated cluster), a ToR's emulated
// egress port queues above their threshold (UdpEngine::set_egress_port).
//
// Why every packet: a switch's ECN (RED / DCTCP thresholds on an egress
// queue) marks the IP header of whatever sits in the queue; it does not parse
// the INA header, and every packet, gradients or not, fills the queue. The
// senders react through whoever echoes the mark, per protocol: a switch
// carries a gradient's CE into its aggregate and the result's ECE
// (dataplane/switch.cpp), the PS into its result (host/ps.cpp), a ring
// receiver echoes a RingData's CE in its RingAck (host/ring_transfer.cpp), a sparse
// receiver a KvData's (host/sparse.cpp), and a switch turns a CE picked up
// by a result its tree parent sent down into ECE (dataplane/switch.cpp).
// Marking only Data and KvData would hide congestion from ring steps
// (RingData through a Rina ToR) and from a tree's downward path. Receivers
// of other types ignore CE, with one exception: P4INC-AOI's switch sends its
// asynchronous-error notice as a RateSync with kEcn set (dataplane/aoi.cpp),
// so a CE mark on another RateSync (GRID's, dataplane/grid.cpp) reads as
// that notice at the worker: it halves the window and waits for the RTO
// instead of resending at once. The runtime marks at the switch's receive
// side, which a switch's own RateSync never crosses (its emulated egress
// ports, set only for Rina's ToRs, would); the simulator marks a switch's
// egress port, which it does.
//
// Returns whether the queue marked the packet (each engine counts these in
// its ecn_marked: packets the queue marked, a packet already CE included).
#include "wire/packet.hpp"

namespace ina {

inline bool ecn_mark(Header& h, bool congested) {
  if (!congested) return false;
  h.flags |= flag::kEcn;
  return true;
}

}  // namespace ina
