// `ina plan zebra`: Zebra's hot-parameter identification on a sparse
// workload (paper §III-C, §V-C: Fig. 9 and Table II): the global hot list
// H_g from every batch, the sampled one H_s per sampling rate, their
// precision |H_g ∩ H_s| / |H_g| and Kendall tau, the online list after the
// first iterations, and Principle 1's k.
#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "cli/checks.hpp"
#include "cli/commands.hpp"
#include "control/zebra_hot.hpp"
#include "workload/sparse.hpp"

namespace ina::cli {
namespace {

struct ZebraArgs {
  std::string model = "oa";
  double scale = 0.1;
  unsigned workers = 16, iterations = 200, online_after = 10;
  std::vector<double> rates = {0.01, 0.02, 0.04, 0.08, 0.16};
  uint64_t seed = 1;
  double p = 0.5, c = 0.05, memory_mb = 20;
  bool json = false;
};

int run_zebra(const ZebraArgs& a) {
  namespace z = control::zebra;
  const auto* m = workload::find_sparse_model(a.model);
  if (!m) {
    std::vector<std::string> names;
    for (const auto& x : workload::sparse_models()) names.push_back(x.name);
    std::cerr << fmt::format("error: --model: unknown sparse model '{}' (one of {})\n", a.model, fmt::join(names, ", "));
    return 2;
  }
  if (a.online_after > a.iterations) {
    std::cerr << fmt::format("error: --online-after {} exceeds --iterations {}\n", a.online_after, a.iterations);
    return 2;
  }
  const auto src = workload::make_synthetic(*m, a.workers, a.iterations, a.seed, a.scale);
  // §V-C: add 1,000 keys at a time (scaled with the model) while a step adds >= 1 % of the updates.
  const size_t step = std::max<size_t>(1, static_cast<size_t>(std::llround(1000 * a.scale)));
  const auto global = z::count_updates(*src, 0, a.iterations, 1.0, a.seed);
  const auto hg = z::hot_by_increment(global, step, 0.01);
  nlohmann::json out = {{"model", a.model},         {"scale", a.scale},         {"params", src->num_params()},
                        {"workers", a.workers},     {"iterations", a.iterations}, {"step", step},
                        {"updates", global.total},  {"hot_global", hg.size()}};
  const auto k = z::principle1(global, a.p, a.c, static_cast<uint64_t>(a.memory_mb * (1 << 20)));
  out["principle1"] = {{"p", a.p}, {"c", a.c}, {"memory_mb", a.memory_mb}, {"k", k ? nlohmann::json(*k) : nullptr}};
  nlohmann::json rows = nlohmann::json::array();
  for (double r : a.rates) {
    const auto sampled = z::count_updates(*src, 0, a.iterations, r, a.seed + 17);
    const auto hs = z::hot_by_increment(sampled, step, 0.01);
    rows.push_back({{"sample_rate", r},
                    {"hot_sampled", hs.size()},
                    {"precision", z::precision(hg, hs)},
                    {"kendall_tau", z::kendall_tau(hg, hs)},
                    {"kendall_distance", (1 - z::kendall_tau(hg, hs)) / 2}});
  }
  out["sampling"] = rows;
  const auto early = z::count_updates(*src, 0, a.online_after, 1.0, a.seed);
  const auto ho = z::hot_by_increment(early, step, 0.01);
  out["online"] = {{"after_iterations", a.online_after},
                   {"hot", ho.size()},
                   {"precision", z::precision(hg, ho)},
                   {"kendall_tau", z::kendall_tau(hg, ho)}};
  if (a.json) {
    std::cout << out.dump() << "\n";
    return 0;
  }
  std::cout << fmt::format(
      "{} at scale {} ({} params), {} workers x {} iterations, {} updates; global hot list H_g: {} keys (steps of {}, "
      ">= 1 %)\nPrinciple 1 (p = {}, c = {}, {} MB): k = {}\n",
      a.model, a.scale, src->num_params(), a.workers, a.iterations, global.total, hg.size(), step, a.p, a.c,
      a.memory_mb, k ? std::to_string(*k) : std::string("none (p out of reach)"));
  std::cout << "| sample rate | |H_s| | precision | Kendall tau | Kendall distance |\n|---|---|---|---|---|\n";
  for (const auto& r : rows) {
    const double tau = r["kendall_tau"].is_number() ? r["kendall_tau"].get<double>() : std::nan("");
    std::cout << fmt::format("| {:g} % | {} | {:.3f} | {:.3f} | {:.3f} |\n", 100 * r["sample_rate"].get<double>(),
                             r["hot_sampled"].get<size_t>(), r["precision"].get<double>(), tau, (1 - tau) / 2);
  }
  std::cout << fmt::format("online after {} iterations: {} keys, precision {:.3f}, Kendall tau {:.3f}\n",
                           a.online_after, ho.size(), z::precision(hg, ho), z::kendall_tau(hg, ho));
  return 0;
}

}  // namespace

Runner register_plan_zebra(CLI::App& plan) {
  auto a = std::make_shared<ZebraArgs>();
  auto* z = plan.add_subcommand("zebra", "Zebra's hot-parameter identification: sampling precision, Kendall tau, "
                                         "online identification and Principle 1 on a sparse workload model");
  z->add_option("--model", a->model, "sparse workload: oa, se, deeplight, ncf or lstm (docs/zebra.md)")
      ->capture_default_str();
  z->add_option("--scale", a->scale, "the model's size and keys per batch x this")
      ->check(Finite(0, 1, true))
      ->capture_default_str();
  z->add_option("--workers", a->workers, "workers")->check(CLI::Range(1u, 4096u))->capture_default_str();
  z->add_option("--iterations", a->iterations, "iterations of the whole training (the paper: ~200)")
      ->check(CLI::Range(1u, 100000u))
      ->capture_default_str();
  z->add_option("--sample-rates", a->rates, "sampling rates (fractions of the batches)")
      ->delimiter(',')
      ->check(Finite(0, 1, true));
  z->add_option("--online-after", a->online_after, "online identification after this many iterations (Table II: 10)")
      ->check(CLI::Range(1u, 100000u))
      ->capture_default_str();
  z->add_option("--p", a->p, "Principle 1: share of updates T_k/T_n to reach")->check(Finite(0, 1, true));
  z->add_option("--c", a->c, "Principle 1: fraction of the switch memory")->check(Finite(0, 1, true));
  z->add_option("--memory-mb", a->memory_mb, "Principle 1: the switch's memory m (MB; the paper's Tofino: 20)")
      ->check(Finite(0, 1e6, true));
  z->add_option("--seed", a->seed, "workload and sampling seed")->capture_default_str();
  z->add_flag("--json", a->json, "print one JSON object");
  return [z, a] { return z->parsed() ? run_zebra(*a) : -1; };
}

}  // namespace ina::cli
