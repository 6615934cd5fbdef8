#include "runtime/communicator.hpp"

#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <vector>

#include <fmt/format.h>

#include "host/float_allreduce.hpp"
#include "host/worker.hpp"
#include "runtime/control.hpp"

namespace ina {

namespace {

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

}  // namespace

// ---------------------------------------------------------------- op state

struct Communicator::OpState {
  enum class Kind { Float, Int };
  Kind kind = Kind::Float;
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
  std::unique_ptr<host::WorkerTransport> tx;
  std::unique_ptr<CommNode> node;
  std::unique_ptr<rt::UdpEngine> engine;
  rt::UniqueFd wake_fd;
  std::thread io;

  // Shared with callers (under mu).
  std::mutex mu;
  std::vector<std::shared_ptr<OpState>> inbox;
  bool close_requested = false;
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
    jo.key = cfg.job_key.empty() ? rt::job_key_from_env(cfg.job) : rt::parse_key(cfg.job_key, "communicator job_key");
    joined = rt::join_job(jo);
    const rt::JobAssignment& a = joined.job;

    host::WorkerConfig wc;
    wc.job = a.job;
    wc.rank = static_cast<uint8_t>(cfg.rank);
    wc.nworkers = static_cast<uint8_t>(cfg.nworkers);
    wc.self = a.self;
    wc.aggregator = a.sw;
    wc.ps = a.ps;
    wc.payload_values = a.payload_values;
    const double pkt_bytes = static_cast<double>(kHeaderBytes + 4u * a.payload_values);
    wc.init_window = std::max(1.0, std::floor(cfg.window_kb * 1024 / pkt_bytes));
    wc.max_window = std::max(wc.init_window, std::floor(cfg.max_window_kb * 1024 / pkt_bytes));
    wc.window_cap = a.window_cap;
    wc.min_rto = cfg.min_rto;
    wc.fast_retransmit = cfg.fast_retransmit;
    wc.delay_target = cfg.delay_target;
    wc.retain_ops = cfg.retain_ops;
    tx = std::make_unique<host::WorkerTransport>(wc);
    node = std::make_unique<CommNode>(*tx, completed_ids);
    node->set_id(a.self);

    rt::EngineConfig ec;
    ec.mode = rt::EngineMode::Host;
    ec.payload_values = a.payload_values;
    ec.gateway = sw;
    ec.faults = cfg.faults;
    engine = std::make_unique<rt::UdpEngine>(ec, std::move(joined.udp));
    engine->add_node(*node);
    wake_fd = rt::UniqueFd(eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
    engine->watch(wake_fd.get(), EPOLLIN, [this](uint32_t) { on_wake(); });
    engine->watch(joined.control.fd(), EPOLLIN, [this](uint32_t) { on_control(); });
    engine->start();
    on_control();  // messages read together with the join's answer (rt::read_control)
    snapshot();
    io = std::thread([this] { io_main(); });
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
    if (!n.open) {
      engine->unwatch(joined.control.fd());
      control_open = false;
      if (!finished && failure.empty())
        failure = fmt::format("lost the control connection to the switch at {} ({})", sw.str(), where());
    }
  }


  // Hands an op to the queue, in issue order. The op's tag is its DSA priority.
  void enqueue(std::shared_ptr<OpState> op) {
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
    if (queue.submit_ready(*tx)) pump();
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
    {
      std::lock_guard lk(op->m);
      op->error = std::move(err);
      op->finished.store(true, std::memory_order_release);
    }
    op->cv.notify_all();
    snapshot();
  }

  void maybe_send_done() {
    {
      std::lock_guard lk(mu);
      if (!close_requested || !inbox.empty()) return;
    }
    if (!queue.idle()) return;
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
    for (auto& op : ops)
      if (!op->finished) complete(op, std::make_exception_ptr(RuntimeError(why)));
  }

  void snapshot() {
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

Communicator::Request Communicator::allreduce_async(std::span<float> data, const AllreduceOptions& o) {
  if (data.empty()) throw RuntimeError("allreduce of an empty buffer");
  auto op = std::make_shared<OpState>();
  op->kind = OpState::Kind::Float;
  op->f = data;
  op->opt = o;
  return Request(impl_->post(std::move(op)));
}

Communicator::Request Communicator::allreduce_async(std::span<int32_t> data, const AllreduceOptions& o) {
  if (data.empty()) throw RuntimeError("allreduce of an empty buffer");
  if (o.op != ReduceOp::Sum) throw RuntimeError("integer allreduce supports only ReduceOp::Sum");
  auto op = std::make_shared<OpState>();
  op->kind = OpState::Kind::Int;
  op->i = data;
  op->opt = o;
  return Request(impl_->post(std::move(op)));
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

const CommConfig& Communicator::config() const { return impl_->cfg; }
unsigned Communicator::rank() const { return impl_->cfg.rank; }
unsigned Communicator::size() const { return impl_->cfg.nworkers; }
uint16_t Communicator::payload_values() const { return impl_->joined.job.payload_values; }
const std::string& Communicator::policy() const { return impl_->joined.job.policy; }

nlohmann::json Communicator::stats() const {
  std::lock_guard lk(impl_->stats_mu);
  return impl_->stats_snapshot;
}

}  // namespace ina
