// Zebra (paper: ../shared/papers/zebra.md): in-network aggregation
// of a sparse job's *hot* parameters only.
//
// Pipeline (Zebra_p, §III-D/E), per KvData packet addressed to the switch:
//   1. parse the <key, value> pairs (wire/kv.hpp; malformed: counted by reason, dropped);
//   2. look each key up in the job's exact-match table (key -> rank index,
//      kv_table_entries entries) for the packet's iteration;
//   3. add each hot pair's value to its register slot (layout: register
//      reg(i), slot slot(i)) and count the contributing worker per index;
//      values are int32 (exact), or with kv_arith = Float16Table float16 bits
//      added by the table-lookup adder (§III-E; wire/fp16.hpp), whose sums
//      the result packets carry as float16 bits too;
//      a register is accessed once per pass, so a packet holding k indices of
//      one register takes k passes: k - 1 recirculations, each serialized on
//      the recirculation port (recirc_gbps), counted;
//   4. the pairs that are not in the table stay in the packet, which goes on
//      to the PS (the PS acknowledges it); a packet left with no pair is
//      turned into the ACK to its worker (§III-F: per-packet ACK).
// Duplicates are found by a per-worker bit per packet of the iteration's hot
// stream (psn); a duplicate adds nothing and is answered again (ACK, or its
// cold pairs passed on again: the PS deduplicates too).
//
// Completion (ours: the paper does not say how the switch knows an iteration
// is complete): each worker's last hot packet (flag kLast, possibly empty —
// §III-F's "empty packet") carries how many packets its hot stream has. When
// every worker's stream is in, the switch reads the registers out: sweep
// passes over the indices in rank order, K per pass (a pass again reads each
// register once, so a layout that puts two of them in one register costs
// passes), clearing them; every index some worker updated becomes a pair
// (rank index, sum) of a KvResult, with one copy to the switch CPU. Where the
// results go is ZebraConfig::hot_results (wire/kv.hpp): to the job's PS (the
// paper's §III-E: the PS "broadcasts the all updated parameters back to each
// worker"), or multicast to the workers (a variant). Result keys are rank
// indices: their receivers map them back (§III-D: "workers store the mapping
// information locally"; the PS holds the hot set too).
//
// Reliability of results (Zebra_s, §III-F): the SwitchCpu node keeps each
// copy until every receiver (the PS, or each worker) acknowledged it (their
// KvAcks reach the pipeline, which passes them to the CPU) and retransmits it
// to the others through the pipeline.
//
// Hot-set updates (online identification): set_sparse_table installs a table
// valid from an iteration on; lookups use the table of the packet's
// iteration, so a table changes only between iterations, when the registers
// are empty. A key a worker still thinks hot but the table no longer has goes
// on to the PS; no gradient is lost or counted twice.
//
// The pipeline is a component (KvPipeline): the zebra program runs it with
// value registers of its own (memory_bytes / 4). Beyond the paper, a
// shared-pool program (ATP, DSA) with ZebraConfig::kv_pool runs
// the same pipeline for its sparse jobs, whose values then live in the pool:
// a table's layout must spread the hot set over as many registers as an
// aggregator has value lanes (in hardware each lane is its own register
// array), and slot s of the layout is aggregator rows[s], pinned from the pool
// when the table is installed (free aggregators only, found by the pool's own
// hash and probing forward) and released when the job is removed. The pool's
// dense jobs see a pinned aggregator as one held by another task. The
// per-index worker counters stay the pipeline's own register array.
#include <algorithm>
#include <cstring>
#include <deque>
#include <stdexcept>

#include <fmt/format.h>

#include "dataplane/switch.hpp"
#include "dataplane/zebra.hpp"
#include "wire/kv.hpp"

namespace ina::dp {

using dp::zebra::HotSet;
using dp::zebra::Layout;

class ZebraPipeline final : public KvPipeline {
 public:
  ZebraPipeline(SwitchProgram& host, bool in_pool) : h_(host), pool_(in_pool) {
    const SwitchConfig& cfg = h_.cfg_;
    if (cfg.zebra.kv_pairs == 0 || cfg.zebra.kv_pairs > kv::kMaxPairs)
      throw std::invalid_argument("zebra: kv_pairs " + std::to_string(cfg.zebra.kv_pairs) + " out of range 1.." +
                                  std::to_string(kv::kMaxPairs));
    if (cfg.zebra.kv_arith == KvArith::Float16Table) f16_ = &fp16::switch_adder();
  }

