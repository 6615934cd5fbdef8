// `ina switch`, `ina ps`, `ina worker`, `ina run`: the UDP runtime commands.
// The logic lives in src/runtime/; this file maps command lines onto it.
#include <signal.h>
#include <sys/epoll.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <filesystem>
#include <cstdio>
#include <fstream>
#include <functional>
#include <iostream>
#include <memory>
#include <string>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli/checks.hpp"
#include "cli/commands.hpp"
#include "runtime/communicator.hpp"
#include "runtime/launcher.hpp"
#include "runtime/ps_daemon.hpp"
#include "runtime/switch_daemon.hpp"
#include "runtime/ring_layout.hpp"
#include "runtime/ring_worker.hpp"
#include "runtime/worker_app.hpp"
#include "schemes/registry.hpp"

namespace ina::cli {

namespace {

// Aggregator memory of a switch: at most 1 GiB (its register arrays are allocated at start).
const CLI::Validator kMemoryRange = CLI::Range(uint64_t{1}, uint64_t{1} << 30);

// Fault-injection flags shared by every runtime command.
struct FaultFlags {
  double loss = 0, duplicate = 0, reorder = 0, reorder_us = 500, delay_us = 0;
  uint64_t seed = 1;

  void add(CLI::App* c, bool with_delay) {
    c->add_option("--loss", loss, "drop this fraction of sent datagrams")->check(Finite(0, 0.999));
    c->add_option("--duplicate", duplicate, "send this fraction of datagrams twice")->check(Finite(0, 0.999));
    c->add_option("--reorder", reorder, "hold back this fraction of datagrams by U(0, --reorder-us)")->check(Finite(0, 0.999));
    c->add_option("--reorder-us", reorder_us, "reordering delay bound (microseconds)")->check(Finite(0, 1e8, false, "microseconds"));
    if (with_delay)
      c->add_option("--delay-us", delay_us, "extra delay of every sent datagram (a straggler)")
          ->check(Finite(0, 1e8, false, "microseconds"));
    c->add_option("--fault-seed", seed, "seed of the fault-injection stream");
  }
  rt::FaultConfig config() const {
    rt::FaultConfig f;
    f.loss = loss;
    f.duplicate = duplicate;
    f.reorder = reorder;
    f.reorder_delay = from_us(reorder_us);
    f.delay = from_us(delay_us);
    f.seed = seed;
    return f;
  }
};

// SIGINT/SIGTERM as a descriptor of the daemon's own loop: a signal stops it cleanly.
class StopSignals {
 public:
  StopSignals() {
    sigemptyset(&set_);
    sigaddset(&set_, SIGINT);
    sigaddset(&set_, SIGTERM);
    sigprocmask(SIG_BLOCK, &set_, nullptr);
    fd_ = rt::UniqueFd(signalfd(-1, &set_, SFD_NONBLOCK | SFD_CLOEXEC));
  }
  template <typename Stop>
  void attach(rt::UdpEngine& engine, Stop stop) {
    engine.watch(fd_.get(), EPOLLIN, [this, stop](uint32_t) {
      signalfd_siginfo si;
      while (::read(fd_.get(), &si, sizeof si) == sizeof si) signo_ = static_cast<int>(si.ssi_signo);
      stop();
    });
  }
  int signo() const { return signo_; }

 private:
  sigset_t set_;
  rt::UniqueFd fd_;
  int signo_ = 0;
};

struct SwitchCmd {
  std::string listen = "127.0.0.1:7700", scheme = std::string(schemes::kDefaultRuntimeScheme), stats_json, key_file, new_key_file, layout;
  uint64_t memory = 5'000'000, seed = 1;
  unsigned payload = rt::kDefaultPayload, regions = 4, rack = 0, threads = 1;
  double ecn_kb = 512;
  double port_mbit = 0, uplink_mbit = 0, port_ecn_kb = 100, capacity_mbit = 0;
  int ready_fd = -1, udp_fd = -1, tcp_fd = -1;
  unsigned max_connections = 0, max_per_source = rt::ControlLimits{}.max_per_source;
  double control_timeout_ms = to_ms(rt::ControlLimits{}.visitor_timeout);
  size_t max_control_line = rt::ControlLimits{}.max_visitor_line;
  bool quiet = false, track_tasks = false, no_offload = false, datagram_auth = false;
  // Sharing the pool (switch_daemon.hpp ShareLimits).
  std::string job_quota = "fair", priority_range;
  std::string hot_results = "via-ps";
  double reclaim_ms = to_ms(rt::ShareLimits{}.reclaim_after);
  std::vector<std::string> job_priority;
  FaultFlags faults;

