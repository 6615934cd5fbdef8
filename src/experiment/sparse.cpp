#include "experiment/sparse.hpp"

#include <algorithm>
#include <cmath>
#include <fmt/format.h>
#include <memory>
#include <optional>
#include <stdexcept>
#include <unordered_map>

#include "control/zebra_hot.hpp"
#include "core/rng.hpp"
#include "host/profile.hpp"
#include "host/ps.hpp"
#include "host/tensor_io.hpp"
#include "host/worker_node.hpp"
#include "schemes/admission.hpp"
#include "schemes/registry.hpp"
#include "cluster/star.hpp"
#include "wire/kv.hpp"

namespace ina::exp {

std::vector<uint64_t> top_keys(const workload::SparseSource& src, unsigned workers, unsigned first, unsigned count,
                               size_t k, double sample_rate, uint64_t seed) {
  auto r = control::zebra::count_updates(src, first, count, sample_rate, seed, workers);
  r.keys.resize(std::min(k, r.keys.size()));
  return std::move(r.keys);
}

namespace {

using Fault = std::function<bool(NodeId, bool, const Packet&)>;

// Effects that drop what the fault selects on leaving a node, and show what leaves to `watch`.
class FaultFx final : public Effects {
 public:
  FaultFx(Effects& base, const Fault& f, NodeId node, uint64_t& n,
          const std::function<void(bool, const Packet&, Time)>* watch = nullptr, Time now = 0)
      : b_(base), f_(f), node_(node), n_(n), watch_(watch), now_(now) {}
  Packet* alloc() override { return b_.alloc(); }
  void free(Packet* p) override { b_.free(p); }
  void set_timer(Time at, uint64_t t) override { b_.set_timer(at, t); }
  bool multicast(Packet* p) override { return b_.multicast(p); }
  void send(Packet* p) override {
    if (f_ && f_(node_, true, *p)) {
      ++n_;
      b_.free(p);
      return;
    }
    if (watch_ && *watch_) (*watch_)(true, *p, now_);
    b_.send(p);
  }

 private:
  Effects& b_;
  const Fault& f_;
  NodeId node_;
  uint64_t& n_;
  const std::function<void(bool, const Packet&, Time)>* watch_;
  Time now_;
};

// Wraps a host node: drops what the fault selects on arrival and on leaving,
// and shows every packet that arrives or leaves to `watch` (if set).
using Watch = std::function<void(bool outgoing, const Packet& p, Time now)>;
template <typename Inner>
class Faulty : public Node {
 public:
  Faulty(std::unique_ptr<Inner> n, const Fault& f, uint64_t& count) : n_(std::move(n)), f_(f), count_(count) {}
  Inner& inner() { return *n_; }
  Watch watch;
  void on_start(Time now, Effects& fx) override {
    n_->set_id(id());
    FaultFx f(fx, f_, id(), count_, &watch, now);
    started(now, f);
  }
  void on_packet(Packet* p, Time now, Effects& fx) override {
    if (f_ && f_(id(), false, *p)) {
      ++count_;
      fx.free(p);
      return;
    }
    if (watch) watch(false, *p, now);
    FaultFx f(fx, f_, id(), count_, &watch, now);
    n_->on_packet(p, now, f);
  }
  void on_timer(uint64_t token, Time now, Effects& fx) override {
    FaultFx f(fx, f_, id(), count_, &watch, now);
    timer(token, now, f);
  }

 protected:
  virtual void started(Time now, Effects& fx) { n_->on_start(now, fx); }
  virtual void timer(uint64_t token, Time now, Effects& fx) { n_->on_timer(token, now, fx); }
  std::unique_ptr<Inner> n_;
  const Fault& f_;
  uint64_t& count_;
};

// Drives one SparseWorker through the iterations: begin, wait for the sums,
// check them against the exact answer, compute, begin the next.
class Driver final : public Faulty<host::SparseWorker> {
 public:
  Driver(std::unique_ptr<host::SparseWorker> w, const Fault& f, uint64_t& count) : Faulty(std::move(w), f, count) {}
  host::SparseWorker& worker() { return inner(); }
  std::function<void(Time now, Effects& fx)> start, next;
  static constexpr uint64_t kComputeDone = ~0ULL;

 private:
  void started(Time now, Effects& fx) override { start(now, fx); }
  void timer(uint64_t token, Time now, Effects& fx) override {
    if (token == kComputeDone) return next(now, fx);
    n_->on_timer(token, now, fx);
  }
};

// One worker's iteration as the dense tensor SwitchML streams: its keys'
// values, zeros elsewhere. The result is checked as it is written, against
// the exact sums of the union (zeros elsewhere): n values per worker would
// not fit in memory for the large models.
class DenseOfSparse final : public host::TensorIO {
 public:
  DenseOfSparse(std::vector<uint64_t> keys, std::vector<int32_t> vals,
                std::shared_ptr<const std::vector<std::pair<uint64_t, int32_t>>> sums, uint64_t& errors)
      : keys_(std::move(keys)), vals_(std::move(vals)), sums_(std::move(sums)), errors_(errors) {}
  void read_gradient(uint64_t off, std::span<int32_t> out) override {
    std::fill(out.begin(), out.end(), 0);
    for (auto it = std::lower_bound(keys_.begin(), keys_.end(), off); it != keys_.end() && *it < off + out.size(); ++it)
      out[*it - off] = vals_[static_cast<size_t>(it - keys_.begin())];
  }
  void write_result(uint64_t off, std::span<const int32_t> in) override {
    auto it = first(off);
    for (size_t i = 0; i < in.size(); ++i) {
      int32_t want = 0;
      if (it != sums_->end() && it->first == off + i) want = (it++)->second;
      if (in[i] != want) ++errors_;
    }
  }
  void read_result(uint64_t off, std::span<int32_t> out) override {  // the checked result (only exact ones pass)
    std::fill(out.begin(), out.end(), 0);
    for (auto it = first(off); it != sums_->end() && it->first < off + out.size(); ++it) out[it->first - off] = it->second;
  }

