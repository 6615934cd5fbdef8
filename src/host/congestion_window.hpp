#pragma once
// A sender's congestion window: AIMD with an optional slow start, sans-I/O
// (no clock, no timers): the sender reports what it saw, with the time and
// its smoothed RTT, and asks whether one more packet fits. The worker
// transport, the ring endpoints' shard transfers and the sparse path all
// keep their window here.
//
// Rules:
//  - the window starts at init_window (at least one packet);
//  - an acknowledged packet grows it by 1 below the slow-start threshold and
//    by 1/cwnd at or above it (one packet per window), up to max_window and
//    up to a ceiling the sender may give with the acknowledgement (a paced
//    sender's full speed: the window covering its rate over one RTT,
//    window_covering below); a window at or above that ceiling stays;
//  - a congestion signal (an ECN echo, a loss, a timeout) halves it (at
//    least one packet) and sets the threshold to the halved window, unless
//    the hold-off of the previous decrease is still running: one window's
//    echoes and losses count once. The hold-off a decrease starts is
//    max(srtt, floor), the floor holdoff_floor (timeout_holdoff_floor after
//    a timeout), and Holdoff says when srtt is read and how it compares;
//  - ecn_per_window: an echo for a packet sent before the last decrease is
//    ignored (the congestion it reports was answered; RFC 3168's CWR);
//  - a packet fits if the packets in flight plus it are within the window
//    (a fractional window rounds down), or with partial_packet if fewer
//    packets than the window are in flight (it rounds up); always one.
// A fixed window (adaptive = false) ignores acknowledgements and signals.
#include <algorithm>
#include <cstdint>
#include <limits>

#include "core/time.hpp"

namespace ina::host {

struct CongestionWindowConfig {
  double init_window = 1;   // packets
  double max_window = 1e6;  // packets
  double ssthresh = 0;      // slow start below this window (0: none)
  bool adaptive = true;     // false: the window stays at init_window
  bool ecn_per_window = false;
  Time holdoff_floor = 1;          // the hold-off after a decrease is at least this (ps)
  Time timeout_holdoff_floor = 1;  // the same after a decrease for a timeout
  enum class Holdoff : uint8_t {
    // A decrease needs now - last decrease >= max(srtt, floor), srtt as the
    // signal finds it (the worker transport).
    AtLeastSrtt,
    // ... now - last decrease > max(srtt, floor) (the ring endpoints, floor 0).
    MoreThanSrtt,
    // ... now - last decrease >= max(srtt, floor), srtt as the last decrease
    // found it: the hold-off is fixed when it starts (the sparse path).
    SrttAtDecrease,
  };
  Holdoff holdoff = Holdoff::AtLeastSrtt;
  // A window of w packets admits ceil(w) in flight rather than floor(w) (the ring endpoints).
  bool partial_packet = false;
};

class CongestionWindow {
 public:
  explicit CongestionWindow(const CongestionWindowConfig& cfg);

  double cwnd() const { return cwnd_; }
  double threshold() const { return ssthresh_; }
  bool in_slow_start() const { return cwnd_ < ssthresh_; }
  // The rate (Gbps) this window is paced at over `srtt` (window_pace_gbps
  // below); 0 before a round trip is known.
  double pace_gbps(Time srtt, double wire_bytes) const;
  Time last_decrease() const { return last_decrease_; }
  const CongestionWindowConfig& config() const { return cfg_; }

  // Whether a packet may go with `inflight` packets outstanding; `cap`
  // bounds the window further (a sender's own limit, e.g. a switch region).
  // (Inline: every send asks.)
  bool allows(uint64_t inflight, double cap = std::numeric_limits<double>::infinity()) const {
    const double w = std::max(std::min(cwnd_, cap), 1.0);
    const auto n = static_cast<double>(inflight);
    return cfg_.partial_packet ? n < w : n + 1 <= w;
  }

  // One packet acknowledged without a congestion mark; the window grows to
  // at most `ceiling` packets (and never shrinks for it).
  // (The test inline: a fixed window's every acknowledgement asks.)
  void on_ack(double ceiling = std::numeric_limits<double>::infinity()) {
    if (cfg_.adaptive) grow(ceiling);
  }
  // Congestion signals, at `now` with the sender's smoothed RTT. Each
  // returns whether the window was halved.
  bool on_ecn(Time now, Time srtt, Time sent);  // an echo for a packet first sent at `sent`
  bool on_loss(Time now, Time srtt);            // a loss or another congestion signal (delay, a switch's notice)
  bool on_timeout(Time now, Time srtt);         // a retransmission timeout

  // Slow start from one packet, until the next decrease or end_slow_start().
  void restart_slow_start();
  // Leaves a slow start (if in one), with at least init_window packets.
  void end_slow_start();

 private:
  bool decrease(Time now, Time srtt, Time floor);
  void grow(double ceiling);

  CongestionWindowConfig cfg_;
  double cwnd_;
  double ssthresh_;
  Time last_decrease_ = -kSec;
  Time held_ = 0;  // SrttAtDecrease: the hold-off the last decrease started
};

// The window (packets of `wire_bytes`) that keeps a sender paced at `gbps`
// busy over one round trip `rtt`: gbps x rtt / packet size. Window growth
// beyond it adds queueing, not rate (Rina §IV-C: "ceasing window expansion
// upon reaching full speed").
inline double window_covering(double gbps, Time rtt, double wire_bytes) {
  return gbps * 1e9 * static_cast<double>(rtt) / static_cast<double>(kSec) / (8.0 * wire_bytes);
}

// The rate (Gbps) a sender paces a window of `cwnd` packets of `wire_bytes`
// at over its smoothed RTT (`srtt_s` seconds): cwnd x wire / srtt times
// Linux's TCP pacing gains, 2 in slow start (tcp_pacing_ss_ratio, 200 %)
// and 1.2 after (tcp_pacing_ca_ratio, 120 %). Both the ring endpoints
// (RinaTransport::Paper) and the Rina time model use it.
inline double window_pace_gbps(double cwnd, double srtt_s, double wire_bytes, bool slow_start) {
  return (slow_start ? 2.0 : 1.2) * cwnd * 8.0 * wire_bytes / srtt_s / 1e9;
}

// A window grown by `by` packets, at most to `ceiling`; one at or above the
// ceiling stays (CongestionWindow::on_ack; the Rina time model).
inline double grow_to_ceiling(double cwnd, double by, double ceiling) {
  return cwnd >= ceiling ? cwnd : std::min(cwnd + by, ceiling);
}

// A retransmission timeout after `doublings` exponential backoffs, at most `ceiling`.
inline Time backed_off_rto(Time rto, unsigned doublings, Time ceiling) {
  const Time t = rto << doublings;
  return t < ceiling ? t : ceiling;
}

}  // namespace ina::host
