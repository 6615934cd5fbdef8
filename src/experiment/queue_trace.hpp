#pragma once
// Queue traces of a simulated network run (scenario keys run.queue_trace, a
// directory, and run.queue_trace_links, the links): every packet offered to
// the output queue of each named link (sim::Simulator::watch_link), with the
// backlog it found, whether it was marked, dropped or lost, and its header,
// written as CSV to read which transfers meet in a queue and when. Tracing
// changes no event: the run's results and trace digest are those without it.
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "core/time.hpp"
#include "topo/graph.hpp"

namespace ina::sim {
class Simulator;
}

namespace ina::exp {

// The links `list` names: "from->to" by node names (topo::Node::name),
// comma-separated, blanks around a name ignored; a link of g, each once.
// Throws std::invalid_argument naming the first name that is not one (or
// is there twice), or if `list` names none.
std::vector<std::pair<topo::NodeId, topo::NodeId>> queue_trace_links(const topo::Graph& g, const std::string& list);

// Makes the directory `dir` (and its parents); throws std::runtime_error
// naming it and the reason if it cannot.
void make_trace_dir(const std::string& dir);

struct CollectiveSettings;
// A collective run's trace, if `s` asks for one (s.queue_trace): makes its
// directory (so a bad one fails before the run) and watches the links over
// s's window; returns their ids for finish_queue_trace (empty: no trace).
std::vector<uint32_t> start_queue_trace(sim::Simulator& sim, const topo::Graph& g, const CollectiveSettings& s);
// After the run: writes the trace of `links` (start_queue_trace's), if any.
void finish_queue_trace(const sim::Simulator& sim, const topo::Graph& g, const CollectiveSettings& s, uint64_t digest,
                        const std::vector<uint32_t>& links);

// Watches the links `list` names in `sim`, built from g (node v of g is
// simulator node v), over simulated times [from, to); returns their
// simulator link ids, in `list`'s order. `processes` > 1 (MPI ranks, whose
// samples would be split over them) is a std::invalid_argument.
std::vector<uint32_t> watch_queue_links(sim::Simulator& sim, const topo::Graph& g, const std::string& list,
                                        unsigned processes = 1, Time from = 0, Time to = kNever);

// Writes DIR/queue-<digest, 16 hex digits>.csv, the run's trace digest as
// runs.json gives it: one row per packet offered to each link of `links`,
// link by link in that order, each in the order its queue was offered them:
//   link,t_ps,backlog_ps,bytes,type,fate,marked,job,flags,psn,priority,src,dst
// (link and src/dst by node names; backlog_ps the queue ahead of the packet
// as serialization time; fate sent, dropped (queue full) or lost (the
// link's random loss); marked: marked at this queue; flags as the packet
// reached it; priority the header's: a ring packet's step tag). A run with
// the same digest (another window or other links) writes over the file; a
// window the run never reaches leaves the header alone.
// Creates DIR; throws std::runtime_error naming the file if it cannot be written.
void write_queue_trace(const std::string& dir, uint64_t digest, const sim::Simulator& sim, const topo::Graph& g,
                       const std::vector<uint32_t>& links);

}  // namespace ina::exp
