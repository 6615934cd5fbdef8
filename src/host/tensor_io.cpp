#include "host/tensor_io.hpp"

#include <algorithm>
#include <cstring>

#include "core/rng.hpp"

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
}  // namespace

SyntheticTensor::SyntheticTensor(uint64_t stream, unsigned rank, unsigned nworkers)
    : stream_(stream), rank_(rank), n_(nworkers) {
  c_rank_ = c_of(stream, rank);
  c_sum_ = 0;
  for (unsigned r = 0; r < nworkers; ++r) c_sum_ += c_of(stream, r);
  tri_ = static_cast<int64_t>(nworkers) * (nworkers + 1) / 2;
}

int32_t SyntheticTensor::a(uint64_t i) const { return AffineBasis{stream_}.at(i); }

void SyntheticTensor::set_contributors(const std::vector<unsigned>& ranks) {
  c_sum_ = 0;
  tri_ = 0;
  for (unsigned r : ranks) {
    c_sum_ += c_of(stream_, r);
    tri_ += r + 1;
  }
  checked_ = 0;
}

int32_t SyntheticTensor::expected(uint64_t i) const { return static_cast<int32_t>(a(i) * tri_ + c_sum_); }

void SyntheticTensor::read_gradient(uint64_t off, std::span<int32_t> out) {
  const int64_t m = rank_ + 1;
  for (size_t k = 0; k < out.size(); ++k) out[k] = static_cast<int32_t>(a(off + k) * m + c_rank_);
}

void SyntheticTensor::write_result(uint64_t off, std::span<const int32_t> in) {
  for (size_t k = 0; k < in.size(); ++k) mismatches_ += in[k] != expected(off + k);
  checked_ += in.size();
}

void SyntheticTensor::read_result(uint64_t off, std::span<int32_t> out) {
  for (size_t k = 0; k < out.size(); ++k) out[k] = expected(off + k);
}

}  // namespace ina::host