  void set_table(const SwitchJob& j, SparseTable t) override {
    const uint16_t job = j.job;
    const SwitchConfig& cfg = h_.cfg_;
    if (!t.hot || !t.layout) throw std::invalid_argument("zebra: a table needs a hot set and a layout");
    const size_t n = t.hot->size();
    if (n > cfg.zebra.kv_table_entries)
      throw std::invalid_argument("zebra: hot set of " + std::to_string(n) + " keys exceeds the table's " +
                                  std::to_string(cfg.zebra.kv_table_entries) + " entries");
    if (!pool_ && n > value_registers())
      throw std::invalid_argument("zebra: hot set of " + std::to_string(n) + " keys exceeds the " +
                                  std::to_string(value_registers()) + " value registers of memory_bytes " +
                                  std::to_string(cfg.memory_bytes));
    if (t.layout->reg_of.size() != n)
      throw std::invalid_argument("zebra: layout covers " + std::to_string(t.layout->reg_of.size()) +
                                  " indices, hot set has " + std::to_string(n));
    if (pool_ && t.layout->registers != h_.width_)
      throw std::invalid_argument(fmt::format(
          "zebra in the {} pool: the layout spreads the hot set over {} registers; an aggregator of the pool has {} "
          "value lanes (payload_values), one register each",
          h_.scheme_, t.layout->registers, h_.width_));
    State& s = state(job);
    // Before the job's first packet, its earliest table says where its
    // aggregation starts (a job measured from a later iteration of training).
    uint32_t iter = s.iter;
    if (!s.started && (s.tables.empty() || t.from < s.iter)) iter = t.from;
    if (t.from < iter || (t.from == iter && s.started))
      throw std::invalid_argument("zebra: a table for iteration " + std::to_string(t.from) +
                                  " comes too late: the switch is at iteration " + std::to_string(s.iter) +
                                  (s.started ? " (started)" : ""));
    if (pool_) pin(j, s, t.layout->slots);  // throws, changing nothing, if the pool has too few free aggregators
    s.iter = iter;
    zebra::add_table(s.tables, std::move(t));
    size_t most = 0;
    for (const auto& x : s.tables) most = std::max(most, x.hot->size());
    if (s.cnt.size() < most) {
      if (!pool_) s.val.resize(most, 0);
      s.cnt.resize(most, 0);
    }
  }

  bool has_table(uint16_t job) const override {
    auto it = states_.find(job);
    return it != states_.end() && !it->second.tables.empty();
  }

  void on_timer(Time now, Effects& fx) override {
    while (!pending_.empty() && pending_.front().at <= now) {
      Pending q = pending_.front();
      pending_.pop_front();
      const SwitchJob* j = h_.job(q.job);
      if (!j || !has_table(q.job)) {
        fx.free(q.p);
        continue;
      }
      if (q.result) emit_result(q.p, *j, fx);
      else finish(q.p, *j, now, fx);
    }
    if (!pending_.empty()) fx.set_timer(pending_.front().at, 0);
  }

  size_t held() const override {
    size_t n = 0;
    for (const auto& [job, s] : states_)
      for (uint16_t c : s.cnt) n += c != 0;
    return n + pending_.size();
  }

  size_t remove(const SwitchJob& j) override {
    auto it = states_.find(j.job);
    if (it == states_.end()) return 0;
    size_t n = 0;
    for (uint16_t c : it->second.cnt) n += c != 0;
    states_.erase(it);  // in a pool, SwitchProgram::remove_job has released the pinned aggregators
    return n;
  }

