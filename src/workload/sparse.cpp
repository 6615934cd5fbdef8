#include "workload/sparse.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <fstream>
#include <numeric>
#include <sstream>
#include <stdexcept>

#include <fmt/format.h>

#include "core/rng.hpp"

namespace ina::workload {
namespace {

// The fit (docs/zebra.md, "Synthetic workloads"). Per (iteration, worker)
// batch the keys with a non-zero gradient are: the `head` hottest ranks
// (always activated, like the paper's commodity ID), and the distinct ranks
// of `draws` draws with replacement from a Zipf-Mandelbrot law
// P(rank r) ~ (r - head + q)^-s over the remaining ranks [head, n) — the
// feature activations of the batch's samples. A rank is then mapped to a key
// by a fixed bijection of [0, n) (keys are not ordered by heat). The update
// frequency of a key is the number of batches it appears in, which is what
// the paper's PS logs count (one push per key, worker and iteration).
//
// draws and head are assumptions (the paper gives neither); s and q are
// fitted to Fig. 4's points by scripts/zebra-fit with these draws:
//   oa        150 M params, 65,536 draws:  top 30 K = 50 %  -> s = 1.2031
//   se          9 M params, 65,536 draws:  top 30 K = 70 %  -> s = 1.3241
//   deeplight 0.32 M, 39,936 draws (Criteo's 39 fields x a batch of 1024):
//                                          top 30 K = 40 %  -> s = 0.7983
//   ncf       0.07 M, head 100 + 150 draws: top 100 = 40 %, top 5 K = 52 % -> s = 0.3962
//   lstm      wikitext-2's 33,278-word vocabulary, one key per word (an
//             embedding row), 700 draws (a batch of 20 x 35 tokens as in the
//             PyTorch word-language-model example), Zipf's law s = 1, q = 2.7
//             (Mandelbrot's word-frequency shift); not fitted (Fig. 4 has no LSTM)
const std::vector<SparseModelSpec>& specs() {
  static const std::vector<SparseModelSpec> v = {
      {"oa", 150'000'000, 0, 65536, 1.2031, 1.0, {{30000, 0.50}}},
      {"se", 9'000'000, 0, 65536, 1.3241, 1.0, {{30000, 0.70}}},
      {"deeplight", 320'000, 0, 39936, 0.7983, 1.0, {{30000, 0.40}}},
      {"ncf", 70'000, 100, 150, 0.3962, 1.0, {{100, 0.40}, {5000, 0.52}}},
      {"lstm", 33'278, 0, 700, 1.0, 2.7, {}},
  };
  return v;
}

// The continuous Zipf-Mandelbrot CDF over [0, span): F(x) = (G(x) - G(0)) / (G(span) - G(0)).
struct Zipf {
  double s, q, span;
  double g(double x) const { return std::abs(s - 1) < 1e-12 ? std::log(x + q) : std::pow(x + q, 1 - s); }
  double cdf(double x) const { return (g(x) - g(0)) / (g(span) - g(0)); }
  double inverse(double u) const {
    const double y = g(0) + u * (g(span) - g(0));
    return (std::abs(s - 1) < 1e-12 ? std::exp(y) : std::pow(y, 1 / (1 - s))) - q;
  }
};

uint64_t gcd(uint64_t a, uint64_t b) { return b ? gcd(b, a % b) : a; }

class Synthetic final : public SparseSource {
 public:
  Synthetic(const SparseModelSpec& m, unsigned workers, unsigned iterations, uint64_t seed, double scale)
      : m_(m), workers_(workers), iterations_(iterations), seed_(seed) {
    if (!(scale > 0 && scale <= 1))
      throw std::invalid_argument(fmt::format("sparse workload {}: scale {} is not in (0, 1]", m.name, scale));
    n_ = std::max<uint64_t>(1, static_cast<uint64_t>(std::llround(static_cast<double>(m.params) * scale)));
    head_ = std::min<uint64_t>(n_, static_cast<uint64_t>(std::llround(static_cast<double>(m.head) * scale)));
    draws_ = static_cast<uint64_t>(std::llround(static_cast<double>(m.draws) * scale));
    if (draws_ == 0 && head_ == 0)
      throw std::invalid_argument(fmt::format("sparse workload {}: scale {} leaves no key per batch", m.name, scale));
    zipf_ = {m.s, m.q, static_cast<double>(n_ - head_)};
    // rank -> key: r * a + b mod n with a coprime to n (a bijection), a near n / golden ratio.
    a_ = std::max<uint64_t>(1, static_cast<uint64_t>(static_cast<double>(n_) * 0.6180339887)) | 1;
    while (gcd(a_, n_) != 1) a_ += 2;
    b_ = n_ > 1 ? seed_ % n_ : 0;
  }
  std::string name() const override { return m_.name; }
  uint64_t num_params() const override { return n_; }
  unsigned workers() const override { return workers_; }
  unsigned iterations() const override { return iterations_; }
  std::vector<uint64_t> keys(unsigned iteration, unsigned worker) const override {
    if (iteration >= iterations_ || worker >= workers_)
      throw std::out_of_range(fmt::format("sparse workload {}: iteration {} worker {} (has {} x {})", m_.name,
                                          iteration, worker, iterations_, workers_));
    std::vector<uint64_t> ranks;
    ranks.reserve(head_ + draws_);
    for (uint64_t r = 0; r < head_; ++r) ranks.push_back(r);
    Rng rng(seed_ * 0x9E3779B97F4A7C15ULL ^ (static_cast<uint64_t>(iteration) << 24) ^ worker ^ 0x5A17C0DEULL);
    const uint64_t tail = n_ - head_;
    if (tail > 0)
      for (uint64_t d = 0; d < draws_; ++d) {
        const double x = zipf_.inverse(rng.uniform());
        ranks.push_back(head_ + std::min<uint64_t>(tail - 1, static_cast<uint64_t>(std::max(0.0, x))));
      }
    std::vector<uint64_t> out;
    out.reserve(ranks.size());
    for (uint64_t r : ranks) out.push_back(key_of(r));
    std::sort(out.begin(), out.end());
    out.erase(std::unique(out.begin(), out.end()), out.end());
    return out;
  }
  uint64_t key_of(uint64_t rank) const {
    return static_cast<uint64_t>((static_cast<unsigned __int128>(rank) * a_ + b_) % n_);
  }

 private:
  SparseModelSpec m_;
  unsigned workers_, iterations_;
  uint64_t seed_, n_ = 1, head_ = 0, draws_ = 0, a_ = 1, b_ = 0;
  Zipf zipf_{1, 1, 1};
};

class Trace final : public SparseSource {
 public:
  std::string name_;
  uint64_t params = 0;
  unsigned w = 0, it = 0;
  std::vector<std::vector<uint64_t>> batches;  // it * w + worker
  std::string name() const override { return name_; }
  uint64_t num_params() const override { return params; }
  unsigned workers() const override { return w; }
  unsigned iterations() const override { return it; }
  std::vector<uint64_t> keys(unsigned iteration, unsigned worker) const override {
    if (iteration >= it || worker >= w)
      throw std::out_of_range(fmt::format("sparse trace {}: iteration {} worker {} (has {} x {})", name_, iteration,
                                          worker, it, w));
    return batches[static_cast<size_t>(iteration) * w + worker];
  }
};

constexpr const char* kTraceMagic = "ina-sparse-trace 1";

}  // namespace

const std::vector<SparseModelSpec>& sparse_models() { return specs(); }

const SparseModelSpec* find_sparse_model(std::string_view name) {
  for (const auto& m : specs())
    if (m.name == name) return &m;
  return nullptr;
}

std::unique_ptr<SparseSource> make_synthetic(const SparseModelSpec& m, unsigned workers, unsigned iterations,
                                             uint64_t seed, double scale) {
  return std::make_unique<Synthetic>(m, workers, iterations, seed, scale);
}

double expected_top_share(const SparseModelSpec& m, uint64_t k) {
  // Expected batches a rank appears in, per batch: 1 for the head, else
  // 1 - (1 - p_r)^draws. Summed exactly over the first 4 M ranks; beyond,
  // draws * p_r << 1 and the sum is draws * (1 - F) (error below 1e-6 of the total here).
  const double span = static_cast<double>(m.params - m.head);
  const Zipf z{m.s, m.q, span};
  const double D = static_cast<double>(m.draws);
  const uint64_t exact = std::min<uint64_t>(m.params - m.head, 4'000'000);
  double top = static_cast<double>(std::min<uint64_t>(k, m.head)), total = static_cast<double>(m.head);
  double prev = 0;
  for (uint64_t r = 0; r < exact; ++r) {
    const double next = z.cdf(static_cast<double>(r + 1));
    const double pi = -std::expm1(D * std::log1p(-std::min(next - prev, 1 - 1e-15)));
    prev = next;
    total += pi;
    if (m.head + r < k) top += pi;
  }
  const double rest = D * (1 - prev);
  total += rest;
  if (k > m.head + exact) top += D * (z.cdf(static_cast<double>(k - m.head)) - prev);
  return total > 0 ? top / total : 0;
}

std::unique_ptr<SparseSource> load_trace(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error(fmt::format("{}: cannot open the sparse trace", path));
  auto t = std::make_unique<Trace>();
  std::string line;
  size_t ln = 0;
  auto bad = [&](std::string_view field, std::string_view what, std::string_view value) {
    return std::runtime_error(
        fmt::format("{}:{}: field '{}': {} (value: {})", path, ln, field, what, value));
  };
  if (!std::getline(in, line) || (++ln, line != kTraceMagic))
    throw bad("magic", fmt::format("the first line must be '{}'", kTraceMagic), line.substr(0, 40));
  if (!std::getline(in, line)) throw bad("header", "missing", "");
  ++ln;
  {
    std::istringstream h(line);
    std::string k1, k2, k3, k4;
    long long params = -1, workers = -1, iters = -1;
    h >> k1 >> t->name_ >> k2 >> params >> k3 >> workers >> k4 >> iters;
    if (k1 != "name" || k2 != "params" || k3 != "workers" || k4 != "iterations" || !h)
      throw bad("header", "expected 'name NAME params N workers W iterations I'", line);
    if (params <= 0) throw bad("params", "must be positive", std::to_string(params));
    if (workers <= 0 || workers > 4096) throw bad("workers", "must be 1..4096", std::to_string(workers));
    if (iters <= 0 || iters > 10'000'000) throw bad("iterations", "must be 1..10^7", std::to_string(iters));
    t->params = static_cast<uint64_t>(params);
    t->w = static_cast<unsigned>(workers);
    t->it = static_cast<unsigned>(iters);
  }
  t->batches.resize(static_cast<size_t>(t->it) * t->w);
  std::vector<bool> seen(t->batches.size(), false);
  while (std::getline(in, line)) {
    ++ln;
    if (line.empty() || line[0] == '#') continue;
    std::istringstream b(line);
    long long it = -1, w = -1;
    if (!(b >> it >> w)) throw bad("iteration worker", "a batch line starts with its iteration and worker", line.substr(0, 40));
    if (it < 0 || it >= t->it) throw bad("iteration", fmt::format("must be 0..{}", t->it - 1), std::to_string(it));
    if (w < 0 || w >= t->w) throw bad("worker", fmt::format("must be 0..{}", t->w - 1), std::to_string(w));
    const size_t at = static_cast<size_t>(it) * t->w + static_cast<size_t>(w);
    if (seen[at]) throw bad("iteration worker", "this batch appears twice", fmt::format("{} {}", it, w));
    seen[at] = true;
    auto& ks = t->batches[at];
    std::string tok;
    while (b >> tok) {
      uint64_t k = 0;
      const auto [p, ec] = std::from_chars(tok.data(), tok.data() + tok.size(), k);
      if (ec != std::errc() || p != tok.data() + tok.size()) throw bad("key", "not a non-negative integer", tok);
      if (k >= t->params) throw bad("key", fmt::format("must be below params = {}", t->params), tok);
      if (!ks.empty() && k <= ks.back()) throw bad("key", "keys of a batch must be strictly ascending", tok);
      ks.push_back(k);
    }
  }
  for (size_t i = 0; i < seen.size(); ++i)
    if (!seen[i])
      throw std::runtime_error(fmt::format("{}: field 'iteration worker': batch {} {} is missing (value: none)", path,
                                           i / t->w, i % t->w));
  return t;
}

void write_trace(const SparseSource& s, const std::string& path) {
  std::ofstream out(path);
  if (!out) throw std::runtime_error(fmt::format("{}: cannot write the sparse trace", path));
  std::string name = s.name();
  std::replace(name.begin(), name.end(), ' ', '_');
  out << kTraceMagic << "\n"
      << fmt::format("name {} params {} workers {} iterations {}\n", name.empty() ? "trace" : name, s.num_params(),
                     s.workers(), s.iterations());
  for (unsigned it = 0; it < s.iterations(); ++it)
    for (unsigned w = 0; w < s.workers(); ++w) {
      out << it << ' ' << w;
      for (uint64_t k : s.keys(it, w)) out << ' ' << k;
      out << '\n';
    }
  if (!out) throw std::runtime_error(fmt::format("{}: write failed", path));
}

int32_t sparse_value(uint64_t seed, unsigned iteration, unsigned worker, uint64_t key) {
  uint64_t x = seed * 0x9E3779B97F4A7C15ULL ^ (static_cast<uint64_t>(iteration) << 40) ^
               (static_cast<uint64_t>(worker) << 32) ^ key;
  x ^= x >> 33;
  x *= 0xFF51AFD7ED558CCDULL;
  x ^= x >> 33;
  const int32_t v = static_cast<int32_t>(x % 2001) - 1000;
  return v == 0 ? 1 : v;
}

float sparse_gradient(uint64_t seed, unsigned iteration, unsigned worker, uint64_t key, double sigma) {
  const uint64_t h = splitmix64(seed * 0x9E3779B97F4A7C15ULL ^ (static_cast<uint64_t>(iteration) << 40) ^
                                (static_cast<uint64_t>(worker) << 32) ^ key);
  const uint64_t h2 = splitmix64(h);
  const double u1 = (static_cast<double>(h >> 11) + 0.5) * 0x1p-53, u2 = static_cast<double>(h2 >> 11) * 0x1p-53;
  const double z = std::sqrt(-2 * std::log(u1)) * std::cos(2 * M_PI * u2);  // Box-Muller
  const bool tail = (h2 & 0xFF) < 13;                                        // 13 / 256: about 5 %
  return static_cast<float>(sigma * z * (tail ? 16 : 1));
}

namespace {

class RowSource final : public SparseSource {
 public:
  RowSource(std::unique_ptr<SparseSource> s, unsigned w) : s_(std::move(s)), w_(w) {}
  std::string name() const override { return s_->name() + " x" + std::to_string(w_); }
  uint64_t num_params() const override { return s_->num_params() * w_; }
  unsigned workers() const override { return s_->workers(); }
  unsigned iterations() const override { return s_->iterations(); }
  std::vector<uint64_t> keys(unsigned iteration, unsigned worker) const override {
    const auto rows = s_->keys(iteration, worker);
    std::vector<uint64_t> out;
    out.reserve(rows.size() * w_);
    for (uint64_t r : rows)
      for (unsigned j = 0; j < w_; ++j) out.push_back(r * w_ + j);
    return out;
  }

 private:
  std::unique_ptr<SparseSource> s_;
  unsigned w_;
};

}  // namespace

std::unique_ptr<SparseSource> with_row_width(std::unique_ptr<SparseSource> src, unsigned width) {
  if (width == 0) throw std::invalid_argument("sparse workload: row width must be >= 1");
  if (width == 1) return src;
  return std::make_unique<RowSource>(std::move(src), width);
}

}  // namespace ina::workload
