#include "host/profile.hpp"

#include <stdexcept>

#include "host/ps.hpp"
#include "host/worker.hpp"

namespace ina::host {
namespace {

constexpr const Profile* kProfiles[] = {&kPaperProfile, &kRuntimeProfile};

}  // namespace

void Profile::apply(WorkerConfig& w) const {
  w.min_rto = min_rto;
  w.fast_retransmit = fast_retransmit;
  w.delay_target = delay_target;
  w.retain_ops = retain_ops;
}

void Profile::apply(PsConfig& p) const {
  p.min_timeout = ps_min_timeout;
  p.targeted_known_results = targeted_known_results;
}

const Profile* find_profile(std::string_view name) {
  for (const Profile* p : kProfiles)
    if (p->name == name) return p;
  return nullptr;
}

const Profile& profile(std::string_view name) {
  if (const Profile* p = find_profile(name)) return *p;
  throw std::invalid_argument("unknown profile '" + std::string(name) + "': expected " + profile_names());
}

std::string profile_names() {
  std::string out;
  for (size_t i = 0; i < std::size(kProfiles); ++i)
    out += (i == 0 ? "" : i + 1 == std::size(kProfiles) ? " or " : ", ") + std::string(kProfiles[i]->name);
  return out;
}

}  // namespace ina::host