  void on_kv(Packet* p, const SwitchJob& j, Time now, Effects& fx) override {
    SwitchStats& st = h_.st_;
    const NodeId src = p->h.src;
    auto drop = [&](uint64_t& c) {
      ++c;
      fx.free(p);
    };
    const kv::Error e = kv::check(*p, h_.cfg_.zebra.kv_pairs);
    if (e != kv::Error::None) {
      ++st.kv_rejects[static_cast<size_t>(e)];
      return drop(st.malformed);
    }
    const size_t n = j.workers.size();
    if (p->h.type == PktType::KvResult) {
      // The CPU's retransmission of a result copy to receiver `rank` (the PS is receiver 0).
      if (j.zebra.cpu == kNoNode || src != j.zebra.cpu) return drop(st.foreign_forward);
      if (p->h.rank >= (via_ps() ? 1 : n) || (via_ps() && j.ps == kNoNode)) return drop(st.malformed);
      p->h.src = h_.id();
      p->h.dst = via_ps() ? j.ps : j.workers[p->h.rank];
      ++st.forwarded;
      fx.send(p);
      return;
    }
    if (p->h.type == PktType::KvAck && via_ps()) {
      // The PS's receipt of a result (receiver 0): the CPU holds the copies.
      if (j.ps == kNoNode || src != j.ps) return drop(st.foreign_data);
      if (!p->h.has(flag::kResult) || p->h.rank != 0 || j.zebra.cpu == kNoNode) return drop(st.malformed);
      p->h.dst = j.zebra.cpu;
      ++st.forwarded;
      fx.send(p);
      return;
    }
    if (p->h.rank >= n || p->h.nworkers != n || j.workers[p->h.rank] != src) return drop(st.foreign_data);
    if (p->h.type == PktType::KvAck) {
      // A worker's receipt of a result: the CPU holds the copies.
      if (!p->h.has(flag::kResult) || j.zebra.cpu == kNoNode) return drop(st.malformed);
      p->h.dst = j.zebra.cpu;
      ++st.forwarded;
      fx.send(p);
      return;
    }
    // KvData: a worker's hot stream.
    State& s = state(j.job);
    const uint32_t iter = p->h.priority;
    const uint32_t psn = p->h.psn;
    if (iter > s.iter || psn & kv::kPsStream || s.tables.empty() || psn >= h_.cfg_.zebra.kv_table_entries)
      return drop(st.malformed);
    if (iter + 1 < s.iter) return drop(st.stale);  // its worker has long had the answer
    const SparseTable* t = table_for(s, iter);
    if (!t) return drop(st.malformed);
    const Lookup l = lookup(*t, *p);
    if (iter < s.iter || seen(s, p->h.rank, psn)) {
      // A duplicate: nothing is added again; the pairs the PS aggregates go on again.
      ++st.duplicates;
      answer(p, j, l.cold_span(), l.ncold, fx);
      return;
    }
    mark_seen(s, p->h.rank, psn);
    s.started = true;
    ++st.kv_in;
    st.kv_pairs_in += l.np;
    // Passes: the most indices any one register gets.
    std::array<uint32_t, kv::kMaxPairs> hot_idx{};
    unsigned nh = 0;
    for (unsigned i = 0; i < l.np; ++i)
      if (!l.cold[i]) hot_idx[nh++] = l.idx[i];
    const uint32_t passes = dp::zebra::passes(*t->layout, std::span<const uint32_t>(hot_idx.data(), nh));
    if (passes <= 1) return finish(p, j, now, fx);
    st.recirculations += passes - 1;
    queue(p, j.job, false, now, passes - 1, fx);
  }

 private:
  struct Worker {
    std::vector<uint64_t> seen;  // bit per hot-stream psn of the current iteration
    uint32_t done = 0;           // packets finished (all their passes)
    uint32_t total = 0;          // from the kLast packet; 0 = not yet
  };
  struct State {
    uint32_t iter = 0;
    bool started = false;           // a packet of `iter` has arrived
    std::vector<SparseTable> tables;  // ascending `from`
    std::vector<int32_t> val;       // own registers: the values by rank index (register reg(i), slot slot(i));
                                    //   Float16Table: float16 bits (0 = +0), read out as they are
    std::vector<uint32_t> rows;     // in a pool: the pinned aggregators, by slot (register = value lane)
    std::vector<uint16_t> cnt;      // contributing workers per index
    std::vector<Worker> w;
    unsigned complete = 0;          // workers whose hot stream is in
  };
  struct Pending {
    Time at;
    uint16_t job;
    bool result;
    Packet* p;
  };

