#pragma once
// `ina train-py`: the scripts' standard error, passed through to ours line by
// line (lines of different ranks never interleave) while the last lines of each
// are kept, so that a failed script's own error can close the launcher's report.
#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <deque>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "core/time.hpp"
#include "runtime/net.hpp"

namespace ina::rt {

class StderrTee {
 public:
  StderrTee() = default;
  StderrTee(const StderrTee&) = delete;
  StderrTee& operator=(const StderrTee&) = delete;
  ~StderrTee() { finish(0); }

  // A pipe whose write end becomes the stderr (spawn's stderr_fd) of the child
  // `id` names (a train-py worker's rank); call before start().
  int add(unsigned id) {
    int fds[2];
    if (pipe2(fds, O_CLOEXEC) != 0) throw RuntimeError(fmt::format("pipe: {}", errno_text(errno)));
    streams_.push_back({UniqueFd(fds[0]), id, {}, {}});
    write_ends_.emplace_back(fds[1]);
    return fds[1];
  }
  // After the children are spawned: closes this process's write ends and starts passing through.
  void start() {
    write_ends_.clear();
    if (!streams_.empty()) thread_ = std::thread([this] { run(); });
  }
  // Waits until every stream has ended (its process and any heir closed it) or `grace` passed.
  void finish(Time grace) {
    if (!thread_.joinable()) return;
    const Time until = monotonic_now() + grace;
    while (!done_.load() && monotonic_now() < until) ::usleep(10'000);
    stop_ = true;
    thread_.join();
  }
  // The last `lines` lines child `id` wrote to its stderr.
  std::string tail(unsigned id, size_t lines = 12) {
    std::lock_guard lk(mu_);
    for (const auto& st : streams_)
      if (st.id == id) {
        std::string t = st.kept + st.partial;
        while (!t.empty() && t.back() == '\n') t.pop_back();
        size_t start = t.size();  // of the last `lines` lines
        for (size_t n = 0; start > 0;) {
          const size_t nl = t.rfind('\n', start - 1);
          if (nl == std::string::npos) {
            start = 0;
          } else {
            start = nl;
            if (++n == lines) ++start;
          }
          if (n == lines) break;
        }
        return t.substr(start);
      }
    return {};
  }

 private:
  struct Stream {
    UniqueFd fd;
    unsigned id;
    std::string partial;  // the current line, not yet passed on
    std::string kept;     // the last few KB passed on
  };
  void emit(Stream& st, std::string_view text) {
    for (size_t off = 0; off < text.size();) {
      const ssize_t n = ::write(STDERR_FILENO, text.data() + off, text.size() - off);
      if (n <= 0) break;
      off += static_cast<size_t>(n);
    }
    st.kept.append(text);
    if (st.kept.size() > kKeep) st.kept.erase(0, st.kept.size() - kKeep);
  }
  void run() {
    char buf[4096];
    for (;;) {
      std::vector<pollfd> p;
      std::vector<Stream*> of;
      for (auto& st : streams_)
        if (st.fd) {
          p.push_back({st.fd.get(), POLLIN, 0});
          of.push_back(&st);
        }
      if (p.empty() || stop_) break;
      const int r = ::poll(p.data(), p.size(), 100);
      std::lock_guard lk(mu_);
      if (r <= 0) {  // quiet for 100 ms: pass on unfinished lines (prompts, progress bars)
        for (auto* st : of)
          if (!st->partial.empty()) emit(*st, std::exchange(st->partial, {}));
        continue;
      }
      for (size_t i = 0; i < p.size(); ++i) {
        if (!(p[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
        Stream& st = *of[i];
        const ssize_t n = ::read(st.fd.get(), buf, sizeof buf);
        if (n <= 0) {
          if (n < 0 && errno == EINTR) continue;
          if (!st.partial.empty()) emit(st, std::exchange(st.partial, {}) + "\n");
          st.fd.reset();
          continue;
        }
        st.partial.append(buf, static_cast<size_t>(n));
        const size_t nl = st.partial.rfind('\n');
        if (nl != std::string::npos) {
          emit(st, std::string_view(st.partial).substr(0, nl + 1));
          st.partial.erase(0, nl + 1);
        } else if (st.partial.size() > kKeep) {
          emit(st, std::exchange(st.partial, {}));
        }
      }
    }
    std::lock_guard lk(mu_);
    for (auto& st : streams_)
      if (!st.partial.empty()) emit(st, std::exchange(st.partial, {}) + "\n");
    done_ = true;
  }
  static constexpr size_t kKeep = 4096;
  std::deque<Stream> streams_;
  std::vector<UniqueFd> write_ends_;
  std::thread thread_;
  std::mutex mu_;
  std::atomic<bool> stop_{false}, done_{false};
};

}  // namespace ina::rt
