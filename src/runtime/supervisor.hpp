#pragma once
// Child-process supervision shared by the launchers (`ina run`, `ina train`):
// children in one process group that die with the launcher (PR_SET_PDEATHSIG),
// SIGCHLD and the terminating signals read through a signalfd, bounded waits,
// and a stop that escalates from SIGTERM to SIGKILL and reaps everyone.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <deque>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "runtime/net.hpp"

extern char** environ;

namespace ina::rt {

enum class Kind { Switch, Ps, Worker };

struct Child {
  std::string name;
  Kind kind;
  unsigned job = 0, rank = 0;
  pid_t pid = -1;
  bool reaped = false;
  int status = 0;
};

inline std::string describe_status(int st) {
  if (WIFEXITED(st)) {
    const int code = WEXITSTATUS(st);
    if (code == 3) return "exited with status 3 (results differed from the exact sum)";
    if (code == 127) return "exited with status 127 (could not be started)";
    return fmt::format("exited with status {}", code);
  }
  if (WIFSIGNALED(st)) return fmt::format("was killed by signal {} ({})", WTERMSIG(st), strsignal(WTERMSIG(st)));
  return "stopped";
}

inline bool exited_ok(int st) { return WIFEXITED(st) && WEXITSTATUS(st) == 0; }

// Children, their process group, and the signals that concern them.
class Supervisor {
 public:
  Supervisor() : parent_(getpid()) {
    sigemptyset(&set_);
    for (int s : {SIGCHLD, SIGINT, SIGTERM, SIGHUP}) sigaddset(&set_, s);
    sigprocmask(SIG_BLOCK, &set_, &old_);
    sigfd_ = UniqueFd(signalfd(-1, &set_, SFD_CLOEXEC | SFD_NONBLOCK));
    if (!sigfd_) throw RuntimeError(fmt::format("signalfd: {}", errno_text(errno)));
    // Children get the environment without INA_* variables: the run's
    // configuration is explicit and must not be overridden by the caller's shell.
    for (char** e = environ; *e; ++e)
      if (std::strncmp(*e, "INA_", 4) != 0) env_.emplace_back(*e);
  }
  ~Supervisor() {
    stop_all();
    sigprocmask(SIG_SETMASK, &old_, nullptr);
  }

  // Starts `exe args...` in the group; `keep_fd` (if >= 0) stays open in the child.
  // `env` adds NAME=VALUE entries to this child's environment only, replacing
  // an inherited variable of the same name. `stderr_fd` (if >= 0) becomes the
  // child's standard error.
  Child& spawn(Kind kind, std::string name, unsigned job, unsigned rank, const std::string& exe,
               const std::vector<std::string>& args, int keep_fd = -1, std::vector<std::string> env = {},
               int stderr_fd = -1) {
    std::vector<std::string> argv_s{exe};
    argv_s.insert(argv_s.end(), args.begin(), args.end());
    std::vector<char*> argv, envp;
    for (auto& a : argv_s) argv.push_back(a.data());
    argv.push_back(nullptr);
    auto overridden = [&](const std::string& inherited) {
      const size_t eq = inherited.find('=');
      if (eq == std::string::npos) return false;
      for (const auto& e : env)
        if (e.compare(0, eq + 1, inherited, 0, eq + 1) == 0) return true;
      return false;
    };
    for (auto& e : env_)
      if (!overridden(e)) envp.push_back(e.data());
    for (auto& e : env) envp.push_back(e.data());
    envp.push_back(nullptr);
    const std::string msg = "cannot execute " + exe + "\n";  // formatted before fork: the child may not allocate
    const pid_t pid = fork();
    if (pid < 0) throw RuntimeError(fmt::format("fork: {}", errno_text(errno)));
    if (pid == 0) {  // child: async-signal-safe calls only
      setpgid(0, pgid_);
      prctl(PR_SET_PDEATHSIG, SIGTERM);
      if (getppid() != parent_) _exit(126);
      sigset_t none;
      sigemptyset(&none);
      sigprocmask(SIG_SETMASK, &none, nullptr);
      if (keep_fd >= 0) fcntl(keep_fd, F_SETFD, 0);
      if (stderr_fd >= 0 && stderr_fd != 2) dup2(stderr_fd, 2);
      execve(argv[0], argv.data(), envp.data());
      [[maybe_unused]] auto r = write(2, msg.data(), msg.size());
      _exit(127);
    }
    setpgid(pid, pgid_ ? pgid_ : pid);  // both sides set it: no race with an early kill
    if (!pgid_) pgid_ = pid;
    Child c;
    c.name = std::move(name);
    c.kind = kind;
    c.job = job;
    c.rank = rank;
    c.pid = pid;
    kids_.push_back(std::move(c));
    return kids_.back();
  }

  // Waits until a signal arrives, `fd` (if >= 0) is readable, or `deadline`.
  // Returns the children reaped meanwhile; sets interrupted() on SIGINT/SIGTERM/SIGHUP.
  std::vector<Child*> wait(Time deadline, int fd = -1, bool* fd_ready = nullptr) {
    std::vector<Child*> reaped;
    pollfd p[2] = {{sigfd_.get(), POLLIN, 0}, {fd, POLLIN, 0}};
    const Time left = std::max<Time>(0, deadline - monotonic_now());
    const int r = ::poll(p, fd >= 0 ? 2 : 1, static_cast<int>(std::min<Time>(left, kSec) / kMs) + 1);
    if (fd_ready) *fd_ready = r > 0 && fd >= 0 && (p[1].revents & (POLLIN | POLLHUP));
    signalfd_siginfo si;
    while (::read(sigfd_.get(), &si, sizeof si) == sizeof si)
      if (si.ssi_signo != SIGCHLD) interrupted_ = static_cast<int>(si.ssi_signo);
    reap(reaped);
    return reaped;
  }

  // SIGTERM to the group, a grace period, then SIGKILL; reaps everyone.
  void stop_all(Time grace = 3 * kSec) {
    if (!pgid_ || all_reaped()) return;
    kill(-pgid_, SIGTERM);
    const Time deadline = monotonic_now() + grace;
    while (!all_reaped() && monotonic_now() < deadline) wait(deadline);
    if (!all_reaped()) kill(-pgid_, SIGKILL);
    for (auto& c : kids_)
      if (!c.reaped) {
        int st = 0;
        if (waitpid(c.pid, &st, 0) == c.pid) {
          c.reaped = true;
          c.status = st;
        }
      }
  }

  bool all_reaped() const {
    for (const auto& c : kids_)
      if (!c.reaped) return false;
    return true;
  }
  int interrupted() const { return interrupted_; }
  std::deque<Child>& kids() { return kids_; }

 private:
  void reap(std::vector<Child*>& out) {
    int st = 0;
    pid_t pid;
    while ((pid = waitpid(-1, &st, WNOHANG)) > 0)
      for (auto& c : kids_)
        if (c.pid == pid) {
          c.reaped = true;
          c.status = st;
          out.push_back(&c);
        }
  }

  pid_t parent_;
  pid_t pgid_ = 0;
  sigset_t set_, old_;
  UniqueFd sigfd_;
  std::vector<std::string> env_;
  std::deque<Child> kids_;
  int interrupted_ = 0;
};

}  // namespace ina::rt
