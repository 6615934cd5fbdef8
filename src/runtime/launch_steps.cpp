#include "runtime/launch_steps.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include <fmt/format.h>

#include "core/json_depth.hpp"
#include "runtime/net.hpp"

namespace ina::rt {

LaunchFailure interrupted_failure(const Supervisor& sup) {
  const int sig = sup.interrupted();
  return LaunchFailure{128 + sig, fmt::format("interrupted by signal {} ({})", sig, strsignal(sig))};
}

LaunchFailure child_failure(const Child& c) {
  const int st = WIFEXITED(c.status) && WEXITSTATUS(c.status) == 3 ? 3 : 1;
  return LaunchFailure{st, fmt::format("{} (pid {}) {}", c.name, c.pid, describe_status(c.status)), &c};
}

std::optional<LaunchFailure> start_switch(Supervisor& sup, const std::string& binary, std::vector<std::string> args,
                                          const std::string& name, unsigned job, unsigned rank, Time deadline,
                                          Child*& sw, uint16_t& port, std::vector<std::string> env) {
  int ready[2];
  if (pipe2(ready, O_CLOEXEC) != 0) throw RuntimeError(fmt::format("pipe: {}", errno_text(errno)));
  UniqueFd ready_r(ready[0]), ready_w(ready[1]);
  args.insert(args.end(), {"--ready-fd", std::to_string(ready_w.get())});
  sw = &sup.spawn(Kind::Switch, name, job, rank, binary, args, ready_w.get(), std::move(env));
  ready_w.reset();
  std::string port_line;
  const Time ready_deadline = std::min(deadline, monotonic_now() + 15 * kSec);
  for (;;) {
    bool readable = false;
    for (Child* c : sup.wait(ready_deadline, ready_r.get(), &readable))
      if (c == sw)
        return LaunchFailure{1, fmt::format("the {} (pid {}) {} before it was ready", name, c->pid, describe_status(c->status)), c};
    if (sup.interrupted()) return interrupted_failure(sup);
    if (readable) {
      char buf[64];
      const ssize_t n = ::read(ready_r.get(), buf, sizeof buf);
      if (n > 0) port_line.append(buf, static_cast<size_t>(n));
      if (port_line.find('\n') != std::string::npos) break;
      if (n == 0) {  // closed without a port: it is exiting; let the reaper name the status
        const Time until = monotonic_now() + 5 * kSec;
        while (!sw->reaped && monotonic_now() < until) sup.wait(until);
        return LaunchFailure{1, sw->reaped ? fmt::format("the {} (pid {}) {} before it was ready", name, sw->pid, describe_status(sw->status))
                                           : fmt::format("the {} closed its ready pipe without reporting a port", name), sw};
      }
    }
    if (monotonic_now() >= ready_deadline) return LaunchFailure{1, fmt::format("timed out waiting for the {} to start", name)};
  }
  port = static_cast<uint16_t>(std::stoi(port_line));
  return std::nullopt;
}

std::optional<LaunchFailure> wait_for_workers(Supervisor& sup, Time deadline, double timeout_s, const WorkerWait& how) {
  auto workers_done = [&] {
    for (const auto& c : sup.kids())
      if (c.kind == Kind::Worker && !(c.reaped && exited_ok(c.status))) return false;
    return true;
  };
  const Time t0 = monotonic_now();
  Time next_progress = how.progress && how.progress_after_s > 0 ? t0 + static_cast<Time>(how.progress_after_s * kSec) : kNever;
  for (;;) {
    auto reaped = sup.wait(std::min(deadline, next_progress));
    if (monotonic_now() >= next_progress && reaped.empty() && !sup.interrupted()) {
      unsigned done = 0, all = 0;
      for (const auto& c : sup.kids())
        if (c.kind == Kind::Worker) {
          ++all;
          done += c.reaped && exited_ok(c.status);
        }
      how.progress(to_ms(monotonic_now() - t0) / 1000, done, all);
      next_progress = monotonic_now() + static_cast<Time>(std::max(0.05, how.progress_every_s) * kSec);
    }
    // A child that failed without a signal (e.g. a PS whose job the switch
    // aborted) is often the echo of another's death: collect the cascade for
    // a moment, so the root cause is named even when it is reaped later.
    const bool failed = std::any_of(reaped.begin(), reaped.end(),
                                    [](const Child* c) { return !exited_ok(c->status); });
    if (failed && std::none_of(reaped.begin(), reaped.end(), [](const Child* c) { return WIFSIGNALED(c->status); })) {
      const Time settle = std::min(deadline, monotonic_now() + 300 * kMs);
      while (monotonic_now() < settle)
        for (Child* c : sup.wait(settle)) reaped.push_back(c);
    }
    // Among children reaped together, one killed by a signal is the likelier
    // cause: the others typically exited because their job was aborted.
    std::stable_sort(reaped.begin(), reaped.end(),
                     [](const Child* a, const Child* b) { return WIFSIGNALED(a->status) && !WIFSIGNALED(b->status); });
    if (how.workers_first)
      std::stable_sort(reaped.begin(), reaped.end(), [](const Child* a, const Child* b) {
        return a->kind == Kind::Worker && !exited_ok(a->status) && !(b->kind == Kind::Worker && !exited_ok(b->status));
      });
    // The rank that left caused the abort, whichever of them was reaped first.
    if (how.echo)
      std::stable_sort(reaped.begin(), reaped.end(),
                       [&](const Child* a, const Child* b) { return !how.echo(*a) && how.echo(*b); });
    for (Child* c : reaped) {
      // A PS exits 0 only when the switch has told it the job finished (its
      // workers may still be writing their reports); the switch never exits on its own.
      const bool ok = exited_ok(c->status) && c->kind != Kind::Switch;
      if (!ok) {
        LaunchFailure f = child_failure(*c);
        if (c->kind == Kind::Switch && exited_ok(c->status))
          f.message = fmt::format("the {} (pid {}) exited while jobs were running", c->name, c->pid);
        return f;
      }
    }
    if (sup.interrupted()) return interrupted_failure(sup);
    if (workers_done()) return std::nullopt;
    if (monotonic_now() >= deadline)
      return LaunchFailure{1, fmt::format("timed out after {:.0f} s (--timeout) with workers still running", timeout_s)};
  }
}

std::optional<LaunchFailure> wait_for_ps_exit(Supervisor& sup, Time deadline) {
  const Time ps_deadline = std::min(deadline, monotonic_now() + 10 * kSec);
  for (;;) {
    bool all = true;
    for (const auto& c : sup.kids())
      if (c.kind == Kind::Ps && !c.reaped) all = false;
    for (const auto& c : sup.kids())
      if (c.kind == Kind::Ps && c.reaped && !exited_ok(c.status)) return child_failure(c);
    if (all) return std::nullopt;
    if (monotonic_now() >= ps_deadline) return LaunchFailure{1, "a PS did not exit after its job finished"};
    sup.wait(ps_deadline);
    if (sup.interrupted()) return interrupted_failure(sup);
  }
}

std::optional<LaunchFailure> stop_switches(Supervisor& sup, const std::vector<Child*>& switches) {
  for (Child* sw : switches) kill(sw->pid, SIGTERM);
  for (Child* sw : switches) {
    const Time until = monotonic_now() + 5 * kSec;
    while (!sw->reaped && monotonic_now() < until) sup.wait(until);
    if (!sw->reaped) return LaunchFailure{1, fmt::format("the {} (pid {}) did not stop on SIGTERM", sw->name, sw->pid), sw};
    if (!exited_ok(sw->status)) return child_failure(*sw);
  }
  return std::nullopt;
}

nlohmann::json read_json_report(const std::string& path) {
  std::ifstream in(path);
  if (!in) return nlohmann::json(nlohmann::json::value_t::discarded);
  std::ostringstream text;
  text << in.rdbuf();
  const std::string s = text.str();
  if (json_nesting_depth(s) > kMaxJsonDepth) return nlohmann::json(nlohmann::json::value_t::discarded);
  return nlohmann::json::parse(s, nullptr, false);
}

}  // namespace ina::rt
