#include "experiment/sparse.hpp"

#include <algorithm>
#include <cmath>
#include <fmt/format.h>
#include <memory>
#include <stdexcept>
#include <unordered_map>

#include "control/zebra_hot.hpp"
#include "core/rng.hpp"
#include "host/profile.hpp"
#include "host/ps.hpp"
#include "host/tensor_io.hpp"
#include "host/worker_node.hpp"
#include "schemes/registry.hpp"
#include "sim/star.hpp"
#include "wire/kv.hpp"

namespace ina::exp {

std::vector<uint64_t> top_keys(const workload::SparseSource& src, unsigned workers, unsigned first, unsigned count,
                               size_t k, double sample_rate, uint64_t seed) {
  auto r = control::zebra::count_updates(src, first, count, sample_rate, seed, workers);
  r.keys.resize(std::min(k, r.keys.size()));
  return std::move(r.keys);
}

namespace {

// Drives one SparseWorker through the iterations: begin, wait for the sums,
// check them against the exact answer, compute, begin the next.
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

}  // namespace

namespace {

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
  constexpr uint16_t kValues = 64;  // 256 B of values per packet, as the dense schemes
  sim::Simulator sim(s.seed, kValues, 50);
  const auto plan = sim::plan_star({static_cast<int>(N)}, false);
  dp::SwitchConfig swc;
  swc.memory_bytes = s.memory_bytes;
  swc.payload_values = kValues;
  swc.seed = s.seed;
  auto swp = scheme.make_switch(swc);
  dp::SwitchProgram& sw = *swp;
  sim.add_node(std::move(swp), true);
  const uint32_t slots = sim::register_jobs(sw, plan, true);
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
  sim::wire_star(sim, plan, s.link, s.link);
  sim.run(s.time_limit);
  for (unsigned r = 0; r < N; ++r)
    if (nodes[r]->completed() != s.iterations)
      throw std::runtime_error(fmt::format("sparse run {}: worker {} finished {} of {} allreduces of {} values within "
                                           "{} ms of simulated time",
                                           scheme.name, r, nodes[r]->completed(), s.iterations, n, to_ms(s.time_limit)));
  if (errors) throw std::runtime_error(fmt::format("sparse run {}: {} result values differ from the exact sums", scheme.name, errors));
  if (sim.pool().in_use() != 0)
    throw std::runtime_error(fmt::format("sparse run {}: {} packets leaked", scheme.name, sim.pool().in_use()));
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
  return out;
}

}  // namespace

