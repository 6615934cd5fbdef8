#include "host/sparse.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "wire/kv.hpp"

namespace ina::host {

using dp::zebra::Table;

namespace {
uint64_t dq_key(uint64_t gen, uint32_t i) { return (gen << 32) | i; }
int32_t wrap_add(int32_t a, int32_t b, uint64_t* overflow) {
  const int64_t s = static_cast<int64_t>(a) + b;
  if (overflow && (s > INT32_MAX || s < INT32_MIN)) ++*overflow;
  return static_cast<int32_t>(static_cast<uint32_t>(s));
}
// Value arithmetic (SparseConfig::arith). Float16Table: a hot value goes out
// as float16 bits, the switch's sums come back as float16 bits, everything
// else is float32 bits, summed in float32.
int32_t to_switch(KvArith a, int32_t v) {
  return a == KvArith::Float16Table ? fp16::from_float(fp16::f32_of_bits(v)) : v;
}
int32_t from_switch(KvArith a, int32_t v) {
  return a == KvArith::Float16Table ? fp16::bits_of_f32(fp16::to_float(static_cast<uint16_t>(v))) : v;
}
int32_t add_value(KvArith a, int32_t acc, int32_t v, uint64_t* overflow) {
  if (a == KvArith::Float16Table) return fp16::bits_of_f32(fp16::f32_of_bits(acc) + fp16::f32_of_bits(v));
  return wrap_add(acc, v, overflow);
}
void check_config(const SparseConfig& c) {
  if (c.workers.empty() || c.workers.size() > kMaxWireWorkers)
    throw std::invalid_argument("sparse job: " + std::to_string(c.workers.size()) + " workers (1.." +
                                std::to_string(kMaxWireWorkers) + ")");
  if (c.pairs == 0 || c.pairs > kv::kMaxPairs)
    throw std::invalid_argument("sparse job: pairs per packet " + std::to_string(c.pairs) + " (1.." +
                                std::to_string(kv::kMaxPairs) + ")");
  if (c.ps_pairs > kv::kMaxPairs)
    throw std::invalid_argument("sparse job: PS pairs per packet " + std::to_string(c.ps_pairs) + " (0.." +
                                std::to_string(kv::kMaxPairs) + ")");
  if (c.ack_every == 0 || c.ack_every > 64)
    throw std::invalid_argument("sparse job: an acknowledgement per " + std::to_string(c.ack_every) +
                                " packets (1..64)");
  if (c.ps == kNoNode) throw std::invalid_argument("sparse job: no PS");
}
// Pairs per packet on the streams to and from the PS, and the most a packet
// of this job may carry (either stream).
unsigned ps_stream_pairs(const SparseConfig& c) { return c.ps_pairs ? c.ps_pairs : c.pairs; }
unsigned max_pairs(const SparseConfig& c) { return std::max(c.pairs, c.ps_pairs); }
// A PS stream longer than this many packets in one iteration is refused
// (the receiver's record of arrivals is bounded whatever a sender claims).
constexpr uint32_t kMaxStreamPackets = 1u << 22;
// The PS's timer keys: a result's index, or this bit and a worker's rank
// (its held packets' delayed acknowledgement).
constexpr uint32_t kDelayedAck = 1u << 31;
// How long a receiver holds an acknowledgement: a fifth of the minimum RTO
// (as Linux: 40 ms of delayed acknowledgement against a 200 ms RTO floor).
Time delayed_ack_time(const SparseConfig& c) { return std::max<Time>(1, c.min_rto / 5); }

// A worker's window: AIMD, a decrease holding off the next one for the
// smoothed RTT as it stands then, at least min_rto after a timeout.
CongestionWindowConfig window_config(const SparseConfig& c) {
  CongestionWindowConfig w;
  w.init_window = c.init_window;
  w.max_window = c.max_window;
  w.holdoff = CongestionWindowConfig::Holdoff::SrttAtDecrease;
  w.holdoff_floor = 1;
  w.timeout_holdoff_floor = c.min_rto;
  return w;
}

// A full PS-stream packet's size over a full switch packet's (the window unit).
double ps_weight(const SparseConfig& c) {
  return (c.header_bytes + 4.0 * kv::words(ps_stream_pairs(c))) / (c.header_bytes + 4.0 * kv::words(c.pairs));
}

// The PS's result window: fixed at init_window units (of its packets, the
// bytes of init_window full switch packets).
CongestionWindowConfig ps_window_config(const SparseConfig& c) {
  CongestionWindowConfig w;
  w.init_window = std::max(1.0, c.init_window / ps_weight(c));
  w.adaptive = false;
  return w;
}

// Turns a received result into its receipt to whoever sent it (§III-F), as
// receiver `rank`; `cum`: a cumulative count (delayed acknowledgements).
void to_receipt(Packet* p, NodeId self, uint8_t rank, size_t nworkers, uint32_t cum) {
  const NodeId to = p->h.src;
  p->h.type = PktType::KvAck;
  p->h.flags = flag::kResult;
  p->h.count = 0;
  p->h.src = self;
  p->h.dst = to;
  p->h.rank = rank;
  p->h.nworkers = static_cast<uint8_t>(nworkers);
  p->h.bitmap = RankBits::bit(rank);
  p->h.agg_index = cum;
}

}  // namespace

bool delayed_ack_due(std::vector<bool>& got, uint32_t psn, bool fresh, bool ack_now, unsigned every, uint32_t& cum,
                     uint32_t& pending) {
  const uint32_t before = cum;
  while (cum < got.size() && got[cum]) ++cum;
  const bool plain = fresh && psn == before && cum == before + 1;  // the next in order, no gap filled
  if (!plain || ack_now || ++pending >= every) {
    pending = 0;
    return true;
  }
  return false;
}

// ---- worker ----

SparseWorker::SparseWorker(SparseConfig cfg, uint8_t rank)
    : cfg_(std::move(cfg)), rank_(rank), cw_(window_config(cfg_)), est_(cfg_.min_rto, cfg_.max_rto) {
  check_config(cfg_);
  if (rank_ >= cfg_.workers.size()) throw std::invalid_argument("sparse worker: rank out of range");
  ps_weight_ = ps_weight(cfg_);
}

void SparseWorker::set_table(Table t) {
  if (!t.hot || !t.layout) throw std::invalid_argument("sparse worker: a table needs a hot set and a layout");
  dp::zebra::add_table(tables_, std::move(t));
}

const Table* SparseWorker::table_for(uint32_t iter) const { return dp::zebra::table_for(tables_, iter); }

const Table* SparseWorker::table_of_version(uint32_t version) const {
  for (const auto& x : tables_)
    if ((x.hot->version & 0xFFFF) == version) return &x;
  return nullptr;
}

void SparseWorker::begin(uint32_t iter, std::span<const uint64_t> keys, std::span<const int32_t> values, Time now,
                         Effects& fx) {
  if (active_) throw std::logic_error("sparse worker: begin() while an iteration is in flight");
  if (keys.size() != values.size()) throw std::invalid_argument("sparse worker: keys and values differ in length");
  for (size_t i = 1; i < keys.size(); ++i)
    if (keys[i] <= keys[i - 1]) throw std::invalid_argument("sparse worker: keys must be strictly ascending");
  active_ = true;
  iter_ = iter;
  ++gen_;
  pairs_.clear();
  desc_.clear();
  order_.clear();
  sums_.clear();
  sw_res_ = Stream{};
  ps_res_ = Stream{};
  next_ = acked_ = cold_cum_ = 0;
  units_ = 0;
  const unsigned K = cfg_.pairs, KP = ps_stream_pairs(cfg_);
  const Table* t = cfg_.sw != kNoNode ? table_for(iter) : nullptr;
  hot_stream_ = t != nullptr;  // no table yet (a runtime job before its first hot set): everything is cold
  // Split: hot (rank indices) and cold (keys, already ascending).
  std::vector<uint32_t> hot;
  std::vector<uint32_t> cold;  // positions in keys
  if (t) scratch_.assign(t->hot->size(), 0);
  for (size_t i = 0; i < keys.size(); ++i) {
    if (t) {
      auto it = t->hot->index.find(keys[i]);
      if (it != t->hot->index.end()) {
        hot.push_back(it->second);
        scratch_[it->second] = to_switch(cfg_.arith, values[i]);
        continue;
      }
    }
    cold.push_back(static_cast<uint32_t>(i));
  }
  if (t) {
    // Algorithm 1 takes the gradients hottest first.
    std::sort(hot.begin(), hot.end());
    auto packets = dp::zebra::package(*t->layout, std::move(hot), K, cfg_.layout_aware);
    if (packets.empty()) packets.emplace_back();  // §III-F: an empty packet so the iteration still completes
    for (auto& pk : packets) {
      Desc d;
      d.first = static_cast<uint32_t>(pairs_.size());
      d.n = static_cast<uint32_t>(pk.size());
      d.hot = true;
      d.psn = static_cast<uint32_t>(desc_.size());
      std::vector<std::pair<uint64_t, int32_t>> kvs;
      for (uint32_t x : pk) kvs.emplace_back(t->hot->keys[x], scratch_[x]);
      std::sort(kvs.begin(), kvs.end());
      pairs_.insert(pairs_.end(), kvs.begin(), kvs.end());
      st_.hot_pairs += d.n;
      desc_.push_back(d);
    }
    desc_.back().last = true;
    desc_.back().total = static_cast<uint32_t>(desc_.size());
  }
  hot_n_ = static_cast<uint32_t>(desc_.size());
  for (size_t b = 0; b < cold.size(); b += KP) {
    Desc d;
    d.first = static_cast<uint32_t>(pairs_.size());
    d.n = static_cast<uint32_t>(std::min<size_t>(KP, cold.size() - b));
    for (size_t q = b; q < b + d.n; ++q) pairs_.emplace_back(keys[cold[q]], values[cold[q]]);
    d.psn = kv::kPsStream | static_cast<uint32_t>(desc_.size() - hot_n_);
    st_.cold_pairs += d.n;
    desc_.push_back(d);
  }
  cold_n_ = static_cast<uint32_t>(desc_.size()) - hot_n_;
  Desc fin;  // the cold stream's last packet: every contribution is in
  fin.first = static_cast<uint32_t>(pairs_.size());
  fin.psn = kv::kPsStream | cold_n_;
  fin.last = true;
  fin.total = cold_n_ + 1;
  desc_.push_back(fin);
  st_.hot_packets += hot_n_;
  st_.cold_packets += cold_n_ + 1;
  // Interleave the two streams in proportion (both share the uplink; the PS's starts early).
  const uint64_t H = hot_n_, C = cold_n_;
  uint64_t h = 0, c = 0;
  while (h < H || c < C) {
    if (c >= C || (h < H && h * C <= c * H)) order_.push_back(static_cast<uint32_t>(h++));
    else order_.push_back(static_cast<uint32_t>(H + c++));
  }
  pump(now, fx);
}

void SparseWorker::pump(Time now, Effects& fx) {
  while (next_ < order_.size() && cw_.allows(static_cast<uint64_t>(std::ceil(units_ - 1e-9)))) {
    const uint32_t i = order_[next_++];
    // With delayed acknowledgements the PS is asked to acknowledge at once
    // the cold stream's last data packet and any packet sent with a window
    // too small for the next one to follow it (nothing else would release it).
    const bool blocked = i + 1 == hot_n_ + cold_n_ || cw_.cwnd() < (cfg_.ack_every + 1) * ps_weight_;
    transmit(i, now, fx, blocked);
  }
  const uint32_t fin = static_cast<uint32_t>(desc_.size() - 1);
  if (acked_ == order_.size() && !desc_[fin].out) transmit(fin, now, fx);
}

void SparseWorker::transmit(uint32_t i, Time now, Effects& fx, bool blocked) {
  Desc& d = desc_[i];
  const bool first = !d.out;
  d.out = true;
  Packet* p = fx.alloc();
  p->h = Header{};
  p->h.type = PktType::KvData;
  p->h.job = cfg_.job;
  p->h.src = id();
  p->h.dst = d.hot ? cfg_.sw : cfg_.ps;
  p->h.rank = rank_;
  p->h.nworkers = static_cast<uint8_t>(cfg_.workers.size());
  p->h.psn = d.psn;
  p->h.priority = iter_;
  p->h.bitmap = RankBits::bit(rank_);
  const bool says_hot = i + 1 == desc_.size() && hot_stream_ && cfg_.hot_results == kv::HotRoute::ViaPs;
  p->h.flags = static_cast<uint16_t>((d.last ? flag::kLast : 0) | (first ? 0 : flag::kResend) |
                                     (!d.hot && cfg_.ack_every > 1 && blocked ? flag::kAckNow : 0) |
                                     (says_hot ? flag::kHot : 0));
  const Table* t = d.hot ? table_for(iter_) : nullptr;
  kv::init(*p, d.n, t ? static_cast<uint16_t>(t->hot->version) : 0, d.last ? d.total : 0);
  for (uint32_t q = 0; q < d.n; ++q) kv::set(*p, q, pairs_[d.first + q].first, pairs_[d.first + q].second);
  if (first) units_ += d.hot ? 1 : ps_weight_;
  d.sent = now;
  d.deadline = now + backed_off_rto(est_.timeout(), std::min<unsigned>(d.tries, 8), cfg_.max_rto);
  ++st_.sent;
  arm(d.deadline, i, fx);
  fx.send(p);
}

void SparseWorker::arm(Time at, uint32_t d, Effects& fx) {
  if (dq_.push(at, dq_key(gen_, d))) fx.set_timer(at, 0);
}

void SparseWorker::on_timer(uint64_t, Time now, Effects& fx) {
  auto live = [&](uint64_t k, Time at) {
    if (k >> 32 != gen_ || !active_) return false;
    const Desc& d = desc_[static_cast<uint32_t>(k)];
    return !d.acked && d.deadline == at;
  };
  const Time next = dq_.expire(
      now,
      [&](uint64_t k, Time at) {
        if (!live(k, at)) return;
        const uint32_t i = static_cast<uint32_t>(k);
        Desc& d = desc_[i];
        ++d.tries;
        d.retx = true;
        ++st_.retransmits;
        if (cw_.on_timeout(now, est_.srtt())) ++st_.decreases;
        transmit(i, now, fx);
      },
      live);
  if (next != kNever) fx.set_timer(next, 0);
}

void SparseWorker::on_packet(Packet* p, Time now, Effects& fx) {
  const NodeId src = p->h.src;
  if (p->h.job != cfg_.job || !is_kv(p->h.type) || (src != cfg_.ps && (cfg_.sw == kNoNode || src != cfg_.sw))) {
    ++st_.foreign;
    fx.free(p);
    return;
  }
  if (kv::check(*p, max_pairs(cfg_)) != kv::Error::None) {
    ++st_.malformed;
    fx.free(p);
    return;
  }
  if (p->h.type == PktType::KvAck && !p->h.has(flag::kResult)) on_ack(*p, now, fx);
  else if (p->h.type == PktType::KvResult) return on_result(p, now, fx);
  else ++st_.malformed;
  fx.free(p);
}

bool SparseWorker::ack_desc(uint32_t i) {
  Desc& d = desc_[i];
  if (d.acked || !d.out) return false;
  d.acked = true;
  if (i + 1 != desc_.size()) {
    units_ -= d.hot ? 1 : ps_weight_;
    ++acked_;
  }
  return true;
}

void SparseWorker::on_ack(const Packet& p, Time now, Effects& fx) {
  if (!active_ || p.h.priority != iter_) {
    ++st_.dup_acks;
    return;
  }
  const uint32_t psn = p.h.psn;
  uint32_t i;
  if (psn & kv::kPsStream) {
    const uint32_t c = psn & ~kv::kPsStream;
    if (c > cold_n_ || p.h.agg_index > cold_n_ + 1) return void(++st_.malformed);
    i = hot_n_ + c;
  } else {
    if (psn >= hot_n_) return void(++st_.malformed);
    i = psn;
  }
  // The packet it names, then (a PS stream's) every one below its cumulative count.
  const bool named = ack_desc(i);
  unsigned newly = named ? 1 : 0;
  if (psn & kv::kPsStream)
    for (; cold_cum_ < p.h.agg_index && desc_[hot_n_ + cold_cum_].out; ++cold_cum_)
      newly += ack_desc(hot_n_ + cold_cum_) ? 1 : 0;
  if (newly == 0) return void(++st_.dup_acks);
  // The window grows by the units acknowledged (byte counting).
  const long grow = std::lround(newly * ((psn & kv::kPsStream) ? ps_weight_ : 1.0));
  ++st_.acks;
  const Desc& d = desc_[i];
  if (named && !d.retx) est_.sample(now - d.sent);
  if (p.h.has(flag::kEce)) {
    ++st_.ece;
    if (cw_.on_ecn(now, est_.srtt(), d.sent)) ++st_.decreases;
  } else {
    for (long k = 0; k < grow; ++k) cw_.on_ack();
  }
  if (desc_.back().acked) return maybe_finish(now, fx);
  pump(now, fx);
}

void SparseWorker::on_result(Packet* p, Time now, Effects& fx) {
  const bool from_sw = cfg_.sw != kNoNode && p->h.src == cfg_.sw;
  if (from_sw && cfg_.hot_results == kv::HotRoute::ViaPs) {  // the switch's results are the PS's to take
    ++st_.foreign;
    fx.free(p);
    return;
  }
  const uint32_t iter = p->h.priority;
  if (iter > iter_ || p->h.psn >= kMaxStreamPackets) {
    ++st_.malformed;
    fx.free(p);
    return;
  }
  Stream& s = from_sw ? sw_res_ : ps_res_;
  const bool current = active_ && iter == iter_;
  bool fresh = false;
  const uint32_t psn = p->h.psn;
  if (current) {
    if (psn >= s.got.size()) s.got.resize(psn + 1, false);
    if (s.got[psn]) {
      ++st_.dup_results;
    } else {
      const unsigned n = kv::pairs(*p);
      const Table* t = from_sw ? table_of_version(kv::hot_version(*p)) : nullptr;
      bool bad = from_sw && !t;
      for (unsigned q = 0; from_sw && t && q < n; ++q) bad |= kv::key(*p, q) >= t->hot->size();
      if (bad) {
        ++st_.malformed;  // a rank index outside the hot set of that version
        fx.free(p);
        return;
      }
      fresh = true;
      s.got[psn] = true;
      ++s.n;
      ++st_.results;
      for (unsigned q = 0; q < n; ++q) {
        const uint64_t key = from_sw ? t->hot->keys[kv::key(*p, q)] : kv::key(*p, q);
        sums_.emplace_back(key, from_sw ? from_switch(cfg_.arith, kv::value(*p, q)) : kv::value(*p, q));
      }
      if (p->h.has(flag::kLast)) s.total = kv::total(*p);
    }
  } else {
    ++st_.dup_results;  // an earlier iteration's, retransmitted: acknowledge it again
  }
  // The receipt, to whoever sent it (the switch passes it to its CPU). The
  // PS's stream with delayed acknowledgements: cumulative, per `ack_every`
  // in order; the switch's results: each (§III-F).
  uint32_t cum = 0;
  if (!from_sw && cfg_.ack_every > 1 && current) {
    const bool now_due = p->h.has(flag::kAckNow) || p->h.has(flag::kLast);
    if (!delayed_ack_due(s.got, psn, fresh, now_due, cfg_.ack_every, s.cum, s.pending)) {
      fx.free(p);
      return maybe_finish(now, fx);
    }
    cum = s.cum;
  }
  to_receipt(p, id(), rank_, cfg_.workers.size(), cum);
  fx.send(p);
  if (current) maybe_finish(now, fx);
}

void SparseWorker::maybe_finish(Time now, Effects& fx) {
  if (!active_ || !desc_.back().acked || !ps_res_.complete()) return;
  if (hot_stream_ && cfg_.hot_results == kv::HotRoute::Multicast && !sw_res_.complete()) return;
  active_ = false;
  ++gen_;
  std::sort(sums_.begin(), sums_.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  std::vector<uint64_t> keys;
  std::vector<int32_t> sums;
  keys.reserve(sums_.size());
  sums.reserve(sums_.size());
  for (const auto& [k, v] : sums_) {
    if (!keys.empty() && keys.back() == k) {
      sums.back() = add_value(cfg_.arith, sums.back(), v, nullptr);
    } else {
      keys.push_back(k);
      sums.push_back(v);
    }
  }
  sums_.clear();
  if (done_) done_(iter_, keys, sums, now, fx);
}

std::string SparseWorker::describe() const {
  std::string s = "iteration " + std::to_string(iter_) + (active_ ? " active" : " idle") + ": sent " +
                  std::to_string(next_) + "/" + std::to_string(order_.size()) + ", acked " + std::to_string(acked_) +
                  ", last " + (desc_.empty() ? "-" : desc_.back().acked ? "acked" : desc_.back().out ? "sent" : "not sent");
  if (hot_stream_ && cfg_.hot_results == kv::HotRoute::Multicast)
    s += "; switch results " + std::to_string(sw_res_.n) + "/" + std::to_string(sw_res_.total);
  return s + "; PS results " + std::to_string(ps_res_.n) + "/" + std::to_string(ps_res_.total);
}

std::string SparsePs::describe() const {
  std::string s = "iteration " + std::to_string(iter_) + ": " + std::to_string(ndone_) + "/" +
                  std::to_string(cfg_.workers.size()) + " workers closed";
  if (hot_expected_) s += ", switch results " + std::to_string(sw_n_) + "/" + std::to_string(sw_total_);
  return s + ", " + std::to_string(unacked_results_) + " result packets of iteration " + std::to_string(res_iter_) +
         " unacknowledged";
}

// ---- PS ----

SparsePs::SparsePs(SparseConfig cfg) : cfg_(std::move(cfg)), window_(ps_window_config(cfg_)) {
  check_config(cfg_);
  iter_ = res_iter_ = cfg_.first_iteration;
  seen_.resize(cfg_.workers.size());
  rx_.resize(cfg_.workers.size());
  res_cum_.assign(cfg_.workers.size(), 0);
  in_.assign(cfg_.workers.size(), false);
}

void SparsePs::set_table(Table t) {
  if (!t.hot) throw std::invalid_argument("sparse PS: a table needs a hot set");
  dp::zebra::add_table(tables_, std::move(t));
}

void SparsePs::ack(const Packet& p, Effects& fx, uint32_t cum, bool ece) {
  send_ack(p.h.rank, p.h.psn, p.h.priority, cum, ece || p.h.has(flag::kEcn), fx);
}

void SparsePs::send_ack(uint8_t rank, uint32_t psn, uint32_t iter, uint32_t cum, bool ece, Effects& fx) {
  Packet* a = fx.alloc();
  a->h = Header{};
  a->h.type = PktType::KvAck;
  a->h.job = cfg_.job;
  a->h.src = id();
  a->h.dst = cfg_.workers[rank];
  a->h.rank = rank;
  a->h.nworkers = static_cast<uint8_t>(cfg_.workers.size());
  a->h.psn = psn;
  a->h.priority = iter;
  a->h.agg_index = cum;
  a->h.flags = ece ? flag::kEce : 0;
  ++st_.acks_sent;
  fx.send(a);
}

// A worker's direct packet: acknowledged at once (ack_every 1, or the
// pairs the switch passed on), else as delayed_ack_due says, cumulatively
// and echoing a CE mark on any packet it covers.
void SparsePs::ack_direct(const Packet& p, bool fresh, Time now, Effects& fx) {
  if (cfg_.ack_every <= 1 || !(p.h.psn & kv::kPsStream)) return ack(p, fx);
  Rx& x = rx_[p.h.rank];
  const uint32_t c = p.h.psn & ~kv::kPsStream;
  if (c >= x.got.size()) x.got.resize(c + 1, false);
  x.got[c] = true;
  x.ce = x.ce || p.h.has(flag::kEcn);
  const bool now_due = p.h.has(flag::kAckNow) || p.h.has(flag::kResend) || p.h.has(flag::kLast);
  if (!delayed_ack_due(x.got, c, fresh, now_due, cfg_.ack_every, x.cum, x.pending)) {
    x.held_psn = p.h.psn;
    if (x.ack_at == kNever) {
      x.ack_at = now + delayed_ack_time(cfg_);
      if (dq_.push(x.ack_at, dq_key(gen_, kDelayedAck | p.h.rank))) fx.set_timer(x.ack_at, 0);
    }
    return;
  }
  x.ack_at = kNever;
  ack(p, fx, x.cum, x.ce);
  x.ce = false;
}

void SparsePs::on_packet(Packet* p, Time now, Effects& fx) {
  auto drop = [&](uint64_t& c) {
    ++c;
    fx.free(p);
  };
  const size_t n = cfg_.workers.size();
  if (p->h.job != cfg_.job || !is_kv(p->h.type) || p->h.rank >= n) return drop(st_.foreign);
  if (kv::check(*p, max_pairs(cfg_)) != kv::Error::None) return drop(st_.malformed);
  const NodeId src = p->h.src;
  if (p->h.type == PktType::KvAck) {
    if (!p->h.has(flag::kResult) || src != cfg_.workers[p->h.rank]) return drop(st_.foreign);
    if (p->h.priority == res_iter_ && p->h.psn < out_.size()) {
      const uint64_t bit = 1ULL << p->h.rank;
      bool freed = false;
      bool any = false;
      auto mark = [&](uint32_t i) {
        Out& o = out_[i];
        if (o.acked & bit || !o.sent) return;
        any = true;
        o.acked |= bit;
        if (o.acked == full_bitmap(static_cast<unsigned>(n))) {
          --inflight_;
          --unacked_results_;
          freed = true;
        }
      };
      mark(p->h.psn);
      // Cumulative: every result below agg_index (0 with per-packet acknowledgements).
      uint32_t& cum = res_cum_[p->h.rank];
      const uint32_t upto = std::min<uint32_t>(p->h.agg_index, static_cast<uint32_t>(out_.size()));
      for (; cum < upto && out_[cum].sent; ++cum) mark(cum);
      if (any) ++st_.result_acks;
      if (freed) pump(now, fx);
    }
    fx.free(p);
    return;
  }
  if (p->h.type == PktType::KvResult) {
    if (cfg_.sw == kNoNode || src != cfg_.sw || cfg_.hot_results != kv::HotRoute::ViaPs) return drop(st_.foreign);
    on_switch_result(p, fx);
    return maybe_finish(now, fx);
  }
  if (p->h.type != PktType::KvData) return drop(st_.malformed);
  const bool direct = (p->h.psn & kv::kPsStream) != 0;
  // A worker's own cold stream, or the pairs the switch passed on from its hot stream.
  if (direct ? src != cfg_.workers[p->h.rank] : (cfg_.sw == kNoNode || src != cfg_.sw)) return drop(st_.foreign);
  const uint32_t iter = p->h.priority;
  if (iter + 1 == iter_) {  // the previous iteration's: its worker lost our ack
    ++st_.duplicates;
    ack(*p, fx);
    fx.free(p);
    return;
  }
  if (iter != iter_) return drop(iter < iter_ ? st_.stale : st_.malformed);
  if (direct && (p->h.psn & ~kv::kPsStream) >= kMaxStreamPackets) return drop(st_.malformed);
  auto [it, fresh] = seen_[p->h.rank].try_emplace(p->h.psn, true);
  if (!fresh) {
    ++st_.duplicates;
  } else {
    ++st_.data;
    const unsigned np = kv::pairs(*p);
    st_.pairs += np;
    if (!direct) st_.forwarded_pairs += np;
    for (unsigned q = 0; q < np; ++q) {
      int32_t& v = sums_[kv::key(*p, q)];  // Float16Table: float32 bits (0 = +0)
      const int32_t x = direct ? kv::value(*p, q) : from_switch(cfg_.arith, kv::value(*p, q));
      v = add_value(cfg_.arith, v, x, &st_.overflow);
    }
    if (direct && p->h.has(flag::kLast) && !in_[p->h.rank]) {
      in_[p->h.rank] = true;
      ++ndone_;
      hot_expected_ |= p->h.has(flag::kHot) && cfg_.sw != kNoNode && cfg_.hot_results == kv::HotRoute::ViaPs;
    }
  }
  ack_direct(*p, fresh, now, fx);
  fx.free(p);
  maybe_finish(now, fx);
}

// A result of the switch (hot_results ViaPs): its pairs, rank indices of the
// hot set of its iteration (whose version it must carry), added in once;
// acknowledged to the switch (whose CPU holds its copy) as receiver 0. One
// of an earlier iteration is a copy sent again after a lost acknowledgement:
// acknowledged again. One of a hot-set version not held yet is left
// unacknowledged.
void SparsePs::on_switch_result(Packet* p, Effects& fx) {
  auto drop = [&](uint64_t& c) {
    ++c;
    fx.free(p);
  };
  const uint32_t iter = p->h.priority, psn = p->h.psn;
  if (iter > iter_ || psn >= kMaxStreamPackets) return drop(st_.malformed);
  if (iter == iter_) {
    if (psn >= sw_got_.size()) sw_got_.resize(psn + 1, false);
    if (sw_got_[psn]) {
      ++st_.duplicates;
    } else {
      // The hot set of this iteration, which the switch used too: a result
      // of another version (one the PS does not hold yet) waits for its resend.
      const Table* t = dp::zebra::table_for(tables_, iter);
      if (!t || (t->hot->version & 0xFFFF) != kv::hot_version(*p)) return drop(st_.unknown_version);
      const unsigned np = kv::pairs(*p);
      for (unsigned q = 0; q < np; ++q)
        if (kv::key(*p, q) >= t->hot->size()) return drop(st_.malformed);
      if (p->h.has(flag::kLast) && (kv::total(*p) == 0 || kv::total(*p) > kMaxStreamPackets))
        return drop(st_.malformed);
      sw_got_[psn] = true;
      ++sw_n_;
      if (p->h.has(flag::kLast)) sw_total_ = kv::total(*p);
      ++st_.hot_results;
      st_.hot_pairs += np;
      for (unsigned q = 0; q < np; ++q) {
        int32_t& v = sums_[t->hot->keys[kv::key(*p, q)]];
        v = add_value(cfg_.arith, v, from_switch(cfg_.arith, kv::value(*p, q)), &st_.overflow);
      }
    }
  } else {
    ++st_.duplicates;
  }
  to_receipt(p, id(), 0, cfg_.workers.size(), 0);
  ++st_.acks_sent;
  fx.send(p);
}

void SparsePs::maybe_finish(Time now, Effects& fx) {
  if (ndone_ != cfg_.workers.size()) return;
  if (hot_expected_ && (sw_total_ == 0 || sw_n_ != sw_total_)) return;
  finish_iteration(now, fx);
}

void SparsePs::finish_iteration(Time now, Effects& fx) {
  // Every worker has begun this iteration, so each has every result of the
  // previous one (whatever acks were lost): those are dropped.
  res_.assign(sums_.begin(), sums_.end());
  std::sort(res_.begin(), res_.end());
  sums_.clear();
  for (auto& s : seen_) s.clear();
  for (Rx& x : rx_) x = Rx{};
  std::fill(res_cum_.begin(), res_cum_.end(), 0);
  std::fill(in_.begin(), in_.end(), false);
  ndone_ = 0;
  hot_expected_ = false;
  sw_got_.clear();
  sw_n_ = sw_total_ = 0;
  res_iter_ = iter_++;
  // Hot sets no later iteration uses: every one before the last that
  // applies from iter_ on (an earlier iteration's results are only
  // acknowledged again, never mapped).
  while (tables_.size() > 1 && tables_[1].from <= iter_) tables_.erase(tables_.begin());
  out_.clear();
  const unsigned K = ps_stream_pairs(cfg_);
  for (size_t b = 0; b < res_.size() || out_.empty(); b += K) {
    Out o;
    o.first = static_cast<uint32_t>(b);
    o.n = static_cast<uint32_t>(std::min<size_t>(K, res_.size() - std::min(b, res_.size())));
    out_.push_back(o);
    if (res_.empty()) break;
  }
  next_ = inflight_ = 0;
  unacked_results_ = out_.size();
  ++gen_;
  pump(now, fx);
}

void SparsePs::pump(Time now, Effects& fx) {
  while (next_ < out_.size() && window_.allows(inflight_)) {
    ++inflight_;
    transmit(next_++, full_bitmap(static_cast<unsigned>(cfg_.workers.size())).lo(), now, fx);
  }
}

void SparsePs::transmit(uint32_t i, uint64_t to, Time now, Effects& fx) {
  Out& o = out_[i];
  const size_t n = cfg_.workers.size();
  auto make = [&](NodeId dst) {
    Packet* p = fx.alloc();
    p->h = Header{};
    p->h.type = PktType::KvResult;
    p->h.job = cfg_.job;
    p->h.src = id();
    p->h.dst = dst;
    p->h.nworkers = static_cast<uint8_t>(n);
    p->h.psn = i;
    p->h.priority = res_iter_;
    const bool last = i + 1 == out_.size();
    // A retransmission, or any packet of a window too small for the next to
    // follow it, is acknowledged at once by a worker that delays its
    // acknowledgements.
    const bool blocked = o.tries > 0 || window_.cwnd() < cfg_.ack_every + 1;
    p->h.flags = static_cast<uint16_t>((last ? flag::kLast : 0) | (cfg_.ack_every > 1 && blocked ? flag::kAckNow : 0));
    kv::init(*p, o.n, 0, last ? static_cast<uint32_t>(out_.size()) : 0);
    for (uint32_t q = 0; q < o.n; ++q) kv::set(*p, q, res_[o.first + q].first, res_[o.first + q].second);
    ++st_.results_sent;
    fx.send(p);
  };
  if (to == full_bitmap(static_cast<unsigned>(n))) {
    make(kMulticast);  // the switch replicates it to the job's workers
  } else {
    for (size_t r = 0; r < n; ++r)
      if (to >> r & 1) make(cfg_.workers[r]);
  }
  o.sent = true;
  o.deadline = now + backed_off_rto(cfg_.min_rto, std::min<unsigned>(o.tries, 8), cfg_.max_rto);
  if (dq_.push(o.deadline, dq_key(gen_, i))) fx.set_timer(o.deadline, 0);
}

void SparsePs::on_timer(uint64_t, Time now, Effects& fx) {
  const uint64_t all = full_bitmap(static_cast<unsigned>(cfg_.workers.size())).lo();
  auto live = [&](uint64_t k, Time at) {
    if (k >> 32 != gen_) return false;
    const uint32_t i = static_cast<uint32_t>(k);
    if (i & kDelayedAck) {
      const Rx& x = rx_[i & ~kDelayedAck];
      return x.pending > 0 && x.ack_at == at;
    }
    const Out& o = out_[i];
    return o.acked != all && o.deadline == at;
  };
  const Time next = dq_.expire(
      now,
      [&](uint64_t k, Time at) {
        if (!live(k, at)) return;
        if (const uint32_t i = static_cast<uint32_t>(k); i & kDelayedAck) {
          const auto rank = static_cast<uint8_t>(i & ~kDelayedAck);
          Rx& x = rx_[rank];
          ++st_.delayed_acks;
          send_ack(rank, x.held_psn, iter_, x.cum, x.ce, fx);
          x.pending = 0;
          x.ce = false;
          x.ack_at = kNever;
          return;
        }
        Out& o = out_[static_cast<uint32_t>(k)];
        ++o.tries;
        ++st_.retransmits;
        transmit(static_cast<uint32_t>(k), all & ~o.acked, now, fx);
      },
      live);
  if (next != kNever) fx.set_timer(next, 0);
}

}  // namespace ina::host
