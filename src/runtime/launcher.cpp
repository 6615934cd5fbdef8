// `ina run` / `ina train-py`: the entry (validation, resource checks, the work
// directory) that hands the run to the star or the ring launch, the Run both
// use (clock, processes, the failure report, the JSON summary) and their shared helpers.
#include "runtime/launcher.hpp"

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <optional>
#include <utility>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/counted.hpp"
#include "core/resources.hpp"
#include "runtime/control.hpp"
#include "runtime/launch_impl.hpp"
#include "runtime/net.hpp"
#include "runtime/ring_layout.hpp"
#include "runtime/ring_worker.hpp"
#include "runtime/switch_daemon.hpp"
#include "runtime/worker_app.hpp"
#include "dataplane/zebra.hpp"
#include "schemes/registry.hpp"

namespace ina::rt {

namespace launching {

std::string mib(uint64_t bytes) {
  if (bytes >= (1u << 20)) return fmt::format("{:.1f} MiB", bytes / 1048576.0);
  if (bytes >= 1024) return fmt::format("{:.1f} KiB", bytes / 1024.0);
  return fmt::format("{} B", bytes);
}

std::vector<std::string> fault_args(const LaunchConfig& c) {
  std::vector<std::string> a;
  if (c.loss > 0) a.insert(a.end(), {"--loss", fmt::format("{}", c.loss)});
  if (c.duplicate > 0) a.insert(a.end(), {"--duplicate", fmt::format("{}", c.duplicate)});
  if (c.reorder > 0) a.insert(a.end(), {"--reorder", fmt::format("{}", c.reorder)});
  return a;
}

bool has_ps(const std::string& scheme) {
  const schemes::Scheme* s = schemes::lookup(scheme);
  return !s || s->has_ps;
}

uint64_t member_refused(const nlohmann::json& engine) {
  const uint64_t all = engine.value("rx_malformed", uint64_t{0}) + engine.value("rx_foreign", uint64_t{0});
  return all - std::min(all, engine.value("rx_unattributed", uint64_t{0}));
}

std::string noise_line(uint64_t n) {
  return fmt::format("noise: {} from addresses outside the job, refused and dropped (not the job's; "
                     "not counted against the run)\n", counted(n, "datagram"));
}

std::optional<Failure> start_run_switch(Supervisor& sup, const LaunchConfig& cfg, std::vector<std::string> args,
                                        const std::string& name, unsigned rank, Time deadline, Child*& sw, uint16_t& port) {
  args.insert(args.end(), {"--memory", std::to_string(cfg.memory_bytes), "--payload", std::to_string(cfg.payload),
                           "--seed", std::to_string(cfg.seed), "--fault-seed", std::to_string(cfg.seed * 7919 + 31 * rank)});
  for (auto& a : fault_args(cfg)) args.push_back(a);
  if (!cfg.verbose) args.push_back("--quiet");
  return start_switch(sup, cfg.binary, std::move(args), name, 0, rank, deadline, sw, port);
}

std::vector<unsigned> ina_rack_list(const LaunchConfig& c) {
  std::vector<unsigned> v;
  if (c.ina_racks.empty()) {
    for (unsigned q = 0; q < c.racks; ++q) v.push_back(q);
    return v;
  }
  if (c.ina_racks == "none") return v;
  return parse_rack_list("--ina-racks", c.ina_racks);
}

Run::Run(const LaunchConfig& c, std::ostream& o)
    : cfg(c), out(o), t_start(monotonic_now()), deadline(t_start + static_cast<Time>(c.timeout_s * kSec)),
      with_ps(has_ps(c.scheme)), me(c.command.empty() ? "ina run" : "ina train-py") {}

nlohmann::json Run::read_ps_stats() const {
  nlohmann::json all = nlohmann::json::array();
  if (!with_ps) return all;
  for (unsigned j = 1; j <= cfg.jobs; ++j) {
    auto st = read_json_report(ps_stats_path(j).string());
    if (st.is_discarded() || st.is_null()) st = {{"job", j}, {"missing", "the PS left no statistics"}};
    all.push_back(std::move(st));
  }
  return all;
}

nlohmann::json Run::config_json() const {
  nlohmann::json per_job = nlohmann::json::array();
  for (unsigned j = 1; j <= cfg.jobs; ++j) per_job.push_back(cfg.workers_of(j));
  return nlohmann::json{{"scheme", cfg.scheme}, {"workers", per_job}, {"jobs", cfg.jobs},
                        {"size_bytes", cfg.size_bytes}, {"iterations", cfg.iterations}, {"payload", cfg.payload},
                        {"memory_bytes", cfg.memory_bytes}, {"loss", cfg.loss}, {"duplicate", cfg.duplicate},
                        {"reorder", cfg.reorder}, {"seed", cfg.seed}, {"racks", cfg.racks}, {"ina_racks", cfg.ina_racks}};
}

void Run::write_json(const nlohmann::json& j) const {
  if (cfg.json_out.empty()) return;
  std::ofstream f(cfg.json_out);
  f << j.dump(1) << "\n";
  if (!f) std::cerr << "ina run: cannot write " << cfg.json_out << "\n";
}

int Run::fail(const Failure& f) {
  if (!sup.all_reaped()) std::cerr << me << ": stopping the other processes\n";
  sup.stop_all();
  tee.finish(1 * kSec);
  std::string tail;
  if (f.child && f.child->kind == Kind::Worker && !cfg.command.empty()) tail = tee.tail(f.child->rank);
  std::cerr << me << ": " << f.message;
  if (!tail.empty()) {
    std::string indented;
    for (size_t at = 0; at < tail.size();) {
      const size_t nl = std::min(tail.find('\n', at), tail.size());
      indented += "  | " + tail.substr(at, nl - at) + "\n";
      at = nl + 1;
    }
    std::cerr << "; the end of its standard error:\n" << indented;
  } else {
    std::cerr << "\n";
  }
  if (!cfg.json_out.empty()) {
    nlohmann::json failure = {{"message", f.message}, {"exit_status", f.status}};
    if (!tail.empty()) failure["stderr_tail"] = tail;
    if (const Child* c = f.child) {
      static constexpr const char* kKinds[] = {"switch", "ps", "worker"};
      failure["process"] = c->name;
      failure["kind"] = kKinds[static_cast<int>(c->kind)];
      failure["job"] = c->job;
      failure["rank"] = c->rank;
      failure["pid"] = c->pid;
      if (WIFEXITED(c->status)) failure["exit_code"] = WEXITSTATUS(c->status);
      if (WIFSIGNALED(c->status)) failure["signal"] = WTERMSIG(c->status);
      failure["status"] = describe_status(c->status);
    }
    write_json({{"ok", false}, {"problems", {f.message}}, {"failure", failure}, {"wall_seconds", wall_seconds()},
                {"config", config_json()}, {"ps", read_ps_stats()}});
  }
  return f.status;
}

}  // namespace launching

using namespace launching;

namespace {


// "--workers 64 x --jobs 64" or "--workers 3,2".
std::string workers_flags(const LaunchConfig& c) {
  if (c.job_workers.empty()) return fmt::format("--workers {} x --jobs {}", c.workers, c.jobs);
  std::string list;
  for (unsigned w : c.job_workers) list += (list.empty() ? "" : ",") + std::to_string(w);
  return fmt::format("--workers {} ({} jobs)", list, c.jobs);
}

// A static layout job (ring_layout.hpp): a ring scheme, or ATP over racks (--racks > 1).
bool uses_layout(const LaunchConfig& c) {
  const schemes::Scheme* s = schemes::lookup(c.scheme);
  return s && (is_ring_scheme(*s) || (is_layout_scheme(*s) && c.racks > 1));
}

// Throws RuntimeError naming the flag for a configuration no launch accepts.
void validate(const LaunchConfig& c) {
  try {
    schemes::find(c.scheme, schemes::Engine::Runtime);
  } catch (const schemes::UnknownScheme& e) {
    throw InputError(fmt::format("--scheme: {}", e.what()));
  }
  if (c.workers < 1 || c.workers > kMaxWireWorkers)
    throw InputError(fmt::format("--workers must be in 1..{}, got {}", kMaxWireWorkers, c.workers));
  if (c.jobs < 1 || c.jobs > 64) throw InputError(fmt::format("--jobs must be in 1..64, got {}", c.jobs));
  if (!c.job_workers.empty() && c.job_workers.size() != c.jobs)
    throw InputError(fmt::format("--workers gives {} counts for {} jobs: give one count per job", c.job_workers.size(), c.jobs));
  for (unsigned w : c.job_workers)
    if (w < 1 || w > kMaxWireWorkers) throw InputError(fmt::format("--workers: every count must be in 1..{}, got {}", kMaxWireWorkers, w));
  if (c.size_bytes < 4 || c.size_bytes % 4 != 0)
    throw InputError(fmt::format("--size must be a positive multiple of 4 bytes (whole float32 values), got {}", c.size_bytes));
  if (c.memory_bytes < uint64_t{4} * c.payload)
    throw InputError(fmt::format("--memory {} holds no aggregator of --payload {} values ({} bytes each)", c.memory_bytes,
                                 c.payload, 4 * c.payload));
  for (uint32_t p : c.priorities)
    if (p < 1 || p > INT32_MAX) throw InputError(fmt::format("--priorities: every priority must be in 1..{}, got {}", INT32_MAX, p));
  if (!(c.delay_us >= 0 && c.delay_us <= 1e8)) throw InputError(fmt::format("--delay-us must be in [0, 1e8], got {}", c.delay_us));
  if (!(c.window_kb >= 0 && c.window_kb <= 1e6)) throw InputError(fmt::format("--window-kb must be in [0, 1e6], got {}", c.window_kb));
  if (c.iterations < 1) throw InputError("--iterations must be >= 1");
  if (c.payload < 1 || c.payload > 16000) throw InputError("--payload must be in 1..16000 values");
  for (double r : {c.loss, c.duplicate, c.reorder})
    if (!(r >= 0 && r < 1)) throw InputError("--loss, --duplicate and --reorder must be in [0, 1)");
  if (!c.priorities.empty() && c.priorities.size() != c.jobs)
    throw InputError(fmt::format("--priorities needs one value per job ({})", c.jobs));
  if (c.delay_job > c.jobs || (c.delay_job && c.delay_rank >= c.workers_of(c.delay_job)))
    throw InputError(fmt::format("--delay-worker {}:{} names a job or rank that does not exist", c.delay_job, c.delay_rank));
  if (!(c.timeout_s > 0 && c.timeout_s <= 1e6)) throw InputError(fmt::format("--timeout must be in (0, 1e6] seconds, got {}", c.timeout_s));
  const schemes::Scheme& s = schemes::find(c.scheme);
  if (s.sparse == schemes::Sparse::HotIna && c.command.empty() && c.hot_set_size == 0 && c.hot_keys_file.empty())
    throw InputError(fmt::format("--scheme {} with --hot-set-size 0 and no --hot-keys: its switch aggregates only the "
                                 "job's hot set, so every pair would go to the PS (that is ps-lite); give a hot set",
                                 c.scheme));
  const LaunchConfig defaults;
  if ((c.hot_set_size != defaults.hot_set_size || c.hot_iterations != defaults.hot_iterations || !c.hot_keys_file.empty()) &&
      s.sparse != schemes::Sparse::HotIna)
    throw InputError(fmt::format("--hot-set-size / --hot-iterations / --hot-keys: --scheme {} has no hot-set table "
                                 "(zebra has)", c.scheme));
  if (s.sparse == schemes::Sparse::HotIna && c.command.empty()) {
    if (!c.hot_keys_file.empty() && c.hot_iterations != defaults.hot_iterations)
      throw InputError("--hot-iterations: the hot set comes from --hot-keys, not from a profile; give one of them");
    if (c.hot_iterations < 1 || c.hot_iterations > c.iterations)
      throw InputError(fmt::format("--hot-iterations must be in 1..{} (--iterations), got {}", c.iterations, c.hot_iterations));
    // What the switch's table holds (its entries, and one value register per key in --memory).
    const uint64_t cap = std::min<uint64_t>(dp::ZebraConfig{}.kv_table_entries, c.memory_bytes / 4);
    const uint64_t size = c.hot_keys_file.empty() ? c.hot_set_size : read_hot_keys_file(c.hot_keys_file).size();
    if (size > cap)
      throw InputError(fmt::format("{} {}{}: the switch holds at most {} hot keys ({} table entries, --memory {} / 4 "
                                   "= {} value registers)",
                                   c.hot_keys_file.empty() ? "--hot-set-size" : "--hot-keys", 
                                   c.hot_keys_file.empty() ? std::to_string(size) : c.hot_keys_file,
                                   c.hot_keys_file.empty() && size == defaults.hot_set_size ? " (the default)"
                                       : c.hot_keys_file.empty() ? "" : fmt::format(" ({} keys)", size),
                                   cap, dp::ZebraConfig{}.kv_table_entries, c.memory_bytes, c.memory_bytes / 4));
  }
  if (c.fail_at_op >= 0 && c.fail_rank < 0) throw InputError(fmt::format("--fail-at-op {}: give --fail-rank too", c.fail_at_op));
  if (c.fail_rank >= 0) {
    if (!uses_layout(c) || !is_ring_scheme(s) || s.collective == schemes::Collective::Hierarchical)
      throw InputError(fmt::format("--fail-rank {}: --scheme {} does not survive a failure (rar and rina do{})", c.fail_rank,
                                   c.scheme,
                                   s.collective == schemes::Collective::Hierarchical
                                       ? "; h-ar needs racks of equal size, which a failure breaks"
                                       : ""));
    if (c.fail_rank >= static_cast<int>(c.workers))
      throw InputError(fmt::format("--fail-rank {}: the job has ranks 0..{}", c.fail_rank, c.workers - 1));
    if (c.workers < 3) throw InputError(fmt::format("--fail-rank {}: a ring of {} workers cannot lose one", c.fail_rank, c.workers));
    if (c.fail_at_op < 0) throw InputError(fmt::format("--fail-rank {}: give --fail-at-op K too", c.fail_rank));
    if (c.fail_at_op >= static_cast<int>(c.iterations))
      throw InputError(fmt::format("--fail-at-op {}: the job runs ops 0..{} (--iterations {})", c.fail_at_op,
                                   c.iterations - 1, c.iterations));
    if (!(c.fail_detect_ms >= kMinFailDetectMs && c.fail_detect_ms <= 1e6))
      throw InputError(fmt::format("--fail-detect-ms {}: must be in [{}, 1e6] ms (heartbeats are looked at every "
                                   "10 ms; a shorter time would never detect anything)", c.fail_detect_ms, kMinFailDetectMs));
  }
  if (!c.command.empty()) {
    if (c.jobs != 1 || !c.job_workers.empty())
      throw InputError(fmt::format("train-py runs one job: got {}", workers_flags(c)));
    if (uses_layout(c))
      throw InputError(fmt::format("--scheme {}: train-py runs a scheme with one switch (not a ring layout)", c.scheme));
    if (c.command[0].empty() || c.command[0][0] != '/')
      throw InputError(fmt::format("--python '{}': the interpreter must be an absolute path", c.command[0]));
    const int err = ::access(c.command[0].c_str(), X_OK) == 0 ? 0 : errno;
    std::error_code ec;
    if (err != 0 || std::filesystem::is_directory(c.command[0], ec))
      throw InputError(fmt::format("--python '{}': not an executable file ({})", c.command[0],
                                   err != 0 ? errno_text(err) : "a directory"));
  }
  if (c.switch_threads < 1 || c.switch_threads > kMaxSwitchThreads)
    throw InputError(fmt::format("--switch-threads must be in 1..{}, got {}", kMaxSwitchThreads, c.switch_threads));
  if (c.switch_threads > 1)
    if (const std::string why = why_not_threaded(s, uses_layout(c)); !why.empty())
      throw InputError(fmt::format("--switch-threads {}: {}; give --switch-threads 1", c.switch_threads, why));
  if (!uses_layout(c)) {
    if (c.racks != 1 || !c.ina_racks.empty() || !c.rina_above.empty())
      throw InputError(fmt::format("--racks / --ina-racks / --rina-above apply to the ring schemes ({}) and to atp and dsa, not to "
                                   "--scheme {}", "rar, h-ar, rina", c.scheme));
    return;
  }
  if (c.jobs != 1) throw InputError(fmt::format("--scheme {} runs one job, got --jobs {}", c.scheme, c.jobs));
  if (c.workers < 2 || c.workers > kMaxRingWorkers)
    throw InputError(fmt::format("--scheme {}: --workers must be in 2..{}, got {}", c.scheme, kMaxRingWorkers, c.workers));
  if (c.delay_job || !c.priorities.empty() || c.window_kb > 0)
    throw InputError(fmt::format("--scheme {}: --delay-worker, --priorities and --window-kb are not supported for ring schemes", c.scheme));
  if (!c.ina_racks.empty() && s.collective != schemes::Collective::RingIna && s.collective != schemes::Collective::PsIna)
    throw InputError(fmt::format("--ina-racks {}: only --scheme rina and PS-based INA over racks (atp, dsa) have INA "
                                 "racks, not {}", c.ina_racks, c.scheme));
  const std::vector<unsigned> ina = ina_rack_list(c);
  (void)split_racks(c.workers, c.racks, ina);  // throws naming --racks / --ina-racks
  if (!c.rina_above.empty()) {
    if (s.collective != schemes::Collective::RingIna)
      throw InputError(fmt::format("--rina-above {}: only --scheme rina has INA switches above the ToR, not {}", c.rina_above,
                                   c.scheme));
    if (c.fail_rank >= 0)
      throw InputError(fmt::format("--fail-rank {} with --rina-above {}: a group above the ToR cannot lose a worker "
                                   "(not handled, as in the simulator)", c.fail_rank, c.rina_above));
    const std::vector<unsigned> above = parse_rack_list("--rina-above", c.rina_above);
    for (unsigned q : above)
      if (q >= c.racks)
        throw InputError(fmt::format("--rina-above names rack {}, which does not exist (--racks {}: racks 0..{})", q, c.racks,
                                     c.racks - 1));
    const size_t ranks = above.size() * (c.workers / c.racks);
    if (ranks < 2 || ranks > 64)
      throw InputError(fmt::format("--rina-above {}: a group above the ToR needs 2..64 ranks below its switch, these racks "
                                   "hold {}", c.rina_above, ranks));
  }
  if (s.collective == schemes::Collective::PsIna && ina.empty())
    throw InputError(fmt::format("--ina-racks {}: --scheme {} over racks needs at least one INA rack (the root of its "
                                 "aggregation tree)", c.ina_racks, c.scheme));
}

}  // namespace

unsigned LaunchConfig::total_workers() const {
  unsigned n = 0;
  for (unsigned j = 1; j <= jobs; ++j) n += workers_of(j);
  return n;
}

LaunchEstimate estimate_launch(const LaunchConfig& c) {
  LaunchEstimate e;
  const uint64_t workers = c.total_workers();
  const uint64_t ps = has_ps(c.scheme) ? c.jobs : 0;
  e.processes = 2 + ps + workers;             // launcher, switch, PSes, workers
  e.threads = 1 + c.switch_threads + ps + 2 * workers;  // a worker: main + the Communicator's I/O thread
  e.worker_bytes = kProcessBaseline + 7 * c.size_bytes;
  if (const schemes::Scheme* s = schemes::lookup(c.scheme); s && s->kv() && c.command.empty()) {
    // The sparse worker (worker_app.hpp): its batch, the exact sums over the
    // key space and the communicator's op, whose result is the union of
    // every rank's keys. Measured peak RSS per worker at 4 M pairs (--size
    // 16000000): 842 MB with 2 workers, 1218 MB with 4, i.e. about 120 B a
    // pair plus 48 B a pair per worker.
    uint64_t n = 0;
    for (unsigned j = 1; j <= c.jobs; ++j) n = std::max<uint64_t>(n, c.workers_of(j));
    const uint64_t pairs = c.size_bytes / 4;
    e.worker_bytes = kProcessBaseline + pairs * (120 + 48 * n);
  }
  const uint64_t agg_bytes = uint64_t{4} * c.payload;
  e.switch_bytes = c.memory_bytes / agg_bytes * (24 + agg_bytes);  // dp::SwitchProgram: Agg (24 B) + values
  e.memory_bytes = workers * e.worker_bytes + e.switch_bytes + (2 + ps) * kProcessBaseline;
  return e;
}

void check_launch_resources(const LaunchConfig& c) {
  const LaunchEstimate e = estimate_launch(c);
  const std::string who = workers_flags(c);
  const std::string parts = fmt::format("{}, {}, the switch and this launcher", counted(c.total_workers(), "worker"),
                                        counted(has_ps(c.scheme) ? c.jobs : 0, "PS", "PSes"));
  if (const uint64_t limit = nproc_limit(); limit && e.threads > limit)
    throw RuntimeError(fmt::format("{}: {} processes with {} threads ({}) exceed RLIMIT_NPROC = {}; use fewer workers or jobs",
                                   who, e.processes, e.threads, parts, limit));
  if (c.force) return;
  const uint64_t bound = 64ULL * online_cpus();
  if (e.processes > bound)
    throw RuntimeError(fmt::format("{}: {} processes ({}) exceed the bound of {} (64 per CPU, {} CPUs); use fewer workers "
                                   "or jobs, or --force",
                                   who, e.processes, parts, bound, online_cpus()));
  if (const uint64_t avail = mem_available_bytes(); avail && e.memory_bytes > avail)
    throw RuntimeError(fmt::format("{} --size {}: estimated memory {} ({} per worker, {} for the switch's arrays) exceeds "
                                   "the available memory {} (MemAvailable); use fewer or smaller workers, or --force",
                                   who, c.size_bytes, human_bytes(e.memory_bytes), human_bytes(e.worker_bytes),
                                   human_bytes(e.switch_bytes), human_bytes(avail)));
}

namespace {

// The configuration after validation, with the binary and a work directory.
LaunchConfig prepare(const LaunchConfig& cfg_in) {
  LaunchConfig cfg = cfg_in;
  validate(cfg);
  check_launch_resources(cfg);
  if (cfg.binary.empty()) cfg.binary = fs::read_symlink("/proc/self/exe").string();
  if (cfg.work_dir.empty()) {
    std::string tmpl = (fs::temp_directory_path() / "ina-run-XXXXXX").string();
    if (!mkdtemp(tmpl.data())) throw RuntimeError(fmt::format("cannot create a temporary directory: {}", errno_text(errno)));
    cfg.work_dir = tmpl;
  } else {
    std::error_code ec;
    fs::create_directories(cfg.work_dir, ec);
    if (ec) throw InputError(fmt::format("--work-dir {}: cannot create it: {}", cfg.work_dir, ec.message()));
  }
  return cfg;
}

// Removes a work directory the launch created, whatever the outcome.
struct WorkDirGuard {
  std::string dir;
  bool remove;
  ~WorkDirGuard() {
    std::error_code ec;
    if (remove) fs::remove_all(dir, ec);
  }
};

}  // namespace

int launch(const LaunchConfig& cfg_in, std::ostream& out) {
  const LaunchConfig cfg = prepare(cfg_in);
  const WorkDirGuard guard{cfg.work_dir, cfg_in.work_dir.empty()};
  Run run(cfg, out);
  if (uses_layout(cfg)) return launch_ring(run);
  return launch_star(run);
}

}  // namespace ina::rt
