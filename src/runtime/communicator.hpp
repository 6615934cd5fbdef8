#pragma once
// ina::Communicator: the worker-side allreduce API over a running `ina switch`.
//
//   ina::CommConfig cfg = ina::CommConfig::from_env();   // or a struct, or from_toml_file()
//   ina::Communicator comm(cfg);                         // joins job cfg.job as rank cfg.rank
//   comm.allreduce(std::span<float>(grad));              // in place: the sum over all workers
//   auto r = comm.allreduce_async(std::span<float>(g2)); // returns at once
//   r.wait();
//
// It owns a host::WorkerTransport (the same object the simulator drives) and
// a Host UdpEngine whose gateway is the switch. The engine loop runs in one
// internal I/O thread; calls hand their work to it and wait on a handle.
//
// Floats are sent as int32 fixed point (FixedPointCodec) and summed exactly
// by the switch, so every worker gets bit-identical results, equal to
// decode(sum over workers of encode(x)). The scale:
//  - ScaleMode::Agree (default): before each float allreduce a small exact
//    round agrees on the largest binary exponent of |x| over all workers:
//    every worker contributes a one-hot vector over float exponents (plus one
//    "non-finite" lane), whose sum tells everyone the global maximum. The
//    scale is then FixedPointCodec::safe_scale(that bound, n): no value can
//    overflow, and n values can never overflow their int32 sum.
//  - ScaleMode::Fixed: the caller's scale, one round. Each worker appends one
//    lane holding its count of values that saturate; if the summed count is
//    nonzero, every worker sees it, and all of them redo the op with an
//    agreed scale (the fallback) — AllreduceInfo::retried tells.
//  - NaN or +-Inf in any worker's input: fixed point cannot carry them. Every
//    worker's call then fails with NonFiniteError (consistently, so the job
//    stays in step and the communicator stays usable); the buffer is untouched.
// Integer allreduce is exact as it is, provided |x| <= INT32_MAX / n (the
// switch saturates beyond, and counts it in its "overflow" statistic).
//
// Ordering: every worker of a job must issue the same allreduces (same sizes)
// in the same order; the op sequence forms one PSN stream. Each op's
// internal rounds are submitted in an order that depends only on the issue
// order, never on timing, so streams stay identical across workers.
//
// Bounded waits: joining (connect_timeout, rendezvous_timeout), every op
// (progress_timeout: no result for that long fails the op, naming the switch)
// and close (close_timeout). A switch that goes away, or a peer that leaves
// the job, fails pending and later calls with the switch's message.
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "host/profile.hpp"
#include "runtime/net.hpp"
#include "runtime/udp_engine.hpp"

namespace ina {

using rt::InputError;
using rt::RuntimeError;

struct NonFiniteError : RuntimeError {
  using RuntimeError::RuntimeError;
};

enum class ScaleMode { Agree, Fixed };
enum class ReduceOp { Sum, Average };

// A worker's initial send window (DSA §III-D: 60 KB), in bytes whatever the
// datagram size: the simulator's 196 packets of 306 B. Counted in packets
// instead, it would be 1.6 MB of 8 KiB datagrams, past the queues of the
// emulated clusters' links.
inline constexpr double kDefaultWindowKb = 60;
// A window of `kb` KiB in packets of `datagram_bytes` bytes (at least one).
double window_packets(double kb, size_t datagram_bytes);

struct CommConfig {
  std::string switch_addr = "127.0.0.1:7700";  // `ina switch` (UDP data and TCP control)
  std::string bind_ip;          // local UDP address; empty: the one that reaches the switch
  uint16_t job = 1;
  // The job's credential (64 hex digits, from its launcher): proves at the
  // switch that this process may join `job`. Empty: INA_JOB_KEY, or derived
  // from INA_SWITCH_KEY (see runtime/auth.hpp).
  std::string job_key;
  unsigned rank = 0;
  unsigned nworkers = 1;
  uint16_t payload_values = 0;  // 0: the switch's; otherwise it must match
  uint32_t priority = 1u << 16; // DSA preemption priority of this worker's packets (higher wins)
  ScaleMode scale_mode = ScaleMode::Agree;
  double fixed_scale = 0;       // ScaleMode::Fixed
  double window_kb = kDefaultWindowKb;  // initial send window
  double max_window_kb = 8192;
  // The engine profile (host/profile.hpp) these four come from: `runtime` by
  // default; key `profile` / INA_PROFILE selects another one first, and the
  // keys below then override single fields. Why each differs from `paper`:
  // docs/architecture.md, "Engine profiles".
  std::string profile{host::kRuntimeProfile.name};
  size_t retain_ops = host::kRuntimeProfile.retain_ops;  // completed ops kept to answer the PS; equal on every worker of a job
  Time min_rto = host::kRuntimeProfile.min_rto;          // RTO floor
  bool fast_retransmit = host::kRuntimeProfile.fast_retransmit;  // time-based fast retransmit (host/worker.hpp)
  Time delay_target = host::kRuntimeProfile.delay_target;        // delay signal (host/worker.hpp); 0 turns it off
  bool offload = true;          // UDP segmentation offload (rt::EngineConfig::offload)
  // Require datagram authentication (runtime/datagram_tag.hpp): a switch that
  // does not tag datagrams is refused at join. Whatever this says, the
  // worker tags its datagrams when the switch announces tags.
  bool datagram_auth = false;
  Time connect_timeout = 10 * kSec;
  Time rendezvous_timeout = 60 * kSec;
  Time progress_timeout = 60 * kSec;
  Time close_timeout = 30 * kSec;
  rt::FaultConfig faults;       // applied to every datagram this worker sends

