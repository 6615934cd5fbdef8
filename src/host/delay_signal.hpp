#pragma once
// Queueing delay as a congestion signal, for paths whose bottleneck queues
// mark no ECN (a software switch over ordinary links, tc-shaped ports):
// without it a window grows until the queue's delay outruns the RTO, and
// every packet in flight then times out with nothing lost. A round trip
// more than `target` above the smallest one seen counts as an ECN echo
// (the sender halves its window, once per round trip). The worker
// transport and the ring endpoints both take it from here; the simulator's
// switches mark ECN, so its profile leaves it off (target 0).
#include <algorithm>

#include "core/time.hpp"

namespace ina::host {

class DelaySignal {
 public:
  explicit DelaySignal(Time target) : target_(target) {}
  // An unambiguous round trip (Karn's rule: never a retransmitted packet's).
  // Returns whether it signals congestion.
  bool sample(Time rtt) {
    min_ = std::min(min_, rtt);
    return target_ > 0 && rtt > min_ + target_;
  }
  Time min_rtt() const { return min_; }  // kNever before the first sample
  Time target() const { return target_; }

 private:
  Time target_;
  Time min_ = kNever;
};

}  // namespace ina::host
