#include "host/ring.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include <fmt/format.h>

namespace ina::host {

// ---- plans -----------------------------------------------------------------

namespace {

RingGroup solo(uint16_t r) { return RingGroup{{r}, kNoNode}; }

}  // namespace

std::vector<std::vector<RingStage>> plan_rar(size_t n, uint64_t elems) {
  if (n == 0 || n > kMaxRingWorkers) throw std::invalid_argument(fmt::format("ring: {} workers (1..255)", n));
  RingStage st;
  st.len = elems;
  for (size_t r = 0; r < n; ++r) st.groups.push_back(solo(static_cast<uint16_t>(r)));
  return std::vector<std::vector<RingStage>>(n, std::vector<RingStage>{st});
}

std::vector<std::vector<RingStage>> plan_rina(const std::vector<std::vector<uint16_t>>& racks,
                                              const std::vector<NodeId>& tors, uint64_t elems) {
  if (racks.size() != tors.size()) throw std::invalid_argument("rina: one ToR entry per rack");
  RingStage st;
  st.len = elems;
  size_t n = 0;
  for (size_t r = 0; r < racks.size(); ++r) {
    auto ranks = racks[r];
    if (ranks.empty()) throw std::invalid_argument(fmt::format("rina: rack {} has no ranks", r));
    std::sort(ranks.begin(), ranks.end());
    n += ranks.size();
    if (tors[r] != kNoNode && ranks.size() >= 2) {
      if (ranks.size() > 64) throw std::invalid_argument(fmt::format("rina: rack {} has {} ranks (at most 64)", r, ranks.size()));
      st.groups.push_back(RingGroup{ranks, tors[r]});
    } else {
      for (uint16_t k : ranks) st.groups.push_back(solo(k));
    }
  }
  if (n == 0 || n > kMaxRingWorkers) throw std::invalid_argument(fmt::format("rina: {} workers (1..255)", n));
  std::vector<bool> seen(n, false);
  for (const auto& rk : racks)
    for (uint16_t k : rk) {
      if (k >= n || seen[k]) throw std::invalid_argument(fmt::format("rina: the racks do not partition ranks 0..{}", n - 1));
      seen[k] = true;
    }
  return std::vector<std::vector<RingStage>>(n, std::vector<RingStage>{st});
}

std::vector<std::vector<RingStage>> plan_hierarchical(const std::vector<std::vector<uint16_t>>& racks, uint64_t elems) {
  if (racks.empty()) throw std::invalid_argument("h-ar: no racks");
  const size_t k = racks[0].size();
  size_t n = 0;
  for (size_t r = 0; r < racks.size(); ++r) {
    if (racks[r].size() != k)
      throw std::invalid_argument(fmt::format(
          "h-ar needs the same number of workers in every rack (rack 0 has {}, rack {} has {})", k, r, racks[r].size()));
    n += k;
  }
  if (n > kMaxRingWorkers) throw std::invalid_argument(fmt::format("h-ar: {} workers (1..255)", n));
  std::vector<std::vector<RingStage>> out(n);
  for (size_t r = 0; r < racks.size(); ++r) {
    RingStage in_rack;
    in_rack.len = elems;
    for (uint16_t x : racks[r]) in_rack.groups.push_back(solo(x));
    for (size_t p = 0; p < k; ++p) {
      // Position p keeps rack shard (p + 1) mod k after the ReduceScatter.
      const size_t c = (p + 1) % k;
      RingStage across;
      across.off = shard_begin(in_rack, c);
      across.len = shard_begin(in_rack, c + 1) - across.off;
      for (const auto& other : racks) across.groups.push_back(solo(other[p]));
      RingStage rs = in_rack, ag = in_rack;
      rs.kind = RingStage::Kind::ReduceScatter;
      ag.kind = RingStage::Kind::AllGather;
      out[racks[r][p]] = {rs, across, ag};
    }
  }
  return out;
}

// ---- the endpoint's steps --------------------------------------------------

struct RingEndpoint::Step {
  uint8_t code = 0;          // tag = op << 8 | code
  size_t stage = 0;
  bool last_stage = false;
  // Send (none if !sends).
  bool sends = false;
  bool bcast = false;        // Rina agent: through the ToR to the rack (and fwd)
  bool gather = false;       // AllGather: complete values (kResult), slow start
  bool pulled = false;       // Rina member: starts when its agent pulls this tag
  bool pull_first = false;   // Rina agent: pull the rack before sending
  bool to_tor = false;       // ScatterReduce to the own Rina ToR (paced at the INA rate)
  bool region_cap = false;   // to a Rina ToR: window capped by its region
  uint64_t tor_bit = 0;      //   this rank's bit in its rack (agent = bit 0)
  uint64_t off = 0, len = 0;
  bool add_local = false;    // own input values
  int add_recv = -1;         // + values received in that step (index in steps_)
  bool from_kept = false;    // values from kept_
  NodeId dst = kNoNode, fwd = kNoNode;
  std::vector<NodeId> ackers;
  // Local finish (autonomous final, AllGather start): kept[shard] = local + recv; write if last stage.
  bool finish = false;
  int finish_recv = -1;
  bool write_kept = false;   // write kept [off, off+len) as results (AllGather stage start)
  // Receive (none if !recvs).
  bool recvs = false;
  uint64_t r_off = 0, r_len = 0;
  NodeId r_src = kNoNode;
  NodeId r_orig = kNoNode;   // through a ToR's copy: the original sender (in agg_index)
  bool r_keep = false;       // store for a later send (buffer)
  bool r_to_kept = false;    // store into kept_
  bool r_write = false;      // write as results
  uint64_t r_parts = 0;      // from a Rina ToR: its rack's full bitmap (a shared-pool ToR may send partial sums)
  int ridx = -1;             // receive ordinal within the op
};

struct RingEndpoint::Send {
  size_t step = 0;
  uint32_t npkts = 0, next = 0, low = 0, acked_pkts = 0;
  uint64_t all = 0;          // every acker's bit
  std::vector<uint64_t> acked;
  std::vector<Time> first_tx, last_tx, deadline;
  std::vector<uint16_t> retx;
  uint64_t inflight = 0;
  uint32_t hi = 0;  // one past the highest packet every acker acknowledged
  uint32_t fr = 0;  // packets below this were checked for a fast retransmission
  DeadlineQueue<uint32_t> rto;
};

struct RingEndpoint::Recv {
  uint64_t ord = UINT64_MAX;  // global receive ordinal (op * receives per op + ridx)
  std::vector<int32_t> vals;
  std::vector<bool> got;
  std::vector<uint64_t> parts;  // r_parts: the rack bits summed so far, per packet
  uint32_t count = 0, npkts = 0;
  Time done_at = kNever;  // when the last packet came (step_log)
  bool complete() const { return count == npkts; }
};

namespace {

constexpr uint64_t kRtoTimer = 0, kPaceTimer = 1, kDelayTimer = 2, kBarrierTimer = 3;
constexpr uint32_t kDupThresh = 3;  // later packets complete before an open one is deemed lost

// The op field of a step tag (see tag_of).
uint64_t op_of_tag(uint32_t tag) { return (tag >> 8) & 0xFFFF; }

uint32_t packets(uint64_t len, uint16_t width) { return static_cast<uint32_t>((len + width - 1) / width); }

// The node a group receives ScatterReduce data at (its agent or its one worker).
NodeId entry(const RingGroup& g, const std::vector<NodeId>& nodes) { return nodes.at(g.ranks[0]); }

// The node that sends a group's AllGather step s: an INA rack's members in
// turn (the agent at s = 0), or the one worker.
NodeId ag_sender_of(const RingGroup& g, size_t s, const std::vector<NodeId>& nodes) {
  return nodes.at(g.ranks[g.ina() ? s % g.ranks.size() : 0]);
}

}  // namespace

std::vector<uint16_t> upstream_of(const std::vector<RingStage>& stages, uint16_t rank) {
  for (const auto& st : stages) {
    const size_t G = st.groups.size();
    for (size_t i = 0; i < G; ++i) {
      const auto& g = st.groups[i];
      if (g.ina() && std::find(g.ranks.begin(), g.ranks.end(), rank) != g.ranks.end())
        return G > 1 ? st.groups[(i + G - 1) % G].ranks : std::vector<uint16_t>{};
    }
  }
  return {};
}

uint64_t ring_steps(const std::vector<RingStage>& stages, uint16_t rank) {
  uint64_t n = 0;
  for (const auto& st : stages) {
    const size_t G = st.groups.size();
    for (const auto& g : st.groups) {
      if (std::find(g.ranks.begin(), g.ranks.end(), rank) == g.ranks.end()) continue;
      const bool sr = st.kind != RingStage::Kind::AllGather, ag = st.kind != RingStage::Kind::ReduceScatter;
      if (g.ina()) n += (sr ? G : 0) + (ag ? std::max<size_t>(G - 1, 1) : 0);
      else n += (sr ? G - 1 : 0) + (ag ? G - 1 : 0);
    }
  }
  return n;
}

RingEndpoint::RingEndpoint(RingConfig cfg)
    : cfg_(std::move(cfg)), rng_(mix(cfg_.seed, 0x21a9ULL + cfg_.rank)), rtt_(cfg_.min_rto, cfg_.max_rto) {
  if (cfg_.rank >= cfg_.nodes.size()) throw std::invalid_argument("ring: rank beyond the job's nodes");
  if (cfg_.payload_values == 0) throw std::invalid_argument("ring: payload_values must be positive");
  cwnd_ = cfg_.init_window;
  build_steps();
  recv_.resize(kRecvSlots);
  have_.assign(cfg_.nodes.size(), false);
}

RingEndpoint::~RingEndpoint() = default;

size_t RingEndpoint::slot(uint64_t op, size_t step) const {
  return static_cast<size_t>((op * nrecv_ + static_cast<uint64_t>(steps_[step].ridx)) % kRecvSlots);
}

void RingEndpoint::build_steps() {
  const auto& nodes = cfg_.nodes;
  const uint16_t me = cfg_.rank;
  barrier_codes_.clear();
  uint8_t code = 0;
  int ridx = 0;
  uint64_t kept_lo = UINT64_MAX, kept_hi = 0;
  auto keep_range = [&](uint64_t off, uint64_t len) {
    kept_lo = std::min(kept_lo, off);
    kept_hi = std::max(kept_hi, off + len);
  };
  for (size_t si = 0; si < cfg_.stages.size(); ++si) {
    const RingStage& st = cfg_.stages[si];
    const bool last = si + 1 == cfg_.stages.size();
    const size_t G = st.groups.size();
    size_t q = G;
    for (size_t i = 0; i < G; ++i)
      if (std::find(st.groups[i].ranks.begin(), st.groups[i].ranks.end(), me) != st.groups[i].ranks.end()) q = i;
    if (q == G) throw std::invalid_argument(fmt::format("ring: rank {} is in no group of stage {}", me, si));
    const RingGroup& mine = st.groups[q];
    const RingGroup& next = st.groups[(q + 1) % G];
    const RingGroup& prev = st.groups[(q + G - 1) % G];
    const bool ina = mine.ina();
    const bool agent = ina && mine.ranks[0] == me;
    const bool sr = st.kind != RingStage::Kind::AllGather, ag = st.kind != RingStage::Kind::ReduceScatter;
    auto shard = [&](size_t c, uint64_t& off, uint64_t& len) {
      c %= G;
      off = shard_begin(st, c);
      len = shard_begin(st, c + 1) - off;
    };
    const NodeId next_entry = entry(next, nodes);
    const NodeId prev_sr_exit = prev.ina() ? prev.tor : nodes.at(prev.ranks[0]);
    // AllGather data goes to an INA rack's ToR, which copies it to every member.
    auto ag_entry = [&](const RingGroup& g) { return g.ina() ? g.tor : nodes.at(g.ranks[0]); };
    auto ag_sender = [&](const RingGroup& g, size_t s) { return ag_sender_of(g, s, nodes); };
    uint64_t my_bit = 0;
    for (size_t i = 0; i < mine.ranks.size(); ++i)
      if (mine.ranks[i] == me) my_bit = 1ULL << i;
    if (code + 2 * G + 1 > 256) throw std::invalid_argument("ring: too many steps per op (step codes are 8 bits)");
    const uint8_t base = code;
    // Barrier codes (step_barrier): the codes in which some rank of this
    // stage sends or receives, from the stage's shape alone (H-AR's stages
    // differ between ranks only in their members and ranges).
    {
      const bool any_ina = std::any_of(st.groups.begin(), st.groups.end(), [](const RingGroup& g) { return g.ina(); });
      if (sr) {
        for (size_t s = 0; s + 1 < G; ++s) barrier_codes_.push_back(static_cast<uint8_t>(base + s));
        if (any_ina) barrier_codes_.push_back(static_cast<uint8_t>(base + G - 1));  // through the ToR to the agent
      }
      if (ag) {
        const size_t n = any_ina ? std::max<size_t>(G - 1, 1) : G - 1;
        for (size_t s = 0; s < n; ++s) barrier_codes_.push_back(static_cast<uint8_t>(base + G + s));
      }
    }
    auto add = [&](Step s) {
      s.stage = si;
      s.last_stage = last;
      if (s.recvs) s.ridx = ridx++;
      steps_.push_back(std::move(s));
    };
    // ScatterReduce.
    if (sr) {
      for (size_t s = 0; s + 1 < G; ++s) {
        Step x;
        x.code = static_cast<uint8_t>(base + s);
        x.sends = true;
        shard(q + G - s % G, x.off, x.len);
        x.add_local = true;
        if (s > 0 && !(ina && !agent)) x.add_recv = static_cast<int>(steps_.size()) - 1;
        if (ina) {
          x.to_tor = x.region_cap = true;
          x.tor_bit = my_bit;
          x.dst = mine.tor;
          x.fwd = next_entry;
          x.ackers = {mine.tor};
          x.pull_first = agent;
          x.pulled = !agent;
        } else {
          x.dst = next_entry;
          x.ackers = {next_entry};
        }
        if (!ina || agent) {
          x.recvs = true;
          shard(q + 2 * G - 1 - s, x.r_off, x.r_len);
          x.r_src = prev_sr_exit;
          x.r_keep = true;
          if (prev.ina()) x.r_parts = full_bitmap(static_cast<unsigned>(prev.ranks.size())).lo();  // racks: <= 64 ranks
        }
        add(std::move(x));
      }
      // The complete shard (q + 1).
      Step f;
      f.code = static_cast<uint8_t>(base + G - 1);
      uint64_t off, len;
      shard(q + 1, off, len);
      const int last_recv = G > 1 && (!ina || agent) ? static_cast<int>(steps_.size()) - 1 : -1;
      if (ina) {
        f.sends = true;
        f.off = off;
        f.len = len;
        f.add_local = true;
        f.add_recv = agent ? last_recv : -1;
        f.to_tor = f.region_cap = true;
        f.tor_bit = my_bit;
        f.dst = mine.tor;
        f.fwd = nodes.at(mine.ranks[0]);  // back to the agent
        f.ackers = {mine.tor};
        f.pull_first = agent;
        f.pulled = !agent;
        if (agent) {
          f.recvs = true;
          f.r_off = off;
          f.r_len = len;
          f.r_src = mine.tor;
          f.r_to_kept = true;
          f.r_parts = full_bitmap(static_cast<unsigned>(mine.ranks.size())).lo();
          f.r_write = last && ag;
        }
      } else {
        f.finish = true;
        f.finish_recv = last_recv;
        f.off = off;
        f.len = len;
      }
      keep_range(off, len);
      add(std::move(f));
    } else if (ina) {
      throw std::invalid_argument("ring: an AllGather-only stage cannot have INA groups");
    }
    // AllGather.
    if (ag) {
      uint64_t own_off, own_len;
      shard(q + 1, own_off, own_len);
      keep_range(own_off, own_len);
      if (!sr) {
        // Start from the shard a previous stage left here.
        Step w;
        w.code = static_cast<uint8_t>(base + G - 1);
        w.write_kept = last;
        w.off = own_off;
        w.len = own_len;
        add(std::move(w));
      }
      const size_t k = mine.ranks.size();
      size_t pos = 0;
      while (mine.ranks[pos] != me) ++pos;
      if (ina && !agent) {
        // The rack's own complete shard, from the agent's broadcast (through the ToR).
        Step o;
        o.code = static_cast<uint8_t>(base + G);
        o.recvs = true;
        o.r_off = own_off;
        o.r_len = own_len;
        o.r_src = mine.tor;
        o.r_orig = nodes.at(mine.ranks[0]);
        o.r_to_kept = !last;
        o.r_write = last;
        add(std::move(o));
      }
      // Step s forwards shard (q + 1 - s): the own one at s = 0, then the one
      // received in step s - 1. An INA rack's step-0 send is its agent's
      // broadcast; later ones rotate over the rack's members.
      const size_t nsteps = ina ? std::max<size_t>(G - 1, 1) : G - 1;
      for (size_t s = 0; s < nsteps; ++s) {
        Step x;
        x.code = static_cast<uint8_t>(base + G + s);
        x.gather = true;
        if (s % k == pos) {
          x.sends = true;
          shard(q + 1 + G - s, x.off, x.len);
          if (s == 0) x.from_kept = true;
          else x.add_recv = static_cast<int>(steps_.size()) - 1;
          if (ina && s == 0) {
            x.bcast = true;
            x.dst = mine.tor;
            x.region_cap = true;
            x.ackers = {mine.tor};
            if (G > 1) {
              x.fwd = ag_entry(next);
              x.ackers.push_back(ag_entry(next));
            }
          } else {
            x.dst = ag_entry(next);
            x.region_cap = next.ina();
            x.ackers = {x.dst};
          }
        }
        if (G > 1) {
          x.recvs = true;
          shard(q + G - s, x.r_off, x.r_len);
          if (ina) {
            x.r_src = mine.tor;
            x.r_orig = ag_sender(prev, s);
          } else {
            x.r_src = ag_sender(prev, s);
          }
          x.r_keep = s + 1 < G - 1 && (s + 1) % k == pos;
          x.r_to_kept = !last;
          x.r_write = last;
        }
        add(std::move(x));
      }
    }
    code = static_cast<uint8_t>(base + 2 * G);
  }
  nrecv_ = static_cast<uint64_t>(ridx);
  if (!barrier_codes_.empty()) barrier_codes_.pop_back();  // the op's last step: nothing in the op follows it
  if (kept_lo < kept_hi) {
    kept_off_ = kept_lo;
    kept_.assign(kept_hi - kept_lo, 0);
  }
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
  send_.reset();  // its RTO entries die with it; a stale RTO timer finds no send
  sending_ = op_running_ = waiting_delay_ = delay_done_ = false;
  ++timer_gen_;  // pending delay timers are void
  pulled_tag_ = 0;
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

void RingEndpoint::arm(Time at, Effects& fx) { fx.set_timer(at, kRtoTimer); }

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
        std::vector<int32_t> v(s.len);
        if (s.finish) {
          if (s.stage == 0) io.read_gradient(s.off, v);
          else std::copy_n(kept_.begin() + static_cast<std::ptrdiff_t>(s.off - kept_off_), s.len, v.begin());
          if (s.finish_recv >= 0) {
            const auto& in = recv_[slot(op_, static_cast<size_t>(s.finish_recv))];
            for (uint64_t i = 0; i < s.len; ++i) v[i] += in.vals[i];
          }
          std::copy(v.begin(), v.end(), kept_.begin() + static_cast<std::ptrdiff_t>(s.off - kept_off_));
        } else {
          std::copy_n(kept_.begin() + static_cast<std::ptrdiff_t>(s.off - kept_off_), s.len, v.begin());
        }
        const bool ag_follows = cfg_.stages[s.stage].kind != RingStage::Kind::ReduceScatter;
        if (s.last_stage && (s.write_kept || ag_follows)) io.write_result(s.off, v);
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
  ++st_.steps;
  ++step_;
  if (step_ < log_.size()) log_[step_].current = now;
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
  sending_ = true;
  log_[step_].send_begin = now;
  log_[step_].send_pkts = x.npkts;
  if (s.gather && cfg_.allgather_from_zero && (s.bcast || cfg_.allgather_all_from_zero)) {
    cwnd_ = 1;
    slow_start_ = true;
  } else if (slow_start_) {
    slow_start_ = false;
    cwnd_ = std::max(cwnd_, cfg_.init_window);
  }
  log_[step_].cwnd = cwnd_;
  if (s.pull_first) send_pull(now, fx);
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

void RingEndpoint::fill(const Step& s, uint32_t idx, Packet& p) {
  const uint64_t off = s.off + static_cast<uint64_t>(idx) * cfg_.payload_values;
  const auto cnt = static_cast<uint16_t>(std::min<uint64_t>(cfg_.payload_values, s.off + s.len - off));
  p.h.count = cnt;
  std::span<int32_t> v(p.payload(), cnt);
  if (s.from_kept) {
    std::copy_n(kept_.begin() + static_cast<std::ptrdiff_t>(off - kept_off_), cnt, v.begin());
  } else if (s.add_local) {
    if (s.stage == 0) ops_[op_].io->read_gradient(off, v);
    else std::copy_n(kept_.begin() + static_cast<std::ptrdiff_t>(off - kept_off_), cnt, v.begin());
  } else {
    std::fill(v.begin(), v.end(), 0);
  }
  if (s.add_recv >= 0) {
    const auto& r = recv_[slot(op_, static_cast<size_t>(s.add_recv))];
    const uint64_t base = static_cast<uint64_t>(idx) * cfg_.payload_values;
    for (uint16_t i = 0; i < cnt; ++i) {
      if (s.add_local || s.from_kept) v[i] += r.vals[base + i];
      else v[i] = r.vals[base + i];
    }
  }
}

void RingEndpoint::transmit(uint32_t idx, bool resend, Time now, Effects& fx) {
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
  } else {
    ++st_.retransmits;
    if (x.retx[idx] < UINT16_MAX) ++x.retx[idx];
  }
  x.last_tx[idx] = now;
  // Backed off by this packet's resends, or by the endpoint's timeouts since
  // the last valid sample (RFC 6298 5.5 with Karn's rule: otherwise, when
  // the floor is below the path's RTT, every packet would time out before it
  // could give a sample and the estimate would never rise).
  Time rto = rtt_.timeout();
  for (int i = 0; i < std::min(std::max<int>(x.retx[idx], backoff_), 6); ++i) rto *= 2;
  rto = std::min(rto, cfg_.max_rto);
  x.deadline[idx] = now + rto;
  if (x.rto.push(x.deadline[idx], idx)) arm(x.deadline[idx], fx);
  ++st_.sent;
  st_.bytes_sent += 4ULL * p->h.count;
  fx.send(p);
}

void RingEndpoint::pump(Time now, Effects& fx) {
  if (!send_) return;
  Send& x = *send_;
  const Step& s = steps_[x.step];
  double cap = std::min(cwnd_, cfg_.max_window);
  if (s.region_cap && cfg_.region) cap = std::min(cap, static_cast<double>(cfg_.region));
  while (x.next < x.npkts && static_cast<double>(x.inflight) < std::max(1.0, cap)) {
    if (s.region_cap && cfg_.region && x.next >= x.low + cfg_.region) break;
    if (s.to_tor && cfg_.ina_gbps > 0) {
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
      const auto gap = static_cast<Time>(8.0 * cfg_.wire_bytes / (cfg_.ina_gbps * 1e9) * kSec);
      next_tx_ = std::max(now, next_tx_) + gap;
    }
    transmit(x.next++, false, now, fx);
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
  if (kind == kPaceTimer) {
    if (now == pace_at_) pace_at_ = kNever;  // the pending one (an older one leaves it armed)
    pump(now, fx);
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

void RingEndpoint::on_rto(Time now, Effects& fx) {
  if (!send_) return;
  Send& x = *send_;
  bool any = false;
  const Time next = x.rto.expire(
      now,
      [&](uint32_t idx, Time at) {
        if (!send_ || x.acked[idx] == x.all || x.deadline[idx] != at) return;
        ++st_.timeouts;
        any = true;
        transmit(idx, true, now, fx);
      },
      [&](uint32_t idx, Time at) { return x.acked[idx] != x.all && x.deadline[idx] == at; });
  if (next != kNever) arm(next, fx);
  if (any) {
    backoff_ = static_cast<uint8_t>(std::min(backoff_ + 1, 6));
    decrease(now);  // a loss is congestion, as an echo is
    if (steps_[x.step].pull_first) send_pull(now, fx);  // a member may have missed the pull
  }
}

// Multiplicative decrease, at most once per smoothed RTT (one window's
// losses or echoes count once).
void RingEndpoint::decrease(Time now) {
  if (now - last_decrease_ <= rtt_.srtt()) return;
  cwnd_ = std::max(1.0, cwnd_ / 2);
  last_decrease_ = now;
  slow_start_ = false;
  ++st_.decreases;
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

void RingEndpoint::ack(const Packet& d, Effects& fx) {
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
  // Receive ordinals (op * receives per op + the step's receive index):
  // `cur` is the first receive at or after the current step. The current
  // send may read the receive before it, so the buffers hold cur - 1 up to
  // cur + kRecvSlots - 2: anything further ahead waits (no acknowledgement).
  const uint64_t ord = op * nrecv_ + static_cast<uint64_t>(s.ridx);
  uint64_t cur = UINT64_MAX;
  if (!done()) {
    size_t k = op_running_ ? step_ : 0;
    while (k < steps_.size() && !steps_[k].recvs) ++k;
    cur = op_ * nrecv_ + (k < steps_.size() ? static_cast<uint64_t>(steps_[k].ridx) : nrecv_);
  }
  if (ord < cur) {
    // A step already received here: the sender missed the acknowledgement.
    ++st_.late;
    ack(*p, fx);
    fx.free(p);
    return;
  }
  if (ord > cur + kRecvSlots - 2) {
    ++st_.early;
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
    if (s.r_keep) r.vals.assign(s.r_len, 0);
    else r.vals.clear();
  }
  if (r.got[p->h.psn]) {
    ++st_.duplicates;
    ack(*p, fx);
    fx.free(p);
    return;
  }
  const uint64_t off = s.r_off + static_cast<uint64_t>(p->h.psn) * cfg_.payload_values;
  std::span<const int32_t> v(p->payload(), p->h.count);
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
      if (r.vals.empty()) r.vals.assign(s.r_len, 0);
      const auto at = r.vals.begin() + static_cast<std::ptrdiff_t>(off - s.r_off);
      for (uint16_t i = 0; i < p->h.count; ++i) at[i] += v[i];
      if (have != s.r_parts) {
        fx.free(p);
        return;
      }
      v = std::span<const int32_t>(&*at, p->h.count);
      summed = true;
    }
  }
  if (s.r_keep && !summed) std::copy(v.begin(), v.end(), r.vals.begin() + static_cast<std::ptrdiff_t>(off - s.r_off));
  r.got[p->h.psn] = true;
  ++r.count;
  ++st_.received;
  if (s.r_to_kept) std::copy(v.begin(), v.end(), kept_.begin() + static_cast<std::ptrdiff_t>(off - kept_off_));
  if (s.r_write) ops_[op].io->write_result(off, v);
  ack(*p, fx);
  fx.free(p);
  // A Rina member learns from its agent's broadcast that its earlier sends are done.
  if (op == op_ && op_running_) skip_pulled_to(si, now);
  if (r.complete()) {
    r.done_at = now;
    advance(now, fx);
  }
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
  fx.free(p);
  if (x.acked[idx] & bit) {
    ++st_.dup_acks;
    return;
  }
  ++st_.acks;
  x.acked[idx] |= bit;
  if (x.acked[idx] != x.all) return;
  --x.inflight;
  ++x.acked_pkts;
  if (x.retx[idx] == 0) {
    rtt_.sample(now - x.first_tx[idx]);
    backoff_ = 0;
  }
  while (x.low < x.npkts && x.acked[x.low] == x.all) ++x.low;
  // Fast retransmission: a packet still open when kDupThresh later ones are
  // complete was lost (acknowledgements of one transfer come back in order
  // unless a packet or its acknowledgement was lost); sent again once, and
  // the window halves. Without this only the RTO recovers a loss.
  x.hi = std::max(x.hi, idx + 1);
  for (; x.fr + kDupThresh < x.hi; ++x.fr)
    if (x.acked[x.fr] != x.all && x.retx[x.fr] == 0) {
      ++st_.fast_retransmits;
      transmit(x.fr, true, now, fx);
      decrease(now);
    }
  if (ece) {
    ++st_.ece;
    decrease(now);
  } else if (slow_start_) {
    cwnd_ = std::min(cwnd_ + 1, cfg_.max_window);
  } else {
    cwnd_ = std::min(cwnd_ + 1.0 / cwnd_, cfg_.max_window);
  }
  if (x.acked_pkts == x.npkts) {
    log_[x.step].send_done = now;
    send_.reset();
    advance(now, fx);
    return;
  }
  pump(now, fx);
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
  // Only a member's own ToR copies its agent's pull.
  bool ok = false;
  for (const auto& st : cfg_.stages)
    for (const auto& g : st.groups)
      if (g.ina() && g.tor == p->h.src && std::find(g.ranks.begin(), g.ranks.end(), cfg_.rank) != g.ranks.end() &&
          g.ranks[0] != cfg_.rank)
        ok = true;
  fx.free(p);
  if (!ok) {
    ++st_.foreign;
    return;
  }
  ++st_.pulls;
  pulled_tag_ = std::max(pulled_tag_, tag + 1);
  if (!op_running_ || op_of_tag(tag) != op_) return;
  // The agent moved on: every earlier pulled step is done (its aggregate was acknowledged).
  size_t target = step_;
  while (target < steps_.size() && tag_of(target) < tag) ++target;
  skip_pulled_to(target, now);
  advance(now, fx);
}

// ---- step barrier (RingConfig::step_barrier) ------------------------------

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
  Time rto = rtt_.timeout();
  for (int i = 0; i < report_tries_; ++i) rto *= 2;
  rto = std::min(rto, cfg_.max_rto);
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
