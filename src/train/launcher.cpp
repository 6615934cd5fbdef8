// The launcher role of ina-train: switch (+ PS) and workers as child
// processes on loopback, supervised with the runtime's launch steps
// (runtime/launch_steps.hpp); then the summary.
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <optional>
#include <stdexcept>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/counted.hpp"
#include "dataplane/zebra.hpp"
#include "runtime/auth.hpp"
#include "runtime/launch_steps.hpp"
#include "runtime/supervisor.hpp"
#include "schemes/registry.hpp"
#include "train/fortune_files.hpp"
#include "train/reducer.hpp"
#include "train/train.hpp"


namespace ina::train {

namespace {

namespace fs = std::filesystem;

double now_s() { return static_cast<double>(rt::monotonic_now()) / static_cast<double>(kSec); }

using rt::Child;
using rt::Kind;
using rt::Supervisor;

// Deadlines here are seconds on the supervisor's monotonic clock.
Time at(double seconds) { return static_cast<Time>(seconds * static_cast<double>(kSec)); }

void validate(const TrainConfig& c) {
  if (!c.comm.empty()) {  // a bad --comm is named before anything starts
    if (c.backend != "ina") throw rt::InputError(fmt::format("--comm sets the ina communicator; --backend is {}", c.backend));
    ina_comm_settings(c);
  }
  if (c.model != "mlp" && c.model != "cnn" && c.model != "fortunes")
    throw rt::InputError(fmt::format("--model must be mlp, cnn or fortunes, got '{}'", c.model));
  if (c.backend != "ina" && c.backend != "gloo")
    throw rt::InputError(fmt::format("--backend must be ina or gloo, got '{}'", c.backend));
  if (c.model == "fortunes") {
    if (c.backend == "ina") {
      const auto& s = schemes::find(c.scheme, schemes::Engine::Runtime);  // throws, listing the schemes
      if (s.sparse != schemes::Sparse::HotIna && s.sparse != schemes::Sparse::Push)
        throw rt::InputError(fmt::format("--scheme {}: --model fortunes averages its embedding gradient with "
                                         "allreduce_sparse on a <key, value> scheme: zebra or ps-lite", c.scheme));
    }
    if (c.momentum != 0)
      throw rt::InputError(fmt::format("--momentum {}: --model fortunes trains with plain SGD (its embedding "
                                       "gradient is sparse); leave --momentum out", c.momentum));
    if (c.dim < 1 || c.dim > 1024) throw rt::InputError(fmt::format("--dim must be in 1..1024, got {}", c.dim));
    const uint64_t cap = std::min<uint64_t>(dp::ZebraConfig{}.kv_table_entries, c.memory_bytes / 4);
    if (c.hot_keys > cap)
      throw rt::InputError(fmt::format("--hot-keys {}: the switch holds at most {} hot keys ({} table entries, "
                                       "--memory / 4 = {} value registers)", c.hot_keys, cap,
                                       dp::ZebraConfig{}.kv_table_entries, c.memory_bytes / 4));
  } else if (c.backend == "ina") {
    schemes::find(c.scheme, schemes::Engine::Training);  // throws, listing the schemes
  }
  if (c.workers < 1 || c.workers > 64) throw rt::InputError("--workers must be in 1..64");
  if (c.epochs < 1) throw rt::InputError("--epochs must be >= 1");
  if (c.batch < 1) throw rt::InputError("--batch must be >= 1");
  if (!(c.lr > 0)) throw rt::InputError("--lr must be > 0");
  if (!(c.momentum >= 0 && c.momentum < 1)) throw rt::InputError("--momentum must be in [0, 1)");
  if (c.hidden < 1) throw rt::InputError("--hidden must be >= 1");
  if (!(c.timeout_s > 0)) throw rt::InputError("--timeout must be > 0");
  if (!(c.target_acc > 0 && c.target_acc <= 1)) throw rt::InputError("--target-acc must be in (0, 1]");
  if (c.payload < 1 || c.payload > 16000) throw rt::InputError("--payload must be in 1..16000");
  if (!fs::is_directory(c.data_dir))  // (not after a switch, PS and workers started)
    throw rt::InputError(fmt::format("--data {}: not a directory (--model {} reads its data there)", c.data_dir, c.model));
  if (c.model != "fortunes")  // the files load_fashion_mnist reads (data.cpp)
    for (const char* f : {"train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz", "t10k-images-idx3-ubyte.gz",
                          "t10k-labels-idx1-ubyte.gz"})
      if (!fs::exists(fs::path(c.data_dir) / f))
        throw rt::InputError(fmt::format("--data {}: no {} (Fashion-MNIST's gzipped IDX files)", c.data_dir, f));
  if (c.model == "fortunes") try {
      fortunes::fortune_files(c.data_dir);
    } catch (const std::runtime_error& e) {
      throw rt::InputError(fmt::format("--data {}", e.what()));
    }
}

std::vector<std::string> worker_args(const TrainConfig& c) {
  std::vector<std::string> a{"--role", "worker", "--model", c.model, "--backend", c.backend, "--scheme", c.scheme,
                             "--workers", std::to_string(c.workers), "--epochs", std::to_string(c.epochs),
                             "--batch", std::to_string(c.batch), "--lr", fmt::format("{}", c.lr),
                             "--momentum", fmt::format("{}", c.momentum), "--hidden", std::to_string(c.hidden),
                             "--priority", c.priority,
                             "--seed", std::to_string(c.seed), "--limit-train", std::to_string(c.limit_train),
                             "--limit-test", std::to_string(c.limit_test), "--target-acc", fmt::format("{}", c.target_acc),
                             "--data", c.data_dir, "--payload", std::to_string(c.payload),
                             "--timeout", fmt::format("{}", c.timeout_s), "--dim", std::to_string(c.dim),
                             "--hot-iterations", std::to_string(c.hot_iterations), "--hot-keys", std::to_string(c.hot_keys)};
  for (const auto& s : c.comm) a.insert(a.end(), {"--comm", s});
  if (c.verbose) a.push_back("--verbose");
  return a;
}

std::string ina_binary(const TrainConfig& c, const std::string& self_exe) {
  if (!c.ina_binary.empty()) return c.ina_binary;
  return (fs::path(self_exe).parent_path() / "ina").string();
}

}  // namespace

int run_launcher(const TrainConfig& cfg, const std::string& self_exe) {
  validate(cfg);
  const bool ina = cfg.backend == "ina";
  const std::string ina_exe = ina_binary(cfg, self_exe);
  if (ina && ::access(ina_exe.c_str(), X_OK) != 0)
    throw rt::InputError(fmt::format("cannot execute {} (set --ina-binary)", ina_exe));
  std::string tmpl = (fs::temp_directory_path() / "ina-train-XXXXXX").string();
  if (!mkdtemp(tmpl.data())) throw std::runtime_error(fmt::format("cannot create a temporary directory: {}", std::strerror(errno)));
  struct DirGuard {
    std::string dir;
    ~DirGuard() {
      std::error_code ec;
      fs::remove_all(dir, ec);
    }
  } guard{tmpl};
  const fs::path work = tmpl;

  const double t_start = now_s();
  const double deadline = t_start + cfg.timeout_s;
  Supervisor sup;
  const std::string label = ina ? fmt::format("ina/{}", cfg.scheme) : "gloo";
  auto fail = [&](const rt::LaunchFailure& f) {
    std::cerr << "ina-train: " << f.message << "\n";
    if (!sup.all_reaped()) std::cerr << "ina-train: stopping the remaining processes\n";
    sup.stop_all();
    return f.status;
  };

  // 1. ina: the switch (it reports its port through a pipe) and, for atp/dsa, the PS.
  Child* sw = nullptr;
  std::string switch_addr;
  // Credentials (runtime/auth.hpp): the switch gets a fresh key, the job's
  // processes job 1's key only, each through its own environment.
  const rt::Key switch_key = rt::random_key();
  const std::vector<std::string> job_env{"INA_JOB_KEY=" + rt::to_hex(rt::job_key(switch_key, 1))};
  if (ina) {
    std::vector<std::string> a{"switch", "--listen", "127.0.0.1:0", "--policy", cfg.scheme, "--memory",
                               std::to_string(cfg.memory_bytes), "--payload", std::to_string(cfg.payload),
                               "--regions", "1", "--seed", std::to_string(cfg.seed),
                               "--stats-json", (work / "switch.json").string()};
    if (!cfg.verbose) a.push_back("--quiet");
    uint16_t port = 0;
    if (auto f = rt::start_switch(sup, ina_exe, std::move(a), "switch", 1, 0, at(deadline), sw, port,
                                  {"INA_SWITCH_KEY=" + rt::to_hex(switch_key)}))
      return fail(*f);
    switch_addr = fmt::format("127.0.0.1:{}", port);
    if (schemes::find(cfg.scheme).has_ps) {
      std::vector<std::string> p{"ps", "--switch", switch_addr, "--job", "1", "--workers", std::to_string(cfg.workers)};
      if (!cfg.verbose) p.push_back("--quiet");
      sup.spawn(Kind::Ps, "the PS", 1, 0, ina_exe, p, -1, job_env);
    }
  }

  // 2. The workers.
  const auto common = worker_args(cfg);
  for (unsigned r = 0; r < cfg.workers; ++r) {
    auto a = common;
    a.insert(a.end(), {"--rank", std::to_string(r), "--report", (work / fmt::format("rank{}.json", r)).string()});
    if (ina)
      a.insert(a.end(), {"--switch", switch_addr, "--job", "1"});
    else
      a.insert(a.end(), {"--store", (work / "gloo-store").string()});
    sup.spawn(Kind::Worker, fmt::format("worker rank {}", r), 1, r, self_exe, a, -1, ina ? job_env : std::vector<std::string>{});
  }

  // 3. Until every worker has exited 0; anything else exiting is a failure.
  if (auto f = rt::wait_for_workers(sup, at(deadline), cfg.timeout_s)) return fail(*f);
  // 4. The PS leaves once the switch finishes the job; then stop the switch.
  if (ina) {
    if (auto f = rt::wait_for_ps_exit(sup, at(deadline))) return fail(*f);
    if (auto f = rt::stop_switches(sup, {sw})) return fail(*f);
  }
  const double wall = now_s() - t_start;

  // 5. Reports and summary.
  std::vector<nlohmann::json> reps;
  for (unsigned r = 0; r < cfg.workers; ++r) {
    auto rep = rt::read_json_report((work / fmt::format("rank{}.json", r)).string());
    if (rep.is_discarded()) return fail({1, fmt::format("worker rank {} left no readable report", r)});
    reps.push_back(std::move(rep));
  }
  const auto& r0 = reps[0];
  std::map<std::string, std::vector<unsigned>> by_sum;
  for (unsigned r = 0; r < cfg.workers; ++r) by_sum[reps[r].at("checksum").get<std::string>()].push_back(r);
  const bool identical = by_sum.size() == 1;
  std::optional<double> tta;
  std::optional<unsigned> tta_epoch;
  nlohmann::json epochs = nlohmann::json::array();
  const bool fortunes = cfg.model == "fortunes";
  const std::string model =
      fortunes ? fmt::format("bag of words EmbeddingBag({}, {}) -> Linear({}, {})", r0.at("vocabulary").get<int64_t>(), cfg.dim,
                             cfg.dim, r0.at("classes").get<int64_t>())
               : cfg.model == "cnn" ? std::string("CNN conv5x5(16)-conv5x5(32)-linear(512, 10)")
                                    : fmt::format("MLP 784-{}-10", cfg.hidden);
  std::cout << fmt::format("ina-train: {}, {}, {}, batch {} per worker, lr {}, momentum {}, {} "
                           "({} parameters), seed {}, {} training samples, {} steps per epoch\n",
                           r0.at("reducer").get<std::string>(), counted(cfg.workers, "worker"),
                           counted(cfg.epochs, "epoch"),
                           cfg.batch, cfg.lr, cfg.momentum,
                           model, r0.at("parameters").get<uint64_t>(), cfg.seed, r0.at("train_samples").get<uint64_t>(),
                           r0.at("steps_per_epoch").get<uint64_t>());
  std::cout << "epoch  test_acc_%  test_loss  train_loss  train_s  allreduce_s\n";
  for (const auto& e : r0.at("epochs")) {
    const double acc = e.at("test_accuracy").get<double>();
    if (!tta && acc >= cfg.target_acc) {
      tta = e.at("train_seconds").get<double>();
      tta_epoch = e.at("epoch").get<unsigned>();
    }
    std::cout << fmt::format("{:5}  {:10.2f}  {:9.4f}  {:10.4f}  {:7.2f}  {:11.2f}\n", e.at("epoch").get<unsigned>(), 100 * acc,
                             e.at("test_loss").get<double>(), e.at("train_loss").get<double>(),
                             e.at("train_seconds").get<double>(), e.at("comm_seconds").get<double>());
    epochs.push_back({{"epoch", e.at("epoch")}, {"test_accuracy", acc}, {"test_loss", e.at("test_loss")},
                      {"train_loss", e.at("train_loss")}, {"train_seconds", e.at("train_seconds")},
                      {"comm_seconds", e.at("comm_seconds")}});
  }
  if (tta)
    std::cout << fmt::format("time to {:.1f} % test accuracy: {:.2f} s (epoch {})\n", 100 * cfg.target_acc, *tta, *tta_epoch);
  else
    std::cout << fmt::format("time to {:.1f} % test accuracy: not reached in {}\n", 100 * cfg.target_acc,
                             counted(cfg.epochs, "epoch"));
  std::cout << fmt::format("loss (rank 0, mean of 20 steps): first {:.4f}, last {:.4f}\n", r0.at("first_loss").get<double>(),
                           r0.at("last_loss").get<double>());
  if (identical) {
    std::cout << fmt::format("parameters: bit-identical on {} (checksum {})\n",
                             cfg.workers == 1 ? "the one worker" : fmt::format("all {} workers", cfg.workers),
                             by_sum.begin()->first);
  } else {
    std::cerr << "ina-train: FAILED: the workers' parameters differ:";
    for (const auto& [sum, ranks] : by_sum) {
      std::cerr << " " << sum << " on ranks";
      for (unsigned r : ranks) std::cerr << " " << r;
      std::cerr << ";";
    }
    std::cerr << "\n";
  }
  // fortunes: the training loss of every step, the mean over the workers' batches (the global batch's loss).
  nlohmann::json step_losses = nlohmann::json::array();
  if (fortunes) {
    const size_t steps = r0.at("step_losses").size();
    for (size_t i = 0; i < steps; ++i) {
      double sum = 0;
      for (const auto& r : reps) sum += r.at("step_losses").at(i).get<double>();
      step_losses.push_back(sum / cfg.workers);
    }
  }
  // The switch's statistics (written when it stopped).
  nlohmann::json switch_stats;
  if (ina) {
    switch_stats = rt::read_json_report((work / "switch.json").string());
    if (switch_stats.is_discarded()) switch_stats = nullptr;
  }
  if (fortunes && ina) {
    uint64_t expected = 0, sent = 0, pairs = 0;
    for (const auto& r : reps) {
      const auto& sp = r.at("sparse");
      expected += sp.at("hot_pairs_expected").get<uint64_t>();
      sent += sp.at("transport").at("hot_pairs").get<uint64_t>();
      pairs += sp.at("embedding_pairs").get<uint64_t>();
    }
    std::cout << fmt::format("hot set: {} keys; embedding pairs pushed {}, of them hot {} ({:.1f} %); the transports sent "
                             "{} hot pairs; the switch aggregated {} pairs\n",
                             r0.at("sparse").at("hot_set_keys").get<uint64_t>(), pairs, expected,
                             pairs ? 100.0 * expected / pairs : 0.0, sent,
                             switch_stats.is_object() ? switch_stats.at("switch").value("kv_aggregated", uint64_t{0}) : 0);
  }
  std::cout << fmt::format("wall time {:.2f} s\n", wall);
  if (!cfg.json_out.empty()) {
    nlohmann::json checksums = nlohmann::json::array();
    for (const auto& r : reps) checksums.push_back(r.at("checksum"));
    nlohmann::json j = {{"ok", identical},
                        {"label", label},
                        {"config",
                         {{"model", cfg.model}, {"backend", cfg.backend}, {"scheme", ina ? cfg.scheme : ""}, {"workers", cfg.workers},
                          {"epochs", cfg.epochs}, {"batch", cfg.batch}, {"lr", cfg.lr}, {"momentum", cfg.momentum},
                          {"hidden", cfg.hidden}, {"priority", cfg.priority}, {"seed", cfg.seed}, {"limit_train", cfg.limit_train},
                          {"limit_test", cfg.limit_test}, {"payload", cfg.payload}, {"target_accuracy", cfg.target_acc},
                          {"dim", cfg.dim}, {"hot_iterations", cfg.hot_iterations}, {"hot_keys", cfg.hot_keys}}},
                        {"epochs", epochs},
                        {"final_test_accuracy", epochs.back().at("test_accuracy")},
                        {"time_to_accuracy_seconds", tta ? nlohmann::json(*tta) : nlohmann::json(nullptr)},
                        {"time_to_accuracy_epoch", tta_epoch ? nlohmann::json(*tta_epoch) : nlohmann::json(nullptr)},
                        {"first_loss", r0.at("first_loss")},
                        {"last_loss", r0.at("last_loss")},
                        {"identical_parameters", identical},
                        {"checksums", checksums},
                        {"wall_seconds", wall},
                        {"step_losses", step_losses},
                        {"switch", switch_stats},
                        {"workers", reps}};
    std::ofstream f(cfg.json_out);
    f << j.dump(1) << "\n";
    if (!f) std::cerr << "ina-train: cannot write " << cfg.json_out << "\n";
  }
  return identical ? 0 : 2;
}

}  // namespace ina::train
