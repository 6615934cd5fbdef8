#include "runtime/switch_shard.hpp"

#include <pthread.h>
#include <unistd.h>

namespace ina::rt::switchd {

void Shard::start_cpu_clock() {
  clockid_t c;
  if (pthread_getcpuclockid(pthread_self(), &c) != 0) return;
  cpu_clock = c;
  cpu_live = true;
}

void Shard::stop_cpu_clock() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  cpu_final = static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
  cpu_live = false;
}

double Shard::cpu_seconds() const {
  if (cpu_live) {
    timespec ts{};
    if (clock_gettime(cpu_clock.load(), &ts) == 0 && cpu_live)
      return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
  }
  return cpu_final;
}

void Shard::run_commands() {
  uint64_t v;
  [[maybe_unused]] auto r = ::read(wake.get(), &v, sizeof v);
  std::vector<std::function<void()>> queued;
  {
    std::lock_guard<std::mutex> l(mu);
    queued.swap(commands);
  }
  for (auto& f : queued) f();
}

void Shard::serve(int failed) {
  start_cpu_clock();
  try {
    while (!stopping) engine->poll(kSec);
  } catch (const std::exception& e) {
    error = e.what();
    const uint64_t one = 1;
    [[maybe_unused]] auto r = ::write(failed, &one, sizeof one);
  }
  {
    std::lock_guard<std::mutex> l(mu);
    gone = true;
  }
  run_commands();  // any the control plane queued before it saw the failure
  stop_cpu_clock();
}

}  // namespace ina::rt::switchd
