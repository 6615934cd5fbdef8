#include <algorithm>
#include <exception>
#include <vector>

#include <fmt/format.h>

#include "runtime/communicator.hpp"
#include "train/reducer.hpp"

namespace ina::train {

namespace {

class InaReducer final : public Reducer {
 public:
  explicit InaReducer(const WorkerConfig& w) : comm_(ina_comm_config(w)) {}
  void average(std::span<float> data) override {
    AllreduceOptions o;
    o.op = ReduceOp::Average;
    comm_.allreduce(data, o);
  }
  void average(std::span<float> data, std::span<const Segment> segments) override {
    std::vector<Communicator::Request> ops;
    ops.reserve(segments.size());
    for (const Segment& s : segments) {
      AllreduceOptions o;
      o.op = ReduceOp::Average;
      o.priority = s.priority;
      ops.push_back(comm_.allreduce_async(data.subspan(s.offset, s.size), o));
    }
    // Every op is waited for before an error is rethrown: none may still
    // write into `data` once this returns.
    std::exception_ptr first;
    for (auto& op : ops) {
      try {
        op.wait();
      } catch (...) {
        if (!first) first = std::current_exception();
      }
    }
    if (first) std::rethrow_exception(first);
  }
  void close() override { comm_.close(); }
  std::string describe() const override {
    return fmt::format("ina ({} policy, {} values per packet)", comm_.policy(), comm_.payload_values());
  }
  nlohmann::json stats() const override { return comm_.stats(); }

 private:
  Communicator comm_;
};

std::vector<std::pair<std::string, std::string>> comm_pairs(const TrainConfig& t) {
  std::vector<std::pair<std::string, std::string>> kv;
  for (const auto& s : t.comm) {
    const size_t eq = s.find('=');
    if (eq == std::string::npos || eq == 0)
      throw rt::InputError(fmt::format("--comm: '{}' is not NAME=VALUE (e.g. fast_retransmit=false)", s));
    kv.emplace_back(s.substr(0, eq), s.substr(eq + 1));
  }
  return kv;
}

}  // namespace

CommConfig ina_comm_settings(const TrainConfig& t) {
  const auto kv = comm_pairs(t);
  // The job's own settings are ina-train's (its options and the launcher's).
  for (const auto& kv_pair : kv)
    for (const char* own : {"switch", "job", "job_key", "rank", "workers", "payload", "rendezvous_timeout_ms", "timeout_ms",
                            "close_timeout_ms"})
      if (const std::string& name = kv_pair.first; name == own || name == std::string("communicator.") + own)
        throw rt::InputError(fmt::format("--comm: {} is set by ina-train itself, not by --comm", name));
  return CommConfig::from_settings(kv, "ina-train --comm", CommConfig{});
}

CommConfig ina_comm_config(const WorkerConfig& w) {
  // --comm's settings first; the job's own (switch, job, rank, workers,
  // payload, timeouts) are ina-train's.
  CommConfig c = ina_comm_settings(w.train);
  c.switch_addr = w.switch_addr;
  c.job = w.job;
  c.rank = w.rank;
  c.nworkers = w.train.workers;
  c.payload_values = w.train.payload;
  const Time t = static_cast<Time>(std::min(w.train.timeout_s, 120.0) * kSec);
  c.rendezvous_timeout = t;
  c.progress_timeout = t;
  c.close_timeout = t;
  c.validate();
  return c;
}

std::unique_ptr<Reducer> make_ina_reducer(const WorkerConfig& cfg) { return std::make_unique<InaReducer>(cfg); }

}  // namespace ina::train
