#include "runtime/communicator.hpp"

#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <mutex>
#include <thread>
#include <unordered_map>

#include <fmt/format.h>

#include "host/tensor_io.hpp"
#include "host/worker.hpp"
#include "runtime/control.hpp"
#include "wire/quant.hpp"

namespace ina {

namespace {

// The scale round: one lane per binary exponent e of a float (|x| < 2^e,
// e from frexp), plus one lane counting workers with non-finite values.
constexpr int kExpMin = -149;
constexpr int kExpMax = 128;
constexpr size_t kExpLanes = kExpMax - kExpMin + 1;
constexpr size_t kScaleLanes = kExpLanes + 1;

// Large int32 buffers are recycled: allocating and faulting in tens of MB per
// op would cost more than the op's arithmetic.
class BufferPool {
 public:
  std::vector<int32_t> get(size_t n) {
    std::vector<int32_t> v;
    if (!free_.empty()) {
      v = std::move(free_.back());
      free_.pop_back();
    }
    v.resize(n);
    return v;
  }
  void put(std::vector<int32_t> v) {
    if (free_.size() < kKeep) free_.push_back(std::move(v));
  }

 private:
  static constexpr size_t kKeep = 4;
  std::vector<std::vector<int32_t>> free_;
};

// Results of a sub-op are kept as int32 sums: a worker that already has a
// result must be able to hand it to the PS while the transport retains the op.
class ResultStore : public host::TensorIO {
 public:
  ResultStore(BufferPool& pool, size_t n) : pool_(pool), res_(pool.get(n)) {}
  ~ResultStore() override { pool_.put(std::move(res_)); }
  void write_result(uint64_t off, std::span<const int32_t> in) override {
    std::memcpy(res_.data() + off, in.data(), in.size_bytes());
  }
  void read_result(uint64_t off, std::span<int32_t> out) override {
    std::memcpy(out.data(), res_.data() + off, out.size_bytes());
  }
  std::span<const int32_t> result() const { return res_; }

 protected:
  std::span<int32_t> scratch() { return res_; }

 private:
  BufferPool& pool_;
  std::vector<int32_t> res_;
};

// Scale round of a float op: the one-hot exponent lanes.
class ScaleIO final : public ResultStore {
 public:
  ScaleIO(BufferPool& pool, std::span<const float> x) : ResultStore(pool, kScaleLanes), lanes_(kScaleLanes, 0) {
    float m = 0;
    bool nonfinite = false;
    for (const float v : x) {
      if (std::isfinite(v)) m = std::max(m, std::fabs(v));
      else nonfinite = true;
    }
    if (m > 0) {
      int e = 0;
      std::frexp(m, &e);  // m < 2^e
      lanes_[static_cast<size_t>(e - kExpMin)] = 1;
    }
    if (nonfinite) lanes_[kExpLanes] = 1;
  }
  void read_gradient(uint64_t off, std::span<int32_t> out) override {
    std::memcpy(out.data(), lanes_.data() + off, out.size_bytes());
  }
  // Workers that passed non-finite values.
  int32_t nonfinite() const { return result()[kExpLanes]; }
  // The agreed scale: safe for the largest exponent any worker reported.
  double scale(unsigned nworkers) const {
    for (size_t l = kExpLanes; l-- > 0;)
      if (result()[l] > 0) {
        const int e = static_cast<int>(l) + kExpMin;
        const float bound = std::nextafter(std::ldexp(1.0f, e), 0.0f);  // largest float below 2^e
        return FixedPointCodec::safe_scale(bound, nworkers);
      }
    return 1.0;  // every value is zero
  }

 private:
  std::vector<int32_t> lanes_;
};

// Data round of a float op: quantized on the fly as packets are sent. With a
// trailer, lane n carries this worker's count of saturated values.
class FloatIO final : public ResultStore {
 public:
  FloatIO(BufferPool& pool, std::span<const float> x, double scale, unsigned nworkers, bool trailer)
      : ResultStore(pool, x.size() + (trailer ? 1 : 0)), x_(x), codec_(scale, nworkers) {
    if (trailer) {
      // The count comes from the codec itself; the scratch is the result buffer,
      // which the results overwrite later.
      const QuantStats st = codec_.encode(x, scratch().first(x.size()));
      trailer_ = static_cast<int32_t>(std::min<uint64_t>(st.overflowed, static_cast<uint64_t>(codec_.limit())));
    }
  }
  void read_gradient(uint64_t off, std::span<int32_t> out) override {
    const size_t k = off < x_.size() ? std::min<size_t>(out.size(), x_.size() - off) : 0;
    if (k) codec_.encode(x_.subspan(off, k), out.first(k));
    if (k < out.size()) out[k] = trailer_;  // only lane n lies beyond the data
  }
  const FixedPointCodec& codec() const { return codec_; }
  int32_t trailer_sum() const { return result()[x_.size()]; }

 private:
  std::span<const float> x_;
  FixedPointCodec codec_;
  int32_t trailer_ = 0;
};

class IntIO final : public ResultStore {
 public:
  IntIO(BufferPool& pool, std::span<const int32_t> x) : ResultStore(pool, x.size()), x_(x) {}
  void read_gradient(uint64_t off, std::span<int32_t> out) override {
    std::memcpy(out.data(), x_.data() + off, out.size_bytes());
  }

