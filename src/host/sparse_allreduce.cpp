#include "host/sparse_allreduce.hpp"

#include <stdexcept>

#include <fmt/format.h>

#include "wire/quant.hpp"

namespace ina::host {

void check_sparse_input(std::span<const uint64_t> keys, size_t values) {
  if (keys.size() != values)
    throw std::invalid_argument(fmt::format("sparse allreduce: {} keys but {} values", keys.size(), values));
  for (size_t i = 0; i < keys.size(); ++i) {
    if (keys[i] == kSaturationKey)
      throw std::invalid_argument(fmt::format("sparse allreduce: keys[{}] = {} is reserved (keys must be below it)", i,
                                              keys[i]));
    if (i > 0 && keys[i] <= keys[i - 1])
      throw std::invalid_argument(fmt::format("sparse allreduce: keys must be strictly ascending, but keys[{}] = {} "
                                              "follows keys[{}] = {}", i, keys[i], i - 1, keys[i - 1]));
  }
}

SparseAllreduce::SparseAllreduce(std::span<const uint64_t> keys, std::span<const float> values,
                                 const FloatAllreduceOptions& o)
    : is_float_(true), opt_(o), keys_(keys.begin(), keys.end()), f_(values.begin(), values.end()) {
  check_sparse_input(keys, values.size());
  if (o.mode == FloatScaleMode::Fixed && !(o.fixed_scale > 0))
    throw std::invalid_argument(fmt::format("sparse allreduce: fixed scale {} must be > 0", o.fixed_scale));
}

SparseAllreduce::SparseAllreduce(std::span<const uint64_t> keys, std::span<const int32_t> values)
    : keys_(keys.begin(), keys.end()), i_(values.begin(), values.end()) {
  check_sparse_input(keys, values.size());
}

const SparseRound& SparseAllreduce::start() {
  if (!is_float_) {
    kind_ = Kind::Int;
    round_.keys = keys_;
    round_.values = i_;
  } else if (opt_.mode == FloatScaleMode::Fixed) {
    data_round(opt_.fixed_scale, true);
  } else {
    scale_round();
  }
  return round_;
}

void SparseAllreduce::scale_round() {
  kind_ = Kind::Scale;
  std::vector<int32_t> lanes(kScaleLanes);
  scale_lanes(f_, lanes);
  round_.keys.clear();
  round_.values.clear();
  for (size_t l = 0; l < lanes.size(); ++l)
    if (lanes[l]) {
      round_.keys.push_back(l);
      round_.values.push_back(lanes[l]);
    }
}

void SparseAllreduce::data_round(double scale, bool trailer) {
  kind_ = trailer ? Kind::FixedData : Kind::Data;
  scale_ = scale;
  const FixedPointCodec codec(scale, opt_.nworkers);
  round_.keys = keys_;
  round_.values.resize(f_.size());
  const QuantStats q = codec.encode(f_, round_.values);
  if (trailer) {
    round_.keys.push_back(kSaturationKey);
    round_.values.push_back(static_cast<int32_t>(std::min<uint64_t>(q.overflowed, INT32_MAX / opt_.nworkers)));
  }
}

SparseAllreduce::Status SparseAllreduce::on_complete(std::span<const uint64_t> keys, std::span<const int32_t> sums) {
  switch (kind_) {
    case Kind::Int:
      out_keys_.assign(keys.begin(), keys.end());
      out_i_.assign(sums.begin(), sums.end());
      return Status::Done;
    case Kind::Scale: {
      std::vector<int32_t> lanes(kScaleLanes, 0);
      for (size_t k = 0; k < keys.size(); ++k)
        if (keys[k] < lanes.size()) lanes[keys[k]] = sums[k];
      if (lanes[kScaleExpLanes] > 0) {
        info_.nonfinite_workers = lanes[kScaleExpLanes];
        error_ = fmt::format("job {}: {} of {} workers passed NaN or infinite values to a sparse allreduce", opt_.job,
                             lanes[kScaleExpLanes], opt_.nworkers);
        return Status::NonFinite;
      }
      data_round(agreed_scale(lanes, opt_.nworkers), false);
      return Status::Next;
    }
    case Kind::FixedData:
      if (!keys.empty() && keys.back() == kSaturationKey && sums.back() != 0) {
        info_.retried = true;
        scale_round();
        return Status::Next;
      }
      [[fallthrough]];
    case Kind::Data: {
      size_t n = keys.size();
      if (kind_ == Kind::FixedData && n > 0 && keys[n - 1] == kSaturationKey) --n;
      const FixedPointCodec codec(scale_, opt_.nworkers);
      out_keys_.assign(keys.begin(), keys.begin() + static_cast<ptrdiff_t>(n));
      out_f_.resize(n);
      codec.decode(sums.first(n), out_f_, opt_.average ? opt_.nworkers : 1.0);
      info_.scale = scale_;
      return Status::Done;
    }
  }
  return Status::Done;
}

}  // namespace ina::host