 private:
  std::vector<std::pair<uint64_t, int32_t>>::const_iterator first(uint64_t off) const {
    return std::lower_bound(sums_->begin(), sums_->end(), std::pair<uint64_t, int32_t>{off, INT32_MIN});
  }
  std::vector<uint64_t> keys_;
  std::vector<int32_t> vals_;
  std::shared_ptr<const std::vector<std::pair<uint64_t, int32_t>>> sums_;
  uint64_t& errors_;
};

uint64_t queue_drops(sim::Simulator& sim) {
  uint64_t n = 0;
  for (uint32_t l = 0; l < sim.link_count(); ++l) n += sim.link(l).st.drop_queue;
  return n;
}

// SwitchML on a sparse workload (the Zebra paper's baseline): every worker
// streams the whole model, zeros included, through SwitchML's isolated
// pool on the star; one allreduce per iteration, back to back. Memory: the
// transport's records of one op, n / 64 packets x 32 B per worker.
SparseRun run_dense(const SparseSettings& s, const workload::SparseSource& src, const schemes::Scheme& scheme) {
  const unsigned N = s.workers;
  const uint64_t n = src.num_params();
  if (s.arith != KvArith::Fixed)
    throw std::invalid_argument(fmt::format("sparse run {}: sums int32 fixed point only (arith {})", scheme.name,
                                            to_string(s.arith)));
  SparseRun out;
  out.scheme = scheme.name;
  const uint16_t kValues = s.dense_payload_values;
  if (kValues == 0) throw std::invalid_argument(fmt::format("sparse run {}: no values per packet", scheme.name));
  sim::Simulator sim(s.seed, kValues, 50);
  const auto plan = cluster::plan_star({static_cast<int>(N)}, false);
  dp::SwitchConfig swc;
  swc.memory_bytes = s.memory_bytes;
  swc.payload_values = kValues;
  swc.seed = s.seed;
  auto swp = scheme.make_switch(swc);
  dp::SwitchProgram& sw = *swp;
  sim.add_node(std::move(swp), true);
  const uint32_t slots = cluster::register_jobs(sw, plan, true);
  uint64_t errors = 0;
  std::vector<std::shared_ptr<const std::vector<std::pair<uint64_t, int32_t>>>> sums(s.iterations);
  std::vector<std::vector<std::vector<uint64_t>>> keys(s.iterations, std::vector<std::vector<uint64_t>>(N));
  for (unsigned i = 0; i < s.iterations; ++i) {
    const unsigned it = s.first_iteration + i;
    std::unordered_map<uint64_t, int64_t> e;
    for (unsigned w = 0; w < N; ++w) {
      keys[i][w] = src.keys(it, w);
      for (uint64_t k : keys[i][w]) e[k] += workload::sparse_value(s.seed, it, w, k);
      out.pairs += keys[i][w].size();
    }
    auto v = std::make_shared<std::vector<std::pair<uint64_t, int32_t>>>();
    for (const auto& [k, x] : e) v->emplace_back(k, static_cast<int32_t>(x));
    std::sort(v->begin(), v->end());
    out.iters.push_back({0, 0, 0, v->size()});
    for (unsigned w = 0; w < N; ++w) out.iters.back().pairs += keys[i][w].size();
    sums[i] = std::move(v);
  }
  std::vector<host::WorkerNode*> nodes;
  for (unsigned r = 0; r < N; ++r) {
    host::WorkerConfig w;
    host::profile("paper").apply(w);
    w.job = plan.jobs[0].id;
    w.rank = static_cast<uint8_t>(r);
    w.nworkers = static_cast<uint8_t>(N);
    w.self = plan.jobs[0].workers[r];
    w.aggregator = plan.sw;
    w.payload_values = kValues;
    w.init_window = std::max(1.0, s.init_window * (50.0 + 4.0 * kv::words(s.pairs)) / (50.0 + 4.0 * kValues));
    w.window_cap = slots;
    std::vector<std::shared_ptr<host::TensorIO>> ops;
    for (unsigned i = 0; i < s.iterations; ++i) {
      const unsigned it = s.first_iteration + i;
      std::vector<int32_t> vals;
      for (uint64_t k : keys[i][r]) vals.push_back(workload::sparse_value(s.seed, it, r, k));
      ops.push_back(std::make_shared<DenseOfSparse>(keys[i][r], std::move(vals), sums[i], errors));
    }
    // One op at a time: the next is submitted when the previous completes, so
    // the transport holds the records of one op (n / 64 packets), not of every iteration.
    auto node = std::make_unique<host::WorkerNode>(w);
    node->submit(ops[0], n);
    host::WorkerNode* nd = node.get();
    node->set_on_complete([nd, ops = std::move(ops), n](Time now, Effects& fx) {
      if (nd->completed() < ops.size() && !nd->transport().busy()) {
        nd->submit(ops[nd->completed()], n);
        nd->transport().pump(now, fx);
      }
    });
    nodes.push_back(node.get());
    sim.add_node(std::move(node), false);
  }
  cluster::wire_machines(sim, plan.sw, plan.jobs[0].workers, s.machines, s.link);
  sim.build_routes();
  sim.run(s.time_limit);
  for (unsigned r = 0; r < N; ++r)
    if (nodes[r]->completed() != s.iterations)
      throw std::runtime_error(fmt::format("sparse run {}: worker {} finished {} of {} allreduces of {} values within "
                                           "{} ms of simulated time",
                                           scheme.name, r, nodes[r]->completed(), s.iterations, n, to_ms(s.time_limit)));
  if (errors) throw std::runtime_error(fmt::format("sparse run {}: {} result values differ from the exact sums", scheme.name, errors));
  if (sim.packets_in_use() != 0)
    throw std::runtime_error(fmt::format("sparse run {}: {} packets leaked", scheme.name, sim.packets_in_use()));
  // SwitchML's slots keep the last round's results by design (the shadow
  // copy answers a late retransmission), so they are not a leak (as exp::run_point).
  if (!scheme.isolated && sw.occupied() != 0)
    throw std::runtime_error(fmt::format("sparse run {}: {} aggregators left in use", scheme.name, sw.occupied()));
  Time end = 0;
  for (auto* nd : nodes) {
    end = std::max(end, nd->finish_time());
    out.workers.retransmits += nd->transport().stats().retransmits;
  }
  out.sw = sw.stats();
  out.total = end;
  out.iters.back().end = end;  // back to back: the whole span, credited to the last iteration
  out.agg_throughput_gbps = end > 0 ? static_cast<double>(out.pairs) * 12 * 8 / (to_us(end) * 1e3) : 0;
  out.events = sim.events();
  out.queue_drops = queue_drops(sim);
  return out;
}

constexpr uint16_t kSparseJob = 1;
constexpr uint16_t kDenseJob = 2;       // a shared pool's dense job
constexpr uint16_t kDenseValues = 64;   // 256 B per packet and per aggregator, as the dense schemes

// The workers and the iterations must be the source's.
void check_source(const SparseSettings& s, const workload::SparseSource& src) {
  if (s.workers == 0 || s.workers > kMaxWireWorkers || s.workers > src.workers())
    throw std::invalid_argument(fmt::format("sparse run: workers {} (the source {} has {}; at most {})", s.workers,
                                            src.name(), src.workers(), kMaxWireWorkers));
  if (s.first_iteration + s.iterations > src.iterations())
    throw std::invalid_argument(fmt::format("sparse run: iterations {}..{} beyond the source's {}", s.first_iteration,
                                            s.first_iteration + s.iterations, src.iterations()));
}

// The shared pool (ours) whose program runs the sparse job beside a dense
// one, or null for the sparse scheme's own program; refuses a pool that
// cannot pin hot values, a pool under a scheme with nothing in the switch,
// and a dense job without a pool.
const schemes::Scheme* shared_pool(const SparseSettings& s, const schemes::Scheme& scheme, bool ina) {
  if (s.pool.empty()) {
    if (s.dense_workers > 0)
      throw std::invalid_argument("sparse run: a dense job beside the sparse one needs a shared pool (pool = atp or dsa)");
    return nullptr;
  }
  const schemes::Scheme* pool = &schemes::find(s.pool, schemes::Engine::SimStar);
  if (!pool->hosts_sparse) {
    std::string can;
    for (const auto& x : schemes::all())
      if (x.hosts_sparse) can += (can.empty() ? "" : ", ") + x.name;
    throw std::invalid_argument(fmt::format("sparse run: pool {} cannot hold a sparse job's hot values (pools that "
                                            "can: {})", pool->name, can));
  }
  if (!ina)
    throw std::invalid_argument(fmt::format("sparse run {}: a shared pool holds Zebra's hot keys; {} aggregates none "
                                            "in the switch", scheme.name, scheme.name));
  if (s.dense_workers > kMaxWireWorkers || (s.dense_workers > 0 && (s.dense_values == 0 || s.dense_iterations == 0)))
    throw std::invalid_argument(fmt::format("sparse run: a dense job of {} workers (1..{}) x {} values x {} "
                                            "iterations", s.dense_workers, kMaxWireWorkers, s.dense_values,
                                            s.dense_iterations));
  return pool;
}

// One sparse run on the star, built and checked in phases (run_sparse calls
// them in order). Node ids: switch 0, workers 1..N, PS N+1, the switch CPU
// N+2; with a dense job, its workers N+3.. and its PS after them. The nodes'
// callbacks point into this object, so it stays where it was built.
class SparseStar {
 public:
  SparseStar(const SparseSettings& s, const workload::SparseSource& src, const schemes::Scheme& scheme,
             const schemes::Scheme* pool)
      : s_(s), src_(src), scheme_(scheme), pool_(pool), ina_(scheme.sparse == schemes::Sparse::HotIna),
        N_(s.workers), registers_(pool ? kDenseValues : s.registers), fl_(s.arith == KvArith::Float16Table),
        kv_words_(static_cast<uint16_t>(kv::words(std::max(s.pairs, s.ps_pairs)))),
        sim_(s.seed, pool ? std::max(kv_words_, kDenseValues) : kv_words_) {
    out_.scheme = scheme.name;
  }
  SparseStar(const SparseStar&) = delete;
  SparseStar& operator=(const SparseStar&) = delete;