  int run() const {
    if (memory < uint64_t{4} * payload)
      throw rt::InputError(fmt::format(
          "--memory {} holds no aggregator of --payload {} values ({} bytes each); give at least {} bytes", memory,
          payload, 4 * payload, 4 * payload));
    rt::SwitchDaemonConfig c;
    c.listen = rt::Endpoint::parse(listen);
    c.scheme = scheme;
    c.program.memory_bytes = memory;
    c.program.payload_values = static_cast<uint16_t>(payload);
    c.program.seed = seed;
    c.program.track_tasks = track_tasks;
    if (capacity_mbit > 0 && !schemes::find(scheme).routed)
      throw rt::InputError(fmt::format("--capacity-mbit {}: scheme {} has no processing capacity to set (GRID's C_s)",
                                       capacity_mbit, scheme));
    c.program.grid.capacity_gbps = capacity_mbit / 1000;
    if (hot_results != "via-ps" && !schemes::find(scheme).has_switch_cpu())
      throw rt::InputError(fmt::format("--hot-results {}: scheme {} sends no hot results (zebra does)", hot_results,
                                       scheme));
    c.program.zebra.hot_results = kv::parse_hot_route(hot_results).value_or(kv::HotRoute::ViaPs);  // checked by CLI11
    c.isolated_regions = regions;
    c.threads = threads;
    c.faults = faults.config();
    c.ecn_backlog_bytes = static_cast<uint64_t>(ecn_kb * 1024);
    c.port_gbps = port_mbit / 1000;
    c.uplink_gbps = uplink_mbit / 1000;
    c.port_ecn_bytes = static_cast<uint64_t>(port_ecn_kb * 1024);
    c.offload = !no_offload;
    c.datagram_auth = datagram_auth;
    c.log = !quiet;
    c.layout = layout;
    c.rack = rack;
    c.udp_fd = udp_fd;
    c.tcp_fd = tcp_fd;
    c.control.max_connections = max_connections;
    c.control.max_per_source = max_per_source;
    c.control.visitor_timeout = from_ms(control_timeout_ms);
    c.control.max_visitor_line = max_control_line;
    c.share = rt::ShareLimits::from_flags(job_quota, reclaim_ms, priority_range, job_priority);
    if (!key_file.empty()) {
      c.key = rt::read_key_file(key_file);
    } else if (!new_key_file.empty()) {
      c.key = rt::random_key();
      rt::write_key_file(new_key_file, c.key);
    } else if (!rt::key_from_env("INA_SWITCH_KEY", c.key)) {
      throw rt::InputError("ina switch: no switch key: give --key-file FILE (make one with 'ina key new FILE'), "
                           "--new-key-file FILE, or INA_SWITCH_KEY");
    }
    c.has_key = true;
    StopSignals sig;
    rt::SwitchDaemon d(c);
    sig.attach(d.engine(), [&d] { d.request_stop(); });
    if (ready_fd >= 0) {  // tell the launcher where we listen
      const std::string line = fmt::format("{}\n", d.endpoint().port());
      [[maybe_unused]] auto r = ::write(ready_fd, line.data(), line.size());
      ::close(ready_fd);
    }
    if (quiet) std::fflush(stderr);
    else std::fprintf(stderr, "ina switch: listening on %s (UDP data, TCP control)\n", d.endpoint().str().c_str());
    d.run();
    if (!stats_json.empty()) std::ofstream(stats_json) << d.stats().dump(1) << "\n";
    return 0;
  }
};

struct PsCmd {
  std::string sw = "127.0.0.1:7700", bind_ip, stats_json, key_file;
  unsigned job = 1, workers = 1;
  double connect_timeout_ms = 10000, rendezvous_timeout_ms = 60000, min_timeout_ms = 0;
  std::string profile{host::kRuntimeProfile.name};
  bool quiet = false, multicast_known = false, datagram_auth = false;
  FaultFlags faults;

  int run() const {
    rt::PsDaemonConfig c;
    const host::Profile& pr = host::profile(profile);
    c.min_timeout = pr.ps_min_timeout;
    c.targeted_known_results = pr.targeted_known_results && !multicast_known;
    c.sw = rt::Endpoint::parse(sw);
    c.job = static_cast<uint16_t>(job);
    c.nworkers = workers;
    if (!key_file.empty()) {
      c.key = rt::read_key_file(key_file);
      c.has_key = true;
    }
    if (!bind_ip.empty()) rt::Endpoint::parse_ip(bind_ip);  // (before connecting, naming the address)
    c.bind_ip = bind_ip;
    c.faults = faults.config();
    c.datagram_auth = datagram_auth;
    c.connect_timeout = from_ms(connect_timeout_ms);
    c.rendezvous_timeout = from_ms(rendezvous_timeout_ms);
    if (min_timeout_ms > 0) c.min_timeout = from_ms(min_timeout_ms);
    c.log = !quiet;
    StopSignals sig;
    std::unique_ptr<rt::PsDaemon> d;
    // The statistics go to --stats-json whenever the PS got as far as joining
    // (also when its job was aborted or it was stopped): `ina run` reports them.
    auto write_stats = [&](const char* outcome) {
      if (stats_json.empty() || !d) return;
      nlohmann::json j = d->stats();
      j["outcome"] = outcome;
      std::ofstream f(stats_json);
      f << j.dump(1) << "\n";
      if (!f) std::fprintf(stderr, "ina ps job %u: cannot write %s\n", job, stats_json.c_str());
    };
    try {
      d = std::make_unique<rt::PsDaemon>(c);
      sig.attach(d->engine(), [&d] { d->request_stop(); });
      d->run();
      if (sig.signo()) {  // stopped before the job finished
        write_stats("stopped");
        return 128 + sig.signo();
      }
      write_stats("finished");
      if (!quiet) std::fprintf(stderr, "ina ps job %u: job finished: %s\n", job, d->stats()["ps"].dump().c_str());
      return 0;
    } catch (const rt::StopRequested& e) {
      write_stats("stopped");
      std::fprintf(stderr, "ina ps job %u: %s\n", job, e.what());
      return rt::exit_status(e);
    } catch (const rt::RuntimeError& e) {
      write_stats("failed");
      std::fprintf(stderr, "ina ps job %u: error: %s\n", job, e.what());
      return rt::exit_status(e);
    }
  }
};

struct WorkerCmd {
  std::string config, sw, scale, key_file, hot_keys;
  unsigned job = 0, rank = 0, workers = 0, payload = 0, priority = 0;
  uint64_t size = 0, seed = 1, hot_set_size = 0;
  unsigned iterations = 1, hot_iterations = 1;
  bool sparse = false;
  double window_kb = 0;
  std::string report;
  bool quiet = false, datagram_auth = false;
  FaultFlags faults;
  CLI::App* app = nullptr;

  bool given(const char* flag) const { return app->count(flag) > 0; }