  size_t value_registers() const { return h_.cfg_.memory_bytes / 4; }
  bool via_ps() const { return h_.cfg_.zebra.hot_results == kv::HotRoute::ViaPs; }

  // Index x's value register under layout L: its own register, or lane
  // reg(x) of the pool aggregator pinned for slot(x).
  int32_t& val(State& s, const Layout& L, uint32_t x) {
    return pool_ ? h_.values(s.rows[L.slot(x)])[L.reg(x)] : s.val[x];
  }

  // A pinned aggregator's key: the sparse job's, with a PSN above any dense stream's.
  static constexpr uint32_t kPinnedPsn = 0xFFFF0000u;
  // In a pool: pins aggregators until the job has `rows` (one per slot of the
  // layout), each the first free one from Hash(job, kPinnedPsn | row) on (the
  // pool's own addressing, probing forward). Free aggregators only: a dense
  // task in flight keeps its own. Throws, pinning nothing, if too few are free.
  void pin(const SwitchJob& j, State& s, uint32_t rows) {
    if (s.rows.size() >= rows) return;
    if (rows > 0x10000u)
      throw std::invalid_argument(fmt::format("zebra in the {} pool: {} rows of hot values exceed 65,536",
                                              h_.scheme_, rows));
    const uint32_t n = static_cast<uint32_t>(h_.n_);
    std::vector<uint32_t> add;
    std::vector<uint8_t> taken(n, 0);
    for (uint32_t r = static_cast<uint32_t>(s.rows.size()); r < rows; ++r) {
      const uint32_t start = h_.index_of(j, kPinnedPsn | r) % n;
      uint32_t k = 0;
      for (; k < n; ++k) {
        const uint32_t i = (start + k) % n;
        if (h_.agg(i).key == 0 && !taken[i]) {
          taken[i] = 1;
          add.push_back(i);
          break;
        }
      }
      if (k == n) {
        size_t free = 0;
        for (uint32_t i = 0; i < n; ++i) free += h_.agg(i).key == 0;
        throw std::invalid_argument(fmt::format(
            "zebra in the {} pool: job {}'s hot set needs {} aggregators ({} value lanes each), {} pinned; {} of the "
            "pool's {} are free",
            h_.scheme_, j.job, rows, h_.width_, s.rows.size(), free, n));
      }
    }
    for (uint32_t i : add) {
      const auto r = static_cast<uint32_t>(s.rows.size());
      h_.agg(i) = SwitchProgram::Agg{SwitchProgram::key_of(j.job, kPinnedPsn | r), 0, 0, 0};
      std::fill_n(h_.values(i), h_.width_, 0);
      s.rows.push_back(i);
    }
  }

  State& state(uint16_t job) {
    State& s = states_[job];
    if (s.w.empty()) {
      const SwitchJob* j = h_.job(job);
      s.w.resize(j ? j->workers.size() : 0);
      for (auto& w : s.w) w.seen.assign((h_.cfg_.zebra.kv_table_entries + 63) / 64, 0);
    }
    return s;
  }
  static const SparseTable* table_for(const State& s, uint32_t iter) { return zebra::table_for(s.tables, iter); }
  struct Lookup {
    std::array<uint32_t, kv::kMaxPairs> idx{};
    std::array<bool, kv::kMaxPairs> cold{};
    unsigned np = 0, ncold = 0;
    std::span<const bool> cold_span() const { return {cold.data(), np}; }
  };
  static Lookup lookup(const SparseTable& t, const Packet& p) {
    Lookup l;
    l.np = kv::pairs(p);
    for (unsigned i = 0; i < l.np; ++i) {
      auto it = t.hot->index.find(kv::key(p, i));
      l.cold[i] = it == t.hot->index.end();
      l.idx[i] = l.cold[i] ? 0 : it->second;
      l.ncold += l.cold[i];
    }
    return l;
  }
  static bool seen(const State& s, uint8_t r, uint32_t psn) { return (s.w[r].seen[psn / 64] >> (psn % 64)) & 1; }
  static void mark_seen(State& s, uint8_t r, uint32_t psn) { s.w[r].seen[psn / 64] |= 1ULL << (psn % 64); }

