#include "host/float_allreduce.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <stdexcept>

#include <fmt/format.h>

#include "core/counted.hpp"

namespace ina::host {

// ---------------------------------------------------------------- scale lanes

void scale_lanes(std::span<const float> x, std::span<int32_t> lanes) {
  std::fill(lanes.begin(), lanes.end(), 0);
  // On the bits, so that it vectorizes: |v|'s bits order as |v| does, and
  // are above those of the largest float exactly for inf and NaN. One pass
  // finds the largest |v| of all; only if that is not finite, a second finds
  // the largest finite one.
  constexpr int32_t kMaxFinite = 0x7f7fffff;
  auto max_bits = [&](bool finite_only) {
    int32_t mb = 0;
    for (const float v : x) {
      int32_t b;
      std::memcpy(&b, &v, sizeof b);
      b &= 0x7fffffff;
      b = finite_only && b > kMaxFinite ? 0 : b;
      mb = b > mb ? b : mb;
    }
    return mb;
  };
  int32_t mb = max_bits(false);
  const bool nonfinite = mb > kMaxFinite;
  if (nonfinite) mb = max_bits(true);
  float m;
  std::memcpy(&m, &mb, sizeof m);
  if (m > 0) {
    int e = 0;
    std::frexp(m, &e);  // m < 2^e
    lanes[static_cast<size_t>(e - kScaleExpMin)] = 1;
  }
  if (nonfinite) lanes[kScaleExpLanes] = 1;
}

double agreed_scale(std::span<const int32_t> lanes, unsigned nworkers) {
  for (size_t l = kScaleExpLanes; l-- > 0;)
    if (lanes[l] > 0) {
      const int e = static_cast<int>(l) + kScaleExpMin;
      const float bound = std::nextafter(std::ldexp(1.0f, e), 0.0f);  // largest float below 2^e
      return FixedPointCodec::safe_scale(bound, nworkers);
    }
  return 1.0;  // every value is zero
}

// ---------------------------------------------------------------- buffers

ResultBuffer BufferPool::get(size_t n) {
  // The smallest free buffer that holds n values (a scale round's 279 must
  // not take a data round's megabytes, which the next data round would then
  // allocate and fault in anew); if none holds n, a new one (growing a
  // pooled one would copy its stale contents). Nothing for n = 0.
  if (n == 0) return {};
  size_t best = free_.size();
  for (size_t i = 0; i < free_.size(); ++i)
    if (free_[i].capacity() >= n && (best == free_.size() || free_[i].capacity() < free_[best].capacity())) best = i;
  ResultBuffer v;
  if (best < free_.size()) {
    v = std::move(free_[best]);
    free_.erase(free_.begin() + static_cast<std::ptrdiff_t>(best));
  }
  v.resize(n);
  return v;
}

void BufferPool::put(ResultBuffer v) {
  if (v.capacity() == 0) return;
  if (free_.size() < kKeep) {
    free_.push_back(std::move(v));
    return;
  }
  auto small = std::min_element(free_.begin(), free_.end(),
                                [](const auto& a, const auto& b) { return a.capacity() < b.capacity(); });
  if (small->capacity() < v.capacity()) *small = std::move(v);  // keep the larger buffers
}

ResultStore::ResultStore(std::shared_ptr<BufferPool> pool, size_t n)
    : pool_(std::move(pool)), res_(pool_ ? pool_->get(n) : ResultBuffer(n)) {}

ResultStore::~ResultStore() {
  if (pool_) pool_->put(std::move(res_));
}

void ResultStore::write_result(uint64_t off, std::span<const int32_t> in) {
  std::memcpy(res_.data() + off, in.data(), in.size_bytes());
}

void ResultStore::read_result(uint64_t off, std::span<int32_t> out) {
  if (off > res_.size() || out.size() > res_.size() - off)
    throw std::logic_error("ResultStore: a result was asked for but results are not kept (keep_results is off)");
  std::memcpy(out.data(), res_.data() + off, out.size_bytes());
}

namespace {

// Scale round of a float op: this worker's one-hot exponent lanes.
class ScaleIO final : public ResultStore {
 public:
  ScaleIO(std::shared_ptr<BufferPool> pool, std::span<const float> x)
      : ResultStore(std::move(pool), kScaleLanes), lanes_(kScaleLanes, 0) {
    scale_lanes(x, lanes_);
  }
  void read_gradient(uint64_t off, std::span<int32_t> out) override {
    std::memcpy(out.data(), lanes_.data() + off, out.size_bytes());
  }
  // Workers that passed non-finite values.
  int32_t nonfinite() const { return result()[kScaleExpLanes]; }
  double scale(unsigned nworkers) const { return agreed_scale(result(), nworkers); }

