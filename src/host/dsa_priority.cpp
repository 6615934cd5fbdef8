#include "host/dsa_priority.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace ina::host {

double dsa_priority(double remaining_us, int layers, int layer, double comm_over_comp) {
  if (layers < 1 || layer < 1 || layer > layers) throw std::invalid_argument("dsa_priority: layer out of range");
  const double t = std::max(remaining_us, 1.0);
  return (1.0 / t) * (static_cast<double>(layers) / layer) * comm_over_comp;
}

uint32_t dsa_priority_field(double p) {
  const double v = std::nearbyint(p * 16777216.0);
  if (!(v >= 1.0)) return 1;
  return static_cast<uint32_t>(std::min(v, 2147483647.0));
}

}  // namespace ina::host