  Time pass_time(const Packet& p) const {
    const double bits = 8.0 * (50.0 + 4.0 * p.h.count);  // Ethernet/IP/UDP + header as the simulator counts
    return from_us(bits / (h_.cfg_.zebra.recirc_gbps * 1e3));
  }
  // Holds p for `passes` passes on the recirculation port.
  void queue(Packet* p, uint16_t job, bool result, Time now, uint32_t passes, Effects& fx) {
    recirc_free_ = std::max(recirc_free_, now) + static_cast<Time>(passes) * pass_time(*p);
    const bool arm = pending_.empty();
    pending_.push_back({recirc_free_, job, result, p});
    if (arm) fx.set_timer(recirc_free_, 0);
  }

  // The ACK to the packet's worker, or its cold pairs on to the PS.
  void answer(Packet* p, const SwitchJob& j, std::span<const bool> cold, unsigned ncold, Effects& fx) {
    if (ncold > 0) {
      std::array<bool, kv::kMaxPairs> keep{};
      for (unsigned i = 0; i < kv::pairs(*p); ++i) keep[i] = cold[i];
      const unsigned left = kv::compact(*p, std::span<const bool>(keep.data(), kv::pairs(*p)));
      h_.st_.kv_to_ps += left;
      p->h.flags = static_cast<uint16_t>((p->h.flags & ~flag::kLast) | flag::kToPs);
      p->h.src = h_.id();  // the switch vouches for it; h.rank still names the worker the PS acknowledges
      p->h.dst = j.ps;
      ++h_.st_.to_ps;
      fx.send(p);
      return;
    }
    p->h.type = PktType::KvAck;
    p->h.count = 0;
    p->h.flags = static_cast<uint16_t>(p->h.flags & flag::kEcn ? flag::kEce : 0);
    p->h.dst = p->h.src;
    p->h.src = h_.id();
    fx.send(p);
  }

  // The packet's last pass: add its hot pairs, answer it, and maybe complete the iteration.
  void finish(Packet* p, const SwitchJob& j, Time now, Effects& fx) {
    State& s = state(j.job);
    const SparseTable* t = table_for(s, p->h.priority);
    const Lookup l = lookup(*t, *p);
    for (unsigned i = 0; i < l.np; ++i) {
      if (l.cold[i]) continue;
      const uint32_t x = l.idx[i];
      int32_t& v = val(s, *t->layout, x);
      if (f16_) {
        // Float16 (kv_arith = Float16Table): the field's low 16 bits (a parser
        // extracts those; the upper 16 are 0) added to the register's by the
        // table adder, one adder lane per pair of the packet.
        bool sat = false;
        v = f16_->add(static_cast<uint16_t>(v), static_cast<uint16_t>(kv::value(*p, i)), &sat);
        h_.st_.overflow += sat;
      } else {
        const int64_t sum = static_cast<int64_t>(v) + kv::value(*p, i);
        if (sum > INT32_MAX || sum < INT32_MIN) ++h_.st_.overflow;
        v = static_cast<int32_t>(static_cast<uint32_t>(sum));
      }
      ++s.cnt[x];
      ++h_.st_.kv_aggregated;
    }
    Worker& w = s.w[p->h.rank];
    ++w.done;
    if (p->h.has(flag::kLast)) w.total = kv::total(*p);
    const bool in = w.total != 0 && w.done == w.total;
    answer(p, j, l.cold_span(), l.ncold, fx);
    if (in && ++s.complete == s.w.size()) sweep(j, s, *t, now, fx);
  }

