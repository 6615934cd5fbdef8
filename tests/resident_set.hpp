#pragma once
// This process's resident set now (/proc/self/statm), for tests that check
// what an allocation faults in.
#include <unistd.h>

#include <cstddef>
#include <fstream>

namespace ina::test {

inline size_t resident_bytes() {
  std::ifstream statm("/proc/self/statm");
  size_t size = 0, resident = 0;
  statm >> size >> resident;
  return resident * static_cast<size_t>(::sysconf(_SC_PAGESIZE));
}

inline double resident_mb() { return static_cast<double>(resident_bytes()) / 1e6; }

}  // namespace ina::test
