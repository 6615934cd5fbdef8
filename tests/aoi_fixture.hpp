#pragma once
// Test helpers shared by the P4INC-AOI tests: the source directory, and a
// placed job named "job <id>".
#include <string>
#include <utility>
#include <vector>

#include "control/aoi.hpp"

namespace ina::control::aoi {

// The repository, for its scenarios.
inline const std::string kAoiSourceDir = INA_SOURCE_DIR;

inline Job aoi_job(unsigned id, std::vector<std::pair<unsigned, unsigned>> workers, unsigned ps, double gb,
                   double update_s = 0, double arrival_s = 0) {
  Job j;
  j.id = id;
  j.name = "job " + std::to_string(id);
  j.workers = std::move(workers);
  j.ps_unit = ps;
  j.gb_per_worker = gb;
  j.update_s = update_s;
  j.arrival_s = arrival_s;
  return j;
}

}  // namespace ina::control::aoi