SparseRun run_sparse(const SparseSettings& s, const workload::SparseSource& src) {
  const schemes::Scheme& scheme = schemes::find(s.scheme, schemes::Engine::SimSparse);
  if (s.workers == 0 || s.workers > kMaxWireWorkers || s.workers > src.workers())
    throw std::invalid_argument(fmt::format("sparse run: workers {} (the source {} has {}; at most {})", s.workers,
                                            src.name(), src.workers(), kMaxWireWorkers));
  if (s.first_iteration + s.iterations > src.iterations())
    throw std::invalid_argument(fmt::format("sparse run: iterations {}..{} beyond the source's {}", s.first_iteration,
                                            s.first_iteration + s.iterations, src.iterations()));
  if (scheme.sparse == schemes::Sparse::Dense) {
    if (!s.pool.empty() || s.dense_workers > 0)
      throw std::invalid_argument(fmt::format("sparse run {}: streams the dense model through its own program; a shared "
                                              "pool and a dense job beside it are for zebra", scheme.name));
    return run_dense(s, src, scheme);
  }
  const bool ina = scheme.sparse == schemes::Sparse::HotIna;
  const unsigned N = s.workers;
  if (N == 0 || N > kMaxWireWorkers || N > src.workers())
    throw std::invalid_argument(fmt::format("sparse run: workers {} (the source {} has {}; at most {})", N,
                                            src.name(), src.workers(), kMaxWireWorkers));
  if (s.first_iteration + s.iterations > src.iterations())
    throw std::invalid_argument(fmt::format("sparse run: iterations {}..{} beyond the source's {}", s.first_iteration,
                                            s.first_iteration + s.iterations, src.iterations()));
  SparseRun out;
  out.scheme = scheme.name;
  // A shared pool (ours): a pool program runs the sparse job beside a dense one.
  constexpr uint16_t kDenseValues = 64;  // 256 B per packet and per aggregator, as the dense schemes
  const schemes::Scheme* pool = nullptr;
  if (!s.pool.empty()) {
    pool = &schemes::find(s.pool, schemes::Engine::SimStar);
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
  } else if (s.dense_workers > 0) {
    throw std::invalid_argument("sparse run: a dense job beside the sparse one needs a shared pool (pool = atp or dsa)");
  }
  // In a pool, a register of the layout is a value lane of the pool's aggregators.
  const uint32_t registers = pool ? kDenseValues : s.registers;

  // The hot set and its layout.
  std::shared_ptr<const control::zebra::HotSet> hot;
  std::shared_ptr<const control::zebra::Layout> layout;
  if (ina) {
    const unsigned pf = s.profile_iterations ? s.profile_first : s.first_iteration;
    const unsigned pn = s.profile_iterations ? s.profile_iterations : s.iterations;
    auto ranking = control::zebra::count_updates(src, pf, pn, s.sample_rate, s.seed, N);
    size_t k = s.hot_keys;
    if (s.principle_p > 0) {
      const auto pk = control::zebra::principle1(ranking, s.principle_p, s.principle_c, s.memory_bytes);
      if (!pk)
        throw std::invalid_argument(fmt::format(
            "sparse run: Principle 1 cannot reach p = {} within c = {} of {} B (4 B per key) on {}", s.principle_p,
            s.principle_c, s.memory_bytes, src.name()));
      k = *pk;
    }
    std::vector<uint64_t> ranked(ranking.keys.begin(),
                                 ranking.keys.begin() + static_cast<std::ptrdiff_t>(std::min(k, ranking.keys.size())));
    hot = std::make_shared<const control::zebra::HotSet>(control::zebra::HotSet::from_ranked(std::move(ranked), 1));
    layout = std::make_shared<const control::zebra::Layout>(
        control::zebra::Layout::make(hot->size(), registers, s.placement, s.seed));
    out.hot_keys = hot->size();
  }

  // The star: switch 0, workers 1..N, PS N+1, the switch CPU N+2; with a
  // dense job, its workers N+3.. and its PS after them.
  const auto kv_words = static_cast<uint16_t>(kv::words(s.pairs));
  sim::Simulator sim(s.seed, pool ? std::max(kv_words, kDenseValues) : kv_words);
  dp::SwitchConfig sc;
  sc.memory_bytes = s.memory_bytes;
  sc.kv_pairs = static_cast<uint16_t>(s.pairs);
  sc.kv_table_entries = s.table_entries;
  sc.kv_arith = s.arith;
  sc.seed = s.seed;
  if (pool) {
    sc.payload_values = kDenseValues;
    sc.kv_pool = true;
  }
  auto swp = pool ? pool->make_switch(sc) : scheme.make_switch(sc);
  dp::SwitchProgram& sw = *swp;
  sim.add_node(std::move(swp), true);
  host::SparseConfig hc;
  hc.job = 1;
  for (unsigned r = 0; r < N; ++r) hc.workers.push_back(static_cast<NodeId>(1 + r));
  hc.ps = static_cast<NodeId>(N + 1);
  hc.sw = ina ? NodeId{0} : kNoNode;
  hc.pairs = s.pairs;
  hc.layout_aware = s.layout_aware;
  hc.init_window = s.init_window;
  hc.first_iteration = s.first_iteration;
  hc.arith = s.arith;
  const NodeId cpu_id = static_cast<NodeId>(N + 2);

  // Exact expected sums per iteration, and each worker's pushes.
  struct Push {
    std::vector<uint64_t> keys;
    std::vector<int32_t> vals;
  };
  std::vector<std::vector<Push>> push(s.iterations, std::vector<Push>(N));
  std::vector<std::unordered_map<uint64_t, int64_t>> expect(s.iterations);
  // Float16Table: float32 gradients (their bits in vals), exact float64 sums.
  const bool fl = s.arith == KvArith::Float16Table;
  struct FloatSum {
    double sum = 0, abs = 0;
    unsigned n = 0;
  };
  std::vector<std::unordered_map<uint64_t, FloatSum>> fexpect(fl ? s.iterations : 0);
  for (unsigned i = 0; i < s.iterations; ++i) {
    const unsigned it = s.first_iteration + i;
    for (unsigned w = 0; w < N; ++w) {
      Push& p = push[i][w];
      p.keys = src.keys(it, w);
      p.vals.resize(p.keys.size());
      for (size_t q = 0; q < p.keys.size(); ++q) {
        if (fl) {
          const float g = workload::sparse_gradient(s.seed, it, w, p.keys[q], s.grad_sigma);
          p.vals[q] = fp16::bits_of_f32(g);
          FloatSum& e = fexpect[i][p.keys[q]];
          e.sum += g;
          e.abs += std::fabs(g);
          ++e.n;
          continue;
        }
        p.vals[q] = workload::sparse_value(s.seed, it, w, p.keys[q]);
        expect[i][p.keys[q]] += p.vals[q];
      }
      out.pairs += p.keys.size();
    }
    out.iters.push_back({0, 0, 0, fl ? fexpect[i].size() : expect[i].size()});
    for (unsigned w = 0; w < N; ++w) out.iters.back().pairs += push[i][w].keys.size();
  }

  std::vector<Driver*> drivers;
  std::vector<unsigned> done_iters(N, 0);
  std::vector<bool> started(s.iterations, false);
  std::string error;
  ValueError& ve = out.value_error;
  double sq_err = 0, sq_exact = 0, sum_rel = 0;
  uint64_t nrel = 0;
  const fp16::TableAdder& adder = fp16::switch_adder();
  // Float16Table: each sum within the bound of its exact float64 sum (not equal).
  auto check_float = [&](unsigned r, uint32_t iter, std::span<const uint64_t> keys, std::span<const int32_t> sums) {
    const auto& e = fexpect[iter - s.first_iteration];
    if (keys.size() != e.size())
      error = fmt::format("worker {} iteration {}: {} keys in the result, {} in the union", r, iter, keys.size(),
                          e.size());
    for (size_t q = 0; q < keys.size() && error.empty(); ++q) {
      auto it = e.find(keys[q]);
      const double got = fp16::f32_of_bits(sums[q]);
      if (it == e.end()) {
        error = fmt::format("worker {} iteration {}: key {} sum {} (not pushed)", r, iter, keys[q], got);
        break;
      }
      const FloatSum& x = it->second;
      const double err = std::fabs(got - x.sum), bound = adder.sum_bound(x.n, x.abs);
      if (!(err <= bound))  // NaN fails too
        error = fmt::format("worker {} iteration {}: key {} float sum {} expected {} (error {} beyond the bound {} of "
                            "{} terms (float16 table sums) of total magnitude {})",
                            r, iter, keys[q], got, x.sum, err, bound, x.n, x.abs);
      ++ve.values;
      sq_err += err * err;
      sq_exact += x.sum * x.sum;
      ve.max_scaled = std::max(ve.max_scaled, x.abs > 0 ? err / x.abs : 0);
      ve.max_over_bound = std::max(ve.max_over_bound, err / bound);
      if (x.sum != 0) {
        const double rel = err / std::fabs(x.sum);
        ve.max_rel = std::max(ve.max_rel, rel);
        sum_rel += rel;
        ++nrel;
      }
    }
  };
  std::vector<control::zebra::Table> worker_tables, switch_tables;
  if (ina) {
    worker_tables.push_back({s.first_iteration, hot, layout});
    switch_tables.push_back(worker_tables.back());
    uint32_t version = 1;
    for (const auto& u : s.updates) {
      auto h = std::make_shared<const control::zebra::HotSet>(control::zebra::HotSet::from_ranked(
          top_keys(src, N, u.profile_first, u.profile_iterations, s.hot_keys, s.sample_rate, s.seed), ++version));
      auto l = std::make_shared<const control::zebra::Layout>(
          control::zebra::Layout::make(h->size(), registers, s.placement, s.seed + version));
      if (u.workers) worker_tables.push_back({u.from, h, l});
      if (u.sw) switch_tables.push_back({u.from, h, l});
    }
    // The pairs the workers send to the switch: hot in the workers' table of their iteration.
    for (unsigned i = 0; i < s.iterations; ++i) {
      const control::zebra::Table* t = nullptr;
      for (const auto& x : worker_tables)
        if (x.from <= s.first_iteration + i && (!t || x.from >= t->from)) t = &x;
      for (unsigned w = 0; w < N; ++w)
        for (uint64_t k : push[i][w].keys) out.hot_pairs += t->hot->contains(k);
      auto hot_in = [&](const auto& m) {
        for (const auto& kv : m) out.hot_union_keys += t->hot->contains(kv.first);
      };
      if (fl) hot_in(fexpect[i]);
      else hot_in(expect[i]);
    }
  }
  out.cold_pairs = out.pairs - out.hot_pairs;
  for (unsigned r = 0; r < N; ++r) {
    auto w = std::make_unique<host::SparseWorker>(hc, static_cast<uint8_t>(r));
    for (const auto& t : worker_tables) w->set_table(t);
    auto d = std::make_unique<Driver>(std::move(w), s.fault, out.faults);
    Driver* dp = d.get();
    drivers.push_back(dp);
    auto begin = [&, dp, r](unsigned i, Time now, Effects& fx) {
      if (!started[i] || now < out.iters[i].start) out.iters[i].start = now;
      started[i] = true;
      dp->worker().begin(s.first_iteration + i, push[i][r].keys, push[i][r].vals, now, fx);
    };
    dp->start = [begin](Time now, Effects& fx) { begin(0, now, fx); };
    dp->next = [&, begin, r](Time now, Effects& fx) { begin(done_iters[r], now, fx); };
    dp->worker().set_done([&, dp, r](uint32_t iter, std::span<const uint64_t> keys, std::span<const int32_t> sums,
                                      Time now, Effects& fx) {
      const unsigned i = iter - s.first_iteration;
      const auto& e = expect[i];
      if (fl && error.empty()) check_float(r, iter, keys, sums);
      if (!fl && error.empty()) {
        if (keys.size() != e.size())
          error = fmt::format("worker {} iteration {}: {} keys in the result, {} in the union", r, iter, keys.size(),
                              e.size());
        for (size_t q = 0; q < keys.size() && error.empty(); ++q) {
          auto it = e.find(keys[q]);
          if (it == e.end() || static_cast<int32_t>(it->second) != sums[q])
            error = fmt::format("worker {} iteration {}: key {} sum {} expected {}", r, iter, keys[q], sums[q],
                                it == e.end() ? std::string("(not pushed)") : std::to_string(it->second));
        }
      }
      out.iters[i].end = std::max(out.iters[i].end, now);
      done_iters[r] = i + 1;
      if (i + 1 < s.iterations) {
        if (s.compute > 0) fx.set_timer(now + s.compute, Driver::kComputeDone);
        else dp->next(now, fx);
      }
    });
    sim.add_node(std::move(d), false);
  }
  auto psn = std::make_unique<Faulty<host::SparsePs>>(std::make_unique<host::SparsePs>(hc), s.fault, out.faults);
  host::SparsePs& ps = psn->inner();
  // The PS's phases per iteration (SparseIteration::ps_*).
  std::vector<uint64_t> closed(s.iterations, 0);  // ranks whose closing cold packet is in
  psn->watch = [&, N](bool outgoing, const Packet& p, Time now) {
    if (p.h.priority < s.first_iteration || p.h.priority >= s.first_iteration + s.iterations) return;
    SparseIteration& it = out.iters[p.h.priority - s.first_iteration];
    const uint64_t bytes = sim.wire_bytes(p);
    if (outgoing) {
      it.ps_out_bytes += bytes;
      return;
    }
    it.ps_in_bytes += bytes;
    if (p.h.type == PktType::KvAck) it.ps_in_ack_bytes += bytes;
    if (p.h.type != PktType::KvData) return;
    if (kv::pairs(p) > 0 && it.ps_all_in == 0) it.ps_last_data = std::max(it.ps_last_data, now);
    if (p.h.rank >= N) return;
    const uint64_t bit = 1ULL << p.h.rank;  // sparse jobs: at most kMaxWireWorkers (64)
    if (p.h.has(flag::kLast) && !(closed[p.h.priority - s.first_iteration] & bit) &&
        (closed[p.h.priority - s.first_iteration] |= bit) == full_bitmap(N))
      it.ps_all_in = now;
  };
  sim.add_node(std::move(psn), false);
  dp::SwitchCpu* cpu = nullptr;
  if (ina) {
    auto c = std::make_unique<dp::SwitchCpu>(NodeId{0}, s.cpu_rto);
    c->add_job(1, hc.workers);
    cpu = c.get();
    sim.add_node(std::move(c), false);
  }
  // The dense job (a pool only): job 2, SyntheticTensor allreduces checked as they arrive.
  const unsigned D = s.dense_workers;
  std::vector<host::WorkerNode*> dense;
  std::vector<std::shared_ptr<host::SyntheticTensor>> dense_io;
  std::vector<NodeId> dense_ids;
  const NodeId dense_ps_id = static_cast<NodeId>(N + 3 + D);
  host::ParameterServer* dense_ps = nullptr;
  constexpr uint16_t kDenseJob = 2;
  for (unsigned r = 0; r < D; ++r) {
    host::WorkerConfig w;
    host::profile("paper").apply(w);
    w.job = kDenseJob;
    w.rank = static_cast<uint8_t>(r);
    w.nworkers = static_cast<uint8_t>(D);
    w.self = static_cast<NodeId>(N + 3 + r);
    w.aggregator = 0;
    w.ps = dense_ps_id;
    w.payload_values = kDenseValues;
    w.init_window = std::max(1.0, s.init_window * (50.0 + 4.0 * kv_words) / (50.0 + 4.0 * kDenseValues));
    auto node = std::make_unique<host::WorkerNode>(w);
    auto io = std::make_shared<host::SyntheticTensor>(mix(s.seed, 0xde05e), r, D);
    dense_io.push_back(io);
    node->submit(io, s.dense_values);
    host::WorkerNode* nd = node.get();
    node->set_on_complete([nd, io, n = s.dense_values, total = s.dense_iterations](Time now, Effects& fx) {
      if (nd->completed() < total && !nd->transport().busy()) {
        nd->submit(io, n);
        nd->transport().pump(now, fx);
      }
    });
    dense.push_back(nd);
    dense_ids.push_back(w.self);
    if (sim.add_node(std::move(node), false) != w.self) throw std::logic_error("sparse run: dense worker id");
  }
  if (D > 0) {
    host::PsConfig pc;
    host::profile("paper").apply(pc);
    pc.job = kDenseJob;
    pc.workers = dense_ids;
    pc.sw = 0;
    pc.payload_values = kDenseValues;
    auto node = std::make_unique<host::ParameterServer>(pc);
    dense_ps = node.get();
    if (sim.add_node(std::move(node), false) != dense_ps_id) throw std::logic_error("sparse run: dense PS id");
  }
  for (NodeId h = 1; h <= N + 1; ++h) sim.connect(h, 0, s.link, s.link);
  if (ina) {
    sim::LinkParams cl;  // the pipeline <-> CPU path: no faults, the paper's latency
    cl.delay = s.cpu_delay;
    cl.queue_bytes = 64ull << 20;
    cl.ecn_bytes = 0;
    sim.connect(cpu_id, 0, cl, cl);
  }
  for (NodeId h : dense_ids) sim.connect(h, 0, s.link, s.link);
  if (D > 0) sim.connect(dense_ps_id, 0, s.link, s.link);
  sim.build_routes();
  sim.set_multicast_group(1, hc.workers);
  if (D > 0) {
    sim.set_multicast_group(kDenseJob, dense_ids);
    dp::SwitchJob dj;
    dj.job = kDenseJob;
    dj.workers = dense_ids;
    dj.ps = dense_ps_id;
    sw.add_job(dj);
  }
  dp::SwitchJob j;
  j.job = 1;
  j.workers = hc.workers;
  j.ps = hc.ps;
  j.cpu = ina ? cpu_id : kNoNode;
  sw.add_job(j);
  for (const auto& t : switch_tables) sw.set_sparse_table(1, t);
  sim.run(s.time_limit);
  if (!sim.idle()) {
    std::string where;
    for (unsigned r = 0; r < N; ++r)
      if (done_iters[r] != s.iterations) where += fmt::format("; worker {}: {}", r, drivers[r]->worker().describe());
    const auto& pst = ps.stats();
    throw std::runtime_error(fmt::format("sparse run {}: not finished after {} ms of simulated time{}; PS at iteration "
                                         "{} (data {} duplicates {} stale {} malformed {} foreign {}); switch malformed {} "
                                         "foreign {} stale {}",
                                         scheme.name, to_ms(s.time_limit), where, ps.iteration(), pst.data,
                                         pst.duplicates, pst.stale, pst.malformed, pst.foreign, sw.stats().malformed,
                                         sw.stats().foreign(), sw.stats().stale));
  }

  // Checks.
  if (!error.empty()) throw std::runtime_error("sparse run " + scheme.name + ": " + error);
  for (unsigned r = 0; r < N; ++r)
    if (done_iters[r] != s.iterations)
      throw std::runtime_error(fmt::format("sparse run {}: worker {} finished {} of {} iterations ({})", scheme.name,
                                           r, done_iters[r], s.iterations, drivers[r]->worker().describe()));
  if (sim.pool().in_use() != 0)
    throw std::runtime_error(fmt::format("sparse run {}: {} packets leaked", scheme.name, sim.pool().in_use()));
  // A pool's pinned aggregators are the table's reservation, not state left
  // over: nothing else may be in use, and removing the job frees them. The
  // dense job in a shared pool may be left holding aggregators that a late
  // copy (a duplicated or reordered first transmission arriving after its
  // task's result) reserved, as every star with such faults
  // (tests/cluster_fixture.hpp); removing the job must free exactly those.
  out.pinned = sw.pinned();
  out.pool_aggregators = pool ? sw.aggregators() : 0;
  const bool late_copies = s.link.dup > 0 || s.link.reorder > 0;
  const size_t dense_left = D > 0 ? sw.occupied_by(kDenseJob) : 0;
  if (dense_left > 0 && !late_copies)
    throw std::runtime_error(fmt::format("sparse run {}: the dense job still holds {} aggregators of the {} pool",
                                         scheme.name, dense_left, pool->name));
  if (sw.occupied() != out.pinned + dense_left)
    throw std::runtime_error(fmt::format("sparse run {}: {} registers left in use", scheme.name,
                                         sw.occupied() - out.pinned - dense_left));
  if (pool) {
    const size_t rows = (out.hot_keys + kDenseValues - 1) / kDenseValues;
    if (out.pinned < rows)
      throw std::runtime_error(fmt::format("sparse run {}: {} aggregators pinned for {} hot keys ({} needed)",
                                           scheme.name, out.pinned, out.hot_keys, rows));
    if (sw.remove_job(1) != out.pinned || (D > 0 && sw.remove_job(kDenseJob) != dense_left) || sw.occupied() != 0)
      throw std::runtime_error(fmt::format("sparse run {}: {} aggregators in use after both jobs left the {} pool",
                                           scheme.name, sw.occupied(), pool->name));
    out.dense.late_aggregators = dense_left;
  }
  if (D > 0) {
    for (unsigned r = 0; r < D; ++r) {
      if (dense[r]->completed() != s.dense_iterations)
        throw std::runtime_error(fmt::format("sparse run {}: dense worker {} finished {} of {} allreduces",
                                             scheme.name, r, dense[r]->completed(), s.dense_iterations));
      if (dense_io[r]->mismatches() != 0)
        throw std::runtime_error(fmt::format("sparse run {}: dense worker {}: {} result values differ from the exact "
                                             "sums", scheme.name, r, dense_io[r]->mismatches()));
      out.dense.finish = std::max(out.dense.finish, dense[r]->finish_time());
      out.dense.verified += dense_io[r]->checked();
      out.dense.retransmits += dense[r]->transport().stats().retransmits;
      if (dense[r]->transport().stats().malformed || dense[r]->transport().stats().foreign)
        throw std::runtime_error(fmt::format("sparse run {}: dense worker {} refused honest packets", scheme.name, r));
    }
    if (out.dense.verified != static_cast<uint64_t>(D) * s.dense_values * s.dense_iterations)
      throw std::runtime_error(fmt::format("sparse run {}: {} dense result values checked, {} expected", scheme.name,
                                           out.dense.verified,
                                           static_cast<uint64_t>(D) * s.dense_values * s.dense_iterations));
    if (dense_ps->entries() != 0 || dense_ps->stats().malformed || dense_ps->stats().foreign)
      throw std::runtime_error(fmt::format("sparse run {}: dense PS: {} entries left, malformed {} foreign {}",
                                           scheme.name, dense_ps->entries(), dense_ps->stats().malformed,
                                           dense_ps->stats().foreign));
    out.dense.ps_completions = dense_ps->stats().completions;
    out.dense.goodput_gbps = static_cast<double>(s.dense_values) * 4 * 8 * s.dense_iterations /
                             (to_us(out.dense.finish) * 1e3);
  }
  if (cpu && cpu->held() != 0)
    throw std::runtime_error(fmt::format("sparse run {}: the switch CPU still holds {} results", scheme.name,
                                         cpu->held()));
  if (ps.held() != 0)
    throw std::runtime_error(fmt::format("sparse run {}: the PS still holds {} unacknowledged results", scheme.name,
                                         ps.held()));
  out.sw = sw.stats();
  if (cpu) out.cpu = cpu->stats();
  out.ps = ps.stats();
  if (out.sw.malformed || out.ps.malformed || out.sw.foreign() || out.ps.foreign)
    throw std::runtime_error(fmt::format("sparse run {}: honest packets refused (switch malformed {} foreign {}, "
                                         "PS malformed {} foreign {})",
                                         scheme.name, out.sw.malformed, out.sw.foreign(), out.ps.malformed,
                                         out.ps.foreign));
  for (Driver* d : drivers) {
    const auto& w = d->worker().stats();
    out.workers.sent += w.sent;
    out.workers.retransmits += w.retransmits;
    out.workers.hot_packets += w.hot_packets;
    out.workers.cold_packets += w.cold_packets;
    out.workers.hot_pairs += w.hot_pairs;
    out.workers.cold_pairs += w.cold_pairs;
    out.workers.results += w.results;
    out.workers.malformed += w.malformed;
    out.workers.foreign += w.foreign;
    out.workers.decreases += w.decreases;
  }
  // Iterations may overlap (a fast worker starts the next one while a slow
  // one finishes), so the span is the first push to the last result, as in run_dense.
  out.total = out.iters.back().end - out.iters.front().start;
  out.agg_throughput_gbps =
      out.total > 0 ? static_cast<double>(out.pairs) * 12 * 8 / (to_us(out.total) * 1e3) : 0;
  out.hot_share = out.pairs ? static_cast<double>(out.hot_pairs) / static_cast<double>(out.pairs) : 0;
  out.recirc_per_packet =
      out.sw.kv_in ? static_cast<double>(out.sw.recirculations) / static_cast<double>(out.sw.kv_in) : 0;
  out.events = sim.events();
  if (fl) {
    ve.mean_rel = nrel ? sum_rel / static_cast<double>(nrel) : 0;
    ve.vec_rel = sq_exact > 0 ? std::sqrt(sq_err / sq_exact) : 0;
  }
  return out;
}

}  // namespace ina::exp
