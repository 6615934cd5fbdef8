#pragma once
// One sparse allreduce (sans-I/O): how <key, value> gradients are summed
// exactly through the int32 iterations of a SparseWorker (host/sparse.hpp).
// It is the sparse counterpart of FloatAllreduce (host/float_allreduce.hpp),
// with the same float rules:
//  - Agree (default): a scale round first. Each worker pushes the keys of its
//    nonzero scale lanes (scale_lanes: a one-hot over the binary exponent of
//    its largest |x|, plus the non-finite lane) with value 1; every worker
//    gets the same summed lanes and derives the same scale (agreed_scale).
//    Then the data round: round(x * scale) per key.
//  - Fixed: one data round with a trailer pair (kSaturationKey, this worker's
//    count of saturated values); a nonzero sum makes every worker redo the op
//    with an agreed scale (FloatAllreduceInfo::retried).
//  - NaN or +-Inf in any worker's values: every worker's op fails alike
//    (Status::NonFinite), without a data round.
//  - Int: one round, the values as they are (exact if |sum| fits int32).
// The result is the union of every worker's keys, ascending, with its sum
// (Average: divided by the number of workers, not by how many had the key).
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "host/float_allreduce.hpp"

namespace ina::host {

// Reserved: the Fixed mode's saturation trailer. Keys must be below it.
inline constexpr uint64_t kSaturationKey = UINT64_MAX;

// Throws std::invalid_argument naming the first offending index: sizes that
// differ, keys not strictly ascending, or the reserved key.
void check_sparse_input(std::span<const uint64_t> keys, size_t values);

struct SparseRound {
  std::vector<uint64_t> keys;   // strictly ascending
  std::vector<int32_t> values;
};

class SparseAllreduce {
 public:
  enum class Status { Next, Done, NonFinite };
  // A float op (the inputs are copied); checks them (check_sparse_input).
  SparseAllreduce(std::span<const uint64_t> keys, std::span<const float> values, const FloatAllreduceOptions& o);
  // An int32 op.
  SparseAllreduce(std::span<const uint64_t> keys, std::span<const int32_t> values);

  // The first round (call once).
  const SparseRound& start();
  // The outstanding round's sums (the union of keys, ascending). Next: round()
  // holds the next round to push; Done: keys() and the values hold the result.
  Status on_complete(std::span<const uint64_t> keys, std::span<const int32_t> sums);
  const SparseRound& round() const { return round_; }

  bool is_float() const { return is_float_; }
  const std::vector<uint64_t>& keys() const { return out_keys_; }
  const std::vector<float>& float_values() const { return out_f_; }
  const std::vector<int32_t>& int_values() const { return out_i_; }
  const FloatAllreduceInfo& info() const { return info_; }
  const std::string& error() const { return error_; }

 private:
  enum class Kind { Scale, Data, FixedData, Int };
  void scale_round();
  void data_round(double scale, bool trailer);

  bool is_float_ = false;
  FloatAllreduceOptions opt_;
  std::vector<uint64_t> keys_;
  std::vector<float> f_;
  std::vector<int32_t> i_;
  Kind kind_ = Kind::Int;
  double scale_ = 0;
  SparseRound round_;
  std::vector<uint64_t> out_keys_;
  std::vector<float> out_f_;
  std::vector<int32_t> out_i_;
  FloatAllreduceInfo info_;
  std::string error_;
};

}  // namespace ina::host