 private:
  std::vector<int32_t> lanes_;
};

// Data round of a float op: quantized on the fly as packets are sent. With a
// trailer (fixed scale), lane n carries this worker's count of saturated
// values and the int32 sums wait for the verdict; without one (agreed scale:
// nothing saturates), each result packet is decoded straight into x, and the
// int32 sums are kept only if a PS may ask for them.
class FloatIO final : public ResultStore {
 public:
  FloatIO(std::shared_ptr<BufferPool> pool, std::span<float> x, double scale, const FloatAllreduceOptions& o,
          bool trailer)
      : ResultStore(std::move(pool), trailer ? x.size() + 1 : o.keep_results ? x.size() : 0),
        x_(x),
        codec_(scale, o.nworkers),
        divisor_(o.average ? static_cast<double>(o.nworkers) : 1.0),
        trailer_mode_(trailer),
        keep_(o.keep_results) {
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
  void write_result(uint64_t off, std::span<const int32_t> in) override {
    if (trailer_mode_ || keep_) ResultStore::write_result(off, in);
    if (!trailer_mode_) codec_.decode(in, x_.subspan(off, in.size()), divisor_);
  }
  // Fixed scale, after the round passed its verdict: the kept sums into x.
  void decode_kept() const { codec_.decode(result().first(x_.size()), x_, divisor_); }
  int32_t trailer_sum() const { return result()[x_.size()]; }

 private:
  std::span<float> x_;
  FixedPointCodec codec_;
  double divisor_;
  bool trailer_mode_, keep_;
  int32_t trailer_ = 0;
};

// An int32 round: results go straight into x (and into the store if kept).
class IntIO final : public ResultStore {
 public:
  IntIO(std::shared_ptr<BufferPool> pool, std::span<int32_t> x, bool keep)
      : ResultStore(std::move(pool), keep ? x.size() : 0), x_(x), keep_(keep) {}
  void read_gradient(uint64_t off, std::span<int32_t> out) override {
    std::memcpy(out.data(), x_.data() + off, out.size_bytes());
  }
  void write_result(uint64_t off, std::span<const int32_t> in) override {
    if (keep_) ResultStore::write_result(off, in);
    std::memcpy(x_.data() + off, in.data(), in.size_bytes());
  }

