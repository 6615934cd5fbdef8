#include "host/worker.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "core/rng.hpp"

namespace ina::host {

namespace {

// P4INC-AOI's AIMD threshold: half the segment (the horizon H), and at most
// the job's bandwidth-delay product when it is known.
double aoi_threshold(const WorkerConfig& cfg) {
  double t = std::max<uint32_t>(1, cfg.segment_size / 2);
  if (cfg.bdp_packets > 0) t = std::max(1.0, std::min(t, std::ceil(cfg.bdp_packets)));
  return t;
}

// The worker's window: AIMD (unless cfg.aimd is off), decreases at most once
// per smoothed RTT; P4INC-AOI's segment schemes slow-start up to their
// threshold, other schemes never slow-start.
CongestionWindowConfig window_config(const WorkerConfig& cfg) {
  CongestionWindowConfig c;
  c.init_window = cfg.init_window;
  c.max_window = cfg.max_window;
  c.adaptive = cfg.aimd;
  c.ecn_per_window = cfg.ecn_per_window;
  c.ssthresh = cfg.segment_size > 0 ? aoi_threshold(cfg) : 0;
  return c;
}

}  // namespace

WorkerTransport::WorkerTransport(const WorkerConfig& cfg)
    : cfg_(cfg),
      cw_(window_config(cfg)),
      aoi_threshold_(cfg.segment_size > 0 ? aoi_threshold(cfg) : 0),
      rtt_(cfg.min_rto, cfg.max_rto),
      delay_(cfg.delay_target),
      full_(full_bitmap(cfg.nworkers)) {
  if (cfg.nworkers == 0 || cfg.nworkers > kMaxWorkers || cfg.rank >= cfg.nworkers)
    throw std::invalid_argument("worker: rank must be below the worker count (1..64)");
  if (cfg.payload_values == 0) throw std::invalid_argument("worker: payload_values must be > 0");
  if (segmented()) {
    if (cfg.segment_mem_id > 0xFFFFFFFFu - cfg.segment_size)
      throw std::invalid_argument("worker: segment beyond the 32-bit aggregator index");
    horizon_ = std::max<uint32_t>(1, cfg.segment_size / 2);
    owner_.assign(cfg.segment_size, kNoFragment);
  }
}

// Fragments are assigned in PSN order (first transmissions are), so every
// worker of the job computes the same index for each: the hashed aggregator,
// or the next one (cyclically) that none of the previous H - 1 fragments took.
void WorkerTransport::assign_slot(Rec& r, uint32_t psn) {
  const uint32_t size = cfg_.segment_size;
  const auto h = static_cast<uint32_t>(splitmix64((static_cast<uint64_t>(cfg_.job) << 32) | psn) % size);
  for (uint32_t k = 0; k < size; ++k) {
    const uint32_t s = (h + k) % size;
    const uint32_t o = owner_[s];
    if (o != kNoFragment && psn - o < horizon_) continue;  // an intra-job collision: redirect
    r.slot = s;
    r.prev = o;
    owner_[s] = psn;
    return;
  }
  throw std::logic_error("worker: no free aggregator in the segment");  // H - 1 < Size: unreachable
}

bool WorkerTransport::has_result(uint32_t psn) {
  Op* op = find(psn);
  if (!op) return psn < (ops_.empty() ? next_psn_ : ops_.front().psn0);  // retired ops are complete
  return op->complete || op->done(psn - op->psn0);
}

int64_t WorkerTransport::index_of(uint32_t psn) {
  Op* op = find(psn);
  if (!segmented() || !op || op->complete || psn - op->psn0 >= op->next || op->done(psn - op->psn0)) return -1;
  return static_cast<int64_t>(cfg_.segment_mem_id) + op->recs[psn - op->psn0].slot;
}

uint64_t WorkerTransport::submit(std::shared_ptr<TensorIO> io, uint64_t elems, uint32_t tag) {
  if (elems == 0) throw std::invalid_argument("worker: empty allreduce");
  Op op;
  op.id = next_op_id_++;
  op.tag = tag;
  op.io = std::move(io);
  op.elems = elems;
  op.psn0 = next_psn_;
  op.npkts = static_cast<uint32_t>((elems + cfg_.payload_values - 1) / cfg_.payload_values);
  next_psn_ += op.npkts;
  ops_.push_back(std::move(op));
  ++incomplete_;
  return ops_.back().id;
}

WorkerTransport::Op* WorkerTransport::find_slow(uint32_t psn) {
  auto it = std::upper_bound(ops_.begin(), ops_.end(), psn, [](uint32_t v, const Op& o) { return v < o.psn0; });
  if (it == ops_.begin()) return nullptr;
  --it;
  if (psn - it->psn0 >= it->npkts) return nullptr;
  last_found_ = &*it;  // a deque keeps its elements in place as it grows at the back
  return last_found_;
}

uint16_t WorkerTransport::count_of(const Op& op, uint32_t idx) const {
  const uint64_t off = static_cast<uint64_t>(idx) * cfg_.payload_values;
  return static_cast<uint16_t>(std::min<uint64_t>(cfg_.payload_values, op.elems - off));
}

uint32_t WorkerTransport::lowest_unacked() const {
  for (size_t i = first_open_; i < ops_.size(); ++i)
    if (!ops_[i].complete) return ops_[i].psn0 + ops_[i].low;
  return next_psn_;
}

inline void WorkerTransport::send_data(Op& op, uint32_t idx, Time now, Effects& fx, bool resend) {
  Rec& r = resend ? op.recs[idx] : op.recs.open(op.low, idx);
  Packet* p = spare_ ? take_spare() : fx.alloc();
  Header& h = p->h;
  const uint32_t psn = op.psn0 + idx;
  const bool redirect = !to_ps_.empty() && to_ps_.count(psn);
  h.type = PktType::Data;
  h.flags = static_cast<uint16_t>((resend ? flag::kResend : 0) | (redirect ? flag::kToPs : 0));
  h.job = cfg_.job;
  h.src = cfg_.self;
  h.dst = redirect ? cfg_.ps : cfg_.aggregator;
  st_.redirected += redirect;
  h.rank = cfg_.rank;
  h.nworkers = cfg_.nworkers;
  h.psn = psn;
  h.bitmap = RankBits::bit(cfg_.rank);
  h.priority = prio_ ? prio_->priority(op.tag, now) : 0;
  h.count = count_of(op, idx);
  if (segmented()) {
    if (!resend) {
      assign_slot(r, psn);
      sent_hi_ = std::max(sent_hi_, psn + 1);
    }
    r.gap_mark = sent_hi_;
    h.agg_index = cfg_.segment_mem_id + r.slot;
    if (r.prev != kNoFragment && !has_result(r.prev)) {
      h.flags |= flag::kBehind;
      ++st_.behind;
    }
  }
  op.io->read_gradient(static_cast<uint64_t>(idx) * cfg_.payload_values, p->values());
  r.last_tx = now;
  if (!resend) {
    r.sent = now;
    ++inflight_;
    ++st_.sent;
  } else {
    ++st_.retransmits;
  }
  const int shift = std::min<int>(r.retx, 3);
  r.deadline = now + backed_off_rto(rtt_.timeout(), static_cast<unsigned>(shift), cfg_.max_rto);
  // Whether a queued deadline is still current: never below the lowest
  // unacknowledged PSN (asked once per push that makes room, not per item).
  uint32_t low = 0;
  bool have_low = false;
  const auto live = [&](uint32_t q, Time dl) {
    if (!have_low) {
      low = lowest_unacked();
      have_low = true;
    }
    return q >= low && rto_current(q, dl) != nullptr;
  };
  if (rto_q_.push(r.deadline, h.psn, live))
    fx.set_timer(r.deadline, 0);
  fx.send(p);
}

void WorkerTransport::pump(Time now, Effects& fx) { send_allowed(now, fx); }

inline void WorkerTransport::send_allowed(Time now, Effects& fx) {
  for (;;) {
    if (!sending_) {  // (a deque index: once per op, not per call)
      const size_t nops = ops_.size();  // (sending adds and retires no op)
      while (send_op_ < nops && ops_[send_op_].next >= ops_[send_op_].npkts) ++send_op_;
      if (send_op_ == nops) return;
      sending_ = &ops_[send_op_];
    }
    Op& op = *sending_;
    if (op.next == 0 && send_op_ >= first_open_ + cfg_.retain_ops) return;  // retention bound
    do {
      if (!cw_.allows(inflight_)) return;
      if (cfg_.window_cap) {  // (the op being sent is the first open one, in the common case: no scan)
        const uint32_t low = send_op_ == first_open_ ? op.psn0 + op.low : lowest_unacked();
        if (op.psn0 + op.next - low >= cfg_.window_cap) return;
      }
      const double pace = pace_gbps();
      if (pace > 0) {
        if (now < next_tx_) {
          if (!pace_armed_) {
            pace_armed_ = true;
            fx.set_timer(next_tx_, kPaceTimer);
          }
          return;
        }
        const double gap_ps = cfg_.wire_bytes * 8.0 / pace * 1000.0;  // bits / (Gbit/s) = ns
        next_tx_ = std::max(next_tx_, now) + static_cast<Time>(gap_ps);
      }
      send_data(op, op.next, now, fx, false);
      ++op.next;
    } while (op.next < op.npkts);
    sending_ = nullptr;
    ++send_op_;
  }
}

double WorkerTransport::pace_gbps() const {
  if (cfg_.rate_gbps > 0) return cfg_.rate_gbps;
  if (!cfg_.window_paced) return 0;
  const double w = cw_.pace_gbps(rtt_.srtt(), cfg_.wire_bytes);  // 0 before a round trip: the window alone
  return w > 0 && cfg_.nic_gbps > 0 ? std::min(w, cfg_.nic_gbps) : w;
}

void WorkerTransport::decrease(Time now) {
  if (cw_.on_loss(now, rtt_.srtt())) ++st_.decreases;
}

void WorkerTransport::on_packet(Packet* p, Time now, Effects& fx) {
  const Header& h = p->h;
  if (h.job != cfg_.job || h.nworkers != cfg_.nworkers) {
    ++st_.malformed;
    fx.free(p);
    return;
  }
  const bool from_switch = h.src == cfg_.aggregator ||
                           std::find(cfg_.switches.begin(), cfg_.switches.end(), h.src) != cfg_.switches.end();
  const bool from_ps = cfg_.ps != kNoNode && h.src == cfg_.ps;
  const bool allowed = h.type == PktType::GradRequest ? from_ps
                       : h.type == PktType::RateSync  ? from_switch
                                                      : from_switch || from_ps;
  if (!allowed) {
    ++st_.foreign;
    fx.free(p);
    return;
  }
  switch (h.type) {
    case PktType::Ack: on_ack(p, now, fx); return;
    case PktType::GradRequest: on_grad_request(p, now, fx); return;
    case PktType::RateSync: on_rate_sync(p, now, fx); return;
    default: ++st_.malformed; fx.free(p); return;
  }
}

inline void WorkerTransport::on_ack(Packet* p, Time now, Effects& fx) {
  Op* op = find(p->h.psn);
  const uint32_t idx = op ? p->h.psn - op->psn0 : 0;
  if (!op || op->complete || op->done(idx)) {
    ++st_.dup_acks;
    fx.free(p);
    return;
  }
  if (idx >= op->next || p->h.count != count_of(*op, idx) ||
      p->h.bitmap != full_) {
    ++st_.malformed;
    fx.free(p);
    return;
  }
  // (Read before set_done(): a straggler's record goes with it.)
  const Rec& rec = op->recs[idx];
  const Time sent = rec.sent;
  const bool retransmitted = rec.retx != 0;
  // The records this host touches next, long out of cache (one per packet
  // sent, the window apart): the result's after next (results come in order:
  // two results of lead, the next one's was asked for by the previous result)
  // and the send's after next.
  __builtin_prefetch(op->recs.peek(idx + 2));
  __builtin_prefetch(op->recs.peek(op->next + 1), 1);
  op->io->write_result(static_cast<uint64_t>(idx) * cfg_.payload_values, p->values());
  if (!to_ps_.empty()) to_ps_.erase(p->h.psn);
  op->recs.set_done(idx);
  --inflight_;
  ++st_.acks;
  ++op->ndone;
  if (idx == op->low) {  // (in order, the common case: no need to read its bit again)
    ++op->low;
    while (op->low < op->next && op->recs.done(op->low)) ++op->low;
  }
  bool delayed = false;
  if (!retransmitted) {  // Karn's rule: only unambiguous round trips are samples
    const Time rtt = now - sent;
    rtt_.sample(rtt);
    if (cfg_.fast_retransmit) rack_sent_ = std::max(rack_sent_, sent);
    delayed = delay_.sample(rtt);
  }
  if (p->h.has(flag::kEce)) {
    ++st_.ece_acks;
    if (cw_.on_ecn(now, rtt_.srtt(), sent)) ++st_.decreases;
  } else if (delayed) {
    ++st_.delayed_acks;
    decrease(now);
  } else if (segmented()) {
    cw_.on_ack(aoi_threshold_);  // the paper's window grows "until reaching a threshold"
  } else {
    cw_.on_ack();
  }
  const uint32_t psn = p->h.psn;
  spare_ = p;  // the next packet sent, if any (else freed below)
  if (segmented()) on_result_aoi(psn, now, fx);
  else if (cfg_.fast_retransmit) detect_losses(now, fx);
  if (op->ndone == op->npkts) {
    op->complete = true;
    op->recs.clear();
    --incomplete_;
    completed_.push_back(op->id);
    while (first_open_ < ops_.size() && ops_[first_open_].complete) ++first_open_;
    while (first_open_ > cfg_.retain_ops) {  // keep R completed ops before the oldest open one
      ops_.pop_front();
      --send_op_;
      --first_open_;
      last_found_ = nullptr;  // it may have been the front
    }
  }
  send_allowed(now, fx);
  if (spare_) {
    fx.free(spare_);
    spare_ = nullptr;
  }
}

void WorkerTransport::detect_losses(Time now, Effects& fx) {
  if (rack_sent_ < 0) return;
  const Time reorder = std::max<Time>(rtt_.srtt() / 4, 1);
  // Outstanding packets in PSN order. First transmissions happen in PSN
  // order, so the scan ends at the first never-retransmitted packet sent too
  // recently; a retransmitted one sent recently is skipped.
  for (size_t o = first_open_; o < ops_.size() && o <= send_op_; ++o) {
    Op& op = ops_[o];
    if (op.complete) continue;
    for (uint32_t idx = op.recs.next_open(op.low, op.next); idx < op.next; idx = op.recs.next_open(idx + 1, op.next)) {
      Rec& r = op.recs[idx];
      if (r.last_tx + reorder >= rack_sent_) {
        if (r.retx == 0) return;
        continue;
      }
      ++r.retx;
      ++st_.fast_retransmits;
      decrease(now);
      send_data(op, idx, now, fx, true);
    }
  }
}

void WorkerTransport::resend(uint32_t psn, Time now, Effects& fx, uint64_t& counter) {
  Op* op = find(psn);
  if (!op || op->complete) return;
  const uint32_t idx = psn - op->psn0;
  if (idx >= op->next || op->done(idx)) return;
  ++op->recs[idx].retx;
  ++counter;
  send_data(*op, idx, now, fx, true);
}

// P4INC-AOI, after the result of fragment `psn`: a fragment refused for lack
// of it goes again; every outstanding fragment below it that was last sent
// before `psn` was first sent is presumed lost and goes again.
void WorkerTransport::on_result_aoi(uint32_t psn, Time now, Effects& fx) {
  if (!waiting_.empty()) {
    if (auto it = waiting_.find(psn); it != waiting_.end()) {
      const uint32_t g = it->second;
      waiting_.erase(it);
      resend(g, now, fx, st_.fast_retransmits);
    }
  }
  for (size_t o = first_open_; o < ops_.size() && o <= send_op_; ++o) {
    Op& op = ops_[o];
    if (op.psn0 >= psn) break;
    if (op.complete) continue;
    const uint32_t end = std::min(op.next, psn - op.psn0);
    for (uint32_t idx = op.recs.next_open(op.low, end); idx < end; idx = op.recs.next_open(idx + 1, end)) {
      Rec& r = op.recs[idx];
      if (psn < r.gap_mark) continue;
      ++r.retx;
      ++st_.fast_retransmits;
      send_data(op, idx, now, fx, true);
    }
  }
}

void WorkerTransport::on_grad_request(Packet* p, Time now, Effects& fx) {
  Op* op = find(p->h.psn);
  const uint32_t idx = op ? p->h.psn - op->psn0 : 0;
  const uint32_t retained_from = ops_.empty() ? next_psn_ : ops_.front().psn0;
  if (!op && p->h.psn < retained_from) {  // retired: every worker has this result (see header)
    const NodeId ps = p->h.src;
    p->h.type = PktType::Data;
    p->h.flags = flag::kToPs | flag::kRetired;
    p->h.src = cfg_.self;
    p->h.dst = ps;
    p->h.rank = cfg_.rank;
    p->h.bitmap = 0;
    p->h.count = 0;
    ++st_.retired_to_ps;
    fx.send(p);
    return;
  }
  if (!op) {  // an op this worker has not reached yet
    fx.free(p);
    return;
  }
  if (!op->complete && idx >= op->next) {  // not sent yet: send it to the PS when its turn comes
    if (cfg_.ps != kNoNode) to_ps_.insert(p->h.psn);
    fx.free(p);
    return;
  }
  const bool have_result = op->complete || op->done(idx);
  const NodeId ps = p->h.src;
  Header& h = p->h;
  h.type = PktType::Data;
  h.flags = static_cast<uint16_t>(flag::kToPs | (have_result ? flag::kResult : 0));
  h.src = cfg_.self;
  h.dst = ps;
  h.rank = cfg_.rank;
  h.count = count_of(*op, idx);
  h.bitmap = have_result ? full_bitmap(cfg_.nworkers) : RankBits::bit(cfg_.rank);
  const uint64_t off = static_cast<uint64_t>(idx) * cfg_.payload_values;
  if (have_result) {
    op->io->read_result(off, p->values());
    ++st_.results_to_ps;
  } else {
    op->io->read_gradient(off, p->values());
    ++st_.grads_to_ps;
  }
  fx.send(p);
}

void WorkerTransport::on_rate_sync(Packet* p, Time now, Effects& fx) {
  if (p->h.has(flag::kEcn)) {  // P4INC-AOI: an asynchronous error; the refused packet is resent later
    ++st_.ecn_notices;
    const uint32_t g = p->h.psn;
    fx.free(p);
    decrease(now);
    Op* op = segmented() ? find(g) : nullptr;
    if (!op || op->complete || g - op->psn0 >= op->next || op->done(g - op->psn0)) return;
    const uint32_t prev = op->recs[g - op->psn0].prev;
    if (prev == kNoFragment) return;  // not for lack of a result: the gap rule or the RTO resends it
    if (has_result(prev)) resend(g, now, fx, st_.fast_retransmits);
    else waiting_[prev] = g;
    return;
  }
  ++st_.rate_syncs;
  Op* op = find(p->h.psn);
  fx.free(p);
  if (!op || op->complete) return;
  const uint32_t idx = p->h.psn - op->psn0;
  if (idx >= op->next || op->done(idx)) return;
  decrease(now);
  ++op->recs[idx].retx;
  send_data(*op, idx, now, fx, true);
}

void WorkerTransport::on_timer(uint64_t token, Time now, Effects& fx) {
  if (token == kPaceTimer) {
    pace_armed_ = false;
    pump(now, fx);
    return;
  }
  on_rto(now, fx);
}

WorkerTransport::Rec* WorkerTransport::rto_current(uint32_t psn, Time dl) {
  Op* op = find(psn);
  if (!op || op->complete) return nullptr;
  const uint32_t idx = psn - op->psn0;
  if (idx < op->low || idx >= op->next) return nullptr;  // done, or not sent: no record in the ring
  if (op->recs.done(idx)) return nullptr;
  Rec& r = op->recs[idx];
  return r.deadline != dl ? nullptr : &r;
}

void WorkerTransport::on_rto(Time now, Effects& fx) {
  const Time next = rto_q_.expire(now, [&](uint32_t psn, Time dl) {
    Rec* rp = rto_current(psn, dl);
    if (!rp) return;
    Rec& r = *rp;
    Op* op = find(psn);
    const uint32_t idx = psn - op->psn0;
    ++st_.timeouts;
    ++r.retx;
    send_data(*op, idx, now, fx, true);
    if (cfg_.ps != kNoNode && r.retx % cfg_.reminder_after == 0) {
      Packet* m = fx.alloc();
      m->h.type = PktType::Reminder;
      m->h.job = cfg_.job;
      m->h.src = cfg_.self;
      m->h.dst = cfg_.ps;
      m->h.rank = cfg_.rank;
      m->h.nworkers = cfg_.nworkers;
      m->h.psn = psn;
      m->h.bitmap = RankBits::bit(cfg_.rank);
      ++st_.reminders;
      fx.send(m);
    }
  }, [&](uint32_t psn, Time dl) { return rto_current(psn, dl) != nullptr; });
  if (next != kNever) fx.set_timer(next, 0);
}

}  // namespace ina::host
