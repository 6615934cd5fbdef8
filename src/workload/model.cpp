#include "workload/model.hpp"

#include <cmath>
#include <stdexcept>

namespace ina::workload {

uint64_t ModelSpec::total_bytes() const {
  uint64_t b = 0;
  for (const auto& p : send_order) b += p.bytes;
  return b;
}

Time ModelSpec::total_compute() const {
  Time t = 0;
  for (Time c : compute) t += c;
  return t;
}

ModelSpec dsa_model(char which, double partition_mb, double compute_ms) {
  double mb, ms;
  if (which == 'A') { mb = 4; ms = 0.32; }
  else if (which == 'B') { mb = 2; ms = 0.64; }
  else throw std::invalid_argument(std::string("unknown DSA model '") + which + "'");
  if (partition_mb > 0) mb = partition_mb;
  if (compute_ms > 0) ms = compute_ms;
  // Round to whole int32 elements.
  const uint64_t bytes = static_cast<uint64_t>(std::llround(mb * kMiB / 4)) * 4;
  ModelSpec m;
  m.name = std::string(1, which);
  m.compute = {from_ms(ms), from_ms(ms)};
  m.send_order = {{bytes, 2}, {bytes, 1}, {bytes, 1}, {bytes, 2}};
  return m;
}

}  // namespace ina::workload
