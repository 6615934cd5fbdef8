// ina-train: see train.hpp. `ina train ARGS` execs `ina-train ARGS`.
#include <filesystem>
#include <iostream>

#include <CLI/CLI.hpp>

#include "cli/checks.hpp"
#include "cli/commands.hpp"
#include "runtime/net.hpp"
#include "schemes/registry.hpp"
#include "train/train.hpp"

int main(int argc, char** argv) {
  using namespace ina::train;
  TrainConfig c;
  WorkerConfig w;
  std::string role = "launcher";
  CLI::App app{"ina train: data-parallel training of an MLP or a CNN on Fashion-MNIST (or, --model fortunes, a bag-of-words "
               "classifier with a sparse embedding gradient); gradients averaged through `ina switch` "
               "(--backend ina) or gloo (--backend gloo). Starts the switch, PS and workers on loopback."};
  app.add_option("--model", c.model,
                 "mlp: MLP 784-H-10 on Fashion-MNIST; cnn: a small CNN on Fashion-MNIST (two 5x5 convolutions, "
                 "a linear layer; computation-intensive); fortunes: bag of words (EmbeddingBag -> Linear) on Debian's fortunes, "
                 "its sparse embedding gradient through allreduce_sparse (--scheme zebra|ps-lite)")
      ->capture_default_str();
  app.add_option("--backend", c.backend, "ina | gloo")->capture_default_str();
  app.name("ina train");  // (not argv[0]: `ina train` execs this binary)
  app.add_option("--scheme", c.scheme,
                 "ina: the aggregation scheme (name|alias); --model mlp or cnn:" + ina::schemes::help(ina::schemes::Engine::Training) +
                     "\n--model fortunes: zebra or ps-lite (a <key, value> scheme)")
      ->capture_default_str();
  app.add_option("--workers", c.workers, "worker processes")->capture_default_str();
  app.add_option("--epochs", c.epochs, "epochs")->capture_default_str();
  app.add_option("--batch", c.batch, "batch size per worker (global batch: batch x workers)")->capture_default_str();
  auto* lr_opt = app.add_option("--lr", c.lr, "SGD learning rate (default: mlp 0.05, fortunes 0.5)");
  auto* mom_opt = app.add_option("--momentum", c.momentum, "SGD momentum (mlp; fortunes trains with plain SGD)")->capture_default_str();
  app.add_option("--hidden", c.hidden, "hidden units of the MLP 784-H-10")->capture_default_str();
  app.add_option("--priority", c.priority,
                 "mlp and cnn on ina: eq1 (DSA's Eq. 1 per layer, measured each step; one allreduce per layer) | fixed "
                 "(one allreduce of the model at the communicator's priority); only DSA's switch reads priorities")
      ->check(CLI::IsMember({"eq1", "fixed"}))
      ->capture_default_str();
  app.add_option("--seed", c.seed, "seed of the initialization and the shuffling (the same on every worker)")->capture_default_str();
  app.add_option("--limit-train", c.limit_train, "use the first N training images (0: all 60000)")->capture_default_str();
  app.add_option("--limit-test", c.limit_test, "evaluate on the first N test images (0: all 10000)")->capture_default_str();
  app.add_option("--target-acc", c.target_acc, "test accuracy (0..1) for the time-to-accuracy")->capture_default_str();
  auto* data_opt = app.add_option("--data", c.data_dir,
                                  "mlp: directory of the gzipped Fashion-MNIST IDX files (default " + c.data_dir +
                                      "); fortunes: directory of fortune files (default /usr/share/games/fortunes)");
  app.add_option("--dim", c.dim, "fortunes: embedding width d (a word is d keys)")->capture_default_str();
  app.add_option("--hot-iterations", c.hot_iterations,
                 "fortunes on zebra: iterations of epoch 1 (all workers' batches) counted to rank the hot rows (0: no hot set)")
      ->capture_default_str();
  app.add_option("--hot-keys", c.hot_keys,
                 "fortunes on zebra: at most this many hot keys (d per row; the switch holds 32768)")
      ->capture_default_str();
  app.add_option("--payload", c.payload, "ina: int32 values per packet")->capture_default_str();
  ina::cli::add_memory_options(&app, c.memory_bytes, "ina: switch aggregator memory",
                               CLI::Range(uint64_t{1}, uint64_t{1} << 30));
  app.add_option("--timeout", c.timeout_s, "bound of the whole run in seconds")->capture_default_str();
  app.add_option("--json", c.json_out, "write a JSON summary here");
  app.add_option("--comm", c.comm,
                 "ina: a communicator setting NAME=VALUE for every worker (docs/runtime.md's [communicator] keys, "
                 "or section.key; e.g. fast_retransmit=false, profile=paper); repeatable");
  app.add_option("--ina-binary", c.ina_binary, "the `ina` executable (default: next to ina-train)");
  app.add_flag("--verbose", c.verbose, "children log their events");
  // Internal: the launcher starts the workers with these.
  auto* grp = app.add_option_group("internal");
  grp->add_option("--role", role, "launcher | worker")->check(CLI::IsMember({"launcher", "worker"}));
  grp->add_option("--rank", w.rank);
  grp->add_option("--switch", w.switch_addr);
  grp->add_option("--job", w.job);
  grp->add_option("--store", w.store_path);
  grp->add_option("--host", w.host);
  grp->add_option("--report", w.report);
  if (const auto rc = ina::cli::parse_command_line(app, argc, argv)) return *rc;
  try {
    if (c.model == "fortunes") {
      if (lr_opt->count() == 0) c.lr = 0.5;
      if (data_opt->count() == 0) c.data_dir = "/usr/share/games/fortunes";
      if (mom_opt->count() == 0) c.momentum = 0;
    }
    if (role == "worker") {
      w.train = c;
      return run_worker(w);
    }
    return run_launcher(c, std::filesystem::canonical("/proc/self/exe").string());
  } catch (const ina::rt::RuntimeError& e) {
    std::cerr << "ina-train: " << e.what() << "\n";
    return ina::rt::exit_status(e);
  } catch (const ina::schemes::UnknownScheme& e) {  // --scheme: input, as an InputError
    std::cerr << "ina-train: " << e.what() << "\n";
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "ina-train: " << e.what() << "\n";
    return 1;
  }
}