  // Zebra's hot set (the top keys of the profiled iterations, or Principle
  // 1's size) and its layout over the registers, then one table per hot-set
  // update: what the workers classify each iteration's keys by, and the
  // lists they submit to the switch's agreement (wire_and_admit).
  void rank_hot_keys() {
    if (!ina_) return;
    const unsigned pf = s_.profile_iterations ? s_.profile_first : s_.first_iteration;
    const unsigned pn = s_.profile_iterations ? s_.profile_iterations : s_.iterations;
    auto ranking = control::zebra::count_updates(src_, pf, pn, s_.sample_rate, s_.seed, N_);
    size_t k = s_.hot_keys;
    if (s_.principle_p > 0) {
      const auto pk = control::zebra::principle1(ranking, s_.principle_p, s_.principle_c, s_.memory_bytes);
      if (!pk)
        throw std::invalid_argument(fmt::format(
            "sparse run: Principle 1 cannot reach p = {} within c = {} of {} B (4 B per key) on {}", s_.principle_p,
            s_.principle_c, s_.memory_bytes, src_.name()));
      k = *pk;
    }
    std::vector<uint64_t> ranked(ranking.keys.begin(),
                                 ranking.keys.begin() + static_cast<std::ptrdiff_t>(std::min(k, ranking.keys.size())));
    auto hot = std::make_shared<const dp::zebra::HotSet>(dp::zebra::HotSet::from_ranked(std::move(ranked), 1));
    auto layout = std::make_shared<const dp::zebra::Layout>(
        dp::zebra::Layout::make(hot->size(), registers_, s_.placement, s_.seed));
    out_.hot_keys = hot->size();
    worker_tables_.push_back({s_.first_iteration, hot, layout});
    switch_tables_.push_back(worker_tables_.back());
    uint32_t version = 1;
    for (const auto& u : s_.updates) {
      auto h = std::make_shared<const dp::zebra::HotSet>(dp::zebra::HotSet::from_ranked(
          top_keys(src_, N_, u.profile_first, u.profile_iterations, s_.hot_keys, s_.sample_rate, s_.seed), ++version));
      auto l = std::make_shared<const dp::zebra::Layout>(
          dp::zebra::Layout::make(h->size(), registers_, s_.placement, s_.seed + version));
      if (u.workers) worker_tables_.push_back({u.from, h, l});
      if (u.sw) switch_tables_.push_back({u.from, h, l});
    }
  }