  int run() const {
    rt::WorkerAppConfig w;
    // Precedence: defaults < --config file < INA_* environment < flags.
    CommConfig c = config.empty() ? CommConfig{} : CommConfig::from_toml_file(config);
    c = CommConfig::from_env(c);
    if (given("--switch")) c.switch_addr = sw;
    if (given("--job")) c.job = static_cast<uint16_t>(job);
    if (given("--rank")) c.rank = rank;
    if (given("--workers")) c.nworkers = workers;
    if (given("--key-file")) c.job_key = rt::to_hex(rt::read_key_file(key_file));
    if (given("--payload")) c.payload_values = static_cast<uint16_t>(payload);
    if (given("--priority")) c.priority = priority;
    if (given("--window-kb")) c.window_kb = window_kb;
    if (given("--datagram-auth")) c.datagram_auth = true;
    if (given("--scale")) c = CommConfig::from_toml_string(fmt::format("[communicator]\nscale = \"{}\"\n", scale), "--scale", c);
    const rt::FaultConfig f = faults.config();
    if (given("--loss")) c.faults.loss = f.loss;
    if (given("--duplicate")) c.faults.duplicate = f.duplicate;
    if (given("--reorder")) c.faults.reorder = f.reorder;
    if (given("--reorder-us")) c.faults.reorder_delay = f.reorder_delay;
    if (given("--delay-us")) c.faults.delay = f.delay;
    if (given("--fault-seed")) c.faults.seed = f.seed;
    w.comm = c;
    w.bytes = size;
    w.iterations = iterations;
    w.seed = seed;
    w.report = report;
    w.log = !quiet;
    if (!sparse && (given("--hot-set-size") || given("--hot-iterations") || given("--hot-keys")))
      throw rt::InputError("--hot-set-size / --hot-iterations / --hot-keys apply to --sparse runs; give --sparse");
    w.sparse = sparse;
    w.hot_set_size = hot_set_size;
    w.hot_iterations = hot_iterations;
    w.hot_keys_file = hot_keys;
    try {
      return rt::run_worker_app(w);
    } catch (const rt::RuntimeError& e) {
      std::fprintf(stderr, "ina worker job %u rank %u: error: %s\n", c.job, c.rank, e.what());
      return rt::exit_status(e);
    }
  }
};

struct RingWorkerCmd {
  rt::RingWorkerConfig c;
  double min_rto_ms = static_cast<double>(rt::RingWorkerConfig{}.min_rto) / static_cast<double>(kMs);
  double delay_target_ms = static_cast<double>(rt::RingWorkerConfig{}.delay_target) / static_cast<double>(kMs);
  double ps_min_timeout_ms = 0;
  bool quiet = false;
  FaultFlags faults;

  int run() {
    c.faults = faults.config();
    c.min_rto = from_ms(min_rto_ms);
    c.delay_target = from_ms(delay_target_ms);
    c.ps_min_timeout = from_ms(ps_min_timeout_ms);
    c.log = !quiet;
    try {
      return rt::run_ring_worker(c);
    } catch (const rt::RuntimeError& e) {
      std::fprintf(stderr, "ina ring-worker rank %u: error: %s\n", c.rank, e.what());
      return rt::exit_status(e);
    }
  }
};

struct RunCmd {
  rt::LaunchConfig c;
  std::string delay_worker;
  std::string workers = "2";
  CLI::Option* jobs_opt = nullptr;

  // --workers N (every job) or N1,N2,... (one per job; the count of jobs unless --jobs says otherwise).
  void parse_workers() {
    std::vector<unsigned> counts;
    size_t at = 0;
    for (;;) {
      const size_t comma = workers.find(',', at);
      const std::string part = workers.substr(at, comma == std::string::npos ? std::string::npos : comma - at);
      unsigned v = 0;
      const auto [p, ec] = std::from_chars(part.data(), part.data() + part.size(), v);
      if (part.empty() || ec != std::errc{} || p != part.data() + part.size() || v < 1 || v > 64)
        throw rt::InputError(fmt::format(
            "--workers: expected N or N1,N2,... with every count in 1..64, got '{}' (bad count '{}')", workers, part));
      counts.push_back(v);
      if (comma == std::string::npos) break;
      at = comma + 1;
    }
    if (counts.size() == 1) {
      c.workers = counts[0];
      c.job_workers.clear();
      return;
    }
    if (jobs_opt && jobs_opt->count() > 0 && c.jobs != counts.size())
      throw rt::InputError(fmt::format("--workers '{}' gives {} worker counts but --jobs is {}: give one count per job",
                                       workers, counts.size(), c.jobs));
    if (counts.size() > 64) throw rt::InputError(fmt::format("--workers '{}': at most 64 jobs", workers));
    c.jobs = static_cast<unsigned>(counts.size());
    c.job_workers = counts;
    c.workers = *std::max_element(counts.begin(), counts.end());
  }

  int run() {
    parse_workers();
    if (!delay_worker.empty()) {
      unsigned j = 0, r = 0;
      char extra;
      if (std::sscanf(delay_worker.c_str(), "%u:%u%c", &j, &r, &extra) != 2 || j == 0)
        throw rt::InputError(fmt::format("--delay-worker expects JOB:RANK (job from 1), got '{}'", delay_worker));
      c.delay_job = j;
      c.delay_rank = r;
    }
    return rt::launch(c, std::cout);
  }
};

// The directory holding the `ina` Python package that belongs to this
// binary: the build tree's python/ beside it, or (an installed layout) the
// package's install directory under the prefix; empty if neither has it.
std::string own_python_dir() {
  namespace fs = std::filesystem;
  const fs::path bin = ina_executable().parent_path();
  std::vector<fs::path> candidates{bin / "python"};
#ifdef INA_PYTHON_INSTALL_DIR
  candidates.push_back(bin.parent_path() / INA_PYTHON_INSTALL_DIR);
#endif
  for (const auto& d : candidates) {
    std::error_code ec;
    if (fs::is_regular_file(d / "ina" / "__init__.py", ec)) return d.string();
  }
  return {};
}

// `ina train-py [OPTIONS] SCRIPT [ARGS...]`: switch, PS and N copies of a
// Python training script (rt::LaunchConfig::command). As with torchrun, ina's
// options come before the script and everything after it is the script's.
struct TrainPyCmd {
  rt::LaunchConfig c;
  std::string python = "/usr/bin/python3";
  CLI::App* app = nullptr;  // its options' names (--workers, -h, ...) are refused after the script

  bool ours(const std::string& arg) const {
    const std::string name = arg.substr(0, arg.find('='));
    for (const CLI::Option* o : app->get_options()) {
      for (const auto& n : o->get_lnames())
        if (name == "--" + n) return true;
      for (const auto& n : o->get_snames())
        if (name == "-" + n) return true;
    }
    return false;
  }

