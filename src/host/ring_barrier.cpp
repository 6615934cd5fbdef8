// The step barrier (RingConfig::step_barrier; see ring.hpp): reports to the
// job's coordinator (rank 0), its releases, and their resends.
#include <algorithm>

#include "host/ring_detail.hpp"

namespace ina::host {

using namespace ring_detail;

// Reports the barriers this rank has reached (every step with the barrier's
// code or a lower one done) and says whether the current step may run: no
// step with a code above an unreleased barrier's starts.
bool RingEndpoint::barrier_gate(Time now, Effects& fx) {
  const size_t nb = barrier_codes_.size();
  while (released_ < nb) {
    if (step_ < steps_.size() && steps_[step_].code <= barrier_codes_[released_]) return true;
    if (reported_ > released_) return false;  // reported: wait for the release
    reported_ = released_ + 1;
    report_tries_ = 0;
    ++st_.reports;
    const uint64_t seq = op_ * nb + released_;
    if (cfg_.rank == 0) {
      gather_report(0, seq, now, fx);  // the last report releases at once
    } else {
      send_barrier(seq, false, cfg_.nodes[0], fx);
      arm_report(now, fx);
    }
  }
  return true;
}

// The coordinator (rank 0) takes `rank`'s report of barrier `seq` (op *
// barriers per op + index). True if it completed the barrier, which is then
// released to every rank (and here).
bool RingEndpoint::gather_report(uint16_t rank, uint64_t seq, Time now, Effects& fx) {
  (void)now;
  if (seq < gathering_) {
    // Released already: the rank missed the release (or this is a copy).
    ++st_.barrier_dups;
    if (rank != 0) {
      ++st_.releases_sent;
      send_barrier(seq, true, cfg_.nodes[rank], fx);
    }
    return false;
  }
  if (seq > gathering_) {
    ++st_.barrier_early;
    return false;
  }
  if (have_[rank]) {
    ++st_.barrier_dups;
    return false;
  }
  have_[rank] = true;
  if (++have_count_ < cfg_.nodes.size()) return false;
  std::fill(have_.begin(), have_.end(), false);
  have_count_ = 0;
  ++gathering_;
  for (size_t r = 1; r < cfg_.nodes.size(); ++r) {
    ++st_.releases_sent;
    send_barrier(seq, true, cfg_.nodes[r], fx);
  }
  // This rank reported seq too (have_[0]): it waits at that barrier.
  ++released_;
  return true;
}

void RingEndpoint::send_barrier(uint64_t seq, bool release, NodeId dst, Effects& fx) {
  const size_t nb = barrier_codes_.size();
  Packet* p = fx.alloc();
  p->h.type = PktType::RingBarrier;
  p->h.flags = 0;
  p->h.job = cfg_.job;
  p->h.src = id();
  p->h.dst = dst;
  p->h.rank = static_cast<uint8_t>(cfg_.rank);
  p->h.nworkers = static_cast<uint8_t>(cfg_.nodes.size());
  p->h.psn = release ? 1 : 0;
  p->h.bitmap = 0;
  p->h.priority = (static_cast<uint32_t>(epoch_) << 24) | static_cast<uint32_t>(((seq / nb) & 0xFFFF) << 8) |
                  barrier_codes_[seq % nb];
  p->h.agg_index = 0;
  p->h.count = 0;
  fx.send(p);
}

void RingEndpoint::arm_report(Time now, Effects& fx) {
  const Time rto = backed_off_rto(rtt_.timeout(), report_tries_, cfg_.max_rto);
  fx.set_timer(now + rto, kBarrierTimer | (++barrier_gen_ << 8));
}

void RingEndpoint::on_barrier(Packet* p, Time now, Effects& fx) {
  const uint32_t tag = p->h.priority;
  const uint64_t op = op_of_tag(tag);
  const auto code = static_cast<uint8_t>(tag & 0xFF);
  const auto it = std::find(barrier_codes_.begin(), barrier_codes_.end(), code);
  const bool release = p->h.psn == 1;
  const uint16_t rank = p->h.rank;
  if (!cfg_.step_barrier || p->h.job != cfg_.job || it == barrier_codes_.end() || op >= ops_.size() || p->h.psn > 1 ||
      p->h.count != 0 || rank >= cfg_.nodes.size()) {
    ++st_.malformed;
    fx.free(p);
    return;
  }
  // Reports come from their rank to the coordinator; releases from the coordinator.
  if (p->h.src != cfg_.nodes[rank] || (release ? rank != 0 || cfg_.rank == 0 : cfg_.rank != 0)) {
    ++st_.foreign;
    fx.free(p);
    return;
  }
  fx.free(p);
  const size_t nb = barrier_codes_.size();
  const uint64_t seq = op * nb + static_cast<uint64_t>(it - barrier_codes_.begin());
  if (!release) {
    if (gather_report(rank, seq, now, fx)) advance(now, fx);
    return;
  }
  const uint64_t waiting = op_ * nb + released_;
  if (op_running_ && reported_ > released_ && seq == waiting) {
    ++st_.releases;
    ++released_;
    ++barrier_gen_;  // the report's resend timer is void
    advance(now, fx);
  } else if (seq < waiting) {
    ++st_.barrier_dups;  // applied already, or a copy of an old one
  } else {
    ++st_.barrier_early;  // cannot be released before this rank reported it
  }
}

}  // namespace ina::host