  // Every worker's hot stream is in: read the registers out, K indices per
  // pass in rank order (a pass reads each register once: indices sharing a
  // register cost passes). A pass that finds nothing updated sends nothing;
  // its time is added to the next packet's.
  void sweep(const SwitchJob& j, State& s, const SparseTable& t, Time now, Effects& fx) {
    const uint32_t iter = s.iter;
    const size_t n = t.hot->size();
    const unsigned K = h_.cfg_.zebra.kv_pairs;
    std::vector<std::pair<Packet*, uint32_t>> out;  // result, passes since the previous one
    uint32_t carry = 0;
    auto make = [&](unsigned pairs) {
      Packet* r = fx.alloc();
      r->h = Header{};
      r->h.type = PktType::KvResult;
      r->h.job = j.job;
      r->h.src = h_.id();
      r->h.nworkers = static_cast<uint8_t>(j.workers.size());
      r->h.priority = iter;
      r->h.psn = static_cast<uint32_t>(out.size());
      kv::init(*r, pairs, static_cast<uint16_t>(t.hot->version));
      return r;
    };
    for (size_t b = 0; b < n; b += K) {
      std::array<uint32_t, kv::kMaxPairs> ids{};
      unsigned m = 0, used = 0;
      for (size_t x = b; x < std::min(n, b + K); ++x) {
        ids[m++] = static_cast<uint32_t>(x);
        used += s.cnt[x] != 0;
      }
      const uint32_t ps = dp::zebra::passes(*t.layout, std::span<const uint32_t>(ids.data(), m));
      h_.st_.sweep_passes += ps;
      carry += ps;
      if (used == 0) continue;
      Packet* r = make(used);
      unsigned k = 0;
      for (unsigned q = 0; q < m; ++q) {
        const uint32_t x = ids[q];
        if (s.cnt[x] == 0) continue;
        int32_t& v = val(s, *t.layout, x);
        kv::set(*r, k++, x, v);
        v = 0;
        s.cnt[x] = 0;
      }
      out.emplace_back(r, carry);
      carry = 0;
    }
    if (out.empty()) {
      out.emplace_back(make(0), std::max<uint32_t>(carry, 1));
      h_.st_.sweep_passes += carry == 0;
    } else {
      out.back().second += carry;
    }
    out.back().first->h.flags |= flag::kLast;
    out.back().first->payload()[1] = static_cast<int32_t>(out.size());
    // The next iteration begins: its packets can only come after the workers have these results.
    ++s.iter;
    s.started = false;
    s.complete = 0;
    for (auto& w : s.w) {
      std::fill(w.seen.begin(), w.seen.end(), 0);
      w.done = w.total = 0;
    }
    // Keep the table of the previous iteration (its duplicates are answered by it) and later ones.
    while (s.tables.size() > 1 && s.tables[1].from < s.iter) s.tables.erase(s.tables.begin());
    for (auto& [r, ps] : out) queue(r, j.job, true, now, ps, fx);
  }

  void emit_result(Packet* r, const SwitchJob& j, Effects& fx) {
    ++h_.st_.kv_results;
    if (j.zebra.cpu != kNoNode) {
      Packet* c = fx.alloc();
      c->h = r->h;
      std::memcpy(c->payload(), r->payload(), 4u * r->h.count);
      c->h.dst = j.zebra.cpu;
      fx.send(c);
    }
    if (!via_ps()) return h_.replicate(r, j, fx);
    if (j.ps == kNoNode) {  // refused by add_job; a job without a PS has no receiver
      ++h_.st_.malformed;
      fx.free(r);
      return;
    }
    r->h.dst = j.ps;
    fx.send(r);
  }

  SwitchProgram& h_;  // the program this pipeline runs in (its stats, job table, pool)
  bool pool_;         // values in pinned aggregators of h_'s pool, not registers of its own
  const fp16::TableAdder* f16_ = nullptr;  // kv_arith = Float16Table
  std::unordered_map<uint16_t, State> states_;
  std::deque<Pending> pending_;  // packets on the recirculation port, in completion order
  Time recirc_free_ = 0;
};

std::unique_ptr<KvPipeline> make_kv_pipeline(SwitchProgram& host, bool in_pool) {
  return std::make_unique<ZebraPipeline>(host, in_pool);
}

namespace {

// The zebra program: the pipeline with value registers of its own.
class Zebra final : public SwitchProgram {
 public:
  Zebra(const SwitchConfig& cfg, std::string_view scheme) : SwitchProgram(cfg, scheme) {
    if (cfg.zebra.kv_pool) throw std::invalid_argument("zebra: kv_pool is for shared-pool programs; zebra has its own registers");
    kv_ = make_kv_pipeline(*this, false);
  }

