#pragma once
// What the machine offers, for the resource checks made before anything runs
// (`ina sim`: experiment/estimate.hpp; `ina run`: runtime/launcher.hpp).
#include <sys/resource.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>

namespace ina {

// MemAvailable from /proc/meminfo in bytes; 0 if it cannot be read.
inline uint64_t mem_available_bytes() {
  std::ifstream in("/proc/meminfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("MemAvailable:", 0) != 0) continue;
    std::istringstream is(line.substr(13));
    uint64_t kb = 0;
    if (is >> kb) return kb * 1024;
  }
  return 0;
}

// RLIMIT_NPROC (processes and threads of this user); 0 if unlimited or unknown.
inline uint64_t nproc_limit() {
  rlimit r{};
  if (getrlimit(RLIMIT_NPROC, &r) != 0 || r.rlim_cur == RLIM_INFINITY) return 0;
  return static_cast<uint64_t>(r.rlim_cur);
}

// Online CPUs (at least 1).
inline unsigned online_cpus() {
  const long n = sysconf(_SC_NPROCESSORS_ONLN);
  return n > 0 ? static_cast<unsigned>(n) : 1;
}

// "1.5 GiB", "12.0 MiB", "3.0 KiB", "512 B".
inline std::string human_bytes(uint64_t b) {
  char buf[32];
  if (b >= (1ULL << 30)) std::snprintf(buf, sizeof buf, "%.1f GiB", static_cast<double>(b) / (1ULL << 30));
  else if (b >= (1ULL << 20)) std::snprintf(buf, sizeof buf, "%.1f MiB", static_cast<double>(b) / (1ULL << 20));
  else if (b >= 1024) std::snprintf(buf, sizeof buf, "%.1f KiB", static_cast<double>(b) / 1024);
  else std::snprintf(buf, sizeof buf, "%llu B", static_cast<unsigned long long>(b));
  return buf;
}

}  // namespace ina