  // The switch program (Zebra's own, or the shared pool's with the hot
  // values pinned in its aggregators) and the sparse hosts' common config.
  void build_switch() {
    dp::SwitchConfig sc;
    sc.memory_bytes = s_.memory_bytes;
    sc.zebra.kv_pairs = static_cast<uint16_t>(s_.pairs);
    sc.zebra.kv_table_entries = s_.table_entries;
    sc.zebra.kv_arith = s_.arith;
    sc.zebra.hot_results = s_.hot_results;
    sc.seed = s_.seed;
    if (pool_) {
      sc.payload_values = kDenseValues;
      sc.zebra.kv_pool = true;
    }
    auto swp = pool_ ? pool_->make_switch(sc) : scheme_.make_switch(sc);
    sw_ = swp.get();
    sim_.add_node(std::move(swp), true);
    hc_.job = kSparseJob;
    for (unsigned r = 0; r < N_; ++r) hc_.workers.push_back(static_cast<NodeId>(1 + r));
    hc_.ps = static_cast<NodeId>(N_ + 1);
    hc_.sw = ina_ ? NodeId{0} : kNoNode;
    hc_.pairs = s_.pairs;
    hc_.ps_pairs = s_.ps_pairs;
    hc_.ack_every = s_.ack_every;
    hc_.layout_aware = s_.layout_aware;
    hc_.init_window = s_.init_window;
    hc_.first_iteration = s_.first_iteration;
    hc_.arith = s_.arith;
    hc_.hot_results = s_.hot_results;
  }

  // Each worker's pushes per iteration and the exact sums of their union
  // (float64 sums and magnitudes for Float16Table), against which every
  // result is checked as it arrives; and how many pushed pairs and union
  // keys the workers' table of that iteration holds hot.
  void expected_sums() {
    push_.assign(s_.iterations, std::vector<Push>(N_));
    expect_.resize(s_.iterations);
    fexpect_.resize(fl_ ? s_.iterations : 0);
    for (unsigned i = 0; i < s_.iterations; ++i) {
      const unsigned it = s_.first_iteration + i;
      for (unsigned w = 0; w < N_; ++w) {
        Push& p = push_[i][w];
        p.keys = src_.keys(it, w);
        p.vals.resize(p.keys.size());
        for (size_t q = 0; q < p.keys.size(); ++q) {
          if (fl_) {
            const float g = workload::sparse_gradient(s_.seed, it, w, p.keys[q], s_.grad_sigma);
            p.vals[q] = fp16::bits_of_f32(g);
            FloatSum& e = fexpect_[i][p.keys[q]];
            e.sum += g;
            e.abs += std::fabs(g);
            ++e.n;
            continue;
          }
          p.vals[q] = workload::sparse_value(s_.seed, it, w, p.keys[q]);
          expect_[i][p.keys[q]] += p.vals[q];
        }
        out_.pairs += p.keys.size();
      }
      out_.iters.push_back({0, 0, 0, fl_ ? fexpect_[i].size() : expect_[i].size()});
      for (unsigned w = 0; w < N_; ++w) out_.iters.back().pairs += push_[i][w].keys.size();
    }
    if (ina_) {
      for (unsigned i = 0; i < s_.iterations; ++i) {
        const dp::zebra::Table* t = nullptr;
        for (const auto& x : worker_tables_)
          if (x.from <= s_.first_iteration + i && (!t || x.from >= t->from)) t = &x;
        for (unsigned w = 0; w < N_; ++w)
          for (uint64_t k : push_[i][w].keys) out_.hot_pairs += t->hot->contains(k);
        auto hot_in = [&](const auto& m) {
          for (const auto& kv : m) out_.hot_union_keys += t->hot->contains(kv.first);
        };
        if (fl_) hot_in(fexpect_[i]);
        else hot_in(expect_[i]);
      }
    }
    out_.cold_pairs = out_.pairs - out_.hot_pairs;
  }

  // The sparse workers (nodes 1..N), each driven through the iterations:
  // begin, check the sums against expected_sums as they arrive, compute,
  // begin the next.
  void add_workers() {
    done_iters_.assign(N_, 0);
    started_.assign(s_.iterations, false);
    for (unsigned r = 0; r < N_; ++r) {
      auto w = std::make_unique<host::SparseWorker>(hc_, static_cast<uint8_t>(r));
      for (const auto& t : worker_tables_) w->set_table(t);
      auto d = std::make_unique<Driver>(std::move(w), s_.fault, out_.faults);
      Driver* dp = d.get();
      drivers_.push_back(dp);
      auto begin = [this, dp, r](unsigned i, Time now, Effects& fx) {
        if (!started_[i] || now < out_.iters[i].start) out_.iters[i].start = now;
        started_[i] = true;
        dp->worker().begin(s_.first_iteration + i, push_[i][r].keys, push_[i][r].vals, now, fx);
      };
      dp->start = [begin](Time now, Effects& fx) { begin(0, now, fx); };
      dp->next = [this, begin, r](Time now, Effects& fx) { begin(done_iters_[r], now, fx); };
      dp->worker().set_done([this, dp, r](uint32_t iter, std::span<const uint64_t> keys,
                                          std::span<const int32_t> sums, Time now, Effects& fx) {
        const unsigned i = iter - s_.first_iteration;
        if (fl_ && error_.empty()) check_float(r, iter, keys, sums);
        if (!fl_ && error_.empty()) check_exact(r, iter, keys, sums);
        out_.iters[i].end = std::max(out_.iters[i].end, now);
        done_iters_[r] = i + 1;
        if (i + 1 < s_.iterations) {
          if (s_.compute > 0) fx.set_timer(now + s_.compute, Driver::kComputeDone);
          else dp->next(now, fx);
        }
      });
      sim_.add_node(std::move(d), false);
    }
  }