 protected:
  void on_data(Packet* p, const SwitchJob&, uint32_t, Time, Effects& fx) override {
    ++st_.malformed;  // dense gradients are not Zebra's
    fx.free(p);
  }
};

}  // namespace

std::unique_ptr<SwitchProgram> make_zebra(const SwitchConfig& cfg, std::string_view scheme) {
  return std::make_unique<Zebra>(cfg, scheme);
}

// ---- the switch CPU ----

void SwitchCpu::add_job(uint16_t job, std::vector<NodeId> receivers) {
  if (jobs_.size() <= job) jobs_.resize(job + 1u);
  jobs_[job] = std::move(receivers);
}

size_t SwitchCpu::remove_job(uint16_t job, Effects& fx) {
  size_t n = 0;
  for (auto it = held_.begin(); it != held_.end();) {
    if (it->second.copy->h.job != job) {
      ++it;
      continue;
    }
    fx.free(it->second.copy);
    it = held_.erase(it);
    ++n;
  }
  if (job < jobs_.size()) jobs_[job].clear();
  return n;
}

void SwitchCpu::arm(Time at, uint64_t k, Effects& fx) {
  if (dq_.push(at, k)) fx.set_timer(at, 0);
}

void SwitchCpu::on_packet(Packet* p, Time now, Effects& fx) {
  const uint16_t job = p->h.job;
  if (job >= jobs_.size() || jobs_[job].empty() || kv::check(*p, kv::kMaxPairs) != kv::Error::None) {
    ++st_.malformed;
    fx.free(p);
    return;
  }
  const auto& workers = jobs_[job];
  const uint64_t k = key(job, p->h.priority, p->h.psn);
  if (p->h.type == PktType::KvResult && p->h.src == sw_) {
    ++st_.copies;
    auto [it, fresh] = held_.try_emplace(k);
    if (!fresh) {  // cannot happen: a result is read out once
      ++st_.malformed;
      fx.free(p);
      return;
    }
    it->second.copy = p;
    it->second.since = now;
    it->second.deadline = now + timeout();
    arm(it->second.deadline, k, fx);
    return;
  }
  if (p->h.type == PktType::KvAck && p->h.has(flag::kResult) && p->h.rank < workers.size() &&
      workers[p->h.rank] == p->h.src) {
    auto it = held_.find(k);
    if (it == held_.end()) {
      ++st_.unknown_acks;  // a duplicate ack of a copy already released
    } else {
      ++st_.acks;
      it->second.acked |= RankBits::bit(p->h.rank);
      if (it->second.acked == full_bitmap(static_cast<unsigned>(workers.size()))) {
        if (it->second.tries == 0) est_.sample(now - it->second.since);  // Karn: copies sent once only
        fx.free(it->second.copy);
        held_.erase(it);
      }
    }
    fx.free(p);
    return;
  }
  ++st_.malformed;
  fx.free(p);
}

void SwitchCpu::on_timer(uint64_t, Time now, Effects& fx) {
  const Time next = dq_.expire(
      now,
      [&](uint64_t k, Time at) {
        auto it = held_.find(k);
        if (it == held_.end() || it->second.deadline != at) return;
        Held& h = it->second;
        const auto& workers = jobs_[h.copy->h.job];
        for (unsigned r = 0; r < workers.size(); ++r) {
          if (h.acked.test(r)) continue;
          Packet* c = fx.alloc();
          c->h = h.copy->h;
          std::memcpy(c->payload(), h.copy->payload(), 4u * h.copy->h.count);
          c->h.src = id();
          c->h.dst = sw_;
          c->h.rank = static_cast<uint8_t>(r);
          fx.send(c);
          ++st_.retransmits;
        }
        ++h.tries;
        h.deadline = now + (timeout() << std::min(h.tries, 6u));
        arm(h.deadline, k, fx);
      },
      [&](uint64_t k, Time at) {
        auto it = held_.find(k);
        return it != held_.end() && it->second.deadline == at;
      });
  if (next != kNever) fx.set_timer(next, 0);
}

}  // namespace ina::dp
