// Half-open intervals [from, to) on the real line, indexed for the two
// questions the Rina time model (control/rina_time.cpp) asks of a port's
// episodes many times per schedule: which intervals contain t, and which
// begin inside (lo, hi). A scan of every interval answers both, but with
// thousands of episodes per port and queries in every round of every
// transfer, such scans are nearly all of a full-size model run's time.
//
// The index cuts [min from, max to] into as many equal bins as there are
// intervals; each bin lists, in insertion order, the intervals that reach
// into it. Bins come from one monotone function of t, so an interval is
// listed in every bin any of its points falls in.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

namespace ina::control {

class IntervalIndex {
 public:
  void clear() {
    from_.clear();
    to_.clear();
    start_.clear();
    entries_.clear();
  }
  // Adds [from, to) as interval number size() - 1; build() before the next query.
  void add(double from, double to) {
    from_.push_back(from);
    to_.push_back(to);
  }
  size_t size() const { return from_.size(); }

  void build() {
    start_.clear();
    entries_.clear();
    const size_t n = from_.size();
    if (n == 0) return;
    lo_ = from_[0];
    double hi = to_[0];
    for (size_t i = 0; i < n; ++i) {
      lo_ = std::min(lo_, from_[i]);
      hi = std::max(hi, to_[i]);
    }
    bins_ = n;
    width_ = hi > lo_ ? (hi - lo_) / static_cast<double>(bins_) : 1.0;
    // Ends that are not finite, or a span too narrow for n normal bins: one bin.
    if (!std::isfinite(lo_) || !std::isfinite(hi) || !std::isnormal(width_)) {
      bins_ = 1;
      width_ = 1.0;
    }
    std::vector<uint32_t> count(bins_ + 1, 0);
    for (size_t i = 0; i < n; ++i)
      if (to_[i] > from_[i])
        for (size_t b = bin(from_[i]), e = bin(to_[i]); b <= e; ++b) ++count[b + 1];
    start_.assign(bins_ + 1, 0);
    for (size_t b = 0; b < bins_; ++b) start_[b + 1] = start_[b] + count[b + 1];
    entries_.resize(start_[bins_]);
    std::vector<uint32_t> at(start_.begin(), start_.end() - 1);
    for (size_t i = 0; i < n; ++i)
      if (to_[i] > from_[i])
        for (size_t b = bin(from_[i]), e = bin(to_[i]); b <= e; ++b) entries_[at[b]++] = static_cast<uint32_t>(i);
  }

  // f(i) for every interval i with from_i <= t < to_i, in insertion order.
  template <class F>
  void stab(double t, F&& f) const {
    if (entries_.empty() || !(t >= lo_)) return;
    const size_t b = bin(t);
    for (uint32_t k = start_[b]; k < start_[b + 1]; ++k) {
      const uint32_t i = entries_[k];
      if (from_[i] <= t && t < to_[i]) f(i);
    }
  }

  // f(i) once for every non-empty interval i with lo < from_i < hi.
  template <class F>
  void starting(double lo, double hi, F&& f) const {
    if (entries_.empty() || !(lo < hi)) return;
    const size_t last = bin(hi);
    for (size_t b = bin(std::max(lo, lo_)); b <= last; ++b)
      for (uint32_t k = start_[b]; k < start_[b + 1]; ++k) {
        const uint32_t i = entries_[k];
        if (lo < from_[i] && from_[i] < hi && bin(from_[i]) == b) f(i);
      }
  }

 private:
  // The bin of t (t >= lo_), the last bin for t at or past the end; bin 0
  // for anything else, a NaN included (with one bin, every t).
  size_t bin(double t) const {
    if (bins_ == 1) return 0;
    const double x = std::floor((t - lo_) / width_);
    if (!(x > 0)) return 0;
    return x >= static_cast<double>(bins_ - 1) ? bins_ - 1 : static_cast<size_t>(x);
  }

  std::vector<double> from_, to_;
  double lo_ = 0, width_ = 1;
  size_t bins_ = 0;
  std::vector<uint32_t> start_;    // bin b's entries: entries_[start_[b], start_[b + 1])
  std::vector<uint32_t> entries_;  // interval numbers, ascending within a bin
};

}  // namespace ina::control