  // The sparse job's PS (node N+1), watched at its NIC for the phases of
  // each iteration (SparseIteration::ps_*).
  void add_ps() {
    auto psn = std::make_unique<Faulty<host::SparsePs>>(std::make_unique<host::SparsePs>(hc_), s_.fault, out_.faults);
    ps_ = &psn->inner();
    for (const auto& t : switch_tables_) ps_->set_table(t);
    closed_.assign(s_.iterations, 0);
    psn->watch = [this](bool outgoing, const Packet& p, Time now) {
      if (p.h.priority < s_.first_iteration || p.h.priority >= s_.first_iteration + s_.iterations) return;
      SparseIteration& it = out_.iters[p.h.priority - s_.first_iteration];
      const uint64_t bytes = sim_.wire_bytes(p);
      if (outgoing) {
        it.ps_out_bytes += bytes;
        if (p.h.type == PktType::KvResult && it.ps_first_out == 0) it.ps_first_out = now;
        return;
      }
      it.ps_in_bytes += bytes;
      if (p.h.type == PktType::KvAck) it.ps_in_ack_bytes += bytes;
      if (p.h.type == PktType::KvResult) {
        it.ps_in_hot_bytes += bytes;
        if (it.ps_first_out == 0) it.ps_hot_in = std::max(it.ps_hot_in, now);
      }
      if (p.h.type != PktType::KvData) return;
      if (kv::pairs(p) > 0 && it.ps_all_in == 0) it.ps_last_data = std::max(it.ps_last_data, now);
      if (p.h.rank >= N_) return;
      const uint64_t bit = 1ULL << p.h.rank;  // sparse jobs: at most kMaxWireWorkers (64)
      uint64_t& closed = closed_[p.h.priority - s_.first_iteration];
      if (p.h.has(flag::kLast) && !(closed & bit) && (closed |= bit) == full_bitmap(N_)) it.ps_all_in = now;
    };
    sim_.add_node(std::move(psn), false);
  }

  // Zebra's switch CPU (node N+2): it keeps a copy of each hot result until
  // its receivers (the PS, or every worker) have acknowledged it, and
  // retransmits it to those that have not.
  void add_switch_cpu() {
    if (!ina_) return;
    auto c = std::make_unique<dp::SwitchCpu>(NodeId{0}, s_.cpu_rto);
    c->add_job(kSparseJob, s_.hot_results == kv::HotRoute::ViaPs ? std::vector<NodeId>{hc_.ps} : hc_.workers);
    cpu_ = c.get();
    sim_.add_node(std::move(c), false);
  }

  // The dense job beside the sparse one (a shared pool only): its workers
  // stream SyntheticTensor allreduces back to back, checked as they arrive,
  // through the pool's program to their own PS.
  void add_dense_job() {
    const unsigned D = s_.dense_workers;
    dense_ps_id_ = static_cast<NodeId>(N_ + 3 + D);
    for (unsigned r = 0; r < D; ++r) {
      host::WorkerConfig w;
      host::profile("paper").apply(w);
      w.job = kDenseJob;
      w.rank = static_cast<uint8_t>(r);
      w.nworkers = static_cast<uint8_t>(D);
      w.self = static_cast<NodeId>(N_ + 3 + r);
      w.aggregator = 0;
      w.ps = dense_ps_id_;
      w.payload_values = kDenseValues;
      w.init_window = std::max(1.0, s_.init_window * (50.0 + 4.0 * kv_words_) / (50.0 + 4.0 * kDenseValues));
      auto node = std::make_unique<host::WorkerNode>(w);
      auto io = std::make_shared<host::SyntheticTensor>(mix(s_.seed, 0xde05e), r, D);
      dense_io_.push_back(io);
      node->submit(io, s_.dense_values);
      host::WorkerNode* nd = node.get();
      node->set_on_complete([nd, io, n = s_.dense_values, total = s_.dense_iterations](Time now, Effects& fx) {
        if (nd->completed() < total && !nd->transport().busy()) {
          nd->submit(io, n);
          nd->transport().pump(now, fx);
        }
      });
      dense_.push_back(nd);
      dense_ids_.push_back(w.self);
      if (sim_.add_node(std::move(node), false) != w.self) throw std::logic_error("sparse run: dense worker id");
    }
    if (D > 0) {
      host::PsConfig pc;
      host::profile("paper").apply(pc);
      pc.job = kDenseJob;
      pc.workers = dense_ids_;
      pc.sw = 0;
      pc.payload_values = kDenseValues;
      auto node = std::make_unique<host::ParameterServer>(pc);
      dense_ps_ = node.get();
      if (sim_.add_node(std::move(node), false) != dense_ps_id_) throw std::logic_error("sparse run: dense PS id");
    }
  }

  // Every host's link to the switch (the CPU's: no faults, the paper's
  // latency), the routes and multicast groups, and both jobs admitted to the
  // switch's one memory (a pool, or Zebra's hot slots: no region, no window
  // cap), and the sparse job's hot-set tables agreed among its workers and installed.
  void wire_and_admit() {
    const unsigned D = s_.dense_workers;
    cluster::wire_machines(sim_, 0, hc_.workers, s_.machines, s_.link);
    sim_.connect(hc_.ps, 0, s_.link, s_.link);
    if (ina_) {
      sim::LinkParams cl;
      cl.delay = s_.cpu_delay;
      cl.queue_bytes = 64ull << 20;
      cl.ecn_bytes = 0;
      sim_.connect(cpu_id(), 0, cl, cl);
    }
    for (NodeId h : dense_ids_) sim_.connect(h, 0, s_.link, s_.link);
    if (D > 0) sim_.connect(dense_ps_id_, 0, s_.link, s_.link);
    sim_.build_routes();
    sim_.set_multicast_group(kSparseJob, hc_.workers);
    auto cfg = schemes::Admission::config_of(pool_ ? *pool_ : scheme_, sw_->aggregators(), 1);
    cfg.hot_sets = ina_;  // Zebra's registers, or a shared pool's pinned aggregators, hold the hot-set table
    schemes::Admission admission(cfg);
    auto admit = [&](uint16_t job, const std::vector<NodeId>& workers, NodeId ps) {
      auto answer = admission.admit({job, workers, ps, std::nullopt});
      if (auto* no = std::get_if<schemes::Admission::Refusal>(&answer))
        throw std::invalid_argument(fmt::format("sparse run {}: {}", scheme_.name, no->reason));
      return std::get<schemes::Admission::Grant>(answer).switch_job();
    };
    if (D > 0) {
      sim_.set_multicast_group(kDenseJob, dense_ids_);
      sw_->add_job(admit(kDenseJob, dense_ids_, dense_ps_id_));
    }
    dp::SwitchJob j = admit(kSparseJob, hc_.workers, hc_.ps);
    j.zebra.cpu = ina_ ? cpu_id() : kNoNode;
    sw_->add_job(j);
    for (const auto& t : switch_tables_) agree_and_install(admission, t);
  }