 private:
  std::span<int32_t> x_;
  bool keep_;
};

}  // namespace

// ---------------------------------------------------------------- FloatAllreduce

FloatAllreduce::FloatAllreduce(std::span<float> data, const FloatAllreduceOptions& o, std::shared_ptr<BufferPool> pool)
    : x_(data), opt_(o), pool_(std::move(pool)) {
  if (data.empty()) throw std::invalid_argument("float allreduce of an empty buffer");
  if (o.nworkers < 1 || o.nworkers > 64) throw std::invalid_argument("float allreduce: nworkers must be in 1..64");
  if (o.mode == FloatScaleMode::Fixed && !(o.fixed_scale > 0 && std::isfinite(o.fixed_scale)))
    throw std::invalid_argument("float allreduce: a fixed scale must be a positive finite number");
}

void FloatAllreduce::submit_scale() {
  round_.kind = IntRound::Kind::Scale;
  round_.io = std::make_shared<ScaleIO>(pool_, x_);
  round_.elems = kScaleLanes;
}

void FloatAllreduce::submit_data(double scale, bool trailer) {
  round_.kind = trailer ? IntRound::Kind::FixedData : IntRound::Kind::Data;
  info_.scale = scale;
  round_.io = std::make_shared<FloatIO>(pool_, x_, scale, opt_, trailer);
  round_.elems = x_.size() + (trailer ? 1 : 0);
}

const IntRound& FloatAllreduce::start() {
  if (started_) throw std::logic_error("FloatAllreduce::start called twice");
  started_ = true;
  if (opt_.mode == FloatScaleMode::Fixed) submit_data(opt_.fixed_scale, true);  // the overflow verdict gates later ops
  else submit_scale();
  return round_;
}

bool FloatAllreduce::last_round() const { return finished_ || round_.kind == IntRound::Kind::Data; }

RoundPlan::Status FloatAllreduce::on_complete() {
  if (!started_ || finished_) throw std::logic_error("FloatAllreduce::on_complete without an outstanding round");
  switch (round_.kind) {
    case IntRound::Kind::Scale: {
      const auto& io = static_cast<const ScaleIO&>(*round_.io);
      if (const int32_t bad = io.nonfinite(); bad > 0) {
        info_.nonfinite_workers = bad;
        error_ = fmt::format(
            "allreduce of {} values: {} of job {} passed NaN or infinite values, which fixed point cannot "
            "carry; the buffer is unchanged",
            x_.size(), counted(static_cast<uint64_t>(bad), "worker"), opt_.job);
        round_.io.reset();
        finished_ = true;
        return Status::Failed;
      }
      const double scale = io.scale(opt_.nworkers);
      submit_data(scale, false);
      return Status::Submit;
    }
    case IntRound::Kind::FixedData: {
      const auto& io = static_cast<const FloatIO&>(*round_.io);
      if (io.trailer_sum() > 0) {  // saturated somewhere: redo with an agreed scale
        info_.retried = true;
        submit_scale();
        return Status::Submit;
      }
      io.decode_kept();
      break;
    }
    case IntRound::Kind::Data:  // decoded into x_ packet by packet
      break;
    case IntRound::Kind::Int:
      throw std::logic_error("FloatAllreduce: integer round");
  }
  round_.io.reset();  // the transport keeps its own reference while it retains the op
  finished_ = true;
  return Status::Done;
}

// ---------------------------------------------------------------- IntAllreduce

IntAllreduce::IntAllreduce(std::span<int32_t> data, std::shared_ptr<BufferPool> pool, bool keep_results)
    : x_(data), pool_(std::move(pool)), keep_results_(keep_results) {
  if (data.empty()) throw std::invalid_argument("integer allreduce of an empty buffer");
}

const IntRound& IntAllreduce::start() {
  if (round_.io) throw std::logic_error("IntAllreduce::start called twice");
  round_.kind = IntRound::Kind::Int;
  round_.io = std::make_shared<IntIO>(pool_, x_, keep_results_);
  round_.elems = x_.size();
  return round_;
}

RoundPlan::Status IntAllreduce::on_complete() {
  if (!round_.io || finished_) throw std::logic_error("IntAllreduce::on_complete without an outstanding round");
  round_.io.reset();  // the results are in x_ already
  finished_ = true;
  return Status::Done;
}

// ---------------------------------------------------------------- AllreduceQueue

uint64_t AllreduceQueue::add(std::span<float> data, const FloatAllreduceOptions& o, uint32_t tag) {
  FloatAllreduceOptions ko = o;
  ko.keep_results = keep_results_;
  return add(std::make_unique<FloatAllreduce>(data, ko, pool_), tag);
}

uint64_t AllreduceQueue::add(std::span<int32_t> data, uint32_t tag) {
  return add(std::make_unique<IntAllreduce>(data, pool_, keep_results_), tag);
}

uint64_t AllreduceQueue::add(std::unique_ptr<RoundPlan> plan, uint32_t tag) {
  const uint64_t h = next_handle_++;
  ops_.emplace(h, Op{std::move(plan), tag});
  pending_.push_back(h);
  return h;
}

void AllreduceQueue::submit(WorkerTransport& tx, uint64_t handle, Op& op) {
  const IntRound& r = op.plan->round();
  by_sub_.emplace(tx.submit(r.io, r.elems, op.tag), handle);
}

size_t AllreduceQueue::submit_ready(WorkerTransport& tx) {
  size_t n = 0;
  while (!pending_.empty()) {
    auto it = ops_.find(pending_.front());
    if (it != ops_.end()) {
      Op& op = it->second;
      if (!op.started) {
        op.started = true;
        op.plan->start();
        submit(tx, it->first, op);
        ++n;
      }
      if (!op.plan->last_round()) return n;
    }
    pending_.pop_front();
  }
  return n;
}

size_t AllreduceQueue::on_completed(WorkerTransport& tx, std::span<const uint64_t> ids, std::vector<Finished>& out,
                                    size_t* submitted) {
  size_t mine = 0, sent = 0;
  for (const uint64_t id : ids) {
    auto s = by_sub_.find(id);
    if (s == by_sub_.end()) continue;
    const uint64_t h = s->second;
    by_sub_.erase(s);
    ++mine;
    auto it = ops_.find(h);
    if (it == ops_.end()) continue;  // forgotten by clear()
    Op& op = it->second;
    const RoundPlan::Status st = op.plan->on_complete();
    if (st == RoundPlan::Status::Submit) {
      submit(tx, h, op);  // the op is at the head of the issue order: its rounds go first
      ++sent;
      continue;
    }
    Finished f;
    f.handle = h;
    f.ok = st == RoundPlan::Status::Done;
    f.error = op.plan->error();
    if (auto* fl = dynamic_cast<const FloatAllreduce*>(op.plan.get())) {
      f.info = fl->info();
      f.nonfinite = fl->info().nonfinite_workers > 0;
    }
    out.push_back(std::move(f));
    ops_.erase(it);
  }
  sent += submit_ready(tx);
  if (submitted) *submitted += sent;
  return mine;
}

std::vector<uint64_t> AllreduceQueue::clear() {
  std::vector<uint64_t> hs;
  for (const auto& [h, op] : ops_) hs.push_back(h);
  std::sort(hs.begin(), hs.end());
  ops_.clear();
  pending_.clear();
  by_sub_.clear();
  return hs;
}

}  // namespace ina::host
