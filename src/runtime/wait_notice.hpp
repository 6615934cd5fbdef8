#pragma once
// A process that waits for someone else (a switch that does not answer yet,
// the rest of its job) says so on stderr: once after a short delay, then now
// and then, so that a long wait is never mistaken for a hang. Silent when the
// wait ends before the first line is due.
#include <cstdio>
#include <functional>
#include <string>
#include <utility>

#include <fmt/format.h>

#include "core/time.hpp"
#include "runtime/net.hpp"

namespace ina::rt {

class WaitNotice {
 public:
  // `who` prefixes every line ("ina worker job 1 rank 0"); empty: never prints.
  explicit WaitNotice(std::string who, Time first = 2 * kSec, Time every = 5 * kSec)
      : who_(std::move(who)), start_(monotonic_now()), next_(start_ + first), every_(every) {}

  // A new phase of the wait (another thing waited for): its own delay from now.
  void restart(Time first, Time every) {
    start_ = monotonic_now();
    next_ = start_ + first;
    every_ = every;
  }
  // When the next line is due (to bound a blocking wait); kNever if silent.
  Time next() const { return who_.empty() ? kNever : next_; }
  // Prints "who: <what()> (W s of T s)" if a line is due; `total` is the wait's bound.
  void tick(Time total, const std::function<std::string()>& what) {
    const Time now = monotonic_now();
    if (who_.empty() || now < next_) return;
    const int digits = total < 10 * kSec ? 1 : 0;  // "2 s of 10 s", "0.3 s of 0.7 s"
    const std::string line = fmt::format("{}: {} ({:.{}f} s of {:.{}f} s)\n", who_, what(), to_ms(now - start_) / 1000,
                                         digits, to_ms(total) / 1000, digits);
    std::fputs(line.c_str(), stderr);
    std::fflush(stderr);
    ++printed_;
    next_ = now + every_;
  }
  unsigned printed() const { return printed_; }

 private:
  std::string who_;
  Time start_, next_, every_;
  unsigned printed_ = 0;
};

}  // namespace ina::rt