  // One hot-set round at the switch: every worker submits the list the
  // control plane gave it, in the runtime's chunks, to the switch's
  // admission; the agreed keys, from-iteration and version become the
  // switch's table (with the control plane's layout). A refused chunk or
  // lists that differ fail the run with the admission's reason.
  void agree_and_install(schemes::Admission& admission, const dp::zebra::Table& t) {
    constexpr size_t kChunk = schemes::Admission::kHotChunkKeys;
    using A = schemes::Admission;
    auto fail = [&](const std::string& why) {
      throw std::invalid_argument(fmt::format("sparse run {}: {}", scheme_.name, why));
    };
    std::optional<A::HotAgreed> agreed;
    for (unsigned r = 0; r < N_; ++r) {
      std::vector<uint64_t> own;
      if (s_.hot_list) {
        own = t.hot->keys;
        s_.hot_list(r, own);
      }
      const std::vector<uint64_t>& list = s_.hot_list ? own : t.hot->keys;
      size_t off = 0;
      do {
        const size_t n = std::min(kChunk, list.size() - off);
        A::HotChunk c{t.from, list.size(), off, {}};
        c.keys.assign(list.begin() + static_cast<std::ptrdiff_t>(off), list.begin() + static_cast<std::ptrdiff_t>(off + n));
        off += n;
        A::HotAnswer a = admission.hot_set(kSparseJob, r, c);
        if (auto* no = std::get_if<A::Refusal>(&a)) fail(no->reason);
        if (auto* d = std::get_if<A::HotDisagreed>(&a)) fail(d->reason);
        if (auto* ok = std::get_if<A::HotAgreed>(&a)) agreed = std::move(*ok);
      } while (off < list.size());
    }
    if (!agreed) throw std::logic_error("sparse run: the hot-set round ended without an answer");
    if (agreed->keys.size() != t.layout->reg_of.size())
      fail(fmt::format("the workers agree on {} hot keys, the control plane's layout places {}", agreed->keys.size(),
                       t.layout->reg_of.size()));
    // The control plane numbers every hot set, the ones only the workers
    // take too; the switch's agreement numbers the tables it installed. They
    // match unless a workers-only update came before this one.
    if (agreed->version != t.hot->version)
      fail(fmt::format("the switch agrees on hot-set version {} from iteration {}, the workers number it {} (an "
                       "earlier update reached the workers only)", agreed->version, agreed->from, t.hot->version));
    dp::zebra::Table installed{agreed->from,
                               std::make_shared<const dp::zebra::HotSet>(
                                   dp::zebra::HotSet::from_ranked(std::move(agreed->keys), agreed->version)),
                               t.layout};
    sw_->set_sparse_table(kSparseJob, installed);
    admission.installed(kSparseJob, agreed->version);
  }

  // Runs to the time limit; a run still going then fails, saying where each
  // unfinished worker, the PS and the switch are.
  void run() {
    sim_.run(s_.time_limit);
    if (sim_.idle()) return;
    std::string where;
    for (unsigned r = 0; r < N_; ++r)
      if (done_iters_[r] != s_.iterations) where += fmt::format("; worker {}: {}", r, drivers_[r]->worker().describe());
    const auto& pst = ps_->stats();
    const auto& sws = sw_->stats();
    throw std::runtime_error(fmt::format("sparse run {}: not finished after {} ms of simulated time{}; PS at {} "
                                         "(data {} duplicates {} stale {} malformed {} foreign {} unknown hot-set version {}); "
                                         "switch malformed {} foreign {} stale {}",
                                         scheme_.name, to_ms(s_.time_limit), where, ps_->describe(), pst.data,
                                         pst.duplicates, pst.stale, pst.malformed, pst.foreign, pst.unknown_version,
                                         sws.malformed, sws.foreign(), sws.stale));
  }