  // Sets `profile` and the four fields above from p.
  void apply_profile(const host::Profile& p);
  // Throws RuntimeError naming the bad field.
  void validate() const;
  nlohmann::json to_json() const;

  // TOML: a [communicator] table (profile (applied before the other keys), switch, bind_ip, job, rank, workers, payload,
  // priority, scale = "agree" | number, window_kb, max_window_kb, retain_ops,
  // min_rto_ms, fast_retransmit, delay_target_ms (0: off), offload, datagram_auth, connect_timeout_ms, rendezvous_timeout_ms, timeout_ms,
  // close_timeout_ms) and a [faults] table (loss, duplicate, reorder,
  // reorder_us, delay_us, seed). Unknown keys are errors.
  // `base` supplies the values the file does not set (defaults if omitted).
  static CommConfig from_toml_file(const std::string& path);
  static CommConfig from_toml_file(const std::string& path, CommConfig base);
  static CommConfig from_toml_string(const std::string& text, const std::string& origin, CommConfig base);
  // INA_CONFIG (a TOML file, read first), then INA_PROFILE, INA_SWITCH, INA_BIND_IP,
  // INA_JOB, INA_RANK, INA_WORKERS, INA_PAYLOAD, INA_PRIORITY, INA_SCALE,
  // INA_WINDOW_KB, INA_MAX_WINDOW_KB, INA_RETAIN_OPS, INA_MIN_RTO_MS,
  // INA_FAST_RETRANSMIT, INA_DELAY_TARGET_MS, INA_OFFLOAD, INA_DATAGRAM_AUTH,
  // INA_CONNECT_TIMEOUT_MS, INA_RENDEZVOUS_TIMEOUT_MS, INA_TIMEOUT_MS,
  // INA_CLOSE_TIMEOUT_MS, INA_LOSS, INA_DUPLICATE, INA_REORDER,
  // INA_REORDER_US, INA_DELAY_US, INA_FAULT_SEED.
  static CommConfig from_env();
  static CommConfig from_env(CommConfig base);
  // The same keys as name/value texts (the Python module's dict): "rank" for
  // communicator.rank, "faults.loss" for a [faults] key. Errors name
  // "origin: section.key" and the value, as for a file.
  static CommConfig from_settings(const std::vector<std::pair<std::string, std::string>>& settings,
                                  const std::string& origin, CommConfig base);
};

struct AllreduceOptions {
  ReduceOp op = ReduceOp::Sum;
  uint32_t priority = 0;  // 0: the communicator's
};

// Sparse allreduce (allreduce_sparse): keys strictly ascending, each below
// UINT64_MAX (reserved), one value per key.
struct SparseOptions {
  ReduceOp op = ReduceOp::Sum;  // Average divides by the number of workers, not by how many had the key
  // Dense schemes (SwitchML streams the whole model): the model's size; every
  // key must be below it. Required there, ignored by <key, value> schemes.
  // The op needs about 16 B per key: a key_space beyond MemAvailable / 16 is
  // refused (RuntimeError naming it) before anything is allocated.
  uint64_t key_space = 0;
};

struct AllreduceInfo {
  double scale = 0;      // float ops: the fixed-point scale used
  bool retried = false;  // ScaleMode::Fixed: saturated somewhere, redone with an agreed scale
  Time elapsed = 0;      // from issue to completion
};

template <typename T>
struct SparseResult {
  std::vector<uint64_t> keys;  // the union of every worker's keys, ascending
  std::vector<T> values;       // their sums
  AllreduceInfo info;
};

class Communicator {
 public:
  struct OpState;

