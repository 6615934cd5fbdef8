#pragma once
// The ring collective tests' settings: a small gradient (default 1/16 MiB
// per worker) and a 2 s bound on simulated time.
#include "experiment/collective.hpp"

namespace ina::test {

inline exp::CollectiveSettings small_ring(double mb = 0.0625) {
  exp::CollectiveSettings s;
  s.gradient_mb = mb;
  s.max_sim_ms = 2000;
  return s;
}

}  // namespace ina::test