  // The invariants of a finished run (every result right, every worker
  // done, nothing left in the pool, the switch, its CPU or a PS, no honest
  // packet refused) and the metrics of SparseRun; throws on the first that fails.
  SparseRun check_and_collect() {
    const std::string& name = scheme_.name;
    if (!error_.empty()) throw std::runtime_error("sparse run " + name + ": " + error_);
    for (unsigned r = 0; r < N_; ++r)
      if (done_iters_[r] != s_.iterations)
        throw std::runtime_error(fmt::format("sparse run {}: worker {} finished {} of {} iterations ({})", name, r,
                                             done_iters_[r], s_.iterations, drivers_[r]->worker().describe()));
    if (sim_.packets_in_use() != 0)
      throw std::runtime_error(fmt::format("sparse run {}: {} packets leaked", name, sim_.packets_in_use()));
    check_switch_memory();
    check_dense_job();
    if (cpu_ && cpu_->held() != 0)
      throw std::runtime_error(fmt::format("sparse run {}: the switch CPU still holds {} results", name, cpu_->held()));
    if (ps_->held() != 0)
      throw std::runtime_error(fmt::format("sparse run {}: the PS still holds {} unacknowledged results", name,
                                           ps_->held()));
    out_.sw = sw_->stats();
    if (cpu_) out_.cpu = cpu_->stats();
    out_.ps = ps_->stats();
    if (out_.sw.malformed || out_.ps.malformed || out_.sw.foreign() || out_.ps.foreign)
      throw std::runtime_error(fmt::format("sparse run {}: honest packets refused (switch malformed {} foreign {}, "
                                           "PS malformed {} foreign {})",
                                           name, out_.sw.malformed, out_.sw.foreign(), out_.ps.malformed,
                                           out_.ps.foreign));
    for (Driver* d : drivers_) {
      const auto& w = d->worker().stats();
      out_.workers.sent += w.sent;
      out_.workers.retransmits += w.retransmits;
      out_.workers.hot_packets += w.hot_packets;
      out_.workers.cold_packets += w.cold_packets;
      out_.workers.hot_pairs += w.hot_pairs;
      out_.workers.cold_pairs += w.cold_pairs;
      out_.workers.results += w.results;
      out_.workers.malformed += w.malformed;
      out_.workers.foreign += w.foreign;
      out_.workers.decreases += w.decreases;
    }
    // Iterations may overlap (a fast worker starts the next one while a slow
    // one finishes), so the span is the first push to the last result, as in run_dense.
    out_.total = out_.iters.back().end - out_.iters.front().start;
    out_.agg_throughput_gbps =
        out_.total > 0 ? static_cast<double>(out_.pairs) * 12 * 8 / (to_us(out_.total) * 1e3) : 0;
    out_.hot_share = out_.pairs ? static_cast<double>(out_.hot_pairs) / static_cast<double>(out_.pairs) : 0;
    out_.recirc_per_packet =
        out_.sw.kv_in ? static_cast<double>(out_.sw.recirculations) / static_cast<double>(out_.sw.kv_in) : 0;
    out_.events = sim_.events();
    out_.queue_drops = queue_drops(sim_);
    if (fl_) {
      ValueError& ve = out_.value_error;
      ve.mean_rel = nrel_ ? sum_rel_ / static_cast<double>(nrel_) : 0;
      ve.vec_rel = sq_exact_ > 0 ? std::sqrt(sq_err_ / sq_exact_) : 0;
    }
    return std::move(out_);
  }

 private:
  struct Push {
    std::vector<uint64_t> keys;
    std::vector<int32_t> vals;
  };
  struct FloatSum {
    double sum = 0, abs = 0;
    unsigned n = 0;
  };

  NodeId cpu_id() const { return static_cast<NodeId>(N_ + 2); }

  // Fixed point: the result holds exactly the union's keys, each with its exact sum.
  void check_exact(unsigned r, uint32_t iter, std::span<const uint64_t> keys, std::span<const int32_t> sums) {
    const auto& e = expect_[iter - s_.first_iteration];
    if (keys.size() != e.size())
      error_ = fmt::format("worker {} iteration {}: {} keys in the result, {} in the union", r, iter, keys.size(),
                           e.size());
    for (size_t q = 0; q < keys.size() && error_.empty(); ++q) {
      auto it = e.find(keys[q]);
      if (it == e.end() || static_cast<int32_t>(it->second) != sums[q])
        error_ = fmt::format("worker {} iteration {}: key {} sum {} expected {}", r, iter, keys[q], sums[q],
                             it == e.end() ? std::string("(not pushed)") : std::to_string(it->second));
    }
  }

  // Float16Table: each sum within the table adder's bound of its exact
  // float64 sum (not equal), and the error statistics of ValueError.
  void check_float(unsigned r, uint32_t iter, std::span<const uint64_t> keys, std::span<const int32_t> sums) {
    const fp16::TableAdder& adder = fp16::switch_adder();
    ValueError& ve = out_.value_error;
    const auto& e = fexpect_[iter - s_.first_iteration];
    if (keys.size() != e.size())
      error_ = fmt::format("worker {} iteration {}: {} keys in the result, {} in the union", r, iter, keys.size(),
                           e.size());
    for (size_t q = 0; q < keys.size() && error_.empty(); ++q) {
      auto it = e.find(keys[q]);
      const double got = fp16::f32_of_bits(sums[q]);
      if (it == e.end()) {
        error_ = fmt::format("worker {} iteration {}: key {} sum {} (not pushed)", r, iter, keys[q], got);
        break;
      }
      const FloatSum& x = it->second;
      const double err = std::fabs(got - x.sum), bound = adder.sum_bound(x.n, x.abs);
      if (!(err <= bound))  // NaN fails too
        error_ = fmt::format("worker {} iteration {}: key {} float sum {} expected {} (error {} beyond the bound {} of "
                             "{} terms (float16 table sums) of total magnitude {})",
                             r, iter, keys[q], got, x.sum, err, bound, x.n, x.abs);
      ++ve.values;
      sq_err_ += err * err;
      sq_exact_ += x.sum * x.sum;
      ve.max_scaled = std::max(ve.max_scaled, x.abs > 0 ? err / x.abs : 0);
      ve.max_over_bound = std::max(ve.max_over_bound, err / bound);
      if (x.sum != 0) {
        const double rel = err / std::fabs(x.sum);
        ve.max_rel = std::max(ve.max_rel, rel);
        sum_rel_ += rel;
        ++nrel_;
      }
    }
  }

  // A pool's pinned aggregators are the table's reservation, not state left
  // over: nothing else may be in use, and removing the job frees them. The
  // dense job in a shared pool may be left holding aggregators that a late
  // copy (a duplicated or reordered first transmission arriving after its
  // task's result) reserved, as every star with such faults
  // (tests/cluster_fixture.hpp); removing the job must free exactly those.
  void check_switch_memory() {
    const std::string& name = scheme_.name;
    dp::SwitchProgram& sw = *sw_;
    out_.pinned = sw.pinned();
    out_.pool_aggregators = pool_ ? sw.aggregators() : 0;
    const bool late_copies = s_.link.dup > 0 || s_.link.reorder > 0;
    const size_t dense_left = s_.dense_workers > 0 ? sw.occupied_by(kDenseJob) : 0;
    if (dense_left > 0 && !late_copies)
      throw std::runtime_error(fmt::format("sparse run {}: the dense job still holds {} aggregators of the {} pool",
                                           name, dense_left, pool_->name));
    if (sw.occupied() != out_.pinned + dense_left)
      throw std::runtime_error(fmt::format("sparse run {}: {} registers left in use", name,
                                           sw.occupied() - out_.pinned - dense_left));
    if (!pool_) return;
    const size_t rows = (out_.hot_keys + kDenseValues - 1) / kDenseValues;
    if (out_.pinned < rows)
      throw std::runtime_error(fmt::format("sparse run {}: {} aggregators pinned for {} hot keys ({} needed)", name,
                                           out_.pinned, out_.hot_keys, rows));
    if (sw.remove_job(kSparseJob) != out_.pinned ||
        (s_.dense_workers > 0 && sw.remove_job(kDenseJob) != dense_left) || sw.occupied() != 0)
      throw std::runtime_error(fmt::format("sparse run {}: {} aggregators in use after both jobs left the {} pool",
                                           name, sw.occupied(), pool_->name));
    out_.dense.late_aggregators = dense_left;
  }

