#pragma once
// The switch daemon's threads (SwitchDaemonConfig::threads = T): T shards,
// each with its own switch program, UdpEngine and UDP socket, and the command
// queue through which the control plane (on shard 0's thread) acts on another
// shard (on_shard).
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

#include <fmt/format.h>

#include "dataplane/switch.hpp"
#include "runtime/udp_engine.hpp"

namespace ina::rt::switchd {

// One switch thread: its own switch program (1/T of the aggregator memory),
// its own engine and UDP socket (one of the reuseport group on the switch's
// port), and the jobs J with J mod T == index. Nothing here is shared with
// another shard. The control plane (on shard 0's thread) reaches a shard
// only through on_shard().
struct Shard {
  unsigned index = 0;
  std::unique_ptr<dp::SwitchProgram> program;
  std::unique_ptr<UdpEngine> engine;  // after the program: destroyed (and flushed) first
  // Shards other than 0 run on a thread of their own (SwitchDaemon::run);
  // commands reach them through this queue and eventfd.
  UniqueFd wake;
  std::mutex mu;
  std::vector<std::function<void()>> commands;  // under mu
  bool gone = false;                            // under mu: the thread left its loop
  std::atomic<bool> stopping{false};
  std::thread thread;
  std::string error;  // why the thread stopped, if it failed (read after join)
  // CPU time of the thread serving the shard: its clock while it runs, the final reading after.
  std::atomic<bool> cpu_live{false};
  std::atomic<clockid_t> cpu_clock{};
  std::atomic<double> cpu_final{0};

  void start_cpu_clock();
  void stop_cpu_clock();
  double cpu_seconds() const;

  // The commands queued so far, on the shard's thread.
  void run_commands();

  // The shard's thread: its loop until stopped. A failure is kept in `error`
  // and reported through `failed` (the control loop's stop descriptor).
  void serve(int failed);
};

// Runs f on shard s's thread and returns its result (or rethrows its
// exception): the control plane's way to act on another shard's program and
// engine. Inline when the shard has no thread of its own (shard 0, whose loop
// is the control plane's, or before / after SwitchDaemon::run).
template <typename F>
auto on_shard(Shard& s, F&& f) -> std::invoke_result_t<F&> {
  if (!s.thread.joinable()) return f();
  std::packaged_task<std::invoke_result_t<F&>()> task(std::ref(f));
  auto done = task.get_future();
  {
    std::lock_guard<std::mutex> l(s.mu);
    if (s.gone) throw RuntimeError(fmt::format("switch thread {} has stopped: {}", s.index, s.error));
    s.commands.emplace_back([&task] { task(); });
  }
  const uint64_t one = 1;
  [[maybe_unused]] auto r = ::write(s.wake.get(), &one, sizeof one);
  return done.get();
}

// Where the job field sits in the INA header (wire/packet.hpp: version u8,
// type u8, flags u16, job u16, ... in network order): what the reuseport
// steering program reads (test: Threads.TheJobFieldIsWhereTheSteeringReadsIt).
constexpr uint32_t kJobOffset = 4;
// With T > 1 threads, each shard needs at least this many aggregators.
constexpr size_t kMinShardAggregators = 16;

}  // namespace ina::rt::switchd
