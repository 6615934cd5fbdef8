#pragma once
// TCP's smoothed round-trip estimator (RFC 6298): srtt, rttvar, and a timeout
// srtt + 4 * rttvar clamped to [floor, ceiling]. Used for the workers' RTO and
// the PS's entry timeout.
#include <algorithm>

#include "core/time.hpp"

namespace ina {

class RttEstimator {
 public:
  RttEstimator(Time floor, Time ceiling) : floor_(floor), ceiling_(ceiling), timeout_(floor) {}

  void sample(Time r) {
    if (srtt_ == 0) {
      srtt_ = r;
      rttvar_ = r / 2;
    } else {
      const Time err = r > srtt_ ? r - srtt_ : srtt_ - r;
      rttvar_ = (3 * rttvar_ + err) / 4;
      srtt_ = (7 * srtt_ + r) / 8;
    }
    timeout_ = std::clamp<Time>(srtt_ + 4 * rttvar_, floor_, ceiling_);
  }
  Time srtt() const { return srtt_; }
  Time timeout() const { return timeout_; }

 private:
  Time floor_, ceiling_;
  Time srtt_ = 0, rttvar_ = 0, timeout_;
};

}  // namespace ina
