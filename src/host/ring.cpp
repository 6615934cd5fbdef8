// The ring endpoint: ops and their steps in order (advance), straggler
// delays, timers, packet dispatch, a Rina member's pulls, membership
// changes; the values a step sends (fill).
#include <algorithm>
#include <cmath>
#include <stdexcept>

#include <fmt/format.h>

#include "host/ring_detail.hpp"

namespace ina::host {

using namespace ring_detail;

RingEndpoint::RingEndpoint(RingConfig cfg)
    : cfg_(std::move(cfg)),
      rng_(mix(cfg_.seed, 0x21a9ULL + cfg_.rank)),
      rtt_(cfg_.min_rto, cfg_.max_rto),
      cw_(transfer_window(cfg_)),
      delay_(cfg_.delay_target) {
  if (cfg_.rank >= cfg_.nodes.size()) throw std::invalid_argument("ring: rank beyond the job's nodes");
  if (cfg_.payload_values == 0) throw std::invalid_argument("ring: payload_values must be positive");
  build_steps();
  recv_.resize(kRecvSlots);
  have_.assign(cfg_.nodes.size(), false);
}

RingEndpoint::~RingEndpoint() = default;

size_t RingEndpoint::slot(uint64_t op, size_t step) const {
  return static_cast<size_t>((op * nrecv_ + static_cast<uint64_t>(steps_[step].ridx)) % kRecvSlots);
}

// Step tag: epoch (8 bits) | op (16 bits) | step code (8 bits).
uint32_t RingEndpoint::tag_of(size_t step) const {
  return (static_cast<uint32_t>(epoch_) << 24) | static_cast<uint32_t>((op_ & 0xFFFF) << 8) | steps_[step].code;
}

void RingEndpoint::reconfigure(std::vector<NodeId> nodes, uint16_t rank, std::vector<RingStage> stages, uint8_t epoch,
                               size_t restart_op, Time now, Effects& fx) {
  if (crashed_) return;
  if (rank >= nodes.size()) throw std::invalid_argument("ring: reconfigure: rank beyond the job's nodes");
  if (epoch == epoch_) throw std::invalid_argument("ring: reconfigure: the epoch must change");
  if (restart_op > op_) throw std::invalid_argument("ring: reconfigure: cannot restart an op not reached yet");
  cfg_.nodes = std::move(nodes);
  cfg_.rank = rank;
  cfg_.stages = std::move(stages);
  epoch_ = epoch;
  steps_.clear();
  kept_.clear();
  build_steps();
  recv_.assign(kRecvSlots, Recv{});
  refused_.clear();
  send_.reset();  // its RTO entries die with it; a stale RTO timer finds no send
  sending_ = op_running_ = waiting_delay_ = delay_done_ = false;
  ++timer_gen_;  // pending delay timers are void
  pulled_tag_ = late_tag_ = held_tag_ = 0;
  released_ = reported_ = 0;
  ++barrier_gen_;  // a pending report's resend timer is void
  gathering_ = restart_op * barrier_codes_.size();
  have_.assign(cfg_.nodes.size(), false);
  have_count_ = 0;
  step_ = 0;
  op_ = restart_op;
  completed_ = restart_op;
  op_start_.resize(std::min(op_start_.size(), restart_op));
  op_end_.resize(std::min(op_end_.size(), restart_op));
  if (op_ < ops_.size()) start_op(now, fx);
}

void RingEndpoint::submit(std::shared_ptr<TensorIO> io, uint64_t elems, Time start_after) {
  uint64_t want = 0;
  for (const auto& st : cfg_.stages) want = std::max(want, st.off + st.len);
  if (elems != want)
    throw std::invalid_argument(fmt::format("ring: op of {} values, but the plan covers {}", elems, want));
  if (ops_.size() >= 0x10000) throw std::invalid_argument("ring: at most 65536 ops per endpoint (16-bit op in the tag)");
  ops_.push_back({std::move(io), start_after});
}

bool RingEndpoint::done() const { return op_ == ops_.size(); }

std::string RingEndpoint::describe() const {
  if (done()) return "done";
  std::string out = fmt::format("op {} step {}/{}", op_, step_, steps_.size());
  if (!op_running_) return out + " (not started)";
  const Step& s = steps_[step_];
  if (send_) out += fmt::format(", sending {} of {} acked (tag {:#x} to {})", send_->acked_pkts, send_->npkts, tag_of(step_), s.dst);
  else if (s.sends) out += s.pulled && pulled_tag_ <= tag_of(step_) ? ", waiting for the pull" : ", send done";
  if (cfg_.step_barrier && reported_ > released_)
    out += fmt::format(", reported step code {}, waiting for its release", barrier_codes_[released_]);
  if (s.recvs) {
    const Recv& r = recv_[slot(op_, step_)];
    const bool mine = r.ord == op_ * nrecv_ + static_cast<uint64_t>(s.ridx);
    out += fmt::format(", receiving {} of {} (tag {:#x} from {} orig {})", mine ? r.count : 0,
                       packets(s.r_len, cfg_.payload_values), tag_of(step_), s.r_src,
                       s.r_orig == kNoNode ? -1 : static_cast<int64_t>(s.r_orig));
  }
  return out;
}

void RingEndpoint::on_start(Time now, Effects& fx) {
  if (!ops_.empty()) {
    const Time at = now + ops_[0].start_after;
    waiting_delay_ = true;
    fx.set_timer(at, kDelayTimer | (++timer_gen_ << 8));
  }
}

void RingEndpoint::start_op(Time now, Effects& fx) {
  op_running_ = true;
  step_ = 0;
  op_start_.push_back(now);
  log_.assign(steps_.size(), RingStepRecord{});
  for (size_t i = 0; i < steps_.size(); ++i) log_[i].code = steps_[i].code;
  if (!log_.empty()) log_[0].current = now;
  advance(now, fx);
}

// Runs the current step: starts its send (after an optional straggler
// delay), or finishes it when its send and receive are both done.
void RingEndpoint::advance(Time now, Effects& fx) {
  while (op_running_) {
    if (cfg_.step_barrier && !barrier_gate(now, fx)) return;
    if (step_ == steps_.size()) {
      op_running_ = false;
      op_end_.push_back(now);
      ++completed_;
      ++op_;
      released_ = reported_ = 0;
      resume_refused(fx);
      if (op_ < ops_.size()) {
        waiting_delay_ = true;
        fx.set_timer(now + ops_[op_].start_after, kDelayTimer | (++timer_gen_ << 8));
      }
      return;
    }
    const Step& s = steps_[step_];
    if (!sending_ && !send_) {
      if (s.finish || s.write_kept) {
        auto& io = *ops_[op_].io;
        const auto basis = io.basis();
        const bool ag_follows = cfg_.stages[s.stage].kind != RingStage::Kind::ReduceScatter;
        // In pieces, so a large shard needs no second copy of itself.
        constexpr uint64_t kPiece = 1 << 16;
        std::vector<int32_t> v(std::min(s.len, kPiece)), in;
        for (uint64_t at = 0; at < s.len; at += kPiece) {
          const std::span<int32_t> piece(v.data(), std::min(kPiece, s.len - at));
          const uint64_t off = s.off + at;
          if (s.finish) {
            if (s.stage == 0) io.read_gradient(off, piece);
            else kept_.read(off - kept_off_, piece);
            if (s.finish_recv >= 0) {
              in.resize(piece.size());
              recv_[slot(op_, static_cast<size_t>(s.finish_recv))].vals.read(at, in);
              for (size_t i = 0; i < piece.size(); ++i) piece[i] = wrap_add(piece[i], in[i]);
            }
            kept_.write(off - kept_off_, piece, basis);
          } else {
            kept_.read(off - kept_off_, piece);
          }
          if (s.last_stage && (s.write_kept || ag_follows)) io.write_result(off, piece);
        }
      }
      if (s.sends) {
        // The straggler delay runs from the moment the step is current, in
        // parallel with a Rina member's wait for its agent's pull: the
        // member sends at whichever comes later (a rack's step then waits
        // for its slowest member, not for the agent's delay plus a member's).
        if ((cfg_.straggler_sigma > 0 || cfg_.straggler_mean > 0 || !cfg_.step_delays.empty()) && !delay_done_) {
          if (!waiting_delay_) {
            double d = 0;
            if (!cfg_.step_delays.empty()) {
              if (s.code < cfg_.step_delays.size()) d = static_cast<double>(cfg_.step_delays[s.code]);
            } else {
              const double u1 = std::max(rng_.uniform(), 1e-300), u2 = rng_.uniform();
              const double z = std::sqrt(-2 * std::log(u1)) * std::cos(6.283185307179586 * u2);
              d = static_cast<double>(cfg_.straggler_mean) + z * static_cast<double>(cfg_.straggler_sigma);
            }
            waiting_delay_ = true;
            fx.set_timer(now + static_cast<Time>(std::max(0.0, d)), kDelayTimer | (++timer_gen_ << 8));
          }
          return;  // the delay timer sets delay_done_ and comes back here
        }
        if (s.pulled && pulled_tag_ <= tag_of(step_)) return;  // wait for the agent's pull
        delay_done_ = false;
        begin_send(now, fx);
        return;
      }
    }
    if (send_) return;  // still sending
    if (s.recvs) {
      const uint64_t ord = op_ * nrecv_ + static_cast<uint64_t>(s.ridx);
      const Recv& r = recv_[slot(op_, step_)];
      if (r.ord != ord || !r.complete()) {
        if (r.ord != ord && packets(s.r_len, cfg_.payload_values) == 0) {
          // Nothing to receive (a zero-length shard).
          Recv& z = recv_[slot(op_, step_)];
          z.ord = ord;
          z.count = z.npkts = 0;
          z.vals.clear();
          z.got.clear();
          z.done_at = now;
        } else {
          return;
        }
      }
    }
    end_step(now);
    sending_ = false;
    resume_refused(fx);
  }
}

// The current step is done: its record, and the next step is current.
void RingEndpoint::end_step(Time now) {
  RingStepRecord& rec = log_[step_];
  const Step& s = steps_[step_];
  if (s.recvs) {
    const Recv& r = recv_[slot(op_, step_)];
    rec.recv_pkts = r.npkts;
    rec.recv_done = r.done_at;
  }
  rec.done = now;
  // The receives this step read (its send's partial, its finish's) are dead:
  // a slot's next receive is kRecvSlots ordinals later. Their values go now,
  // so an endpoint holds the shards it has yet to read, not kRecvSlots.
  for (const int used : {s.add_recv, s.finish ? s.finish_recv : -1})
    if (used >= 0) recv_[slot(op_, static_cast<size_t>(used))].vals.clear();
  ++st_.steps;
  ++step_;
  if (step_ < log_.size()) log_[step_].current = now;
}

void RingEndpoint::fill(const Step& s, uint32_t idx, Packet& p) {
  const uint64_t off = s.off + static_cast<uint64_t>(idx) * cfg_.payload_values;
  const auto cnt = static_cast<uint16_t>(std::min<uint64_t>(cfg_.payload_values, s.off + s.len - off));
  p.h.count = cnt;
  std::span<int32_t> v(p.payload(), cnt);
  if (s.from_kept) {
    kept_.read(off - kept_off_, v);
  } else if (s.add_local) {
    if (s.stage == 0) ops_[op_].io->read_gradient(off, v);
    else kept_.read(off - kept_off_, v);
  } else {
    std::fill(v.begin(), v.end(), 0);
  }
  if (s.add_recv >= 0) {
    const auto& r = recv_[slot(op_, static_cast<size_t>(s.add_recv))];
    const uint64_t base = static_cast<uint64_t>(idx) * cfg_.payload_values;
    if (s.add_local || s.from_kept) {
      scratch_.resize(cnt);
      r.vals.read(base, scratch_);
      for (uint16_t i = 0; i < cnt; ++i) v[i] = wrap_add(v[i], scratch_[i]);
    } else {
      r.vals.read(base, v);
    }
  }
}

void RingEndpoint::on_timer(uint64_t token, Time now, Effects& fx) {
  if (crashed_) return;
  const uint64_t kind = token & 0xFF;
  if (kind == kDelayTimer) {
    if ((token >> 8) != timer_gen_ || !waiting_delay_) return;
    waiting_delay_ = false;
    if (!op_running_) {
      start_op(now, fx);
      return;
    }
    delay_done_ = true;
    advance(now, fx);
    return;
  }
  if (kind == kPersistTimer) {
    if ((token >> 8) == persist_gen_) on_persist(now, fx);
    return;
  }
  if (kind == kPaceTimer) {
    // The pending one (an older one leaves it armed). A timer that fires
    // late (a real clock) keeps the pace's schedule: pump sends from its
    // due time, not from now.
    if (now >= pace_at_) {
      pace_due_ = pace_at_;
      pace_at_ = kNever;
    }
    pump(now, fx);
    pace_due_ = kNever;
    return;
  }
  if (kind == kBarrierTimer) {
    // The report's release has not come: resend the report.
    if ((token >> 8) != barrier_gen_ || !op_running_ || reported_ <= released_) return;
    ++st_.report_resends;
    if (report_tries_ < 6) ++report_tries_;
    send_barrier(op_ * barrier_codes_.size() + released_, false, cfg_.nodes[0], fx);
    arm_report(now, fx);
    return;
  }
  on_rto(now, fx);
}

void RingEndpoint::on_packet(Packet* p, Time now, Effects& fx) {
  if (crashed_) {
    ++st_.after_crash;
    fx.free(p);
    return;
  }
  if (is_ring(p->h.type) && (p->h.priority >> 24) != epoch_) {
    ++st_.stale_epoch;
    fx.free(p);
    return;
  }
  switch (p->h.type) {
    case PktType::RingData: on_data(p, now, fx); return;
    case PktType::RingAck: on_ack(p, now, fx); return;
    case PktType::RingPull: on_pull(p, now, fx); return;
    case PktType::RingBarrier: on_barrier(p, now, fx); return;
    default:
      ++st_.malformed;
      fx.free(p);
  }
}

// A Rina member whose agent has moved on to step `target` (pulled it, or
// broadcast in it): every pulled send before it is done (the agent's own
// packets of those steps were acknowledged, so every slot completed).
void RingEndpoint::skip_pulled_to(size_t target, Time now) {
  if (target <= step_) return;
  for (size_t i = step_; i < target; ++i)
    if (!steps_[i].pulled) return;
  send_.reset();
  sending_ = false;
  if (waiting_delay_ || delay_done_) {  // the skipped step's straggler delay is void
    ++timer_gen_;
    waiting_delay_ = delay_done_ = false;
  }
  while (step_ < target) end_step(now);
}

void RingEndpoint::on_pull(Packet* p, Time now, Effects& fx) {
  const uint32_t tag = p->h.priority;
  const bool word = p->h.has(flag::kBusy), resumed = p->h.has(flag::kResume);  // the ToR's word on a late member
  // Only a member's own ToR copies its agent's pull; the ToR's word goes to the whole rack.
  bool ok = false;
  for (const auto& st : cfg_.stages)
    for (const auto& g : st.groups)
      if (g.ina() && g.tor == p->h.src && std::find(g.ranks.begin(), g.ranks.end(), cfg_.rank) != g.ranks.end() &&
          (word || g.ranks[0] != cfg_.rank))
        ok = true;
  fx.free(p);
  if (!ok) {
    ++st_.foreign;
    return;
  }
  if (word) return on_rack_word(tag, resumed, now, fx);
  ++st_.pulls;
  pulled_tag_ = std::max(pulled_tag_, tag + 1);
  if (op_running_ && op_of_tag(tag) == op_) {
    // The agent moved on: every earlier pulled step is done (its aggregate was acknowledged).
    size_t target = step_;
    while (target < steps_.size() && tag_of(target) < tag) ++target;
    skip_pulled_to(target, now);
    advance(now, fx);
  }
  // Late: this member has not begun the pulled step (an earlier step or op
  // still runs here, or its straggler delay): it says so now, and again
  // when it begins (begin_send). A pull of a step begun after that: the
  // second answer again (the agent pulls again while the rack is held).
  const auto code = static_cast<uint8_t>(tag & 0xFF);
  for (size_t i = 0; i < steps_.size(); ++i) {
    if (steps_[i].code != code || !steps_[i].pulled) continue;
    const bool begun = op_of_tag(tag) < op_ || (op_of_tag(tag) == op_ && op_running_ && (i < step_ || (i == step_ && send_)));
    if (!begun) {
      late_tag_ = tag + 1;
      answer_pull(tag, steps_[i].dst, false, fx);
    } else if (late_tag_ == tag + 1) {
      answer_pull(tag, steps_[i].dst, true, fx);
    }
  }
}

}  // namespace ina::host
