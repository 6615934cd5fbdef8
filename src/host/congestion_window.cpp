#include "host/congestion_window.hpp"

#include <algorithm>

namespace ina::host {

CongestionWindow::CongestionWindow(const CongestionWindowConfig& cfg)
    : cfg_(cfg), cwnd_(std::max(1.0, cfg.init_window)), ssthresh_(cfg.ssthresh), held_(cfg.holdoff_floor) {}

double CongestionWindow::pace_gbps(Time srtt, double wire_bytes) const {
  if (srtt <= 0) return 0;
  return window_pace_gbps(cwnd_, static_cast<double>(srtt) / static_cast<double>(kSec), wire_bytes, in_slow_start());
}

void CongestionWindow::grow(double ceiling) {
  if (cwnd_ >= ceiling) return;
  cwnd_ = std::min(cfg_.max_window, grow_to_ceiling(cwnd_, cwnd_ < ssthresh_ ? 1.0 : 1.0 / cwnd_, ceiling));
}

bool CongestionWindow::on_ecn(Time now, Time srtt, Time sent) {
  if (cfg_.ecn_per_window && sent <= last_decrease_) return false;
  return decrease(now, srtt, cfg_.holdoff_floor);
}

bool CongestionWindow::on_loss(Time now, Time srtt) { return decrease(now, srtt, cfg_.holdoff_floor); }

bool CongestionWindow::on_timeout(Time now, Time srtt) { return decrease(now, srtt, cfg_.timeout_holdoff_floor); }

bool CongestionWindow::decrease(Time now, Time srtt, Time floor) {
  if (!cfg_.adaptive) return false;
  const Time since = now - last_decrease_;
  switch (cfg_.holdoff) {
    case CongestionWindowConfig::Holdoff::AtLeastSrtt:
      if (since < std::max(srtt, held_)) return false;
      break;
    case CongestionWindowConfig::Holdoff::MoreThanSrtt:
      if (since <= std::max(srtt, held_)) return false;
      break;
    case CongestionWindowConfig::Holdoff::SrttAtDecrease:
      if (since < held_) return false;
      break;
  }
  cwnd_ = std::max(1.0, cwnd_ / 2);
  ssthresh_ = cwnd_;
  last_decrease_ = now;
  held_ = cfg_.holdoff == CongestionWindowConfig::Holdoff::SrttAtDecrease ? std::max(srtt, floor) : floor;
  return true;
}

void CongestionWindow::restart_slow_start() {
  cwnd_ = 1;
  ssthresh_ = std::numeric_limits<double>::infinity();
}

void CongestionWindow::end_slow_start() {
  if (!in_slow_start()) return;
  ssthresh_ = 0;
  cwnd_ = std::max(cwnd_, cfg_.init_window);
}

}  // namespace ina::host
