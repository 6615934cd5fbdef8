// `ina bench allreduce`, sparse cases: allreduce_sparse over loopback UDP
//, Zebra against PS-lite-style push and SwitchML streaming the
// whole model, in the same run.
//
//  allreduce/sparse_<scheme>/workers:N — an in-process job: `ina switch`
//  (SwitchDaemon) and, for zebra and ps-lite, `ina ps` (PsDaemon) in
//  threads, N workers each with an ina::Communicator in its own thread, all
//  over real UDP sockets on 127.0.0.1. The workload is the OA-like synthetic
//  model (docs/zebra.md) at 1 % of its size (1.5 M parameters, ~10 K
//  non-zero keys per worker and iteration); int32 values
//  (workload::sparse_value), one allreduce_sparse per iteration, every
//  worker's result checked against the exact per-key sums computed here.
//  Zebra's hot set: the top 30 K keys of two profiling iterations, installed
//  with set_hot_keys before the clock starts. Time = the slowest worker's
//  time for `kIterations` ops. Counters: kv_pairs_per_s (pairs pushed by all
//  workers per second), Gbit_per_s (those pairs at 12 B each), hot_share.
#include <benchmark/benchmark.h>

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <map>
#include <thread>
#include <vector>

#include "experiment/sparse.hpp"
#include "runtime/auth.hpp"
#include "runtime/communicator.hpp"
#include "runtime/ps_daemon.hpp"
#include "runtime/switch_daemon.hpp"
#include "schemes/registry.hpp"
#include "workload/sparse.hpp"

namespace {

constexpr unsigned kProfile = 2, kIterations = 4;
constexpr double kScale = 0.01;
constexpr size_t kHotKeys = 30000;

void BM_SparseAllreduce(benchmark::State& state, const char* scheme_name) {
  using namespace ina;
  const unsigned n = static_cast<unsigned>(state.range(0));
  const auto& scheme = schemes::find(scheme_name);
  const auto src = workload::make_synthetic(*workload::find_sparse_model("oa"), n, kProfile + kIterations, 1, kScale);
  const std::vector<uint64_t> hot = exp::top_keys(*src, n, 0, kProfile, kHotKeys);
  // The per-iteration inputs and exact sums.
  std::vector<std::vector<std::vector<uint64_t>>> keys(kIterations, std::vector<std::vector<uint64_t>>(n));
  std::vector<std::vector<std::vector<int32_t>>> vals(kIterations, std::vector<std::vector<int32_t>>(n));
  std::vector<std::map<uint64_t, int64_t>> ref(kIterations);
  uint64_t pairs = 0, hot_pairs = 0;
  std::vector<bool> is_hot(src->num_params(), false);
  for (uint64_t k : hot) is_hot[k] = true;
  for (unsigned i = 0; i < kIterations; ++i)
    for (unsigned w = 0; w < n; ++w) {
      keys[i][w] = src->keys(kProfile + i, w);
      for (uint64_t k : keys[i][w]) {
        vals[i][w].push_back(workload::sparse_value(1, kProfile + i, w, k));
        ref[i][k] += vals[i][w].back();
        hot_pairs += is_hot[k];
      }
      pairs += keys[i][w].size();
    }
  double seconds = 0;
  unsigned ops = 0;
  for (auto _ : state) {
    const rt::Key key = rt::random_key();
    rt::SwitchDaemonConfig sc;
    sc.listen = rt::Endpoint::parse("127.0.0.1:0");
    sc.scheme = scheme.name;
    sc.program.memory_bytes = 1 << 20;  // the paper's 1 MB cap
    sc.program.payload_values = 8192;   // SwitchML's dense stream: the largest loopback datagrams (bench_allreduce.cpp)
    sc.key = key;
    sc.has_key = true;
    sc.log = false;
    rt::SwitchDaemon sw(sc);
    std::thread swt([&] { sw.run(); });
    std::string ps_error;
    std::thread pst;
    if (scheme.has_ps)
      pst = std::thread([&] {
        try {
          rt::PsDaemonConfig pc;
          pc.sw = sw.endpoint();
          pc.nworkers = n;
          pc.key = rt::job_key(key, 1);
          pc.has_key = true;
          pc.log = false;
          rt::PsDaemon ps(pc);
          ps.run();
        } catch (const std::exception& e) {
          ps_error = e.what();
        }
      });
    std::vector<double> took(n, 0);
    std::vector<std::string> errors(n);
    std::atomic<uint64_t> wrong{0};
    std::vector<std::thread> ws;
    for (unsigned r = 0; r < n; ++r)
      ws.emplace_back([&, r] {
        try {
          CommConfig c;
          c.switch_addr = sw.endpoint().str();
          c.job_key = rt::to_hex(rt::job_key(key, 1));
          c.rank = r;
          c.nworkers = n;
          Communicator comm(c);
          comm.set_hot_keys(hot);
          SparseOptions so;
          so.key_space = src->num_params();
          const Time t0 = rt::monotonic_now();
          for (unsigned i = 0; i < kIterations; ++i) {
            const auto res = comm.allreduce_sparse(keys[i][r], std::span<const int32_t>(vals[i][r]), so);
            size_t j = 0;
            bool ok = res.keys.size() == ref[i].size();
            for (auto it = ref[i].begin(); ok && it != ref[i].end(); ++it, ++j)
              ok = res.keys[j] == it->first && res.values[j] == it->second;
            if (!ok) ++wrong;
          }
          took[r] = to_ms(rt::monotonic_now() - t0) / 1000;
          comm.close();
        } catch (const std::exception& e) {
          errors[r] = e.what();
        }
      });
    for (auto& t : ws) t.join();
    if (pst.joinable()) pst.join();
    sw.request_stop();
    swt.join();
    std::string problem = ps_error;
    for (unsigned r = 0; r < n && problem.empty(); ++r)
      if (!errors[r].empty()) problem = fmt::format("worker {}: {}", r, errors[r]);
    if (problem.empty() && wrong) problem = fmt::format("{} results differ from the exact sums", wrong.load());
    if (!problem.empty()) {
      state.SkipWithError(problem.c_str());
      break;
    }
    const double s = *std::max_element(took.begin(), took.end());
    state.SetIterationTime(s);
    seconds += s;
    ops += kIterations;
  }
  state.counters["kv_pairs_per_s"] = seconds > 0 ? static_cast<double>(pairs) * ops / kIterations / seconds : 0;
  state.counters["Gbit_per_s"] = seconds > 0 ? static_cast<double>(pairs) * ops / kIterations * 12 * 8 / seconds / 1e9 : 0;
  state.counters["hot_share"] = std::string(scheme_name) == "zebra" ? static_cast<double>(hot_pairs) / pairs : 0;
  state.counters["ms_per_op"] = ops ? seconds * 1000 / ops : 0;
  state.counters["workers"] = n;
}

[[maybe_unused]] const int registered = [] {
  for (const char* s : {"zebra", "ps-lite", "switchml"})
    benchmark::RegisterBenchmark((std::string("allreduce/sparse_") + s).c_str(), BM_SparseAllreduce, s)
        ->ArgNames({"workers"})
        ->Arg(2)
        ->Arg(4)
        ->Arg(8)
        ->Iterations(1)
        ->UseManualTime()
        ->Unit(benchmark::kMillisecond);
  return 0;
}();

}  // namespace