 private:
  std::span<const int32_t> x_;
};

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
  enum class Stage { New, Scale, Data };
  Kind kind = Kind::Float;
  std::span<float> f;
  std::span<int32_t> i;
  AllreduceOptions opt;
  Time issued = 0;
  // I/O thread only.
  Stage stage = Stage::New;
  bool fixed_round = false;    // the data round carries a trailer lane
  bool submitted_all = false;  // later ops may start submitting
  std::shared_ptr<ScaleIO> scale_io;
  std::shared_ptr<ResultStore> data_io;
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
  BufferPool buffers;  // before the transport: retained ops return buffers here
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
  std::deque<std::shared_ptr<OpState>> pending;  // not fully submitted, issue order
  std::unordered_map<uint64_t, std::shared_ptr<OpState>> by_sub;  // transport op id -> op
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
    {
      std::lock_guard lk(mu);
      for (auto& op : inbox) pending.push_back(std::move(op));
      inbox.clear();
    }
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


  void submit(const std::shared_ptr<OpState>& op, std::shared_ptr<host::TensorIO> io, uint64_t elems) {
    const uint32_t prio = op->opt.priority ? op->opt.priority : cfg.priority;
    uint64_t id = 0;
    engine->invoke(*node, [&](Time now, Effects& fx) {
      id = tx->submit(std::move(io), elems, prio);
      tx->pump(now, fx);
    });
    by_sub.emplace(id, op);
  }

  void submit_scale(const std::shared_ptr<OpState>& op) {
    op->stage = OpState::Stage::Scale;
    op->scale_io = std::make_shared<ScaleIO>(buffers, op->f);
    submit(op, op->scale_io, kScaleLanes);
  }

  void submit_float_data(const std::shared_ptr<OpState>& op, double scale, bool trailer) {
    op->stage = OpState::Stage::Data;
    op->fixed_round = trailer;
    op->info.scale = scale;
    auto io = std::make_shared<FloatIO>(buffers, op->f, scale, cfg.nworkers, trailer);
    op->data_io = io;
    submit(op, io, op->f.size() + (trailer ? 1 : 0));
  }

  // Starts the op at the head of the submission order.
  void begin(const std::shared_ptr<OpState>& op) {
    if (op->kind == OpState::Kind::Int) {
      op->stage = OpState::Stage::Data;
      auto io = std::make_shared<IntIO>(buffers, op->i);
      op->data_io = io;
      submit(op, io, op->i.size());
      op->submitted_all = true;
    } else if (cfg.scale_mode == ScaleMode::Fixed) {
      submit_float_data(op, cfg.fixed_scale, true);  // the verdict on overflow gates later ops
    } else {
      submit_scale(op);
    }
  }

  // Submits in issue order: an op's rounds depend only on results every
  // worker shares, so all workers produce the same PSN stream.
  void advance() {
    while (!pending.empty()) {
      auto op = pending.front();
      if (op->stage == OpState::Stage::New) begin(op);
      if (!op->submitted_all) return;
      pending.pop_front();
    }
  }

  void process_completions() {
    while (!completed_ids.empty()) {
      const auto ids = std::exchange(completed_ids, {});
      for (uint64_t id : ids) {
        auto it = by_sub.find(id);
        if (it == by_sub.end()) continue;
        auto op = it->second;
        by_sub.erase(it);
        on_round_done(op);
      }
      advance();
    }
    if (!done_sent && control_open) maybe_send_done();
  }

  void on_round_done(const std::shared_ptr<OpState>& op) {
    last_progress = engine->now();
    if (op->stage == OpState::Stage::Scale) {
      if (const int32_t bad = op->scale_io->nonfinite(); bad > 0) {
        op->submitted_all = true;
        complete(op, std::make_exception_ptr(NonFiniteError(fmt::format(
                         "allreduce of {} values: {} worker(s) of job {} passed NaN or infinite values, which fixed "
                         "point cannot carry; the buffer is unchanged", op->f.size(), bad, cfg.job))));
        return;
      }
      const double scale = op->scale_io->scale(cfg.nworkers);
      op->scale_io.reset();
      submit_float_data(op, scale, false);
      op->submitted_all = true;
      return;
    }
    if (op->kind == OpState::Kind::Int) {
      const auto& io = static_cast<const IntIO&>(*op->data_io);
      std::memcpy(op->i.data(), io.result().data(), op->i.size_bytes());
      complete(op, nullptr);
      return;
    }
    const auto& io = static_cast<const FloatIO&>(*op->data_io);
    if (op->fixed_round) {
      if (io.trailer_sum() > 0) {  // saturated somewhere: redo with an agreed scale
        op->info.retried = true;
        op->data_io.reset();
        submit_scale(op);
        return;
      }
      op->submitted_all = true;
    }
    const double divisor = op->opt.op == ReduceOp::Average ? cfg.nworkers : 1.0;
    io.codec().decode(io.result().first(op->f.size()), op->f, divisor);
    complete(op, nullptr);
  }

  void complete(const std::shared_ptr<OpState>& op, std::exception_ptr err) {
    op->data_io.reset();  // the transport keeps its own reference while it retains the op
    op->scale_io.reset();
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
    if (!pending.empty() || !by_sub.empty()) return;
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
    if (by_sub.empty()) {
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
                            to_ms(cfg.progress_timeout) / 1000, where(), by_sub.size(), tx->next_psn(),
                            tx->lowest_unacked(), cfg.nworkers);
  }

  void fail_everything(const std::string& why) {
    std::vector<std::shared_ptr<OpState>> ops(pending.begin(), pending.end());
    for (auto& [id, op] : by_sub) ops.push_back(op);
    {
      std::lock_guard lk(mu);
      broken = why;
      for (auto& op : inbox) ops.push_back(op);
      inbox.clear();
    }
    pending.clear();
    by_sub.clear();
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
