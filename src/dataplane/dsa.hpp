#pragma once
// DSA's settings (dsa.cpp): the compare rule and the split-task join. The
// program itself is built by make_dsa (switch.hpp), through the registry.
#include <cstdint>

namespace ina::dp {

// DSA's compare rule: Eq. 1 priorities, or the Fig. 11 strawmen.
enum class PreemptMode { Priority, Always, Coin };

struct DsaConfig {
  PreemptMode preempt = PreemptMode::Priority;
  // Ours (scheme dsa-join): the switch remembers the ranks of a task it sent
  // to the PS (evicted, or a lost compare), and sends its own half of that
  // task to the PS as soon as the two halves cover every rank, so they meet
  // at once instead of at the PS's timeout (dsa.cpp). Off: the paper's §IV-C.
  bool join_splits = false;
};

}  // namespace ina::dp
