#include <cstdio>
#include <filesystem>
#include <numeric>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "train/train.hpp"

namespace ina::train {

namespace {

// The decompressed bytes of a gzip file, read through `gzip -dc`.
std::vector<uint8_t> gunzip(const std::string& path) {
  if (!std::filesystem::exists(path)) throw std::runtime_error(fmt::format("missing data file {}", path));
  std::string quoted = "'";
  for (char c : path) quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
  quoted += "'";
  FILE* p = ::popen(fmt::format("gzip -dc {} 2>/dev/null", quoted).c_str(), "r");
  if (!p) throw std::runtime_error(fmt::format("cannot run gzip -dc on {}", path));
  std::vector<uint8_t> out;
  uint8_t buf[1 << 16];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) out.insert(out.end(), buf, buf + n);
  const int st = ::pclose(p);
  if (st != 0) throw std::runtime_error(fmt::format("gzip -dc {} failed (status {})", path, st));
  return out;
}

uint32_t be32(const std::vector<uint8_t>& b, size_t off) {
  if (off + 4 > b.size()) throw std::runtime_error("truncated IDX header");
  return (uint32_t{b[off]} << 24) | (uint32_t{b[off + 1]} << 16) | (uint32_t{b[off + 2]} << 8) | b[off + 3];
}

}  // namespace

Dataset load_fashion_mnist(const std::string& dir, const std::string& prefix, uint64_t limit) {
  const std::string ipath = fmt::format("{}/{}-images-idx3-ubyte.gz", dir, prefix);
  const std::string lpath = fmt::format("{}/{}-labels-idx1-ubyte.gz", dir, prefix);
  const auto img = gunzip(ipath);
  const auto lab = gunzip(lpath);
  if (be32(img, 0) != 2051) throw std::runtime_error(fmt::format("{}: not an IDX3 image file", ipath));
  if (be32(lab, 0) != 2049) throw std::runtime_error(fmt::format("{}: not an IDX1 label file", lpath));
  const uint64_t n = be32(img, 4), rows = be32(img, 8), cols = be32(img, 12);
  if (rows != 28 || cols != 28) throw std::runtime_error(fmt::format("{}: images are {}x{}, expected 28x28", ipath, rows, cols));
  if (be32(lab, 4) != n) throw std::runtime_error(fmt::format("{} and {} disagree on the sample count", ipath, lpath));
  if (img.size() < 16 + n * 784 || lab.size() < 8 + n) throw std::runtime_error(fmt::format("{}: truncated", prefix));
  Dataset d;
  d.n = limit ? std::min<uint64_t>(limit, n) : n;
  d.images.resize(d.n * 784);
  d.labels.resize(d.n);
  // Fashion-MNIST's training mean and standard deviation.
  constexpr float kMean = 0.2860f, kStd = 0.3530f;
  for (uint64_t i = 0; i < d.n * 784; ++i) d.images[i] = (img[16 + i] / 255.0f - kMean) / kStd;
  for (uint64_t i = 0; i < d.n; ++i) {
    if (lab[8 + i] > 9) throw std::runtime_error(fmt::format("{}: label {} out of range", lpath, lab[8 + i]));
    d.labels[i] = lab[8 + i];
  }
  return d;
}

std::vector<uint64_t> epoch_order(uint64_t n, uint64_t seed, unsigned epoch) {
  std::vector<uint64_t> order(n);
  std::iota(order.begin(), order.end(), 0);
  std::mt19937_64 rng(seed * 1000003ull + epoch);
  for (uint64_t i = order.size(); i > 1; --i) std::swap(order[i - 1], order[rng() % i]);
  return order;
}

}  // namespace ina::train