  // Handle of an asynchronous allreduce. The buffer must stay alive and
  // untouched until the op is finished: results are written into it packet
  // by packet as they arrive (if the op fails during its data round, the
  // buffer holds a mix of inputs and results).
  class Request {
   public:
    Request() = default;
    bool valid() const { return static_cast<bool>(op_); }
    // True once the op has finished (successfully or not); never blocks.
    bool test() const;
    // Blocks until the op finishes; throws its error. Bounded by the
    // communicator's progress timeout.
    void wait();
    const AllreduceInfo& info() const;

   private:
    friend class Communicator;
    explicit Request(std::shared_ptr<OpState> op) : op_(std::move(op)) {}
    std::shared_ptr<OpState> op_;
  };

  // Connects to the switch and joins the job; throws RuntimeError.
  explicit Communicator(const CommConfig& cfg);
  // close(), swallowing its errors.
  ~Communicator();
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;

  AllreduceInfo allreduce(std::span<float> data, const AllreduceOptions& o = {});
  AllreduceInfo allreduce(std::span<int32_t> data, const AllreduceOptions& o = {});
  Request allreduce_async(std::span<float> data, const AllreduceOptions& o = {});
  Request allreduce_async(std::span<int32_t> data, const AllreduceOptions& o = {});

  // Sparse allreduce: the sum of every worker's <key, value> pairs for the
  // union of their keys, the same on every worker (floats as for allreduce:
  // fixed point with an agreed or fixed scale, exact sums of the encoded
  // values; int32 exact). On a <key, value> scheme (zebra, ps-lite) the
  // pairs travel as such: Zebra aggregates the hot-set keys in the switch and
  // the rest at the PS; PS-lite pushes every pair to the PS. On a dense
  // scheme (switchml, atp, dsa) the whole model of opt.key_space values is
  // streamed, zeros included, plus one byte of key presence per key (so the
  // result lists exactly the union; n <= 255 workers, two bytes beyond).
  // Every worker must issue the same sequence of sparse and dense ops; the
  // key sets may differ. Blocking; throws RuntimeError (bad input: naming the
  // index), NonFiniteError.
  SparseResult<float> allreduce_sparse(std::span<const uint64_t> keys, std::span<const float> values,
                                       const SparseOptions& o = {});
  SparseResult<int32_t> allreduce_sparse(std::span<const uint64_t> keys, std::span<const int32_t> values,
                                         const SparseOptions& o = {});
  // (A dense allreduce on a <key, value> scheme runs as keys 0..n-1 and a
  // float op's scale round as keys 0..278: every op is its own iteration, so
  // sums never mix, but a hot set holding such small keys also aggregates
  // those ops' pairs in the switch. Offset sparse keys (e.g. by 2^32) to keep
  // the hot set to them.)
  // Zebra: the job's hot set from the next sparse op on: keys ranked hottest
  // first, at most the switch's table entries and value registers. A
  // collective: every worker calls it at the same point of its op sequence
  // with the same list; the switch installs it once all have, and no
  // gradient is lost in the change. Returns the table's version; 0 (and does
  // nothing) on a scheme without a hot-set table. Throws RuntimeError with the
  // switch's reason if it refuses (lists differ, too many keys); the job goes
  // on with the previous table. Bounded by rendezvous_timeout (a worker that
  // never calls it fails the others' call, and their communicators).
  uint32_t set_hot_keys(std::span<const uint64_t> ranked);

  // Waits for outstanding ops, then until every worker of the job is done
  // (so late requests of slower peers are still answered). Idempotent.
  void close();
  // Leaves the job without the "done" of close(): stops the I/O thread and
  // closes the control connection, so the switch aborts the job at once and
  // the other workers fail fast instead of waiting for this one. For a
  // process that is failing (the Python package calls it at exit after an
  // uncaught exception). Outstanding ops fail. Idempotent; close() then does nothing.
  void abandon();

  const CommConfig& config() const;
  unsigned rank() const;
  unsigned size() const;
  uint16_t payload_values() const;
  const std::string& policy() const;
  const std::string& scheme() const;  // the switch's scheme (schemes/registry.hpp)
  bool sparse_native() const;         // sparse ops travel as <key, value> pairs (zebra, ps-lite)
  // Transport and engine statistics (a snapshot; thread-safe).
  nlohmann::json stats() const;

 private:
  template <typename T>
  SparseResult<T> sparse_impl(std::span<const uint64_t> keys, std::span<const T> values, const SparseOptions& o);
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace ina