  // args: what follows the options: SCRIPT [ARGS...], or SCRIPT -- ARGS... (that "--" is dropped
  // and ARGS go to the script unchecked); SCRIPT may be `-m MODULE`, as python's (torchrun's
  // --module). An option of train-py's among ARGS before any "--" is refused: it would silently
  // go to the script instead of configuring the run.
  int run(std::vector<std::string> args) {
    if (!args.empty() && args[0] == "--") args.erase(args.begin());
    if (args.empty())
      throw rt::InputError("train-py: give the script to run: ina train-py [OPTIONS] SCRIPT [ARGS...]");
    const size_t script_len = args[0] == "-m" ? 2 : 1;
    if (script_len == 2 && args.size() < 2)
      throw rt::InputError("train-py: -m needs the module to run: ina train-py [OPTIONS] -m MODULE [ARGS...]");
    if (script_len == 1 && args[0].size() > 1 && args[0][0] == '-')
      throw rt::InputError(fmt::format("train-py: unknown option '{}' (`ina train-py --help` lists them); the script "
                                       "comes after the options: ina train-py [OPTIONS] SCRIPT [ARGS...] (or -m "
                                       "MODULE [ARGS...])", args[0]));
    const std::string script = script_len == 2 ? "-m " + args[1] : args[0];
    if (script_len == 1 && args[0] != "-" && !std::filesystem::exists(args[0]))  // (not after a switch, PS and workers started)
      throw rt::InputError(fmt::format("train-py: no script file '{}'", args[0]));
    if (args.size() > script_len && args[script_len] == "--") {
      args.erase(args.begin() + static_cast<long>(script_len));
    } else {
      for (size_t i = script_len; i < args.size() && args[i] != "--"; ++i)
        if (ours(args[i]))
          throw rt::InputError(fmt::format(
              "train-py: '{0}' comes after the script '{1}', so it would be the script's argument and not configure "
              "the run: put ina's options before the script, as with torchrun (ina train-py {0} ... {1} [ARGS...]); "
              "to hand '{0}' to the script, write '--' right after the script (ina train-py [OPTIONS] {1} -- ARGS...)",
              args[i], script));
    }
    c.command = {python};
    c.command.insert(c.command.end(), args.begin(), args.end());
    c.python_path = own_python_dir();
    c.progress_after_s = 0;  // the scripts say how far they are
    return rt::launch(c, std::cout);
  }
};

// train-py runs schemes with one switch: the runtime's, except the ring
// collectives (their workers are `ina ring-worker`s, not a script).
bool train_py_scheme(const schemes::Scheme& s) { return s.supports(schemes::Engine::Runtime) && !rt::is_ring_scheme(s); }

std::string train_py_schemes_help() {
  std::string out;
  for (const auto& s : schemes::all()) {
    if (!train_py_scheme(s)) continue;
    std::string n = s.name;
    for (const auto& a : s.aliases) n += "|" + a;
    out += fmt::format("\n  {:<22} {}", n, s.description);
  }
  return out;
}

CLI::Validator TrainPyScheme() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        const schemes::Scheme* s = schemes::lookup(text);
        if (!s || !train_py_scheme(*s)) {
          std::string names;
          for (const auto& x : schemes::all())
            if (train_py_scheme(x)) names += (names.empty() ? "" : ", ") + x.name;
          return fmt::format("train-py runs a scheme with one switch: {}; not '{}'", names, text);
        }
        text = s->name;
        return {};
      },
      "SCHEME", "TrainPyScheme");
}

}  // namespace

