#pragma once
// PS / fallback server for one job (ATP's fallback, DSA's auxiliary PS).
//
// Keeps a dictionary PSN -> (values, bitmap, time) for tasks that reached it
// (collision fallbacks, evicted partials, flushed or completed aggregates,
// gradients and results fetched by a reminder). Merging never double-counts:
// contributions are identified by their bitmap, and a worker's contribution
// is the same every time it is sent, so
//   disjoint bitmaps        -> add,
//   packet within entry     -> duplicate, ignore,
//   entry within packet     -> the packet supersedes the entry,
//   partial overlap         -> drop the packet and run the reminder, which
//                              fetches the missing workers' gradients one by one.
// A full bitmap completes the task: the result goes to the switch as an Ack
// to the job's multicast group and the entry is deleted.
//
// Reminder (DSA §IV-B): when an entry outlives its timeout (EWMA of entry
// setup -> completion, floor min_timeout, doubled per repeat), or a worker
// reports it is stuck, the PS asks the switch for the aggregator of that task
// (Fetch) and every worker missing from the bitmap for its gradient
// (GradRequest). Workers that already hold the result answer with it.
#include <cstdint>
#include <deque>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "core/deadline_queue.hpp"
#include "core/rtt_estimator.hpp"
#include "proto/node.hpp"
#include "host/profile.hpp"

namespace ina::host {

struct PsConfig {
  uint16_t job = 1;
  std::vector<NodeId> workers;   // by rank
  NodeId sw = kNoNode;           // the switch holding the job's aggregators (kNoNode: none besides more_switches)
  std::vector<NodeId> more_switches;  // further aggregation switches (GRID), also fetched by the reminder
  uint16_t payload_values = 64;
  Time min_timeout = kPaperProfile.ps_min_timeout;  // defaults: the `paper` profile (host/profile.hpp)
  Time max_timeout = 200 * kMs;
  // A completion from a result some worker already held (the task had
  // completed and been multicast once) goes only to the workers still
  // waiting for it, and nowhere when none is (a second, late copy of the
  // result). Off: multicast it again, as the papers' PS does; the extra
  // copies cost every worker's downlink but give a lossy link spares. Off in
  // the `paper` profile, on in `runtime`.
  bool targeted_known_results = kPaperProfile.targeted_known_results;
  // Remember the last 65 536 tasks completed, so that an entry opened again
  // for one (a late copy: a duplicated, held-back or retransmitted
  // gradient, or one a reminder asked for, arriving after the result) is
  // told from one that never completed (late_entries()). Off: no memory
  // spent on it (the simulator checks for no entry left at all).
  bool remember_completed = false;
};

struct PsStats {
  uint64_t data_in = 0, completions = 0, duplicates = 0, superseded = 0, conflicts = 0;
  uint64_t timeout_reminders = 0, worker_reminders = 0, fetches = 0, fetch_hits = 0, grad_requests = 0;
  uint64_t retired = 0;  // stale entries dropped: a worker had retired the task
  // Completions from a result a worker already held; with
  // targeted_known_results, the unicast copies sent and those nobody needed.
  uint64_t known_results = 0, unicast_results = 0, unneeded_results = 0;
  uint64_t malformed = 0, max_entries = 0;
  // Dropped: the source is neither one of the job's switches nor the worker
  // of the claimed rank, or claims contributions that are not its own.
  uint64_t foreign = 0;
};

class ParameterServer final : public Node {
 public:
  explicit ParameterServer(const PsConfig& cfg);
  void on_packet(Packet* p, Time now, Effects& fx) override;
  void on_timer(uint64_t token, Time now, Effects& fx) override;

  size_t entries() const { return index_.size(); }
  // Of those, the entries opened for a task that had completed before
  // (PsConfig::remember_completed; 0 without it).
  size_t late_entries() const {
    size_t n = 0;
    for (const auto& [psn, e] : index_) n += slots_[e].late;
    return n;
  }
  const PsStats& stats() const { return st_; }
  Time timeout() const { return est_.timeout(); }

  struct EntryView {
    uint32_t psn;
    RankBits bitmap;
    unsigned reminders;
    Time created, deadline;
  };
  // Introspection (tests, debugging): the open entries, in no particular order.
  std::vector<EntryView> open_entries() const {
    std::vector<EntryView> v;
    for (const auto& [psn, e] : index_) v.push_back({psn, slots_[e].bitmap, slots_[e].reminders, slots_[e].created, slots_[e].deadline});
    return v;
  }

 private:
  struct Entry {
    uint32_t psn = 0;
    RankBits bitmap;
    uint16_t count = 0;
    bool ecn = false;
    bool reminded = false;   // Karn's rule: such completions are not timeout samples
    bool known = false;      // a worker sent the finished result: the task had completed once
    bool late = false;       // opened for a task this PS had completed (remember_completed)
    RankBits waiting;        // workers whose own gradient or reminder reached this entry
    uint8_t reminders = 0;   // consecutive reminders without progress
    Time created = 0, deadline = 0, last_reminder = -kSec;
  };

  uint32_t open(uint32_t psn, Time now, Effects& fx);
  // remember_completed: the last kRemembered completed tasks, and their order.
  static constexpr size_t kRemembered = 1 << 16;
  std::unordered_set<uint32_t> completed_;
  std::deque<uint32_t> completed_order_;
  void merge(uint32_t e, const Packet& p, Time now, Effects& fx);
  void complete(uint32_t e, Time now, Effects& fx);
  void remind(uint32_t e, Time now, Effects& fx);
  void close(uint32_t e);
  bool valid(const Packet& p) const;
  bool authentic(const Packet& p) const;
  int32_t* vals(uint32_t e) { return vals_.data() + static_cast<size_t>(e) * cfg_.payload_values; }

  PsConfig cfg_;
  PsStats st_;
  RankBits full_;
  std::vector<Entry> slots_;
  std::vector<int32_t> vals_;
  std::vector<uint32_t> free_;
  std::unordered_map<uint32_t, uint32_t> index_;  // psn -> slot
  DeadlineQueue<uint32_t> timers_;  // psn by reminder deadline
  RttEstimator est_;  // entry setup -> completion
};

}  // namespace ina::host
