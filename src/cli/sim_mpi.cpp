// `mpirun -np N ina sim FILE`: see sim_mpi.hpp and docs/architecture.md.
#include "cli/sim_mpi.hpp"
#include "cli/commands.hpp"
#include "sim/ranks.hpp"

#include <dlfcn.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <mutex>
#include <stdexcept>
#include <thread>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace ina::cli {
namespace {

// Messages: a rank > 0 says kReady (its scenario digest) or kBroken (why it
// cannot run), then kResult after each run; rank 0 answers each with kRun
// (a run's index) or kStop.
enum Tag : int { kReady = 1, kBroken = 2, kResult = 3, kRun = 4, kStop = 5 };
// A rank's state on rank 0, else the run it is running: kFirst before its first message,
// kAnswer while it waits for rank 0's answer to its message, kStopped once told to stop.
constexpr int kFirst = -3, kAnswer = -2, kStopped = -1;
constexpr auto kPoll = std::chrono::milliseconds(1);  // waiting ranks poll: OpenMPI's blocking calls spin

// A run's outcome as rank 0 receives it. CBOR keeps every double's bits (NaN included), so the
// metrics rank 0 averages are those the run produced.
std::string encode(size_t index, const exp::RunResult& r) {
  nlohmann::json j = {{"i", index}, {"ok", r.out.ok}, {"problems", r.out.problems}, {"metrics", r.out.metrics},
                            {"jct", r.out.job_jct_ms}, {"digest", r.out.digest}, {"wall_s", r.wall_s}, {"cpu_s", r.cpu_s},
                            {"peak_rss", r.peak_rss}, {"error", r.error}, {"links", nlohmann::json::array()},
                            {"busiest", nlohmann::json::array()}};
  nlohmann::json& links = j["links"];
  for (const auto& l : r.out.marked_links) links.push_back({l.link, l.ecn_marks, l.queue_drops});
  for (const auto& l : r.out.busiest_links) j["busiest"].push_back({l.link, l.busy_ms, l.bytes});
  const std::vector<uint8_t> bytes = nlohmann::json::to_cbor(j);
  return std::string(bytes.begin(), bytes.end());
}

exp::RunResult decode(const std::string& data, size_t* index) {
  const nlohmann::json j = nlohmann::json::from_cbor(data);
  exp::RunResult r;
  *index = j.at("i").get<size_t>();
  r.out.ok = j.at("ok").get<bool>();
  r.out.problems = j.at("problems").get<std::string>();
  r.out.metrics = j.at("metrics").get<std::map<std::string, double>>();
  r.out.job_jct_ms = j.at("jct").get<std::vector<double>>();
  r.out.digest = j.at("digest").get<uint64_t>();
  r.wall_s = j.at("wall_s").get<double>();
  r.cpu_s = j.at("cpu_s").get<double>();
  r.peak_rss = j.at("peak_rss").get<uint64_t>();
  r.error = j.at("error").get<std::string>();
  for (const auto& l : j.at("links"))
    r.out.marked_links.push_back({l.at(0).get<std::string>(), l.at(1).get<uint64_t>(), l.at(2).get<uint64_t>()});
  for (const auto& l : j.at("busiest"))
    r.out.busiest_links.push_back({l.at(0).get<std::string>(), l.at(1).get<double>(), l.at(2).get<uint64_t>()});
  return r;
}

}  // namespace

bool launched_by_mpirun() { return std::getenv("OMPI_COMM_WORLD_SIZE") != nullptr; }

unsigned mpi_local_ranks() {
  const char* v = std::getenv("OMPI_COMM_WORLD_LOCAL_SIZE");
  const long n = v ? std::strtol(v, nullptr, 10) : 1;
  return n > 0 ? static_cast<unsigned>(n) : 1;
}

uint64_t digest_text(const std::string& text, uint64_t h) {
  for (unsigned char c : text) h = (h ^ c) * 0x100000001b3ull;
  return h;
}

struct MpiSweep::Api {
  void* lib = nullptr;
  int (*init)(int*, int*, int) = nullptr;
  int (*poll)(int, int*, int*, long*) = nullptr;
  int (*recv)(int, int, char*, long) = nullptr;
  int (*send)(int, int, const char*, long) = nullptr;
  void (*abort)(int) = nullptr;
  int (*finalize)() = nullptr;
  int (*exchange_counts)(const long*, long*) = nullptr;
  int (*exchange)(const char*, const long*, char*, const long*) = nullptr;
  void (*error_string)(int, char*, int) = nullptr;

