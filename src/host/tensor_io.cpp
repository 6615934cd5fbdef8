#include "host/tensor_io.hpp"

#include <algorithm>
#include <cstring>

#include "core/rng.hpp"
#include "core/simd_clones.hpp"

namespace ina::host {

void SpanTensor::read_gradient(uint64_t off, std::span<int32_t> out) {
  std::memcpy(out.data(), grad_.data() + off, out.size_bytes());
}
void SpanTensor::write_result(uint64_t off, std::span<const int32_t> in) {
  std::memcpy(result_.data() + off, in.data(), in.size_bytes());
}
void SpanTensor::read_result(uint64_t off, std::span<int32_t> out) {
  std::memcpy(out.data(), result_.data() + off, out.size_bytes());
}

void VectorTensor::read_gradient(uint64_t off, std::span<int32_t> out) {
  std::memcpy(out.data(), grad.data() + off, out.size_bytes());
}
void VectorTensor::write_result(uint64_t off, std::span<const int32_t> in) {
  std::memcpy(result.data() + off, in.data(), in.size_bytes());
}
void VectorTensor::read_result(uint64_t off, std::span<int32_t> out) {
  std::memcpy(out.data(), result.data() + off, out.size_bytes());
}

namespace {
int64_t c_of(uint64_t stream, unsigned r) { return static_cast<int64_t>(mix(stream, 0xC0 + r) & 1023); }

// a(i) * m + c as int32: the low 32 bits of the int64 value, which 32-bit
// lanes compute alike.
inline int32_t affine(uint64_t stream, uint64_t i, int64_t m, int64_t c) {
  return static_cast<int32_t>(static_cast<uint32_t>(AffineBasis{stream}.at(i)) * static_cast<uint32_t>(m) +
                              static_cast<uint32_t>(c));
}
// The loops run for every packet a simulated worker sends and receives
// (core/simd_clones.hpp: AVX-512's 64-bit multiply makes a(i) a vector
// operation): out[k] = affine(off + k), and how many of in[k] differ from it.
INA_SIMD_CLONES void affine_values(int32_t* __restrict out, size_t n, uint64_t stream, uint64_t off, int64_t m, int64_t c) {
  for (size_t k = 0; k < n; ++k) out[k] = affine(stream, off + k, m, c);
}
INA_SIMD_CLONES uint32_t affine_mismatches(const int32_t* in, size_t n, uint64_t stream, uint64_t off, int64_t m,
                                           int64_t c) {
  uint32_t bad = 0;
  for (size_t k = 0; k < n; ++k) bad += in[k] != affine(stream, off + k, m, c);
  return bad;
}
}  // namespace

SyntheticTensor::SyntheticTensor(uint64_t stream, unsigned rank, unsigned nworkers)
    : stream_(stream), rank_(rank) {
  c_rank_ = c_of(stream, rank);
  c_sum_ = 0;
  for (unsigned r = 0; r < nworkers; ++r) c_sum_ += c_of(stream, r);
  tri_ = static_cast<int64_t>(nworkers) * (nworkers + 1) / 2;
}

void SyntheticTensor::set_contributors(const std::vector<unsigned>& ranks) {
  c_sum_ = 0;
  tri_ = 0;
  for (unsigned r : ranks) {
    c_sum_ += c_of(stream_, r);
    tri_ += r + 1;
  }
  checked_ = 0;
}

int32_t SyntheticTensor::expected(uint64_t i) const { return affine(stream_, i, tri_, c_sum_); }

void SyntheticTensor::read_gradient(uint64_t off, std::span<int32_t> out) {
  affine_values(out.data(), out.size(), stream_, off, rank_ + 1, c_rank_);
}

void SyntheticTensor::write_result(uint64_t off, std::span<const int32_t> in) {
  mismatches_ += affine_mismatches(in.data(), in.size(), stream_, off, tri_, c_sum_);
  checked_ += in.size();
}

void SyntheticTensor::read_result(uint64_t off, std::span<int32_t> out) {
  affine_values(out.data(), out.size(), stream_, off, tri_, c_sum_);
}

}  // namespace ina::host
