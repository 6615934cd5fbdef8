#pragma once
// What the machine offers, for the resource checks made before anything runs
// (`ina sim`: experiment/estimate.hpp; `ina run`: runtime/launcher.hpp).
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>

namespace ina {

// The "<key> <n> kB" line of a /proc file, in bytes; 0 if it cannot be read.
inline uint64_t proc_kb_field(const char* path, const std::string& key) {
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(key, 0) != 0) continue;
    std::istringstream is(line.substr(key.size()));
    uint64_t kb = 0;
    if (is >> kb) return kb * 1024;
  }
  return 0;
}

// MemAvailable from /proc/meminfo in bytes; 0 if it cannot be read.
inline uint64_t mem_available_bytes() { return proc_kb_field("/proc/meminfo", "MemAvailable:"); }

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

// CPU time of the calling thread (s): what one simulation run used, whatever
// else the machine or the process's other threads did meanwhile.
inline double thread_cpu_seconds() {
  timespec ts{};
  if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts) != 0) return 0;
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

// The process's peak resident set (VmHWM of /proc/self/status) in bytes; 0 if unknown.
inline uint64_t peak_rss_bytes() { return proc_kb_field("/proc/self/status", "VmHWM:"); }

// Resets the peak resident set to the current one (Linux >= 4.0: "5" to
// /proc/self/clear_refs), so that peak_rss_bytes() is the peak from now on.
inline bool reset_peak_rss() {
  std::ofstream out("/proc/self/clear_refs");
  out << "5";
  out.flush();
  return static_cast<bool>(out);
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
