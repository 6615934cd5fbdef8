#pragma once
// Where a worker's gradient comes from and where its result goes, for one
// allreduce. The transport reads a packet's worth of gradient when it sends,
// writes results as they arrive, and may read a result back to answer a PS
// that needs it after the worker already finished (the reminder mechanism).
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

namespace ina::host {

// SyntheticTensor's per-index values a(i) of one stream: its gradients, and
// every sum of them, are a(i) * A + C (host/value_store.hpp keeps them so).
// A multiplicative (Weyl) sequence: one multiply per value, different for
// every stream and index, cheap enough to check every result value.
struct AffineBasis {
  uint64_t stream = 0;
  int32_t at(uint64_t i) const { return static_cast<int32_t>(((stream + i) * 0x9E3779B97F4A7C15ULL) >> 52) - 2048; }
};

class TensorIO {
 public:
  virtual ~TensorIO() = default;
  // The basis this tensor's values are affine in, if it has one.
  virtual std::optional<AffineBasis> basis() const { return std::nullopt; }
  virtual void read_gradient(uint64_t offset, std::span<int32_t> out) = 0;
  virtual void write_result(uint64_t offset, std::span<const int32_t> in) = 0;
  virtual void read_result(uint64_t offset, std::span<int32_t> out) = 0;
};

// Gradient and result in caller-owned buffers (which must outlive the op and
// its retention window).
class SpanTensor final : public TensorIO {
 public:
  SpanTensor(std::span<const int32_t> grad, std::span<int32_t> result) : grad_(grad), result_(result) {}
  void read_gradient(uint64_t off, std::span<int32_t> out) override;
  void write_result(uint64_t off, std::span<const int32_t> in) override;
  void read_result(uint64_t off, std::span<int32_t> out) override;

 private:
  std::span<const int32_t> grad_;
  std::span<int32_t> result_;
};

// Owns its buffers (tests, small runs).
class VectorTensor final : public TensorIO {
 public:
  explicit VectorTensor(std::vector<int32_t> grad) : grad(std::move(grad)), result(this->grad.size(), 0) {}
  void read_gradient(uint64_t off, std::span<int32_t> out) override;
  void write_result(uint64_t off, std::span<const int32_t> in) override;
  void read_result(uint64_t off, std::span<int32_t> out) override;
  std::vector<int32_t> grad, result;
};

// Large simulated tensors without storage: values are a deterministic
// function of (stream, rank, index) whose sum over ranks has a closed form,
//   g_r(i) = a(i) * (r + 1) + c(r),  sum(i) = a(i) * n(n+1)/2 + sum_r c(r),
// with a(i) a pseudo-random value in [-2048, 2047] and c(r) a hashed value in [0, 1023].
// A missing, duplicated or foreign contribution changes the sum, so every
// written result is checked exactly in O(1) per element.
class SyntheticTensor final : public TensorIO {
 public:
  SyntheticTensor(uint64_t stream, unsigned rank, unsigned nworkers);
  void read_gradient(uint64_t off, std::span<int32_t> out) override;
  void write_result(uint64_t off, std::span<const int32_t> in) override;
  void read_result(uint64_t off, std::span<int32_t> out) override;
  std::optional<AffineBasis> basis() const override { return AffineBasis{stream_}; }
  int32_t expected(uint64_t i) const;
  // From now on results are the sum of these ranks' gradients only (a
  // failure excluded the others); the count of checked values restarts.
  void set_contributors(const std::vector<unsigned>& ranks);
  uint64_t checked() const { return checked_; }
  uint64_t mismatches() const { return mismatches_; }

 private:
  uint64_t stream_;
  unsigned rank_;
  int64_t c_rank_, c_sum_, tri_;
  uint64_t checked_ = 0, mismatches_ = 0;
};

}  // namespace ina::host