  // Reports an MPI failure and ends the whole job: a peer may be waiting for this rank.
  [[noreturn]] void fail(int rank, const char* call, int code) {
    char text[256] = "";
    error_string(code, text, sizeof text);
    std::fprintf(stderr, "ina sim: rank %d: %s failed: %s (MPI error %d); aborting the MPI job\n", rank, call, text, code);
    std::fflush(stderr);
    abort(1);
    std::_Exit(1);
  }
};

class MpiSweep::Ranks final : public sim::Ranks {
 public:
  explicit Ranks(MpiSweep& m) : m_(m) {}
  unsigned rank() const override { return static_cast<unsigned>(m_.rank_); }
  unsigned size() const override { return static_cast<unsigned>(m_.size_); }

 protected:
  std::vector<std::string> trade(std::vector<std::string> out) override {
    const auto n = static_cast<size_t>(m_.size_);
    out[rank()].clear();
    std::vector<long> send_len(n), recv_len(n);
    std::string send;
    for (size_t r = 0; r < n; ++r) {
      send_len[r] = static_cast<long>(out[r].size());
      send += out[r];
    }
    Api& api = *m_.api_;
    if (int rc = api.exchange_counts(send_len.data(), recv_len.data())) api.fail(m_.rank_, "MPI_Alltoall", rc);
    long total = 0;
    for (const long l : recv_len) total += l;
    std::string recv(static_cast<size_t>(total), '\0');
    if (int rc = api.exchange(send.data(), send_len.data(), recv.data(), recv_len.data()))
      api.fail(m_.rank_, "MPI_Alltoallv", rc);
    std::vector<std::string> in(n);
    size_t at = 0;
    for (size_t r = 0; r < n; ++r) {
      in[r] = recv.substr(at, static_cast<size_t>(recv_len[r]));
      at += static_cast<size_t>(recv_len[r]);
    }
    return in;
  }
  [[noreturn]] void out_of_step(const std::string& what) override { m_.protocol_error(what); }

 private:
  MpiSweep& m_;
};

MpiSweep::MpiSweep(bool split) : api_(std::make_unique<Api>()), split_(split) {
  // Under mpirun; the module sits next to the ina executable.
  const auto path = beside_ina("ina-mpi-transport.so");
  // RTLD_GLOBAL: OpenMPI's own plugins (dlopened by libmpi) resolve libmpi's symbols globally.
  api_->lib = ::dlopen(path.c_str(), RTLD_NOW | RTLD_GLOBAL);
  if (!api_->lib)
    throw std::runtime_error(fmt::format("ina sim under mpirun (OMPI_COMM_WORLD_SIZE={}) needs {}: {} "
                                         "(cmake --build build --target ina-mpi-transport)",
                                         std::getenv("OMPI_COMM_WORLD_SIZE"), path.string(), ::dlerror()));
  auto sym = [&](auto& fn, const char* name) {
    fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(::dlsym(api_->lib, name));
    if (!fn) throw std::runtime_error(fmt::format("{}: no symbol {}", path.string(), name));
  };
  sym(api_->init, "ina_mpi_init");
  sym(api_->poll, "ina_mpi_poll");
  sym(api_->recv, "ina_mpi_recv");
  sym(api_->send, "ina_mpi_send");
  sym(api_->abort, "ina_mpi_abort");
  sym(api_->finalize, "ina_mpi_finalize");
  sym(api_->error_string, "ina_mpi_error_string");
  sym(api_->exchange_counts, "ina_mpi_exchange_counts");
  sym(api_->exchange, "ina_mpi_exchange");
  ranks_ = std::make_unique<Ranks>(*this);
  if (int rc = api_->init(&rank_, &size_, split_ ? 1 : 0))
    throw std::runtime_error(fmt::format("MPI_Init_thread failed (MPI error {}){}", rc,
                                         split_ ? "; --partition needs MPI_THREAD_SERIALIZED" : ""));
  if (rank_ == 0) state_.assign(static_cast<size_t>(size_), split_ ? kStopped : kFirst);
  if (rank_ == 0) state_[0] = kStopped;
}

