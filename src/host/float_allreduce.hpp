#pragma once
// The float allreduce protocol (sans-I/O): how a float tensor is reduced
// exactly through integer allreduces of a WorkerTransport.
//
// Floats travel as int32 fixed point (FixedPointCodec); the switch sums
// exactly and every worker decodes the same integers, so all workers get
// bit-identical results equal to decode(sum over workers of encode(x_r)).
// The scale:
//  - Agree: a first small exact round (the scale round, kScaleLanes values)
//    agrees on the largest binary exponent of |x| over all workers: each
//    worker contributes a one-hot vector over float exponents -149..128 plus
//    one lane counting workers with NaN/+-Inf. The scale is then
//    FixedPointCodec::safe_scale(largest float below 2^e_max, n): no value
//    can saturate and n values cannot overflow their int32 sum.
//  - Fixed: the caller's scale, one data round with one extra trailer lane
//    holding each worker's count of saturated values. If the summed count is
//    nonzero every worker sees it, and all redo the op with an agreed scale
//    (the overflow fallback; FloatAllreduceInfo::retried).
//  - Non-finite input anywhere: the scale round's last lane is nonzero on
//    every worker; the op fails (the same on all workers) and the buffer is
//    left unchanged.
//  - Average: the decoded sum divided by n.
//
// FloatAllreduce is one op: start() gives the first integer round to submit,
// on_complete() is called when the transport completes it (the round's
// TensorIO then holds the summed integers) and answers with the next round
// or the outcome. It has no threads, sockets or clocks.
//
// AllreduceQueue sequences many ops (float and int32) over one
// WorkerTransport in issue order. All workers of a job must issue the same
// ops in the same order (one PSN stream per job); an op's later rounds depend
// only on results every worker shares, so the queue submits an op's rounds,
// and starts the next op only once no further round of the current one can
// follow: the streams stay identical across workers regardless of timing.
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <deque>
#include <unordered_map>
#include <vector>

#include "core/zero_page_allocator.hpp"
#include "host/tensor_io.hpp"
#include "host/worker.hpp"
#include "wire/quant.hpp"

namespace ina::host {

// The scale round: one lane per binary exponent e of a float (|x| < 2^e, e
// from frexp), plus one lane counting workers with non-finite values.
inline constexpr int kScaleExpMin = -149;
inline constexpr int kScaleExpMax = 128;
inline constexpr size_t kScaleExpLanes = kScaleExpMax - kScaleExpMin + 1;
inline constexpr size_t kScaleLanes = kScaleExpLanes + 1;

// The scale every worker derives from the summed scale-round lanes (`lanes`
// has kScaleLanes values): safe for the largest exponent any worker
// reported; 1.0 if every value is zero.
double agreed_scale(std::span<const int32_t> lanes, unsigned nworkers);
// This worker's scale-round lanes for x (kScaleLanes values written).
void scale_lanes(std::span<const float> x, std::span<int32_t> lanes);

// An int32 result buffer. Results land before any read of their range, so a
// new buffer is not zero-filled up front: zeroing tens of MB would fault in
// every page before the op's first packet goes out (core/zero_page_allocator.hpp).
using ResultBuffer = std::vector<int32_t, ZeroPageAllocator<int32_t>>;

// Recycles large int32 buffers: allocating and faulting in tens of MB per op
// would cost more than the op's arithmetic. Not thread-safe; shared by the
// ResultStores of one owner (which may outlive it in the transport's
// retention, hence shared_ptr).
class BufferPool {
 public:
  ResultBuffer get(size_t n);
  void put(ResultBuffer v);

 private:
  static constexpr size_t kKeep = 4;
  std::vector<ResultBuffer> free_;
};

// The int32 sums of one round. Kept as integers: a worker that already has a
// result must be able to hand it to the PS while the transport retains the op.
class ResultStore : public TensorIO {
 public:
  ResultStore(std::shared_ptr<BufferPool> pool, size_t n);
  ~ResultStore() override;
  void write_result(uint64_t off, std::span<const int32_t> in) override;
  void read_result(uint64_t off, std::span<int32_t> out) override;
  std::span<const int32_t> result() const { return res_; }

 protected:
  std::span<int32_t> scratch() { return res_; }

 private:
  std::shared_ptr<BufferPool> pool_;
  ResultBuffer res_;
};

enum class FloatScaleMode { Agree, Fixed };

struct FloatAllreduceOptions {
  unsigned nworkers = 1;  // workers of the job (1..64)
  uint16_t job = 0;       // named in the non-finite error
  FloatScaleMode mode = FloatScaleMode::Agree;
  double fixed_scale = 0;  // FloatScaleMode::Fixed; > 0
  bool average = false;    // divide the sum by nworkers
  // Keep the int32 sums of the data round until the transport retires the
  // op: a job with a fallback server (PS) needs them to answer its requests
  // for results (WorkerTransport's GradRequest). Without one (false), results
  // are decoded straight from each result packet into the caller's buffer
  // and no int32 result buffer exists. Set by AllreduceQueue.
  bool keep_results = true;
};

struct FloatAllreduceInfo {
  double scale = 0;      // the fixed-point scale of the round that produced the result
  bool retried = false;  // Fixed: saturated somewhere, redone with an agreed scale
  int32_t nonfinite_workers = 0;  // > 0: failed (error() says so)
};

// One integer allreduce to submit to a WorkerTransport.
struct IntRound {
  enum class Kind { Scale, Data, FixedData, Int };
  Kind kind = Kind::Data;
  std::shared_ptr<TensorIO> io;
  uint64_t elems = 0;
};

// One allreduce as a sequence of integer rounds, at most one outstanding.
class RoundPlan {
 public:
  enum class Status { Submit, Done, Failed };
  virtual ~RoundPlan() = default;
  // The first round (call once; submit round()).
  virtual const IntRound& start() = 0;
  // The outstanding round completed. Submit: submit round() next; Done: the
  // caller's buffer holds the result; Failed: error() says why.
  virtual Status on_complete() = 0;
  // The outstanding round.
  const IntRound& round() const { return round_; }
  // No round can follow the outstanding one, whatever its result (or the op
  // has finished): later ops may start submitting.
  virtual bool last_round() const = 0;
  bool finished() const { return finished_; }
  const std::string& error() const { return error_; }