Runner register_runtime(CLI::App& app) {
  auto sw = std::make_shared<SwitchCmd>();
  auto ps = std::make_shared<PsCmd>();
  auto wk = std::make_shared<WorkerCmd>();
  auto rn = std::make_shared<RunCmd>();
  auto rw = std::make_shared<RingWorkerCmd>();

  auto* s = app.add_subcommand("switch", "Software INA switch (UDP): hosts an aggregation scheme, serves many jobs");
  s->add_option("--listen", sw->listen, "UDP data + TCP control address (port 0: ephemeral)")->capture_default_str();
  s->add_option("--scheme,--policy", sw->scheme, "aggregation scheme (name|alias):" + switch_scheme_help())
      ->capture_default_str()
      ->check(SchemeOf(schemes::Engine::Runtime, schemes::Engine::Layout));
  add_memory_options(s, sw->memory, "aggregator memory", kMemoryRange);
  s->add_option("--payload", sw->payload, "int32 values per packet (2048 = 8 KB, fits a 9000-byte jumbo frame; 64 = Tofino's 256 B)")
      ->capture_default_str()->check(CLI::Range(1, 16000));
  s->add_option("--regions", sw->regions, "isolated policy: memory regions, i.e. jobs at once (per switch thread)")->capture_default_str()->check(CLI::Range(1, 4096));
  s->add_option("--threads", sw->threads,
                "switch threads: job J is served by thread J mod T with --memory / T of its own, all on the one "
                "--listen port (SO_REUSEPORT, steered by job); DSA then preempts only among the jobs of one thread; "
                "not for --layout or schemes with a switch CPU")
      ->capture_default_str()->check(CLI::Range(1u, rt::kMaxSwitchThreads));
  s->add_option("--ecn-kb", sw->ecn_kb, "mark ECN on every packet received above this receive backlog (0: never)")
      ->capture_default_str()->check(Finite(0, 1e6, false, "KiB"));
  s->add_option("--port-mbit", sw->port_mbit,
                "with --layout, a ToR: the rate of its links to its rack's workers; their emulated egress queues mark "
                "ECN above --port-ecn-kb, for links that mark nothing themselves (0: no such marking)")
      ->check(Finite(0, 1e7, false, "Mbit/s"));
  s->add_option("--uplink-mbit", sw->uplink_mbit, "with --port-mbit: the rate of the ToR's uplink (every other destination)")
      ->check(Finite(0, 1e7, false, "Mbit/s"));
  s->add_option("--port-ecn-kb", sw->port_ecn_kb, "with --port-mbit: the emulated egress queues' ECN threshold")
      ->capture_default_str()->check(Finite(0, 1e6, true, "KiB"));
  s->add_option("--capacity-mbit", sw->capacity_mbit,
                "GRID: the switch's aggregation processing capacity C_s, Mbit/s of aggregated values (a fragment beyond "
                "it is dropped with a rate-sync, GRID 5.2); 0: unlimited")
      ->check(Finite(0, 1e7, false, "Mbit/s"));
  s->add_option("--seed", sw->seed, "switch program seed (DSA coin strawman)");
  s->add_option("--hot-results", sw->hot_results,
                "zebra: where the switch sends the hot sums: via-ps (the paper's: to the PS, which sends every sum "
                "to the workers) or multicast (to the workers)")
      ->capture_default_str()
      ->check(CLI::IsMember({"via-ps", "multicast"}));
  s->add_flag("--no-offload", sw->no_offload,
              "send and receive one datagram per system-call message (no UDP_SEGMENT / UDP_GRO segmentation offload)");
  s->add_flag("--datagram-auth", sw->datagram_auth,
              "authenticate every datagram: each job's carry an 8-byte SipHash-2-4 tag keyed by a key derived from "
              "the job's credential; untagged or wrongly tagged ones are counted (engine.rx_bad_tag) and dropped. "
              "Members follow; costs CPU (docs/runtime.md, Security). With --layout the layout's datagram_salt turns "
              "tags on; this flag then requires one");
  s->add_flag("--track-tasks", sw->track_tasks, "count per-task preemption outcomes (DSA task types) in the stats");
  s->add_option("--stats-json", sw->stats_json, "write the final statistics here on exit");
  s->add_option("--key-file", sw->key_file, "the switch key (64 hex digits; 'ina key new FILE'); else INA_SWITCH_KEY");
  s->add_option("--new-key-file", sw->new_key_file, "create a fresh switch key in this file (mode 0600) and use it");
  s->add_option("--udp-fd", sw->udp_fd, "adopt this bound UDP data socket (with --tcp-fd; used by `ina run`)");
  s->add_option("--tcp-fd", sw->tcp_fd, "adopt this listening TCP control socket on the same port (used by `ina run`)");
  s->add_option("--ready-fd", sw->ready_fd, "write the bound port to this descriptor once listening (used by `ina run`)");
  s->add_option("--layout", sw->layout, "rina, atp and dsa over racks, grid's plan: the job's static layout (JSON; "
                                        "runtime/ring_layout.hpp)");
  s->add_option("--rack", sw->rack, "with --layout: this switch is the ToR of this rack of --layout (grid: a planned "
                                    "aggregation node); R + a (R racks): "
                                    "the layout's aggregation[a], an INA switch above racks (rina)")->check(CLI::Range(0, 511));
  // Control-plane limits (switch_daemon.hpp ControlLimits; docs/runtime.md, Security).
  s->add_option("--max-connections", sw->max_connections,
                "control connections at once; at the limit a newcomer replaces the oldest one that has not joined a "
                "job (default: 4096, or the descriptor limit less 64)")
      ->check(CLI::Range(1u, 1u << 20));
  s->add_option("--max-connections-per-source", sw->max_per_source,
                "control connections from one IP address (beyond it a newcomer replaces that address's oldest one that "
                "has not joined, or is refused)")
      ->capture_default_str()->check(CLI::Range(1u, 1u << 20));
  s->add_option("--control-timeout-ms", sw->control_timeout_ms,
                "a connection that has not joined a job (a join, a stats query) is closed this long after it opened; "
                "a member's incomplete line gets as long")
      ->capture_default_str()->check(Finite(1, 3.6e6, false, "milliseconds"));
  s->add_option("--max-control-line", sw->max_control_line,
                "longest control line of a connection that has not joined (bytes; a member's: 64 KiB)")
      ->capture_default_str()->check(CLI::Range(size_t{256}, rt::LineChannel::kMaxLine));
  // Sharing the aggregator pool between jobs (ATP, DSA; switch_daemon.hpp ShareLimits; docs/runtime.md, Security).
  s->add_option("--job-quota", sw->job_quota,
                "ATP, DSA: aggregators one job may hold at once: fair (the pool divided by the live jobs, per switch "
                "thread), none, or a number; a job at its quota sends on to its PS")
      ->capture_default_str();
  s->add_option("--reclaim-ms", sw->reclaim_ms,
                "ATP, DSA: an aggregator whose task is incomplete this long after reserving it is taken back by the "
                "next packet addressing it (its partial goes to its PS); 0: never")
      ->capture_default_str()->check(Finite(0, 3.6e6, false, "milliseconds"));
  s->add_option("--priority-range", sw->priority_range,
                "DSA: every job's admitted priority range LO..HI; a packet's priority is clamped into it (default "
                "0..2147483647)");
  s->add_option("--job-priority", sw->job_priority,
                "DSA: job J's admitted priority range instead, J=LO..HI (repeat for more jobs)")
      ->allow_extra_args(false);
  s->add_flag("--quiet", sw->quiet, "log errors only");
  sw->faults.add(s, false);

  auto* rwk = app.add_subcommand("ring-worker", "One rank of a ring job (rar, h-ar, rina), of ATP or DSA over racks or "
                                                 "of GRID's plan, over UDP: K verified allreduces");
  rwk->add_option("--layout", rw->c.layout, "the job's layout (JSON: workers' and ToR switches' addresses, racks)")->required();
  auto* rank_opt = rwk->add_option("--rank", rw->c.rank, "this worker's rank")->check(CLI::Range(0, 255));
  auto* ps_flag = rwk->add_flag("--ps", rw->c.ps, "ATP or DSA over racks, GRID: run the job's PS instead of a rank");
  rank_opt->excludes(ps_flag);
  rwk->callback([rank_opt, ps_flag] {
    if (!rank_opt->count() && !ps_flag->count()) throw CLI::RequiredError("--rank (or --ps)");
  });
  rwk->add_option("--size", rw->c.bytes, "bytes per allreduce (int32 values)")->required()->check(FloatBytes(uint64_t{1} << 34));
  rwk->add_option("--iterations", rw->c.iterations, "allreduces to run")->capture_default_str()->check(CLI::Range(1, 1000000));
  rwk->add_option("--seed", rw->c.seed, "gradient seed (the same on every rank)")->capture_default_str();
  rwk->add_option("--barrier", rw->c.barrier, "a fresh directory shared by every rank (start and end barriers)")->required();
  rwk->add_option("--udp-fd", rw->c.udp_fd, "adopt this bound UDP socket (used by `ina run`)");
  rwk->add_option("--report", rw->c.report, "write a JSON report here");
  rwk->add_option("--timeout", rw->c.timeout_s, "give up after this many seconds")->capture_default_str()
      ->check(Finite(0, 1e6, true, "seconds"));
  rwk->add_option("--min-rto-ms", rw->min_rto_ms, "floor of the retransmission timeout")->capture_default_str()
      ->check(Finite(0, 1e5, true, "milliseconds"));
  rwk->add_option("--ps-min-timeout-ms", rw->ps_min_timeout_ms,
                  "with --ps: floor of the PS's reminder timeout (default: the runtime profile's, 5)")
      ->check(Finite(0, 1e5, true, "milliseconds"))
      ->needs(ps_flag);
  rwk->add_option("--delay-target-ms", rw->delay_target_ms,
                  "queueing delay that halves the window as an ECN echo would (0: off)")
      ->capture_default_str()->check(Finite(0, 1e5, false, "milliseconds"));
  rwk->add_option("--window-kb", rw->c.window_kb, "initial send window (default: 196 packets)")
      ->check(Finite(0, 1e6, true, "KB"));
  rwk->add_option("--nic-gbps", rw->c.nic_gbps,
                  "this worker's link rate: under the paper's transport every ring worker paces at most at it (default: unknown, not paced)")
      ->check(Finite(0, 1e4, true, "Gbit/s"));
  rwk->add_option("--fail-detect-ms", rw->c.fail_detect_ms,
                  "rar, rina: survive a rank's failure: heartbeats in --barrier; a rank silent this long has failed, and "
                  "the lowest surviving rank re-plans the job (ring_worker.hpp)")
      ->check(Finite(0, 1e6, false, "milliseconds"));
  rwk->add_option("--crash-at-op", rw->c.crash_at_op, "fault injection: this rank stops for good inside op K (0-based), then exits")
      ->check(CLI::Range(0, 65535));
  rwk->add_option("--crash-after", rw->c.crash_after, "with --crash-at-op: after this many packets received in that op")
      ->capture_default_str()->check(CLI::Range(1, 1 << 30));
  rwk->add_option("--key-file", rw->c.key_file, "the job's credential, for tagged datagrams (a layout with "
                                                "datagram_salt) and reconfiguring the ToRs after a failure (else "
                                                "INA_JOB_KEY, or derived from INA_SWITCH_KEY)");
  rwk->add_flag("--datagram-auth", rw->c.datagram_auth,
                "require datagram authentication: refuse a layout without datagram_salt (tags are used whenever the "
                "layout has one)");
  rwk->add_flag("--quiet", rw->quiet, "log errors only");
  rw->faults.add(rwk, false);

  // Credentials (runtime/auth.hpp): a switch key, and the per-job keys derived from it.
  auto* k = app.add_subcommand("key", "Switch keys and job credentials");
  k->require_subcommand(1);
  auto key_new_file = std::make_shared<std::string>();
  auto* kn = k->add_subcommand("new", "Create a random switch key in FILE (mode 0600)");
  kn->add_option("FILE", *key_new_file, "where to write it")->required();
  // These run inside CLI11's parse, outside main's handler: an error is
  // printed here and ends the command with its status (not an uncaught exception).
  auto reported = [](const std::function<void()>& f) {
    return [f] {
      try {
        f();
      } catch (const rt::RuntimeError& e) {
        std::cerr << "error: " << e.what() << "\n";
        throw CLI::RuntimeError(rt::exit_status(e));
      } catch (const std::exception& e) {
        std::cerr << "error: " << e.what() << "\n";
        throw CLI::RuntimeError(1);
      }
    };
  };
  kn->callback(reported([key_new_file] { rt::write_key_file(*key_new_file, rt::random_key()); }));
  auto key_job_src = std::make_shared<std::string>();
  auto key_job_out = std::make_shared<std::string>();
  auto key_job_id = std::make_shared<unsigned>(0);
  auto* kj = k->add_subcommand("job", "Derive job J's credential from the switch key (hand it to job J's processes only)");
  kj->add_option("--switch-key-file", *key_job_src, "the switch key")->required();
  kj->add_option("--job", *key_job_id, "job id")->required()->check(CLI::Range(1, 65535));
  kj->add_option("--out", *key_job_out, "write it to this file (mode 0600) instead of standard output");
  kj->callback(reported([key_job_src, key_job_out, key_job_id] {
    const rt::Key jk = rt::job_key(rt::read_key_file(*key_job_src), static_cast<uint16_t>(*key_job_id));
    if (key_job_out->empty()) std::cout << rt::to_hex(jk) << "\n";
    else rt::write_key_file(*key_job_out, jk);
  }));

  auto* p = app.add_subcommand("ps", "PS / fallback server of one job (ATP, DSA)");
  p->add_option("--switch", ps->sw, "the switch's address")->capture_default_str();
  p->add_option("--job", ps->job, "job id (>= 1)")->required()->check(CLI::Range(1, 65535));
  p->add_option("--workers", ps->workers, "workers in the job")->required()->check(CLI::Range(1, 64));
  p->add_option("--bind-ip", ps->bind_ip, "local address for data (default: the one that reaches the switch)");
  p->add_option("--key-file", ps->key_file, "the job's credential (else INA_JOB_KEY, or derived from INA_SWITCH_KEY)");
  p->add_option("--connect-timeout-ms", ps->connect_timeout_ms, "give up connecting to the switch after this")
      ->capture_default_str()->check(Finite(0, 1e9, true, "milliseconds"));
  p->add_option("--rendezvous-timeout-ms", ps->rendezvous_timeout_ms, "give up waiting for the workers after this")
      ->capture_default_str()->check(Finite(0, 1e9, true, "milliseconds"));
  p->add_option("--profile", ps->profile, "engine profile (paper: the papers' PS; runtime)")
      ->capture_default_str()
      ->check(CLI::IsMember({std::string(host::kPaperProfile.name), std::string(host::kRuntimeProfile.name)}));
  p->add_option("--min-timeout-ms", ps->min_timeout_ms, "floor of the reminder timeout (default: the profile's, 1 or 5)")->check(Finite(0, 1e6, true, "milliseconds"));
  p->add_option("--stats-json", ps->stats_json, "write the PS's statistics here on exit (also when the job failed)");
  p->add_flag("--multicast-known-results", ps->multicast_known,
              "multicast a result a worker already held to every worker, as the papers' PS does "
              "(default: only to the workers waiting for it)");
  p->add_flag("--datagram-auth", ps->datagram_auth,
              "require datagram authentication: refuse a switch without --datagram-auth (tags are used whenever the "
              "switch uses them)");
  p->add_flag("--quiet", ps->quiet, "log errors only");
  ps->faults.add(p, false);

  auto* w = app.add_subcommand("worker", "Run K verified allreduces of S bytes through ina::Communicator");
  wk->app = w;
  w->add_option("--config", wk->config, "communicator TOML file ([communicator], [faults])");
  w->add_option("--switch", wk->sw, "the switch's address (default 127.0.0.1:7700)");
  w->add_option("--job", wk->job, "job id")->check(CLI::Range(1, 65535));
  w->add_option("--rank", wk->rank, "this worker's rank")->check(CLI::Range(0, 63));
  w->add_option("--key-file", wk->key_file, "the job's credential (else job_key in --config, INA_JOB_KEY or INA_SWITCH_KEY)");
  w->add_option("--workers", wk->workers, "workers in the job")->check(CLI::Range(1, 64));
  w->add_option("--payload", wk->payload, "values per packet the switch must use (0: any)")->check(CLI::Range(0, 16000));
  w->add_option("--priority", wk->priority, "DSA priority of this worker's packets")->check(CLI::Range(1, INT32_MAX));
  w->add_option("--scale", wk->scale, "fixed-point scale: 'agree' (default) or a number");
  w->add_option("--window-kb", wk->window_kb, "initial send window")->check(Finite(0, 1e6, true, "KB"));
  w->add_option("--size", wk->size, "bytes per allreduce (floats)")->required()->check(FloatBytes(uint64_t{1} << 34));
  w->add_option("--iterations", wk->iterations, "allreduces to run")->capture_default_str()->check(CLI::Range(1, 1000000));
  w->add_option("--seed", wk->seed, "gradient seed (the same on every worker of a job)");
  w->add_option("--report", wk->report, "write a JSON report here");
  w->add_flag("--sparse", wk->sparse, "<key, value> schemes (zebra, ps-lite): sparse allreduces of --size / 4 pairs, "
                                      "keys skewed as a sparse model's");
  w->add_option("--hot-set-size", wk->hot_set_size, "with --sparse, zebra: install the hot set of this many keys the "
                                                    "profile of every rank's first --hot-iterations batches finds hottest");
  w->add_option("--hot-iterations", wk->hot_iterations, "the batches the hot-set profile replays")
      ->capture_default_str()->check(CLI::Range(1, 1000000));
  w->add_option("--hot-keys", wk->hot_keys, "with --sparse, zebra: install these ranked keys (a file, one per line, "
                                            "hottest first) as the hot set")->check(CLI::ExistingFile);
  w->add_flag("--datagram-auth", wk->datagram_auth, "require datagram authentication: refuse a switch without --datagram-auth "
                                  "(communicator key datagram_auth; tags are used whenever the switch uses them)");
  w->add_flag("--quiet", wk->quiet, "log errors only");
  wk->faults.add(w, true);

  auto& c = rn->c;
  auto* r = app.add_subcommand("run", "Launch switch, PS(es) and workers on loopback; verify and report goodput");
  r->add_option("--workers", rn->workers,
                "workers per job: N (every job) or N1,N2,... (one count per job; sets --jobs if not given)")
      ->capture_default_str();
  r->add_option("--scheme", c.scheme, "aggregation scheme (name|alias):" + schemes::help(schemes::Engine::Runtime))
      ->capture_default_str()
      ->check(SchemeOf(schemes::Engine::Runtime));
  r->add_option("--jobs", c.jobs, "concurrent jobs")->capture_default_str()->check(CLI::Range(1, 64));
  r->add_option("--size", c.size_bytes, "bytes per allreduce")->capture_default_str()->check(FloatBytes(uint64_t{1} << 34));
  r->add_option("--iterations", c.iterations, "allreduces per worker")->capture_default_str()->check(CLI::Range(1, 1000000));
  r->add_option("--payload", c.payload, "int32 values per packet")->capture_default_str()->check(CLI::Range(1, 16000));
  add_memory_options(r, c.memory_bytes, "switch aggregator memory", kMemoryRange);
  r->add_option("--loss", c.loss, "datagram loss rate injected in every process")->check(Finite(0, 0.999));
  r->add_option("--duplicate", c.duplicate, "duplication rate")->check(Finite(0, 0.999));
  r->add_option("--reorder", c.reorder, "reordering rate")->check(Finite(0, 0.999));
  r->add_option("--delay-worker", rn->delay_worker, "JOB:RANK of a straggler (with --delay-us)");
  r->add_option("--delay-us", c.delay_us, "extra delay of the straggler's datagrams")->check(Finite(0, 1e8, false, "microseconds"));
  r->add_option("--priorities", c.priorities, "DSA priority per job (default: job j gets 2^20 / 2^(j-1))")
      ->delimiter(',')->check(CLI::Range(uint32_t{1}, uint32_t{INT32_MAX}));
  r->add_option("--window-kb", c.window_kb, "workers' initial send window (default: the communicator's)")
      ->check(Finite(0, 1e6, true, "KB"));
  r->add_option("--port", c.port, "switch port (default: ephemeral)");
  r->add_option("--switch-threads", c.switch_threads, "`ina switch --threads`: job J on switch thread J mod T (DSA "
                                                      "preempts only among one thread's jobs)")
      ->capture_default_str()->check(CLI::Range(1u, rt::kMaxSwitchThreads));
  r->add_option("--racks", c.racks, "split the workers into this many equal racks: H-AR's and Rina's racks, and ATP's "
                                    "or DSA's over racks (one `ina switch` per INA rack, --ina-racks)")
      ->capture_default_str()->check(CLI::Range(1, 256));
  r->add_option("--fail-rank", c.fail_rank, "rar, rina: inject a failure: this rank stops for good (with --fail-at-op)")
      ->check(CLI::Range(0, 65535));
  r->add_option("--fail-at-op", c.fail_at_op, "with --fail-rank: inside this op (0-based)")->check(CLI::Range(0, 65535));
  r->add_option("--fail-detect-ms", c.fail_detect_ms, "with --fail-rank: a rank silent this long has failed")
      ->capture_default_str()->check(Finite(0, 1e6, true, "milliseconds"));
  r->add_option("--ina-racks", c.ina_racks, "rina, atp, dsa: the racks whose ToR is an INA switch, e.g. 0,1, or none (rina only) (default: every rack)");
  r->add_option("--rina-above", c.rina_above, "rina: one INA switch above these racks, e.g. 0,1 (Rina IV-D): their ranks "
                                              "are one group, each INA ToR below it aggregating its rack first");
  r->add_option("--timeout", c.timeout_s, "give up after this many seconds")->capture_default_str()
      ->check(Finite(0, 1e6, true, "seconds"));
  r->add_option("--seed", c.seed, "gradient and fault seed")->capture_default_str();
  r->add_option("--json", c.json_out, "write a JSON summary (per-worker reports, switch statistics)");
  r->add_option("--hot-set-size", c.hot_set_size, "zebra: the hot set's keys, the hottest of a profile of every rank's "
                                                  "first --hot-iterations batches (the workers of a <key, value> scheme "
                                                  "run sparse allreduces of --size / 4 pairs)")
      ->capture_default_str();
  r->add_option("--hot-iterations", c.hot_iterations, "zebra: the batches the hot-set profile replays")
      ->capture_default_str();
  r->add_option("--hot-keys", c.hot_keys_file, "zebra: the hot set from this file (ranked keys, one per line, hottest "
                                               "first) instead of the profile")->check(CLI::ExistingFile);
  r->add_option("--work-dir", c.work_dir, "keep generated configs and reports here (default: a temporary directory)");
  r->add_flag("--datagram-auth", c.datagram_auth,
              "authenticate every datagram (switch, PSes and workers with --datagram-auth; ring layouts: a salt in "
              "the layout, the job's key to each worker)");
  r->add_flag("--verbose", c.verbose, "let every process log its events");
  r->add_flag("--force", c.force, "start even beyond the process bound (64 per CPU) or the memory estimate");
  rn->jobs_opt = r->get_option("--jobs");

  auto tp = std::make_shared<TrainPyCmd>();
  tp->c.timeout_s = 3600;
  auto* t = app.add_subcommand("train-py", "Run a PyTorch script on N workers over ina: starts the switch (and PS), then "
                                           "N copies of SCRIPT with torchrun's RANK/WORLD_SIZE/MASTER_ADDR/MASTER_PORT "
                                           "and the job's INA_* settings in their environment (docs/python.md)");
  t->prefix_command();  // SCRIPT [ARGS...]: everything from the script on is the script's
  t->footer("Usage as torchrun's: ina train-py [OPTIONS] SCRIPT [ARGS...]; ina's options before the script, the "
            "script's arguments after it. An option of ina's after the script is refused; '--' right after the script "
            "hands everything after it to the script unchecked.");
  t->add_option("--workers", tp->c.workers, "copies of the script (ranks)")->capture_default_str()->check(CLI::Range(1, 64));
  t->add_option("--scheme", tp->c.scheme, "aggregation scheme (name|alias):" + train_py_schemes_help())
      ->capture_default_str()->check(TrainPyScheme());
  t->add_option("--payload", tp->c.payload, "int32 values per packet")->capture_default_str()->check(CLI::Range(1, 16000));
  add_memory_options(t, tp->c.memory_bytes, "switch aggregator memory", kMemoryRange);
  t->add_option("--loss", tp->c.loss, "datagram loss rate injected in every process")->check(Finite(0, 0.999));
  t->add_option("--duplicate", tp->c.duplicate, "duplication rate")->check(Finite(0, 0.999));
  t->add_option("--reorder", tp->c.reorder, "reordering rate")->check(Finite(0, 0.999));
  t->add_option("--python", tp->python, "the interpreter (absolute path)")->capture_default_str();
  t->add_option("--timeout", tp->c.timeout_s, "give up after this many seconds")->capture_default_str()
      ->check(Finite(0, 1e6, true, "seconds"));
  t->add_option("--seed", tp->c.seed, "fault-injection seed")->capture_default_str();
  t->add_option("--json", tp->c.json_out, "write a JSON summary (switch and PS statistics)");
  t->add_flag("--verbose", tp->c.verbose, "let the switch and PS log their events");
  tp->app = t;

  return [&app, sw, ps, wk, rn, rw, tp]() -> int {
    try {
      if (app.got_subcommand("switch")) return sw->run();
      if (app.got_subcommand("ps")) return ps->run();
      if (app.got_subcommand("worker")) return wk->run();
      if (app.got_subcommand("ring-worker")) return rw->run();
      if (app.got_subcommand("run")) return rn->run();
      if (app.got_subcommand("train-py")) return tp->run(app.get_subcommand("train-py")->remaining());
    } catch (const rt::RuntimeError& e) {
      std::fprintf(stderr, "error: %s\n", e.what());
      return rt::exit_status(e);
    }
    return 0;
  };
}

}  // namespace ina::cli