MpiSweep::~MpiSweep() {
  // Every rank that has not been told to stop is waiting for rank 0 (or running a run it was
  // given): answer its next message with kStop, so that no rank is left waiting.
  // --partition: the other ranks wait for rank 0's first word until it says
  // it; once they run, only the job's end frees them if rank 0 stopped early.
  if (split_ && rank_ == 0 && !said_hello_) hello("stop");
  else if (split_ && rank_ == 0 && !split_done_)
    protocol_error("rank 0 stopped before the split runs were done (the other ranks are in them)");
  for (int w = 1; rank_ == 0 && w < size_; ++w) {
    if (state_[w] == kStopped) continue;
    int from = -1;
    std::string data;
    if (state_[w] != kAnswer) receive(w, true, &from, &data);
    stop(w);
  }
  api_->finalize();
}

void MpiSweep::send(int dest, int tag, const std::string& data) {
  if (int rc = api_->send(dest, tag, data.data(), static_cast<long>(data.size()))) api_->fail(rank_, "MPI_Send", rc);
}

int MpiSweep::receive(int source, bool wait, int* from, std::string* data) {
  for (;;) {
    int src = -1, tag = 0;
    long len = 0;
    const int got = api_->poll(source, &src, &tag, &len);
    if (got < 0) api_->fail(rank_, "MPI_Iprobe", got);
    if (got == 1) {
      data->assign(static_cast<size_t>(len), '\0');
      if (int rc = api_->recv(src, tag, data->data(), len)) api_->fail(rank_, "MPI_Recv", rc);
      *from = src;
      return tag;
    }
    if (!wait) return 0;
    std::this_thread::sleep_for(kPoll);
  }
}

void MpiSweep::protocol_error(const std::string& what) {
  std::fprintf(stderr, "ina sim: rank %d: %s; aborting the MPI job\n", rank_, what.c_str());
  std::fflush(stderr);
  api_->abort(1);
  std::_Exit(1);
}

void MpiSweep::stop(int rank) {
  send(rank, kStop, "");
  state_[rank] = kStopped;
}

exp::RunExecutor MpiSweep::executor(uint64_t digest) {
  return [this, digest](const std::vector<exp::ScenarioRun>& runs, const exp::RunDone& done) {
    std::atomic<size_t> next{0};
    std::mutex mu;
    std::vector<std::pair<size_t, exp::RunResult>> finished;  // by rank 0's own thread
    std::atomic<bool> quit{false}, local_over{false};
    std::thread local([&] {
      for (size_t i; !quit && (i = next++) < runs.size();) {
        exp::RunResult r = exp::run_one(runs[i], true);
        std::lock_guard lock(mu);
        finished.emplace_back(i, std::move(r));
      }
      local_over = true;
    });
    struct Join {
      std::thread& t;
      std::atomic<bool>& quit;
      ~Join() {
        quit = true;
        t.join();
      }
    } join{local, quit};
    auto assign = [&](int w) {
      const size_t i = next++;
      if (i >= runs.size()) return stop(w);
      send(w, kRun, std::to_string(i));
      state_[w] = static_cast<int>(i);
    };
    for (;;) {
      std::vector<std::pair<size_t, exp::RunResult>> batch;
      {
        std::lock_guard lock(mu);
        batch.swap(finished);
      }
      for (auto& [i, r] : batch) done(i, std::move(r), 0);
      bool waiting = false;
      for (int w = 1; w < size_; ++w) waiting |= state_[w] != kStopped;
      if (!waiting && local_over) {
        std::lock_guard lock(mu);
        if (finished.empty()) break;
        continue;
      }
      int w = -1;
      std::string data;
      const int tag = receive(-1, false, &w, &data);
      if (!tag) {
        std::this_thread::sleep_for(kPoll);
        continue;
      }
      if (tag == kReady && state_[w] == kFirst) {
        if (data == fmt::format("{:016x}", digest)) {
          assign(w);
        } else {
          std::fprintf(stderr, "ina sim: warning: rank %d read another scenario (digest %s, rank 0's %016llx): it takes no runs\n",
                       w, data.c_str(), static_cast<unsigned long long>(digest));
          stop(w);
        }
      } else if (tag == kBroken && state_[w] == kFirst) {
        std::fprintf(stderr, "ina sim: warning: rank %d takes no runs: %s\n", w, data.c_str());
        stop(w);
      } else if (tag == kResult && state_[w] >= 0) {
        size_t i = 0;
        exp::RunResult r = decode(data, &i);
        if (i != static_cast<size_t>(state_[w]))
          protocol_error(fmt::format("rank {} returned run {}, not the run {} it was given", w, i, state_[w]));
        state_[w] = kAnswer;
        done(i, std::move(r), w);
        assign(w);
      } else {
        protocol_error(fmt::format("unexpected message (tag {}) from rank {}", tag, w));
      }
    }
  };
}

