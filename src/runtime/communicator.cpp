#include "runtime/communicator.hpp"

#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>
#include <tuple>
#include <unordered_map>
#include <vector>

#include <fmt/format.h>

#include "dataplane/zebra_layout.hpp"
#include "core/resources.hpp"
#include "host/float_allreduce.hpp"
#include "host/sparse.hpp"
#include "host/sparse_allreduce.hpp"
#include "host/worker.hpp"
#include "runtime/control.hpp"
#include "schemes/registry.hpp"
#include "wire/kv.hpp"

namespace ina {

// (A named namespace: Communicator::Impl, which has external linkage, holds one.)
namespace communicator_detail {

// The host node: the worker transport, with op tags used as DSA priorities.
class CommNode final : public Node, public host::PriorityFn {
 public:
  CommNode(host::WorkerTransport& tx, std::vector<uint64_t>& done) : tx_(tx), done_(done) { tx_.set_priority_fn(this); }
  void on_packet(Packet* p, Time now, Effects& fx) override {
    tx_.on_packet(p, now, fx);
    collect();
  }
  void on_timer(uint64_t token, Time now, Effects& fx) override {
    tx_.on_timer(token, now, fx);
    collect();
  }
  uint32_t priority(uint32_t tag, Time) override { return tag; }
  void collect() {
    for (uint64_t id : tx_.take_completed()) done_.push_back(id);
  }

 private:
  host::WorkerTransport& tx_;
  std::vector<uint64_t>& done_;
};

}  // namespace communicator_detail

// ---------------------------------------------------------------- op state

struct Communicator::OpState {
  enum class Kind { Float, Int, Sparse, HotSet };
  Kind kind = Kind::Float;
  // Sparse: the op (inputs copied, result inside); HotSet: the ranked keys and the installed version.
  std::unique_ptr<host::SparseAllreduce> sparse;
  std::vector<uint64_t> hot;
  uint32_t version = 0;
  std::span<float> f;
  std::span<int32_t> i;
  AllreduceOptions opt;
  Time issued = 0;
  // Completion.
  std::mutex m;
  std::condition_variable cv;
  std::atomic<bool> finished{false};
  std::exception_ptr error;
  AllreduceInfo info;
};

bool Communicator::Request::test() const { return op_ && op_->finished.load(std::memory_order_acquire); }

void Communicator::Request::wait() {
  if (!op_) throw RuntimeError("wait() on an empty request");
  std::unique_lock lk(op_->m);
  op_->cv.wait(lk, [&] { return op_->finished.load(); });
  if (op_->error) std::rethrow_exception(op_->error);
}

const AllreduceInfo& Communicator::Request::info() const {
  if (!op_) throw RuntimeError("info() on an empty request");
  return op_->info;
}

// ---------------------------------------------------------------- impl

struct Communicator::Impl {
  CommConfig cfg;
  rt::Endpoint sw;
  rt::Joined joined;
  // The float protocol and the issue order of the ops' rounds
  // (host/float_allreduce.hpp); this file only moves work between threads.
  host::AllreduceQueue queue;
  std::vector<uint64_t> completed_ids;
  const schemes::Scheme* scheme = nullptr;
  // Dense schemes: the worker transport; <key, value> schemes: the sparse worker.
  std::unique_ptr<host::WorkerTransport> tx;
  std::unique_ptr<communicator_detail::CommNode> node;
  std::unique_ptr<host::SparseWorker> sworker;
  // Sparse ops and hot-set changes, in issue order, one at a time (I/O thread).
  std::deque<std::shared_ptr<OpState>> sparse_q;
  std::shared_ptr<OpState> sparse_cur;
  uint32_t iter = 0;                  // the sparse worker's next iteration
  bool round_done = false;            // set by the sparse worker's completion callback
  std::vector<uint64_t> res_keys;
  std::vector<int32_t> res_sums;
  size_t hot_sent = 0;                // keys of sparse_cur's hot set handed to the control connection
  bool hot_sending = false, hot_waiting = false;
  uint64_t last_sparse_acks = 0, last_sparse_results = 0;
  std::unique_ptr<rt::UdpEngine> engine;
  rt::UniqueFd wake_fd;
  std::thread io;

