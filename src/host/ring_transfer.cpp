// The reliable shard transfer of a ring step: the sender's window
// (host/congestion_window.hpp), RTO with backoff and fast retransmission,
// per-packet acknowledgements from every acker; the receiver's per-step
// buffers, duplicate and early/late handling, and its acknowledgements.
#include <algorithm>
#include <limits>
#include <memory>

#include "host/ring_detail.hpp"

namespace ina::host {

using namespace ring_detail;

namespace {

constexpr uint32_t kDupThresh = 3;  // later packets complete before an open one is deemed lost
constexpr Time kPaceCatchUp = 8;    // gaps a late pace timer may make up

}  // namespace

// A shard transfer's window: AIMD, halved at most once per smoothed RTT
// (strictly more than srtt since the last decrease), a fractional window
// admitting its partial packet; slow start only where begin_send starts one.
CongestionWindowConfig ring_detail::transfer_window(const RingConfig& c) {
  CongestionWindowConfig w;
  w.init_window = c.init_window;
  w.max_window = c.max_window;
  w.holdoff = CongestionWindowConfig::Holdoff::MoreThanSrtt;
  w.holdoff_floor = w.timeout_holdoff_floor = 0;
  w.partial_packet = true;
  return w;
}

void RingEndpoint::arm(Time at, Effects& fx) { fx.set_timer(at, kRtoTimer); }

// The rate a send's link allows (ring_link_gbps): under Paper no window
// queues behind its own NIC (and the acknowledgements the worker sends do
// not wait behind it).
double RingEndpoint::link_rate(const Step& s) const {
  return ring_link_gbps(s.to_tor, cfg_.ina_gbps, cfg_.nic_gbps, cfg_.rina_transport);
}

// The rate a send is paced at (Gbps; 0: not paced). Under Paper, once the
// RTT is sampled, also the window's rate: DCQCN's senders leave at a rate,
// never a window's burst, so the window's pace (window_pace_gbps), at most
// link_rate. A window sent at the NIC's rate instead arrives at a
// shared port as a burst whenever its acknowledgements bunch up behind the
// reverse direction's data, and the port marks below its
// bandwidth-delay product.
double RingEndpoint::pace_rate(const Step& s) const {
  const double link = link_rate(s);
  if (cfg_.rina_transport != RinaTransport::Paper || link <= 0 || rtt_.srtt() <= 0) return link;
  return std::min(link, cw_.pace_gbps(rtt_.srtt(), cfg_.wire_bytes));
}

// RinaTransport::Paper: a paced send stops growing its window where it
// covers the link's rate over the least round trip sampled on this
// transfer (the smoothed RTT before its first sample). The smoothed RTT
// includes the queue the window itself builds, so a ceiling over it rises
// with the window and expansion never ceases at full speed.
double RingEndpoint::growth_ceiling(const Step& s) const {
  const double rate = link_rate(s);
  if (cfg_.rina_transport != RinaTransport::Paper || rate <= 0 || rtt_.srtt() <= 0)
    return std::numeric_limits<double>::infinity();
  const Time least = send_ && send_->least_rtt > 0 ? send_->least_rtt : rtt_.srtt();
  return window_covering(rate, least, cfg_.wire_bytes);
}

Time ring_detail::pace_gap(double gbps, uint32_t wire_bytes) {
  return static_cast<Time>(8.0 * wire_bytes / (gbps * 1e9) * kSec);
}

void RingEndpoint::begin_send(Time now, Effects& fx) {
  waiting_delay_ = false;
  const Step& s = steps_[step_];
  send_ = std::make_unique<Send>();
  Send& x = *send_;
  x.step = step_;
  x.npkts = packets(s.len, cfg_.payload_values);
  x.all = s.ackers.size() >= 64 ? ~0ULL : (1ULL << s.ackers.size()) - 1;
  x.acked.assign(x.npkts, 0);
  x.first_tx.assign(x.npkts, 0);
  x.last_tx.assign(x.npkts, 0);
  x.deadline.assign(x.npkts, kNever);
  x.retx.assign(x.npkts, 0);
  x.parked.assign(x.npkts, 0);
  x.refused.assign(x.npkts, 0);
  sending_ = true;
  log_[step_].send_begin = now;
  log_[step_].send_pkts = x.npkts;
  const bool paper = cfg_.rina_transport == RinaTransport::Paper;
  if (s.gather && ((cfg_.allgather_from_zero && (s.bcast || cfg_.allgather_all_from_zero)) ||
                   (paper && s.rack_gather_first))) {
    cw_.restart_slow_start();
  } else if (!(paper && s.rack_gather)) {
    cw_.end_slow_start();
  }
  log_[step_].cwnd = cw_.cwnd();
  if (s.pull_first) send_pull(now, fx);
  else if (s.pulled && late_tag_ == tag_of(step_) + 1) answer_pull(tag_of(step_), s.dst, true, fx);  // begun now
  x.rack_held = s.rack_step && held_tag_ == tag_of(step_) + 1;
  if (x.npkts == 0) {
    log_[step_].send_done = now;
    send_.reset();
    advance(now, fx);
    return;
  }
  pump(now, fx);
}

void RingEndpoint::send_pull(Time now, Effects& fx) {
  const Step& s = steps_[step_];
  Packet* p = fx.alloc();
  p->h.type = PktType::RingPull;
  p->h.flags = 0;
  p->h.job = cfg_.job;
  p->h.src = id();
  p->h.dst = s.dst;
  p->h.rank = static_cast<uint8_t>(cfg_.rank);
  p->h.nworkers = static_cast<uint8_t>(cfg_.nodes.size());
  p->h.psn = 0;
  p->h.bitmap = 0;
  p->h.priority = tag_of(step_);
  p->h.agg_index = 0;
  p->h.count = 0;
  ++st_.pulls_sent;
  fx.send(p);
  (void)now;
}

// A late Rina member's answer to the pull of step `tag`: it cannot begin
// the step yet, or (`begun`) it has begun it now. Through its entry switch
// to its group's top, which tells the rack (dataplane/rina.cpp).
void RingEndpoint::answer_pull(uint32_t tag, NodeId tor, bool begun, Effects& fx) {
  Packet* p = fx.alloc();
  p->h.type = PktType::RingPull;
  p->h.flags = static_cast<uint16_t>(flag::kBusy | (begun ? flag::kResume : 0));
  p->h.job = cfg_.job;
  p->h.src = id();
  p->h.dst = tor;
  p->h.rank = static_cast<uint8_t>(cfg_.rank);
  p->h.nworkers = static_cast<uint8_t>(cfg_.nodes.size());
  p->h.psn = 0;
  p->h.bitmap = 0;
  p->h.priority = tag;
  p->h.agg_index = 0;
  p->h.count = 0;
  ++st_.answers_sent;
  fx.send(p);
}

// The ToR's word: a late member holds step `tag` (kept for a step this
// rank has yet to begin), or (`resumed`) no member holds it any more: the
// wait for the members' packets is over, this sender's open packets are
// timed afresh from now.
void RingEndpoint::on_rack_word(uint32_t tag, bool resumed, Time now, Effects& fx) {
  const bool current = send_ && tag == tag_of(send_->step) && steps_[send_->step].rack_step;
  if (!resumed) {
    held_tag_ = tag + 1;
    if (current && !send_->rack_held) {
      ++st_.rack_words;
      send_->rack_held = true;
    }
    return;
  }
  if (held_tag_ == tag + 1) held_tag_ = 0;
  if (!current) return;
  Send& x = *send_;
  x.sample_from = x.next;  // the step was held (its word may have been lost): what is out waited
  if (!x.rack_held) return;
  ++st_.rack_words;
  x.rack_held = false;
  for (uint32_t idx = x.low; idx < x.next; ++idx)
    if (x.acked[idx] != x.all && !x.parked[idx]) time_packet(idx, std::min<unsigned>(x.retx[idx], 6), now, fx);
}

// Packet idx's RTO from `from`, the estimator's timeout doubled n times.
void RingEndpoint::time_packet(uint32_t idx, unsigned n, Time from, Effects& fx) {
  Send& x = *send_;
  x.deadline[idx] = from + backed_off_rto(rtt_.timeout(), n, cfg_.max_rto);
  if (x.rto.push(x.deadline[idx], idx)) arm(x.deadline[idx], fx);
}

// Backed off by the packet's resends, or by the endpoint's timeouts since
// the last valid sample (RFC 6298 5.5 with Karn's rule: otherwise, when
// the floor is below the path's RTT, every packet would time out before it
// could give a sample and the estimate would never rise).
unsigned RingEndpoint::doublings(uint32_t idx) const {
  return static_cast<unsigned>(std::min(std::max<int>(send_->retx[idx], backoff_), 6));
}

void RingEndpoint::transmit(uint32_t idx, bool resend, Time now, Effects& fx, bool refused) {
  Send& x = *send_;
  const Step& s = steps_[x.step];
  Packet* p = fx.alloc();
  p->h.type = PktType::RingData;
  p->h.flags = static_cast<uint16_t>((s.gather ? flag::kResult : flag::kPartial) | (resend ? flag::kResend : 0));
  p->h.job = cfg_.job;
  p->h.src = id();
  p->h.dst = s.dst;
  p->h.rank = static_cast<uint8_t>(cfg_.rank);
  p->h.nworkers = static_cast<uint8_t>(cfg_.nodes.size());
  p->h.psn = idx;
  p->h.bitmap = s.tor_bit;
  p->h.priority = tag_of(x.step);
  p->h.agg_index = s.fwd;
  fill(s, idx, *p);
  if (!resend) {
    x.first_tx[idx] = now;
    ++x.inflight;
  } else if (refused) {
    // Refused, not lost: not a retransmission. The refusal answered the
    // earlier copy, so an acknowledgement answers this one: a valid sample.
    ++st_.resent_refused;
    x.first_tx[idx] = now;
  } else {
    ++st_.retransmits;
    if (x.retx[idx] < UINT16_MAX) ++x.retx[idx];
  }
  x.last_tx[idx] = now;
  time_packet(idx, doublings(idx), now, fx);
  ++st_.sent;
  st_.bytes_sent += 4ULL * p->h.count;
  fx.send(p);
}

void RingEndpoint::pump(Time now, Effects& fx) {
  if (!send_) return;
  Send& x = *send_;
  const Step& s = steps_[x.step];
  double cap = cfg_.max_window;
  if (s.region_cap && cfg_.region) cap = std::min(cap, static_cast<double>(cfg_.region));
  while (!x.held && (x.released || x.next < x.npkts) && cw_.allows(x.inflight, cap)) {
    if (!x.released && s.region_cap && cfg_.region && x.next >= x.low + cfg_.region) break;
    if (const double rate = pace_rate(s); rate > 0) {
      if (now < next_tx_) {
        // One pending pace timer at a time: every acknowledgement calls
        // pump, and a timer per call (each re-arming when it fires early)
        // piled up with the packets, quadratic in the step's size.
        if (pace_at_ != next_tx_) {
          fx.set_timer(next_tx_, kPaceTimer);
          pace_at_ = next_tx_;
        }
        return;
      }
      // On a late pace timer the schedule holds for up to kPaceCatchUp
      // gaps: the packets due meanwhile leave now, as a rate limiter's
      // bucket would let them (a simulated timer is never late).
      const Time gap = pace_gap(rate, cfg_.wire_bytes);
      const bool late = pace_due_ != kNever && now - next_tx_ < kPaceCatchUp * gap;
      next_tx_ = (late ? next_tx_ : std::max(now, next_tx_)) + gap;
    }
    if (x.released) {  // refused packets first, in order, under the window and the pace
      while (x.parked[x.redo] != kReleased) ++x.redo;
      unpark_one(x.redo, now, fx);
      continue;
    }
    transmit(x.next++, false, now, fx);
  }
}

void RingEndpoint::on_rto(Time now, Effects& fx) {
  if (!send_) return;
  Send& x = *send_;
  bool any = false, held = false;
  const Time next = x.rto.expire(
      now,
      [&](uint32_t idx, Time at) {
        if (!send_ || x.acked[idx] == x.all || x.deadline[idx] != at) return;
        if (const unsigned n = doublings(idx);
            n == 0 && x.progress_at != kNever &&
            now < x.progress_at + backed_off_rto(rtt_.timeout(), n, cfg_.max_rto)) {
          // Acknowledged progress since it left: timed from that (Send::
          // progress_at). Not once a timeout backed the RTO off: a loss
          // recovers at the backed-off pace, not later still.
          time_packet(idx, n, x.progress_at, fx);
          return;
        }
        if (x.rack_held) {
          // A late member holds the step: the ToR keeps this packet for
          // the member's, so it is not lost. Timed again; the agent's pull
          // goes again (below): its answer recovers a lost word.
          ++st_.held_rtos;
          held = true;
          time_packet(idx, doublings(idx), now, fx);
          return;
        }
        ++st_.timeouts;
        any = true;
        transmit(idx, true, now, fx);
      },
      [&](uint32_t idx, Time at) { return x.acked[idx] != x.all && x.deadline[idx] == at; });
  if (next != kNever) arm(next, fx);
  if (held && !any && steps_[x.step].pull_first) send_pull(now, fx);
  if (any) {
    backoff_ = static_cast<uint8_t>(std::min(backoff_ + 1, 6));
    if (cw_.on_timeout(now, rtt_.srtt())) ++st_.decreases;  // a loss is congestion, as an echo is
    if (steps_[x.step].pull_first) send_pull(now, fx);  // a member may have missed the pull
  }
}

void RingEndpoint::decrease(Time now) {
  if (cw_.on_loss(now, rtt_.srtt())) ++st_.decreases;
}

void RingEndpoint::ack(const Packet& d, Time now, Effects& fx) {
  // A send paced at the NIC's rate (RinaTransport::Paper) leaves room on the link for this one.
  if (send_ && cfg_.nic_gbps > 0 && cfg_.rina_transport == RinaTransport::Paper &&
      pace_rate(steps_[send_->step]) >= cfg_.nic_gbps)
    next_tx_ = std::max(now, next_tx_) + pace_gap(cfg_.nic_gbps, cfg_.ack_wire_bytes);
  Packet* a = fx.alloc();
  a->h = d.h;
  a->h.type = PktType::RingAck;
  a->h.flags = static_cast<uint16_t>((d.h.has(flag::kEcn) ? flag::kEce : 0) | (d.h.flags & flag::kResult));
  a->h.src = id();
  a->h.dst = d.h.src;
  a->h.rank = static_cast<uint8_t>(cfg_.rank);
  a->h.bitmap = 0;
  a->h.count = 0;
  fx.send(a);
}

// Receive ordinals (op * receives per op + the step's receive index): the
// first receive at or after the current step. The current send may read
// the receive before it, so the buffers hold recv_floor() - 1 up to
// recv_floor() + kRecvSlots - 2; a packet further ahead is refused.
uint64_t RingEndpoint::recv_floor() const {
  if (done()) return UINT64_MAX;
  size_t k = op_running_ ? step_ : 0;
  while (k < steps_.size() && !steps_[k].recvs) ++k;
  return op_ * nrecv_ + (k < steps_.size() ? static_cast<uint64_t>(steps_[k].ridx) : nrecv_);
}

// Receiver flow control. A sender may run several steps ahead of this
// receiver (an unpaced rank ahead of a paced INA rack, a slow receiver);
// its packets of a receive beyond the buffers are refused with a kBusy
// acknowledgement, so it holds the transfer instead of taking the refusal
// for a loss (a timeout, a halved window, a doubled RTO). When the
// receive fits, one kBusy | kResume per refused (sender, ordinal) tells it
// to go on. Through a Rina ToR both go the acknowledgements' way
// (dataplane/rina.cpp relays them and frees nothing). A lost resume costs
// the sender a persist timer's probe, not a timeout.
void RingEndpoint::refuse(const Packet& d, uint64_t ord, Effects& fx) {
  ++st_.early;
  Packet* a = fx.alloc();
  a->h = d.h;
  a->h.type = PktType::RingAck;
  a->h.flags = static_cast<uint16_t>(flag::kBusy | (d.h.flags & flag::kResult));
  a->h.src = id();
  a->h.dst = d.h.src;
  a->h.rank = static_cast<uint8_t>(cfg_.rank);
  a->h.bitmap = 0;
  a->h.count = 0;
  const bool known = std::any_of(refused_.begin(), refused_.end(), [&](const Refused& r) {
    return r.ord == ord && r.h.src == d.h.src && r.h.agg_index == d.h.agg_index;
  });
  if (!known && refused_.size() < kMaxRefused) refused_.push_back({ord, a->h});
  fx.send(a);
}

void RingEndpoint::resume_refused(Effects& fx) {
  if (refused_.empty()) return;
  const uint64_t cur = recv_floor();
  std::erase_if(refused_, [&](const Refused& r) {
    if (cur != UINT64_MAX && r.ord > cur + kRecvSlots - 2) return false;
    if (r.ord >= cur) {  // fits now (a receive already done is acknowledged when it comes again)
      Packet* a = fx.alloc();
      a->h = r.h;
      a->h.flags = static_cast<uint16_t>(r.h.flags | flag::kResume);
      ++st_.resumes_sent;
      fx.send(a);
    }
    return true;
  });
}

void RingEndpoint::on_data(Packet* p, Time now, Effects& fx) {
  const uint32_t tag = p->h.priority;
  const uint64_t op = op_of_tag(tag);
  const uint8_t code = static_cast<uint8_t>(tag & 0xFF);
  size_t si = steps_.size();
  bool code_known = false;
  for (size_t i = 0; i < steps_.size(); ++i)
    if (steps_[i].code == code && steps_[i].recvs) {
      code_known = true;
      if (steps_[i].r_orig == kNoNode || steps_[i].r_orig == p->h.agg_index) si = i;
    }
  if (p->h.job != cfg_.job || !code_known || op >= ops_.size()) {
    ++st_.malformed;
    fx.free(p);
    return;
  }
  if (si == steps_.size() || p->h.src != steps_[si].r_src) {
    ++st_.foreign;
    fx.free(p);
    return;
  }
  const Step& s = steps_[si];
  const uint32_t npk = packets(s.r_len, cfg_.payload_values);
  const uint64_t want = std::min<uint64_t>(cfg_.payload_values, s.r_len - std::min<uint64_t>(s.r_len, static_cast<uint64_t>(p->h.psn) * cfg_.payload_values));
  if (p->h.psn >= npk || p->h.count != want) {
    ++st_.malformed;
    fx.free(p);
    return;
  }
  const uint64_t ord = op * nrecv_ + static_cast<uint64_t>(s.ridx);
  const uint64_t cur = recv_floor();
  if (ord < cur) {
    // A step already received here: the sender missed the acknowledgement.
    ++st_.late;
    ack(*p, now, fx);
    fx.free(p);
    return;
  }
  if (ord > cur + kRecvSlots - 2) {
    refuse(*p, ord, fx);
    fx.free(p);
    return;
  }
  Recv& r = recv_[ord % kRecvSlots];
  if (r.ord != ord) {
    r.ord = ord;
    r.npkts = npk;
    r.count = 0;
    r.done_at = kNever;
    r.got.assign(npk, false);
    r.parts.assign(s.r_parts ? npk : 0, 0);
    if (s.r_keep) r.vals.assign(s.r_len, s.r_off);
    else r.vals.clear();
  }
  if (r.got[p->h.psn]) {
    ++st_.duplicates;
    ack(*p, now, fx);
    fx.free(p);
    return;
  }
  const uint64_t off = s.r_off + static_cast<uint64_t>(p->h.psn) * cfg_.payload_values;
  std::span<const int32_t> v(p->payload(), p->h.count);
  const auto basis = ops_[op].io->basis();
  bool summed = false;  // v already lies in r.vals
  if (s.r_parts) {
    // A Rina ToR's output: the rack's sum, or (shared pool, dataplane/rina.cpp)
    // partial sums of disjoint member sets. A packet overlapping what is
    // held is dropped unacknowledged: its members retransmit, and the ToR
    // sends a retransmission on alone.
    uint64_t& have = r.parts[p->h.psn];
    const uint64_t bits = p->h.bitmap.lo();  // rack-local member bits (a rack has <= 64 ranks)
    if (p->h.bitmap.hi() || bits == 0 || (bits & ~s.r_parts) || (have & bits)) {
      ++st_.duplicates;
      fx.free(p);
      return;
    }
    have |= bits;
    if (have != bits || have != s.r_parts) {  // a partial sum: add it up here
      if (r.vals.empty()) r.vals.assign(s.r_len, s.r_off);
      r.vals.add(off - s.r_off, v, basis);
      if (have != s.r_parts) {
        fx.free(p);
        return;
      }
      scratch_.resize(p->h.count);
      r.vals.read(off - s.r_off, scratch_);
      v = scratch_;
      summed = true;
    }
  }
  if (s.r_keep && !summed) r.vals.write(off - s.r_off, v, basis);
  r.got[p->h.psn] = true;
  ++r.count;
  ++st_.received;
  if (s.r_to_kept) kept_.write(off - kept_off_, v, basis);
  if (s.r_write) ops_[op].io->write_result(off, v);
  ack(*p, now, fx);
  fx.free(p);
  // A Rina member learns from its agent's broadcast that its earlier sends are done.
  if (op == op_ && op_running_) skip_pulled_to(si, now);
  if (r.complete()) {
    r.done_at = now;
    advance(now, fx);
  }
}

// An acker refused packet idx (kBusy), or has room again (kBusy | kResume).
void RingEndpoint::on_busy(uint32_t idx, uint64_t bit, bool resume, Time now, Effects& fx) {
  Send& x = *send_;
  if (resume) return end_hold(bit, now, fx);
  ++st_.busy;
  if (x.acked[idx] & bit) return;
  x.refused[idx] = 1;
  if (x.parked[idx] == kReleased) {  // a stale refusal: held again
    --x.released;
  } else if (!x.parked[idx]) {
    ++x.nparked;
    --x.inflight;
    x.deadline[idx] = kNever;  // its RTO entry is void
  }
  x.parked[idx] = kParked;
  if (!x.held) {
    x.probes = 0;
    fx.set_timer(now + rtt_.timeout(), kPersistTimer | (++persist_gen_ << 8));
  }
  x.held |= bit;
}

// The receiver has room: the parked packets go again (pump sends them
// before new ones, under the window and the pace), then new ones.
void RingEndpoint::unpark(Time now, Effects& fx) {
  Send& x = *send_;
  ++persist_gen_;  // the pending probe is void
  for (uint32_t i = x.low; i < x.npkts; ++i)
    if (x.parked[i] == kParked) {
      x.parked[i] = kReleased;
      ++x.released;
    }
  x.redo = x.low;
  pump(now, fx);
}

// Acker `bit` has room again (its resume, or an acknowledgement from it):
// once no acker holds the transfer, the parked packets go again.
void RingEndpoint::end_hold(uint64_t bit, Time now, Effects& fx) {
  Send& x = *send_;
  if (!(x.held & bit)) return;
  x.held &= ~bit;
  if (!x.held) unpark(now, fx);
}

// Parked packet idx is in flight again (sent again, or its earlier copy acknowledged).
void RingEndpoint::unpark_state(uint32_t idx) {
  Send& x = *send_;
  if (x.parked[idx] == kReleased) --x.released;
  x.parked[idx] = 0;
  --x.nparked;
  ++x.inflight;
}

// Parked packet idx goes again (not a retransmission).
void RingEndpoint::unpark_one(uint32_t idx, Time now, Effects& fx) {
  unpark_state(idx);
  transmit(idx, true, now, fx, true);
}

// Held with no resume (lost, or the acker does not send one): the lowest
// parked packet goes again as a probe, the persist interval doubling up to
// max_rto; an acknowledgement of it is a resume, a refusal parks it again.
void RingEndpoint::on_persist(Time now, Effects& fx) {
  if (!send_ || !send_->held) return;
  Send& x = *send_;
  uint32_t i = x.low;
  while (i < x.npkts && x.parked[i] != kParked) ++i;
  if (i < x.npkts) {
    ++st_.probes;
    unpark_one(i, now, fx);
  }
  x.probes = static_cast<uint8_t>(std::min(x.probes + 1, 6));
  fx.set_timer(now + backed_off_rto(rtt_.timeout(), x.probes, cfg_.max_rto), kPersistTimer | (++persist_gen_ << 8));
}

void RingEndpoint::on_ack(Packet* p, Time now, Effects& fx) {
  const uint32_t tag = p->h.priority;
  if (!send_ || tag != tag_of(send_->step) || p->h.psn >= send_->npkts) {
    ++st_.dup_acks;
    fx.free(p);
    return;
  }
  Send& x = *send_;
  const Step& s = steps_[x.step];
  uint64_t bit = 0;
  for (size_t i = 0; i < s.ackers.size(); ++i)
    if (s.ackers[i] == p->h.src) bit = 1ULL << i;
  if (!bit) {
    ++st_.foreign;
    fx.free(p);
    return;
  }
  const uint32_t idx = p->h.psn;
  const bool ece = p->h.has(flag::kEce);
  const bool busy = p->h.has(flag::kBusy), resume = p->h.has(flag::kResume);
  fx.free(p);
  if (busy) return on_busy(idx, bit, resume, now, fx);
  if (x.acked[idx] & bit) {
    ++st_.dup_acks;
    return;
  }
  ++st_.acks;
  x.acked[idx] |= bit;
  if (x.acked[idx] == x.all && x.parked[idx]) unpark_state(idx);  // an earlier copy's
  end_hold(bit, now, fx);  // an acker that refused has room again
  if (x.acked[idx] != x.all) return;
  --x.inflight;
  ++x.acked_pkts;
  x.progress_at = now;
  bool delayed = false;
  // A valid sample: a first transmission (Karn), not out while a late
  // member held the step (its round trip holds the wait; held now: the
  // resume word was lost or is late).
  if (x.retx[idx] == 0 && idx >= x.sample_from && !x.rack_held) {
    const Time rtt = now - x.first_tx[idx];
    rtt_.sample(rtt);
    if (x.least_rtt == 0 || rtt < x.least_rtt) x.least_rtt = rtt;
    delayed = delay_.sample(rtt);
    backoff_ = 0;
  }
  while (x.low < x.npkts && x.acked[x.low] == x.all) ++x.low;
  // Fast retransmission: a packet still open when kDupThresh later ones are
  // complete was lost (acknowledgements of one transfer come back in order
  // unless a packet or its acknowledgement was lost); sent again once, and
  // the window halves. Without this only the RTO recovers a loss. Not a
  // packet an acker refused: while parked or released it is held, not
  // lost (and a released one goes again from pump); sent again, its
  // acknowledgements need not follow the send order (its copy leaves after
  // later packets on the resume, and a Rina ToR acknowledges a shard copy
  // when every member has, on the refusing member's later acknowledgement
  // while the packets another member refused wait for both). Once sent
  // again its RTO covers it: a loss of that copy costs an RTO.
  x.hi = std::max(x.hi, idx + 1);
  for (; x.fr + kDupThresh < x.hi; ++x.fr)
    if (x.acked[x.fr] != x.all && x.retx[x.fr] == 0 && !x.refused[x.fr]) {
      ++st_.fast_retransmits;
      transmit(x.fr, true, now, fx);
      decrease(now);
    }
  if (ece) {
    ++st_.ece;
    if (cw_.on_ecn(now, rtt_.srtt(), x.first_tx[idx])) ++st_.decreases;
  } else if (delayed) {
    ++st_.delayed;
    decrease(now);
  } else {
    cw_.on_ack(growth_ceiling(s));
  }
  if (x.acked_pkts == x.npkts) {
    log_[x.step].send_done = now;
    send_.reset();
    advance(now, fx);
    return;
  }
  pump(now, fx);
}

}  // namespace ina::host
