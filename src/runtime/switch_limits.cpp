// The operator's limits of a switch: its control connections (ControlLimits)
// and how jobs share its pool (ShareLimits), from the `ina switch` flags.
#include <sys/resource.h>

#include <algorithm>

#include <fmt/format.h>

#include "runtime/control.hpp"
#include "runtime/switch_daemon.hpp"

namespace ina::rt {

namespace {
// "LO..HI" (each 0..2^32-1, LO <= HI); `what` (the flag and its value) names it in errors.
ShareLimits::Range parse_range(const std::string& what, const std::string& v) {
  const auto dots = v.find("..");
  auto num = [&](const std::string& t) -> uint32_t {
    if (t.empty() || t.size() > 10 || t.find_first_not_of("0123456789") != std::string::npos || std::stoull(t) > UINT32_MAX)
      throw InputError(fmt::format("{}: give LO..HI, each 0..{}", what, UINT32_MAX));
    return static_cast<uint32_t>(std::stoull(t));
  };
  if (dots == std::string::npos) throw InputError(fmt::format("{}: give LO..HI, each 0..{}", what, UINT32_MAX));
  ShareLimits::Range r{num(v.substr(0, dots)), num(v.substr(dots + 2))};
  if (r.lo > r.hi) throw InputError(fmt::format("{}: LO is above HI", what));
  return r;
}
}  // namespace

ShareLimits ShareLimits::from_flags(const std::string& quota, double reclaim_ms, const std::string& range,
                                    const std::vector<std::string>& job_ranges) {
  ShareLimits s;
  if (quota == "fair") {
    s.job_quota = kFairQuota;
  } else if (quota == "none") {
    s.job_quota = 0;
  } else {
    if (quota.empty() || quota.size() > 9 || quota.find_first_not_of("0123456789") != std::string::npos ||
        std::stoul(quota) == 0)
      throw InputError(fmt::format("--job-quota {}: give fair, none, or a number of aggregators (1..999999999)", quota));
    s.job_quota = static_cast<uint32_t>(std::stoul(quota));
  }
  if (!(reclaim_ms >= 0) || reclaim_ms > 3.6e6)
    throw InputError(fmt::format("--reclaim-ms {}: give 0 (never) .. 3600000", reclaim_ms));
  s.reclaim_after = from_ms(reclaim_ms);
  if (!range.empty()) s.priority = parse_range("--priority-range " + range, range);
  for (const std::string& jr : job_ranges) {
    const auto eq = jr.find('=');
    const std::string id = jr.substr(0, eq);
    if (eq == std::string::npos || id.empty() || id.size() > 5 || id.find_first_not_of("0123456789") != std::string::npos ||
        std::stoul(id) == 0 || std::stoul(id) > UINT16_MAX)
      throw InputError(fmt::format("--job-priority {}: give JOB=LO..HI with JOB 1..{}", jr, UINT16_MAX));
    const auto job = static_cast<uint16_t>(std::stoul(id));
    if (s.job_priority.count(job)) throw InputError(fmt::format("--job-priority {}: job {} is given twice", jr, job));
    s.job_priority[job] = parse_range("--job-priority " + jr, jr.substr(eq + 1));
  }
  return s;
}

ControlLimits ControlLimits::resolved(unsigned threads) const {
  ControlLimits r = *this;
  if (r.max_connections == 0) {
    r.max_connections = kDefaultMaxConnections;
    const rlim_t reserve = kDescriptorReserve + rlim_t{kDescriptorsPerThread} * std::max(1u, threads);
    rlimit nofile{};
    if (getrlimit(RLIMIT_NOFILE, &nofile) == 0 && nofile.rlim_cur != RLIM_INFINITY)
      r.max_connections = static_cast<unsigned>(
          std::clamp<rlim_t>(nofile.rlim_cur > reserve + 16 ? nofile.rlim_cur - reserve : 16, 16, kDefaultMaxConnections));
  }
  if (r.max_per_source == 0) throw InputError("switch: --max-connections-per-source must be >= 1");
  if (r.visitor_timeout <= 0) throw InputError("switch: --control-timeout-ms must be > 0");
  if (r.max_visitor_line < 256 || r.max_visitor_line > LineChannel::kMaxLine)
    throw InputError(fmt::format("switch: --max-control-line {}: give {}..{} bytes (a join is a few hundred)",
                                 r.max_visitor_line, 256, LineChannel::kMaxLine));
  if (r.max_visitor_output < 4096)
    throw InputError(fmt::format("switch: max_visitor_output {}: at least 4096 bytes", r.max_visitor_output));
  return r;
}

}  // namespace ina::rt