void MpiSweep::serve(const std::vector<exp::ScenarioRun>& runs, uint64_t digest, const std::string& setup_error) {
  if (!setup_error.empty()) send(0, kBroken, setup_error);
  else send(0, kReady, fmt::format("{:016x}", digest));
  for (;;) {
    int from = -1;
    std::string data;
    const int tag = receive(0, true, &from, &data);
    if (tag == kStop) return;
    size_t i = runs.size();
    if (tag == kRun) i = std::strtoull(data.c_str(), nullptr, 10);
    if (i >= runs.size()) protocol_error(fmt::format("unexpected message (tag {}, '{}') from rank 0", tag, data));
    send(0, kResult, encode(i, exp::run_one(runs[i], true)));
  }
}

std::vector<std::string> MpiSweep::hello(const std::string& mine) {
  said_hello_ = true;
  return ranks_->share(mine, "hello");
}

namespace {
// What a split run's ranks must share besides the scenario: the layout of what they trade as bytes.
std::string build_identity() {
  return fmt::format("{}:{}:{}:{}", INA_VERSION, sizeof(Header), sizeof(RankBits), sizeof(sim::LinkStats));
}
}  // namespace

exp::RunExecutor MpiSweep::split_executor(uint64_t digest) {
  return [this, digest](const std::vector<exp::ScenarioRun>& runs, const exp::RunDone& done) {
    const std::string expect = fmt::format("ready {:016x} {} {}", digest, runs.size(), build_identity());
    const std::vector<std::string> all = hello(fmt::format("go {:016x} {} {}", digest, runs.size(), build_identity()));
    std::string wrong;
    for (int r = 1; r < size_; ++r)
      if (all[r] != expect)
        wrong += fmt::format("{}rank {}: {}", wrong.empty() ? "" : "; ", r,
                             all[r].starts_with("broken ") ? all[r].substr(7)
                                                           : "read another scenario or other --set values (" + all[r] + ")");
    if (!wrong.empty()) {
      split_done_ = true;  // no rank runs any: each saw the hellos
      throw std::runtime_error("the ranks cannot split the runs: " + wrong);
    }
    // Each run starts with its index, and the last ends with "end": a rank
    // that left a run early is out of step at the next one (the job ends).
    for (size_t i = 0; i < runs.size(); ++i) {
      ranks_->share("", fmt::format("run {}", i));
      done(i, exp::run_one(runs[i], true, ranks_.get()), -1);
    }
    ranks_->share("", "end");
    split_done_ = true;
  };
}

void MpiSweep::follow(const std::vector<exp::ScenarioRun>& runs, uint64_t digest, const std::string& setup_error) {
  const std::string ready = fmt::format("ready {:016x} {} {}", digest, runs.size(), build_identity());
  const std::vector<std::string> all = hello(setup_error.empty() ? ready : "broken " + setup_error);
  // Rank 0 stopped, or read another scenario; or a rank is not ready (rank 0 reports it).
  if (all[0] != fmt::format("go {:016x} {} {}", digest, runs.size(), build_identity())) return;
  for (int r = 1; r < size_; ++r)
    if (r != rank_ && all[r] != ready) return;
  if (!setup_error.empty()) return;
  for (size_t i = 0; i < runs.size(); ++i) {
    ranks_->share("", fmt::format("run {}", i));
    exp::run_one(runs[i], true, ranks_.get());
  }
  ranks_->share("", "end");
}

}  // namespace ina::cli