 protected:
  IntRound round_;
  bool finished_ = false;
  std::string error_;
};

// The float protocol above, for one op. `data` is read when rounds are
// submitted and sent. Results reach it without a staging copy: an agreed-scale
// data round decodes each result packet straight into its slice of `data`
// (a slice's gradient is never read again once its result is in: the
// transport neither resends nor serves a done packet's gradient). A
// fixed-scale round keeps the int32 sums until its overflow verdict (the last
// lane) is known, and decodes only if it passed. So `data` is unchanged when
// an op fails before its data round (non-finite input) or is redone; an op
// that fails during its data round (its transport broke) leaves a mix.
class FloatAllreduce final : public RoundPlan {
 public:
  // pool: where result buffers come from (nullptr: plain allocation).
  FloatAllreduce(std::span<float> data, const FloatAllreduceOptions& o, std::shared_ptr<BufferPool> pool = nullptr);
  const IntRound& start() override;
  Status on_complete() override;
  bool last_round() const override;
  const FloatAllreduceInfo& info() const { return info_; }
  const FloatAllreduceOptions& options() const { return opt_; }

 private:
  void submit_scale();
  void submit_data(double scale, bool trailer);

  std::span<float> x_;
  FloatAllreduceOptions opt_;
  std::shared_ptr<BufferPool> pool_;
  FloatAllreduceInfo info_;
  bool started_ = false;
};

// An exact int32 sum in one round (|x| <= INT32_MAX / n, else the switch
// saturates). Results are written straight into `data` as they arrive (kept
// as well when keep_results, as above).
class IntAllreduce final : public RoundPlan {
 public:
  IntAllreduce(std::span<int32_t> data, std::shared_ptr<BufferPool> pool = nullptr, bool keep_results = true);
  const IntRound& start() override;
  Status on_complete() override;
  bool last_round() const override { return true; }

 private:
  std::span<int32_t> x_;
  std::shared_ptr<BufferPool> pool_;
  bool keep_results_;
};

// Issue-order sequencing of ops over one WorkerTransport (see the header).
class AllreduceQueue {
 public:
  struct Finished {
    uint64_t handle = 0;
    bool ok = false;
    bool nonfinite = false;   // failed: NaN/Inf in some worker's input
    std::string error;
    FloatAllreduceInfo info;  // float ops
  };

  // keep_results: the workers' transport has a fallback server that may ask
  // for results (FloatAllreduceOptions::keep_results); set for every op.
  explicit AllreduceQueue(std::shared_ptr<BufferPool> pool = std::make_shared<BufferPool>(), bool keep_results = true)
      : pool_(std::move(pool)), keep_results_(keep_results) {}
  void set_keep_results(bool k) { keep_results_ = k; }

  // Queues an op; `tag` goes to every round's transport submit (the
  // PriorityFn's tag). Returns a handle (0, 1, ...). Nothing is submitted
  // until submit_ready().
  uint64_t add(std::span<float> data, const FloatAllreduceOptions& o, uint32_t tag = 0);
  uint64_t add(std::span<int32_t> data, uint32_t tag = 0);
  uint64_t add(std::unique_ptr<RoundPlan> plan, uint32_t tag = 0);

  // Submits every round that may go now, in issue order. Returns how many
  // were submitted (the caller then pumps the transport).
  size_t submit_ready(WorkerTransport& tx);
  // Transport ops completed (WorkerTransport::take_completed()). Finished
  // ops are appended to `out`; follow-up rounds and later ops are submitted.
  // Returns how many of `ids` were rounds of this queue, and adds the rounds
  // submitted to *submitted if given.
  size_t on_completed(WorkerTransport& tx, std::span<const uint64_t> ids, std::vector<Finished>& out,
                      size_t* submitted = nullptr);

  bool idle() const { return ops_.empty(); }
  size_t ops() const { return ops_.size(); }
  size_t rounds_in_flight() const { return by_sub_.size(); }
  // Forgets every op (the owner fails them); handles of the forgotten ops.
  std::vector<uint64_t> clear();

 private:
  struct Op {
    std::unique_ptr<RoundPlan> plan;
    uint32_t tag = 0;
    bool started = false;
  };
  void submit(WorkerTransport& tx, uint64_t handle, Op& op);

  std::shared_ptr<BufferPool> pool_;
  bool keep_results_ = true;
  std::unordered_map<uint64_t, Op> ops_;
  std::deque<uint64_t> pending_;  // not fully submitted, issue order
  std::unordered_map<uint64_t, uint64_t> by_sub_;  // transport op id -> handle
  uint64_t next_handle_ = 0;
};

}  // namespace ina::host
