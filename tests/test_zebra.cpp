// Zebra (issue 11): the sparse data path — KV codec, layout and Algorithm 1,
// the switch program, the sparse hosts and the simulator runner.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <set>

#include "control/zebra_layout.hpp"
#include "core/rng.hpp"
#include "experiment/sparse.hpp"
#include "wire/kv.hpp"

using namespace ina;
namespace z = ina::control::zebra;

namespace {

// A small heavy-tailed source: per (iteration, worker), `nnz` draws from a
// Zipf(1.1) over `params` ranks, scrambled to keys; deterministic.
class ZipfSource final : public workload::SparseSource {
 public:
  ZipfSource(uint64_t params, unsigned workers, unsigned iters, unsigned nnz, uint64_t seed = 7)
      : n_(params), w_(workers), it_(iters), nnz_(nnz), seed_(seed) {
    double c = 0;
    cdf_.resize(params);
    for (uint64_t r = 0; r < params; ++r) cdf_[r] = (c += 1.0 / std::pow(double(r + 1), 1.1));
    for (auto& x : cdf_) x /= c;
  }
  std::string name() const override { return "zipf-test"; }
  uint64_t num_params() const override { return n_; }
  unsigned workers() const override { return w_; }
  unsigned iterations() const override { return it_; }
  std::vector<uint64_t> keys(unsigned iteration, unsigned worker) const override {
    Rng rng(seed_ * 1000003 + iteration * 131 + worker);
    std::set<uint64_t> ks;
    for (unsigned i = 0; i < nnz_; ++i) {
      const double u = rng.uniform();
      const uint64_t r = static_cast<uint64_t>(std::lower_bound(cdf_.begin(), cdf_.end(), u) - cdf_.begin());
      ks.insert(scramble(std::min(r, n_ - 1)));
    }
    return {ks.begin(), ks.end()};
  }
  uint64_t scramble(uint64_t r) const { return (r * 0x9E3779B97F4A7C15ULL) ^ 0x5bd1e995; }

 private:
  uint64_t n_;
  unsigned w_, it_, nnz_;
  uint64_t seed_;
  std::vector<double> cdf_;
};

}  // namespace

TEST(Zebra, RunsExactOnALosslessStar) {
  ZipfSource src(20000, 4, 3, 2000);
  exp::SparseSettings s;
  s.workers = 4;
  s.iterations = 3;
  s.hot_keys = 1000;
  auto z = exp::run_sparse(s, src);
  auto p = [&] { auto t = s; t.scheme = "ps-lite"; return exp::run_sparse(t, src); }();
  std::printf("zebra %.2f Gbps hot share %.3f recirc/pkt %.3f; ps-lite %.2f Gbps\n", z.agg_throughput_gbps,
              z.hot_share, z.recirc_per_packet, p.agg_throughput_gbps);
}