  // The dense job: every allreduce done and exact, its PS empty, and its
  // finish time, goodput and counters in SparseRun::dense.
  void check_dense_job() {
    const unsigned D = s_.dense_workers;
    if (D == 0) return;
    const std::string& name = scheme_.name;
    for (unsigned r = 0; r < D; ++r) {
      if (dense_[r]->completed() != s_.dense_iterations)
        throw std::runtime_error(fmt::format("sparse run {}: dense worker {} finished {} of {} allreduces", name, r,
                                             dense_[r]->completed(), s_.dense_iterations));
      if (dense_io_[r]->mismatches() != 0)
        throw std::runtime_error(fmt::format("sparse run {}: dense worker {}: {} result values differ from the exact "
                                             "sums", name, r, dense_io_[r]->mismatches()));
      out_.dense.finish = std::max(out_.dense.finish, dense_[r]->finish_time());
      out_.dense.verified += dense_io_[r]->checked();
      out_.dense.retransmits += dense_[r]->transport().stats().retransmits;
      if (dense_[r]->transport().stats().malformed || dense_[r]->transport().stats().foreign)
        throw std::runtime_error(fmt::format("sparse run {}: dense worker {} refused honest packets", name, r));
    }
    const uint64_t want = static_cast<uint64_t>(D) * s_.dense_values * s_.dense_iterations;
    if (out_.dense.verified != want)
      throw std::runtime_error(fmt::format("sparse run {}: {} dense result values checked, {} expected", name,
                                           out_.dense.verified, want));
    if (dense_ps_->entries() != 0 || dense_ps_->stats().malformed || dense_ps_->stats().foreign)
      throw std::runtime_error(fmt::format("sparse run {}: dense PS: {} entries left, malformed {} foreign {}", name,
                                           dense_ps_->entries(), dense_ps_->stats().malformed,
                                           dense_ps_->stats().foreign));
    out_.dense.ps_completions = dense_ps_->stats().completions;
    out_.dense.goodput_gbps =
        static_cast<double>(s_.dense_values) * 4 * 8 * s_.dense_iterations / (to_us(out_.dense.finish) * 1e3);
  }

  const SparseSettings& s_;
  const workload::SparseSource& src_;
  const schemes::Scheme& scheme_;
  const schemes::Scheme* pool_;   // a shared pool's scheme, or null
  const bool ina_;                // hot keys aggregate in the switch (Zebra)
  const unsigned N_;              // the sparse job's workers
  const uint32_t registers_;      // the layout's registers (in a pool: an aggregator's value lanes)
  const bool fl_;                 // Float16Table values
  const uint16_t kv_words_;       // a sparse packet's payload words
  sim::Simulator sim_;
  SparseRun out_;
  // The tables the workers classify by, and the control plane's lists for
  // the switch's hot-set rounds (each agreed among the workers, then installed).
  std::vector<dp::zebra::Table> worker_tables_, switch_tables_;
  dp::SwitchProgram* sw_ = nullptr;
  host::SparseConfig hc_;
  // expected_sums
  std::vector<std::vector<Push>> push_;
  std::vector<std::unordered_map<uint64_t, int64_t>> expect_;
  std::vector<std::unordered_map<uint64_t, FloatSum>> fexpect_;  // Float16Table only
  // add_workers and the results' checks
  std::vector<Driver*> drivers_;
  std::vector<unsigned> done_iters_;
  std::vector<bool> started_;
  std::string error_;             // the first wrong result
  double sq_err_ = 0, sq_exact_ = 0, sum_rel_ = 0;
  uint64_t nrel_ = 0;
  // add_ps, add_switch_cpu
  host::SparsePs* ps_ = nullptr;
  std::vector<uint64_t> closed_;  // per iteration: ranks whose closing cold packet is in
  dp::SwitchCpu* cpu_ = nullptr;
  // add_dense_job
  std::vector<host::WorkerNode*> dense_;
  std::vector<std::shared_ptr<host::SyntheticTensor>> dense_io_;
  std::vector<NodeId> dense_ids_;
  NodeId dense_ps_id_ = kNoNode;
  host::ParameterServer* dense_ps_ = nullptr;
};

}  // namespace

SparseRun run_sparse(const SparseSettings& s, const workload::SparseSource& src) {
  const schemes::Scheme& scheme = schemes::find(s.scheme, schemes::Engine::SimSparse);
  check_source(s, src);
  if (scheme.sparse == schemes::Sparse::Dense) {
    if (!s.pool.empty() || s.dense_workers > 0)
      throw std::invalid_argument(fmt::format("sparse run {}: streams the dense model through its own program; a shared "
                                              "pool and a dense job beside it are for zebra", scheme.name));
    return run_dense(s, src, scheme);
  }
  const schemes::Scheme* pool = shared_pool(s, scheme, scheme.sparse == schemes::Sparse::HotIna);
  SparseStar star(s, src, scheme, pool);
  star.rank_hot_keys();
  star.build_switch();
  star.expected_sums();
  star.add_workers();
  star.add_ps();
  star.add_switch_cpu();
  star.add_dense_job();
  star.wire_and_admit();
  star.run();
  return star.check_and_collect();
}

}  // namespace ina::exp