  // Shared with callers (under mu).
  std::mutex mu;
  std::vector<std::shared_ptr<OpState>> inbox;
  bool close_requested = false;
  bool abandon_requested = false;
  std::string broken;  // set once the communicator can no longer work

  // I/O thread only.
  std::unordered_map<uint64_t, std::shared_ptr<OpState>> live;  // queue handle -> op
  bool finished = false, done_sent = false, control_open = true;
  Time close_deadline = 0, last_progress = 0;
  uint64_t last_acks = 0;
  std::string failure;

  mutable std::mutex stats_mu;
  nlohmann::json stats_snapshot;

  explicit Impl(const CommConfig& c) : cfg(c) {
    cfg.validate();
    sw = rt::Endpoint::parse(cfg.switch_addr);
    rt::JoinOptions jo;
    jo.sw = sw;
    jo.role = rt::Role::Worker;
    jo.job = cfg.job;
    jo.rank = cfg.rank;
    jo.nworkers = cfg.nworkers;
    jo.payload_values = cfg.payload_values;
    jo.retain_ops = cfg.retain_ops;
    jo.bind_ip = cfg.bind_ip;
    jo.connect_timeout = cfg.connect_timeout;
    jo.rendezvous_timeout = cfg.rendezvous_timeout;
    jo.announce = fmt::format("ina: worker rank {} of job {}", cfg.rank, cfg.job);  // long waits are said on stderr
    jo.key = cfg.job_key.empty() ? rt::job_key_from_env(cfg.job) : rt::parse_key(cfg.job_key, "communicator job_key");
    joined = rt::join_job(jo);
    const rt::JobAssignment& a = joined.job;
    scheme = &rt::scheme_of(a, sw);
    if (scheme->kv()) {
      host::SparseConfig sc = rt::sparse_config(a, *scheme);
      std::tie(sc.init_window, sc.max_window) = windows(kHeaderBytes + 4u * kv::words(a.kv_pairs));
      sc.min_rto = cfg.min_rto;
      sworker = std::make_unique<host::SparseWorker>(sc, static_cast<uint8_t>(cfg.rank));
      sworker->set_id(a.self);
      sworker->set_done([this](uint32_t, std::span<const uint64_t> k, std::span<const int32_t> v, Time, Effects&) {
        res_keys.assign(k.begin(), k.end());
        res_sums.assign(v.begin(), v.end());
        round_done = true;
      });
    } else {
      host::WorkerConfig wc;
      wc.job = a.job;
      wc.rank = static_cast<uint8_t>(cfg.rank);
      wc.nworkers = static_cast<uint8_t>(cfg.nworkers);
      wc.self = a.self;
      wc.aggregator = a.sw;
      wc.ps = a.ps;
      wc.payload_values = a.payload_values;
      std::tie(wc.init_window, wc.max_window) = windows(kHeaderBytes + 4u * a.payload_values);
      wc.window_cap = a.window_cap;
      wc.min_rto = cfg.min_rto;
      wc.fast_retransmit = cfg.fast_retransmit;
      wc.delay_target = cfg.delay_target;
      wc.retain_ops = cfg.retain_ops;
      tx = std::make_unique<host::WorkerTransport>(wc);
      queue.set_keep_results(wc.ps != kNoNode);  // only a PS asks for results after they arrive
      node = std::make_unique<communicator_detail::CommNode>(*tx, completed_ids);
      node->set_id(a.self);
    }

    rt::EngineConfig ec;
    ec.mode = rt::EngineMode::Host;
    ec.payload_values = sworker ? rt::payload_words(a) : a.payload_values;
    ec.gateway = sw;
    ec.faults = cfg.faults;
    ec.offload = cfg.offload;
    ec.datagram_tags = rt::member_tags(cfg.datagram_auth, a.datagram_auth,
                                       fmt::format("worker rank {} of job {}", cfg.rank, a.job), sw.str());
    engine = std::make_unique<rt::UdpEngine>(ec, std::move(joined.udp));
    if (ec.datagram_tags) engine->set_datagram_key(a.job, rt::datagram_key(jo.key, a.datagram_salt));
    if (sworker) engine->add_node(*sworker);
    else engine->add_node(*node);
    wake_fd = rt::UniqueFd(eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
    engine->watch(wake_fd.get(), EPOLLIN, [this](uint32_t) { on_wake(); });
    engine->watch(joined.control.fd(), EPOLLIN, [this](uint32_t ev) {
      if (ev & EPOLLOUT) push_hot_set();
      if (ev & ~static_cast<uint32_t>(EPOLLOUT)) on_control();
    });
    engine->start();
    on_control();  // messages read together with the join's answer (rt::read_control)
    snapshot();
    io = std::thread([this] { io_main(); });
  }

  // The initial and largest send windows in packets of `pkt_bytes`.
  std::pair<double, double> windows(size_t pkt_bytes) const {
    const double init = window_packets(cfg.window_kb, pkt_bytes);
    return {init, std::max(init, window_packets(cfg.max_window_kb, pkt_bytes))};
  }

  std::string where() const {
    return fmt::format("job {} rank {}, switch {}", cfg.job, cfg.rank, sw.str());
  }

  void wake() {
    const uint64_t one = 1;
    [[maybe_unused]] auto r = ::write(wake_fd.get(), &one, sizeof one);
  }

  // ---- caller side
  std::shared_ptr<OpState> post(std::shared_ptr<OpState> op) {
    op->issued = rt::monotonic_now();
    {
      std::lock_guard lk(mu);
      if (!broken.empty()) throw RuntimeError(broken);
      if (close_requested) throw RuntimeError(fmt::format("communicator ({}) is closed", where()));
      inbox.push_back(op);
    }
    wake();
    return op;
  }

  // ---- I/O thread
  void io_main() {
    try {
      last_progress = engine->now();
      while (!finished && failure.empty()) {
        engine->poll(100 * kMs);
        process_completions();
        process_sparse();
        check_progress();
      }
    } catch (const std::exception& e) {
      failure = fmt::format("communicator I/O failed ({}): {}", where(), e.what());
    }
    if (failure.empty()) failure = fmt::format("communicator ({}) is closed", where());
    fail_everything(failure);
    snapshot();
  }

  void on_wake() {
    uint64_t v;
    [[maybe_unused]] auto r = ::read(wake_fd.get(), &v, sizeof v);
    std::vector<std::shared_ptr<OpState>> ops;
    {
      std::lock_guard lk(mu);
      ops.swap(inbox);
      if (abandon_requested) failure = fmt::format("communicator ({}) left the job without closing", where());
    }
    for (auto& op : ops) enqueue(std::move(op));
    advance();
  }

  void on_control() {
    const rt::ControlNews n = rt::read_control(joined.control);
    if (!n.error.empty()) {
      failure = fmt::format("control connection to the switch at {}: {}", sw.str(), n.error);
      return;
    }
    finished |= n.finished;
    if (!n.aborted.empty()) failure = fmt::format("job {} aborted by the switch at {}: {}", cfg.job, sw.str(), n.aborted);
    for (const auto& h : n.hot_sets) on_hot_set(h);
    if (!n.open) {
      engine->unwatch(joined.control.fd());
      control_open = false;
      if (!finished && failure.empty())
        failure = fmt::format("lost the control connection to the switch at {} ({})", sw.str(), where());
    }
  }


  // Hands an op to the queue, in issue order. The op's tag is its DSA priority.
  void enqueue(std::shared_ptr<OpState> op) {
    if (op->kind == OpState::Kind::Sparse || op->kind == OpState::Kind::HotSet) {
      sparse_q.push_back(std::move(op));
      return;
    }
    const uint32_t prio = op->opt.priority ? op->opt.priority : cfg.priority;
    uint64_t h = 0;
    if (op->kind == OpState::Kind::Int) {
      h = queue.add(op->i, prio);
    } else {
      host::FloatAllreduceOptions fo;
      fo.nworkers = cfg.nworkers;
      fo.job = cfg.job;
      fo.mode = cfg.scale_mode == ScaleMode::Fixed ? host::FloatScaleMode::Fixed : host::FloatScaleMode::Agree;
      fo.fixed_scale = cfg.fixed_scale;
      fo.average = op->opt.op == ReduceOp::Average;
      h = queue.add(op->f, fo, prio);
    }
    live.emplace(h, std::move(op));
  }

  void pump() {
    engine->invoke(*node, [&](Time now, Effects& fx) { tx->pump(now, fx); });
  }

  // Submits what the queue allows now (its issue order).
  void advance() {
    if (tx && queue.submit_ready(*tx)) pump();
    advance_sparse();
  }

  // ---- sparse ops (<key, value> schemes): one at a time, in issue order

  void begin_round() {
    const host::SparseRound& r = sparse_cur->sparse->round();
    engine->invoke(*sworker, [&](Time now, Effects& fx) { sworker->begin(iter, r.keys, r.values, now, fx); });
  }

  void advance_sparse() {
    while (!sparse_cur && !sparse_q.empty()) {
      sparse_cur = std::move(sparse_q.front());
      sparse_q.pop_front();
      last_progress = engine->now();
      if (sparse_cur->kind == OpState::Kind::HotSet) {
        hot_sent = 0;
        hot_sending = true;
        push_hot_set();
        return;
      }
      sparse_cur->sparse->start();
      begin_round();
    }
  }

  // Hands the hot set to the control connection as fast as it takes it.
  void push_hot_set() {
    if (!hot_sending || !sparse_cur || failure.size()) return;
    const auto& keys = sparse_cur->hot;
    try {
      while (hot_sending && !joined.control.pending_output()) {
        joined.control.send(rt::hot_set_chunk(iter, keys, hot_sent));
        hot_sent += std::min(rt::kHotSetChunk, keys.size() - hot_sent);
        if (hot_sent == keys.size()) {
          hot_sending = false;
          hot_waiting = true;
        }
      }
      if (joined.control.pending_output()) joined.control.flush();
    } catch (const std::exception& e) {
      failure = fmt::format("sending the hot set to the switch at {}: {}", sw.str(), e.what());
      return;
    }
    engine->rewatch(joined.control.fd(), EPOLLIN | (joined.control.pending_output() ? EPOLLOUT : 0u));
  }

  void on_hot_set(const rt::HotSetNews& h) {
    if (!sparse_cur || sparse_cur->kind != OpState::Kind::HotSet || !hot_waiting || h.from != iter) {
      failure = fmt::format("the switch at {} answered a hot set for iteration {} that {} did not send", sw.str(), h.from,
                            where());
      return;
    }
    hot_waiting = false;
    auto op = std::move(sparse_cur);
    if (!h.error.empty()) {
      complete(op, std::make_exception_ptr(RuntimeError(fmt::format("the switch at {} refused the hot set: {}", sw.str(), h.error))));
    } else {
      try {
        sworker->set_table(dp::zebra::heat_table(op->hot, h.from, h.version, joined.job.kv_registers));
        op->version = h.version;
        complete(op, nullptr);
      } catch (const std::exception& e) {
        failure = fmt::format("installing hot set version {} ({}): {}", h.version, where(), e.what());
        return;
      }
    }
    advance_sparse();
  }

  // A dense op on a <key, value> scheme (keys 0..n-1): the sums back into the caller's buffer.
  static void write_back(OpState& op) {
    const auto& keys = op.sparse->keys();
    if (op.sparse->is_float()) {
      for (size_t k = 0; k < keys.size() && !op.f.empty(); ++k) op.f[keys[k]] = op.sparse->float_values()[k];
    } else {
      for (size_t k = 0; k < keys.size() && !op.i.empty(); ++k) op.i[keys[k]] = op.sparse->int_values()[k];
    }
  }

  void process_sparse() {
    if (!round_done) return;
    round_done = false;
    ++iter;
    last_progress = engine->now();
    const auto st = sparse_cur->sparse->on_complete(res_keys, res_sums);
    if (st == host::SparseAllreduce::Status::Next) {
      begin_round();
      return;
    }
    auto op = std::move(sparse_cur);
    op->info.scale = op->sparse->info().scale;
    op->info.retried = op->sparse->info().retried;
    if (st == host::SparseAllreduce::Status::Done) write_back(*op);
    complete(op, st == host::SparseAllreduce::Status::NonFinite
                     ? std::make_exception_ptr(NonFiniteError(op->sparse->error()))
                     : nullptr);
    advance_sparse();
    if (!done_sent && control_open) maybe_send_done();
  }

  void process_completions() {
    while (!completed_ids.empty()) {
      const auto ids = std::exchange(completed_ids, {});
      std::vector<host::AllreduceQueue::Finished> fin;
      size_t sent = 0;
      if (queue.on_completed(*tx, ids, fin, &sent)) last_progress = engine->now();
      if (sent) pump();
      for (auto& f : fin) {
        auto it = live.find(f.handle);
        if (it == live.end()) continue;
        auto op = std::move(it->second);
        live.erase(it);
        op->info.scale = f.info.scale;
        op->info.retried = f.info.retried;
        std::exception_ptr err;
        if (f.nonfinite) err = std::make_exception_ptr(NonFiniteError(f.error));
        else if (!f.ok) err = std::make_exception_ptr(RuntimeError(f.error));
        complete(op, std::move(err));
      }
    }
    if (!done_sent && control_open) maybe_send_done();
  }

  void complete(const std::shared_ptr<OpState>& op, std::exception_ptr err) {
    op->info.elapsed = rt::monotonic_now() - op->issued;
    snapshot();  // first: stats() read after wait() returns include this op
    {
      std::lock_guard lk(op->m);
      op->error = std::move(err);
      op->finished.store(true, std::memory_order_release);
    }
    op->cv.notify_all();
  }

  void maybe_send_done() {
    {
      std::lock_guard lk(mu);
      if (!close_requested || !inbox.empty()) return;
    }
    if (!queue.idle() || sparse_cur || !sparse_q.empty()) return;
    joined.control.send({{"op", "done"}});
    done_sent = true;
    close_deadline = engine->now() + cfg.close_timeout;
  }

  void check_progress() {
    const Time now = engine->now();
    if (done_sent) {
      if (!finished && now > close_deadline)
        failure = fmt::format("timed out after {:.1f} s waiting for the other workers of job {} to finish (switch {})",
                              to_ms(cfg.close_timeout) / 1000, cfg.job, sw.str());
      return;
    }
    if (sworker) {
      if (!sparse_cur) {
        last_progress = now;
        return;
      }
      if (hot_sending || hot_waiting) {  // a rendezvous with the other workers, bounded as a join is
        if (now - last_progress > cfg.rendezvous_timeout)
          failure = fmt::format("the switch at {} did not install the hot set within {:.1f} s ({}): do all {} workers "
                                "call set_hot_keys at the same point of their op sequence?", sw.str(),
                                to_ms(cfg.rendezvous_timeout) / 1000, where(), cfg.nworkers);
        return;
      }
      const auto& s = sworker->stats();
      if (s.acks != last_sparse_acks || s.results != last_sparse_results) {
        last_sparse_acks = s.acks;
        last_sparse_results = s.results;
        last_progress = now;
      }
      if (now - last_progress > cfg.progress_timeout)
        failure = fmt::format("sparse allreduce made no progress for {:.1f} s ({}; iteration {}: {}): are all {} workers "
                              "running the same sequence of allreduces?", to_ms(cfg.progress_timeout) / 1000, where(),
                              iter, sworker->describe(), cfg.nworkers);
      return;
    }
    if (queue.rounds_in_flight() == 0) {
      last_progress = now;
      return;
    }
    if (tx->stats().acks != last_acks) {
      last_acks = tx->stats().acks;
      last_progress = now;
    }
    if (now - last_progress > cfg.progress_timeout)
      failure = fmt::format("allreduce made no progress for {:.1f} s ({}; {} ops in flight, next PSN {}, lowest "
                            "unacknowledged {}): are all {} workers running the same sequence of allreduces?",
                            to_ms(cfg.progress_timeout) / 1000, where(), queue.rounds_in_flight(), tx->next_psn(),
                            tx->lowest_unacked(), cfg.nworkers);
  }

  void fail_everything(const std::string& why) {
    std::vector<std::shared_ptr<OpState>> ops;
    for (auto& [h, op] : live) ops.push_back(op);
    {
      std::lock_guard lk(mu);
      broken = why;
      for (auto& op : inbox) ops.push_back(op);
      inbox.clear();
    }
    queue.clear();
    live.clear();
    if (sparse_cur) ops.push_back(std::move(sparse_cur));
    for (auto& op : sparse_q) ops.push_back(op);
    sparse_q.clear();
    for (auto& op : ops)
      if (!op->finished) complete(op, std::make_exception_ptr(RuntimeError(why)));
  }

  void snapshot() {
    if (sworker) {
      const auto& s = sworker->stats();
      nlohmann::json j = {
          {"node", sworker->id()},
          {"iteration", iter},
          {"transport",
           {{"kind", "sparse"}, {"sent", s.sent}, {"retransmits", s.retransmits}, {"acks", s.acks}, {"dup_acks", s.dup_acks}, {"ece", s.ece},
            {"decreases", s.decreases}, {"hot_packets", s.hot_packets}, {"cold_packets", s.cold_packets},
            {"hot_pairs", s.hot_pairs}, {"cold_pairs", s.cold_pairs}, {"results", s.results},
            {"dup_results", s.dup_results}, {"malformed", s.malformed}, {"foreign", s.foreign},
            {"window", sworker->window()}}},
          {"engine", engine->stats().to_json()}};
      std::lock_guard lk(stats_mu);
      stats_snapshot = std::move(j);
      return;
    }
    const auto& s = tx->stats();
    nlohmann::json j = {
        {"node", node->id()},
        {"transport",
         {{"sent", s.sent}, {"retransmits", s.retransmits}, {"reminders", s.reminders}, {"timeouts", s.timeouts},
          {"fast_retransmits", s.fast_retransmits}, {"acks", s.acks}, {"dup_acks", s.dup_acks}, {"ece_acks", s.ece_acks}, {"delayed_acks", s.delayed_acks}, {"decreases", s.decreases},
          {"grads_to_ps", s.grads_to_ps}, {"results_to_ps", s.results_to_ps}, {"retired_to_ps", s.retired_to_ps},
          {"redirected", s.redirected}, {"malformed", s.malformed}, {"foreign", s.foreign}, {"cwnd", tx->cwnd()},
          {"rto_us", to_us(tx->rto())}}},
        {"engine", engine->stats().to_json()}};
    std::lock_guard lk(stats_mu);
    stats_snapshot = std::move(j);
  }
};

// ---------------------------------------------------------------- Communicator

Communicator::Communicator(const CommConfig& cfg) : impl_(std::make_unique<Impl>(cfg)) {}

Communicator::~Communicator() {
  try {
    close();
  } catch (const std::exception&) {
  }
}

namespace {

host::FloatAllreduceOptions float_options(const CommConfig& cfg, ReduceOp op) {
  host::FloatAllreduceOptions fo;
  fo.nworkers = cfg.nworkers;
  fo.job = cfg.job;
  fo.mode = cfg.scale_mode == ScaleMode::Fixed ? host::FloatScaleMode::Fixed : host::FloatScaleMode::Agree;
  fo.fixed_scale = cfg.fixed_scale;
  fo.average = op == ReduceOp::Average;
  return fo;
}

std::vector<uint64_t> iota_keys(size_t n) {
  std::vector<uint64_t> k(n);
  for (size_t i = 0; i < n; ++i) k[i] = i;
  return k;
}

}  // namespace

Communicator::Request Communicator::allreduce_async(std::span<float> data, const AllreduceOptions& o) {
  if (data.empty()) throw RuntimeError("allreduce of an empty buffer");
  auto op = std::make_shared<OpState>();
  op->f = data;
  op->opt = o;
  if (impl_->sworker) {  // a <key, value> scheme: keys 0..n-1
    op->kind = OpState::Kind::Sparse;
    op->sparse = std::make_unique<host::SparseAllreduce>(iota_keys(data.size()), data, float_options(impl_->cfg, o.op));
  } else {
    op->kind = OpState::Kind::Float;
  }
  return Request(impl_->post(std::move(op)));
}

Communicator::Request Communicator::allreduce_async(std::span<int32_t> data, const AllreduceOptions& o) {
  if (data.empty()) throw RuntimeError("allreduce of an empty buffer");
  if (o.op != ReduceOp::Sum) throw RuntimeError("integer allreduce supports only ReduceOp::Sum");
  auto op = std::make_shared<OpState>();
  op->i = data;
  op->opt = o;
  if (impl_->sworker) {
    op->kind = OpState::Kind::Sparse;
    op->sparse = std::make_unique<host::SparseAllreduce>(iota_keys(data.size()), data);
  } else {
    op->kind = OpState::Kind::Int;
  }
  return Request(impl_->post(std::move(op)));
}

namespace {

// Key presence on a dense scheme: one 8-bit count per key, four keys per
// int32 lane (n <= 127 workers keeps the top byte's sum below 2^31).
constexpr unsigned kPresenceBits = 8, kPresencePerLane = 32 / kPresenceBits;
// Memory per key of a sparse op on a dense scheme: the model and its result
// (4 + 4 B), presence (1 + 1 B), and room for the copies a PS scheme retains.
constexpr uint64_t kDenseSparseBytesPerKey = 16;

}  // namespace

template <typename T>
SparseResult<T> Communicator::sparse_impl(std::span<const uint64_t> keys, std::span<const T> values,
                                          const SparseOptions& o) {
  try {
    host::check_sparse_input(keys, values.size());
  } catch (const std::invalid_argument& e) {
    throw RuntimeError(e.what());
  }
  if (std::is_same_v<T, int32_t> && o.op != ReduceOp::Sum)
    throw RuntimeError("integer sparse allreduce supports only ReduceOp::Sum");
  SparseResult<T> out;
  if (impl_->sworker) {
    auto op = std::make_shared<OpState>();
    op->kind = OpState::Kind::Sparse;
    op->opt.op = o.op;
    if constexpr (std::is_same_v<T, float>)
      op->sparse = std::make_unique<host::SparseAllreduce>(keys, values, float_options(impl_->cfg, o.op));
    else
      op->sparse = std::make_unique<host::SparseAllreduce>(keys, values);
    Request r(impl_->post(op));
    r.wait();
    out.keys = op->sparse->keys();
    if constexpr (std::is_same_v<T, float>) out.values = op->sparse->float_values();
    else out.values = op->sparse->int_values();
    out.info = op->info;
    return out;
  }
  // A dense scheme: the whole model, plus the keys' presence counts.
  if (o.key_space == 0)
    throw RuntimeError(fmt::format("sparse allreduce on scheme {} (dense: it streams the whole model) needs "
                                   "SparseOptions::key_space, the model's size", scheme()));
  if (!keys.empty() && keys.back() >= o.key_space)
    throw RuntimeError(fmt::format("sparse allreduce: key {} is not below key_space {}", keys.back(), o.key_space));
  if (size() > 127) throw RuntimeError("sparse allreduce on a dense scheme supports at most 127 workers");
  // The whole model is allocated here (4 B per key and a presence byte) and by
  // the allreduces (fixed-point results, copies kept for a PS): refused before
  // anything is allocated if that cannot fit in the available memory.
  if (const uint64_t avail = mem_available_bytes(); avail && o.key_space > avail / kDenseSparseBytesPerKey)
    throw RuntimeError(fmt::format("sparse allreduce on dense scheme {}: key_space {} needs about {} ({} B per key: "
                                   "the whole model is streamed), more than the available memory {} (MemAvailable)",
                                   scheme(), o.key_space, human_bytes(static_cast<uint64_t>(std::min<double>(
                                       static_cast<double>(o.key_space) * kDenseSparseBytesPerKey, 1.8e19))),
                                   kDenseSparseBytesPerKey, human_bytes(avail)));
  std::vector<T> dense(o.key_space, T{});
  std::vector<int32_t> presence((o.key_space + kPresencePerLane - 1) / kPresencePerLane, 0);
  for (size_t k = 0; k < keys.size(); ++k) {
    dense[keys[k]] = values[k];
    presence[keys[k] / kPresencePerLane] |= int32_t{1} << (kPresenceBits * (keys[k] % kPresencePerLane));
  }
  AllreduceOptions ao;
  ao.op = o.op;
  auto rv = allreduce_async(std::span<T>(dense), ao);
  auto rp = allreduce_async(std::span<int32_t>(presence));
  rv.wait();
  rp.wait();
  const auto mask = (uint32_t{1} << kPresenceBits) - 1;
  for (uint64_t k = 0; k < o.key_space; ++k)
    if ((static_cast<uint32_t>(presence[k / kPresencePerLane]) >> (kPresenceBits * (k % kPresencePerLane))) & mask) {
      out.keys.push_back(k);
      out.values.push_back(dense[k]);
    }
  out.info = rv.info();
  return out;
}

SparseResult<float> Communicator::allreduce_sparse(std::span<const uint64_t> keys, std::span<const float> values,
                                                   const SparseOptions& o) {
  return sparse_impl<float>(keys, values, o);
}

SparseResult<int32_t> Communicator::allreduce_sparse(std::span<const uint64_t> keys, std::span<const int32_t> values,
                                                     const SparseOptions& o) {
  return sparse_impl<int32_t>(keys, values, o);
}

uint32_t Communicator::set_hot_keys(std::span<const uint64_t> ranked) {
  if (!impl_->sworker || impl_->scheme->sparse != schemes::Sparse::HotIna) return 0;
  const auto& a = impl_->joined.job;
  const uint64_t cap = std::min<uint64_t>(a.kv_table_entries, a.value_registers);
  if (ranked.size() > cap)
    throw RuntimeError(fmt::format("hot set of {} keys: the switch holds at most {} (table entries {}, value registers {})",
                                   ranked.size(), cap, a.kv_table_entries, a.value_registers));
  {
    std::unordered_map<uint64_t, size_t> seen;
    for (size_t i = 0; i < ranked.size(); ++i)
      if (auto [it, fresh] = seen.emplace(ranked[i], i); !fresh)
        throw RuntimeError(fmt::format("hot set: key {} is ranked twice (at {} and {})", ranked[i], it->second, i));
  }
  auto op = std::make_shared<OpState>();
  op->kind = OpState::Kind::HotSet;
  op->hot.assign(ranked.begin(), ranked.end());
  Request r(impl_->post(op));
  r.wait();
  return op->version;
}

AllreduceInfo Communicator::allreduce(std::span<float> data, const AllreduceOptions& o) {
  auto r = allreduce_async(data, o);
  r.wait();
  return r.info();
}

AllreduceInfo Communicator::allreduce(std::span<int32_t> data, const AllreduceOptions& o) {
  auto r = allreduce_async(data, o);
  r.wait();
  return r.info();
}

void Communicator::close() {
  if (!impl_ || !impl_->io.joinable()) return;
  {
    std::lock_guard lk(impl_->mu);
    impl_->close_requested = true;
  }
  impl_->wake();
  impl_->io.join();
  if (!impl_->finished) throw RuntimeError(impl_->failure);
}

void Communicator::abandon() {
  if (!impl_ || !impl_->io.joinable()) return;
  {
    std::lock_guard lk(impl_->mu);
    impl_->abandon_requested = true;
  }
  impl_->wake();
  impl_->io.join();
  impl_->joined.control = rt::LineChannel();  // the switch sees this member leave now
}

const CommConfig& Communicator::config() const { return impl_->cfg; }
unsigned Communicator::rank() const { return impl_->cfg.rank; }
unsigned Communicator::size() const { return impl_->cfg.nworkers; }
uint16_t Communicator::payload_values() const { return impl_->joined.job.payload_values; }
const std::string& Communicator::policy() const { return impl_->joined.job.policy; }
const std::string& Communicator::scheme() const { return impl_->joined.job.scheme; }
bool Communicator::sparse_native() const { return static_cast<bool>(impl_->sworker); }

nlohmann::json Communicator::stats() const {
  std::lock_guard lk(impl_->stats_mu);
  return impl_->stats_snapshot;
}

}  // namespace ina
