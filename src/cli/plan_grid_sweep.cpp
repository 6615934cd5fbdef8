// `ina plan grid-sweep`: the GRID paper's large-scale experiments (Figs.
// 11-16) from a TOML file, every scheme's plan per (series, worker count,
// seed), averaged over the seeds into results.json, results.csv and plots.
//
// [scenario] name, title
// [topology] kind = "fat-tree-paper" | "leaf-spine-paper" | "fat-tree:K" | JSON file (relative to the TOML file)
//            programmable = "tor" | "all" | "random:F"     (generated topologies)
//            capacity_gbps = [MIN, MAX]                      C_s ~ U(MIN, MAX) per seed
//            links = true                                    enforce link capacities
//            multicast_results = false                       also plan the result multicast (--multicast-results)
// [job]      ps = "last" | "first" | host name               placement = "packed" | "random"
// [run]      schemes = [...], seeds = [...], exact_max_nodes = 2000 (grid-exact)
// [sweep]    workers = [...], label = "..."
// [output]   metrics = [...], y_label = "..."
// [[series]] name = "...", plus any "topology.*" / "job.*" key

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <limits>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "cli/plan_common.hpp"
#include "control/grid.hpp"
#include "core/set_override.hpp"
#include "core/toml_reader.hpp"
#include "experiment/results.hpp"
#include "experiment/scenario.hpp"
#include "topo/graph.hpp"

namespace ina::cli::plancmd {
namespace {

namespace fs = std::filesystem;
namespace grid = ina::control::grid;

struct SweepSettings {
  std::string kind = "fat-tree-paper";
  std::string programmable = "tor";
  double cap_min = 100, cap_max = 3200;
  bool links = true;
  bool multicast_results = false;
  std::string ps = "last";
  std::string placement = "packed";
};

struct Sweep {
  std::string file;
  std::string name, title;
  SweepSettings base;
  std::vector<std::pair<std::string, SweepSettings>> series;
  std::vector<std::string> schemes = {"grid", "atp", "switchml", "geryon"};
  std::vector<uint64_t> seeds = {1};
  int exact_max_nodes = 2000;  // grid-exact
  std::vector<int> workers;
  std::string x_label = "number of workers";
  std::vector<std::string> metrics = {"avg_rate_gbps", "switch_agg_gbps", "ps_agg_gbps"};
  std::string y_label = "Gbps";
};

// Every metric a sweep record carries.
const std::vector<std::string>& sweep_metrics() {
  static const std::vector<std::string> m = {
      "min_rate_gbps", "avg_rate_gbps", "switch_agg_gbps", "ps_agg_gbps", "max_switch_factor", "ps_factor",
      "max_link_factor", "feasible_min_rate_gbps", "feasible_avg_rate_gbps", "feasible_switch_agg_gbps",
      "feasible_ps_agg_gbps", "lp_lambda_gbps", "lambda_bound_gbps"};
  return m;
}


// A non-empty string.
std::string name_of(const toml::node& n) {
  std::string v = read_string(n);
  if (v.empty()) throw TomlProblem{"must not be empty"};
  return v;
}

// Keys of SweepSettings ([topology] and [job], also allowed in [[series]]).
using SettingReader = void (*)(SweepSettings&, const toml::node&);
const std::vector<std::pair<std::string_view, SettingReader>>& setting_keys() {
  static const std::vector<std::pair<std::string_view, SettingReader>> keys = {
      {"topology.kind", [](SweepSettings& s, const toml::node& n) { s.kind = name_of(n); }},
      {"topology.programmable",
       [](SweepSettings& s, const toml::node& n) {
         s.programmable = name_of(n);
         topo::InaDeployment d;
         try {
           topo::parse_ina_where(s.programmable, d);
         } catch (const topo::TopologyError& e) {
           throw TomlProblem{e.what()};
         }
       }},
      {"topology.capacity_gbps",
       [](SweepSettings& s, const toml::node& n) {
         const auto* arr = n.as_array();
         if (!arr || arr->size() != 2) throw TomlProblem{"expected [MIN, MAX] in Gbps"};
         double v[2];
         for (int i = 0; i < 2; ++i) {
           auto x = (*arr)[static_cast<size_t>(i)].value<double>();
           if (!x || !(*x > 0) || !std::isfinite(*x)) throw TomlProblem{"expected [MIN, MAX] with 0 < MIN <= MAX"};
           v[i] = *x;
         }
         if (v[0] > v[1]) throw TomlProblem{"expected [MIN, MAX] with 0 < MIN <= MAX"};
         s.cap_min = v[0];
         s.cap_max = v[1];
       }},
      {"topology.links", [](SweepSettings& s, const toml::node& n) { s.links = read_boolean(n); }},
      {"topology.multicast_results", [](SweepSettings& s, const toml::node& n) { s.multicast_results = read_boolean(n); }},
      {"job.ps", [](SweepSettings& s, const toml::node& n) { s.ps = name_of(n); }},
      {"job.placement", [](SweepSettings& s, const toml::node& n) { s.placement = read_string(n, {"packed", "random"}); }},
  };
  return keys;
}

// Every key of a sweep file, in file order of sections ([[series]] aside).
const std::vector<std::string_view>& sweep_keys() {
  static const std::vector<std::string_view> keys = [] {
    std::vector<std::string_view> out = {"scenario.name", "scenario.title"};
    for (const auto& [k, r] : setting_keys()) out.push_back(k);
    for (std::string_view k : {"run.schemes", "run.seeds", "run.exact_max_nodes", "sweep.workers", "sweep.label",
                               "output.metrics", "output.y_label"})
      out.push_back(k);
    return out;
  }();
  return keys;
}

// "unknown key" for `key`, listing what its section accepts (of `keys`), or every section when it has none.
TomlProblem unknown_sweep_key(std::string_view key, const std::vector<std::string_view>& keys) {
  const std::string_view section = key.substr(0, key.find('.'));
  std::vector<std::string_view> names, sections;
  for (std::string_view k : keys) {
    const std::string_view s = k.substr(0, k.find('.'));
    if (s == section && k.size() > s.size()) names.push_back(k.substr(s.size() + 1));
    if (std::find(sections.begin(), sections.end(), s) == sections.end()) sections.push_back(s);
  }
  if (names.empty() || section == key) {
    std::vector<std::string> quoted;
    for (std::string_view s : sections) quoted.emplace_back(s);
    return {fmt::format("unknown section [{}] (sections: {})", section, join(quoted, ", "))};
  }
  return unknown_key(section, names);
}

void read_setting(SweepSettings& s, const std::string& origin, const std::string& key, const toml::node& n) {
  for (const auto& [k, reader] : setting_keys()) {
    if (k != key) continue;
    try {
      reader(s, n);
    } catch (const TomlProblem& p) {
      fail_value(origin, key, p, n);
    }
    return;
  }
  std::vector<std::string_view> keys;
  for (const auto& [k, r] : setting_keys()) keys.push_back(k);
  fail_value(origin, key, unknown_sweep_key(key, keys), n);
}

// How `--set` reads a key of a sweep file (ina::apply_sets): its arrays and its strings.
ina::SetShape sweep_set_shape(std::string_view key) {
  for (std::string_view k : {"run.schemes", "run.seeds", "sweep.workers", "output.metrics", "topology.capacity_gbps"})
    if (key == k) return ina::SetShape::Array;
  for (std::string_view k : {"scenario.name", "scenario.title", "topology.kind", "topology.programmable", "job.ps",
                             "job.placement", "sweep.label", "output.y_label"})
    if (key == k) return ina::SetShape::String;
  return ina::SetShape::Value;
}

std::vector<std::string_view> views(const std::vector<std::string>& names) {
  return {names.begin(), names.end()};
}

Sweep read_sweep(const toml::table& root, const std::string& path) {
  Sweep sw;
  sw.file = path;
  sw.name = fs::path(path).stem().string();
  std::vector<const toml::node*> series_nodes;
  for (const auto& [sec_key, node] : root) {
    const std::string sec(sec_key.str());
    if (sec == "series") {
      const auto* arr = node.as_array();
      if (!arr || !arr->is_array_of_tables())
        fail_field(path, "series", "expected [[series]] tables", toml_text(node));
      for (const auto& e : *arr) series_nodes.push_back(&e);
      continue;
    }
    const auto* tbl = node.as_table();
    if (!tbl) {
      const std::string_view k = sec;
      const bool known = std::any_of(sweep_keys().begin(), sweep_keys().end(),
                                     [&](std::string_view key) { return key.substr(0, key.find('.')) == k; });
      if (!known) fail_value(path, sec, unknown_sweep_key(sec, sweep_keys()), node);
      fail_field(path, sec, fmt::format("expected a [{}] table, got {}", sec, toml_type(node)), toml_text(node));
    }
    for (const auto& [k, v] : *tbl) {
      const std::string key = sec + "." + std::string(k.str());
      if (sec == "topology" || sec == "job") {
        read_setting(sw.base, path, key, v);
        continue;
      }
      try {
        if (key == "scenario.name") {
          sw.name = name_of(v);
        } else if (key == "scenario.title") {
          sw.title = name_of(v);
        } else if (key == "run.schemes") {
          sw.schemes = read_strings(v, views(grid::scheme_names()));
        } else if (key == "run.exact_max_nodes") {
          sw.exact_max_nodes = static_cast<int>(read_integer(v, between(1, 100'000'000)));
        } else if (key == "run.seeds") {
          sw.seeds = read_seeds(v);
        } else if (key == "sweep.workers") {
          sw.workers.clear();
          for (const int64_t w : read_integers(v, between(1, std::numeric_limits<int>::max())))
            sw.workers.push_back(static_cast<int>(w));
        } else if (key == "sweep.label") {
          sw.x_label = name_of(v);
        } else if (key == "output.metrics") {
          sw.metrics = read_strings(v, views(sweep_metrics()));
        } else if (key == "output.y_label") {
          sw.y_label = name_of(v);
        } else {
          throw unknown_sweep_key(key, sweep_keys());
        }
      } catch (const TomlProblem& p) {
        fail_value(path, key, p, v);
      }
    }
  }
  if (sw.workers.empty()) fail_field(path, "sweep.workers", "required", "(missing)");
  if (sw.title.empty()) sw.title = sw.name;
  for (const toml::node* n : series_nodes) {
    const auto& tbl = *n->as_table();
    auto name = tbl["name"].value_exact<std::string>();
    if (!name || name->empty())
      fail_field(path, "series.name", "every [[series]] needs a non-empty name", toml_text(*n));
    for (const auto& [other, s] : sw.series)
      if (other == *name) fail_field(path, "series.name", "duplicate series name", *name);
    SweepSettings s = sw.base;
    for (const auto& [key, node] : flatten_toml(tbl))
      if (key != "name") read_setting(s, fmt::format("{} [series '{}']", path, *name), key, *node);
    sw.series.emplace_back(*name, s);
  }
  if (sw.series.empty()) sw.series.emplace_back("", sw.base);
  return sw;
}

// The sweep file with `--set key=value` overrides written into it before it is read.
Sweep load_sweep(const std::string& path, const std::vector<std::string>& sets) {
  toml::table root = parse_toml(read_settings_file(path, "sweep"), path);
  ina::apply_sets(root, sets, sweep_set_shape);
  try {
    return read_sweep(root, path);
  } catch (const ConfigError& e) {
    if (sets.empty()) throw;
    throw ConfigError(e.what() + ina::sets_note(sets));
  }
}

// One (series, worker count, seed): the topology with its INA deployment,
// the job, and every scheme's plan as a result record.
std::vector<exp::Record> run_sweep_point(const Sweep& sw, const std::string& series, const SweepSettings& s,
                                         int workers, uint64_t seed) {
  const std::string origin = series.empty() ? sw.file : fmt::format("{} [series '{}']", sw.file, series);
  topo::InaDeployment d;
  topo::parse_ina_where(s.programmable, d);
  d.min_gbps = s.cap_min;
  d.max_gbps = s.cap_max;
  std::string kind = s.kind;
  if (!topo::generate(kind)) kind = (fs::path(sw.file).parent_path() / kind).string();
  TopologyChoice t = load_topology(kind, d, seed, origin + ": field 'topology.kind'");
  const topo::Graph& g = t.graph;
  const auto hosts = g.hosts();
  topo::NodeId ps = topo::kNoNode;
  if (s.ps == "first") ps = hosts.front();
  else if (s.ps == "last") ps = hosts.back();
  else ps = g.at(s.ps, origin + ": field 'job.ps'");
  topo::Job job;
  job.ps = ps;
  job.workers = topo::place_workers(
      g, ps, workers, s.placement == "random" ? topo::Placement::Random : topo::Placement::Packed, seed);
  grid::GridModel model;
  model.enforce_links = s.links;
  model.multicast_results = s.multicast_results;
  const grid::Instance inst(g, job, model);

  std::vector<exp::Record> out;
  for (const auto& scheme : sw.schemes) {
    const grid::Plan p = grid::plan_scheme(inst, scheme, seed, sw.exact_max_nodes);
    const grid::Plan f = p.rounded ? grid::feasible_rates(inst, p) : p;
    exp::Record r;
    r.series = series;
    r.scheme = scheme;
    r.x = workers;
    r.metrics = {{"min_rate_gbps", p.lambda_gbps},
                 {"avg_rate_gbps", p.avg_rate_gbps},
                 {"switch_agg_gbps", p.switch_agg_gbps},
                 {"ps_agg_gbps", p.ps_load_gbps},
                 {"max_switch_factor", p.max_switch_factor},
                 {"ps_factor", p.ps_factor},
                 {"max_link_factor", p.max_link_factor},
                 {"feasible_min_rate_gbps", f.lambda_gbps},
                 {"feasible_avg_rate_gbps", f.avg_rate_gbps},
                 {"feasible_switch_agg_gbps", f.switch_agg_gbps},
                 {"feasible_ps_agg_gbps", f.ps_load_gbps}};
    if (p.lp_lambda_gbps) r.metrics["lp_lambda_gbps"] = *p.lp_lambda_gbps;
    if (p.lambda_bound_gbps) r.metrics["lambda_bound_gbps"] = *p.lambda_bound_gbps;
    out.push_back(std::move(r));
  }
  return out;
}

int run_grid_sweep(const std::string& file, const std::string& out_dir, const std::vector<std::string>& sets) {
  const Sweep sw = load_sweep(file, sets);
  std::vector<exp::Record> per_seed;
  const size_t total = sw.series.size() * sw.workers.size() * sw.seeds.size();
  size_t done = 0;
  for (const auto& [series, s] : sw.series)
    for (const int w : sw.workers)
      for (const uint64_t seed : sw.seeds) {
        const auto start = std::chrono::steady_clock::now();
        auto recs = run_sweep_point(sw, series, s, w, seed);
        per_seed.insert(per_seed.end(), recs.begin(), recs.end());
        fmt::print(stderr, "[{}/{}] {}{}{} workers, seed {}: {:.2f} s\n", ++done, total, series, series.empty() ? "" : ", ",
                   w, seed, std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
      }
  const auto records = exp::average_over_seeds(per_seed);

  exp::Scenario sc;
  sc.file = sw.file;
  sc.name = sw.name;
  sc.title = sw.title;
  sc.schemes = sw.schemes;
  sc.seeds = sw.seeds;
  sc.sweep_key = "workers";
  for (const int w : sw.workers) sc.sweep_values.push_back(std::to_string(w));
  sc.x_label = sw.x_label;
  for (const auto& [series, s] : sw.series)
    if (!series.empty()) sc.series.push_back({series, {}});
  sc.metrics = sw.metrics;
  sc.y_label = sw.y_label;

  fmt::print("{}\n", sw.title);
  fmt::print("\n{}", exp::format_tables(records, sw.metrics, "workers"));
  if (!out_dir.empty())
    for (const auto& f : exp::write_results(out_dir, sc, records)) fmt::print("wrote {}\n", f);
  return 0;
}

}  // namespace

Runner register_plan_grid_sweep(CLI::App& plan) {
  auto sweep_file = std::make_shared<std::string>();
  auto sweep_out = std::make_shared<std::string>();
  auto sweep_sets = std::make_shared<std::vector<std::string>>();
  auto* s = plan.add_subcommand("grid-sweep", "GRID's large-scale experiments (Figs. 11-16) from a TOML file");
  s->add_option("file", *sweep_file, "sweep TOML file (see scenarios/grid/)")->required();
  s->add_option("--out", *sweep_out, "write results.json, results.csv and PNG plots here");
  s->add_option("--set", *sweep_sets,
                "override any key of the file before it is read (repeatable), arrays as a comma list or TOML array: "
                "--set sweep.workers=8,16 --set run.seeds=1 --set run.schemes=grid,atp");
  s->footer("Points run one at a time (no -j): the GRID planners (grid, grid-published, grid-exact) solve their LPs "
            "and MILPs with COIN-OR CLP/CBC, which ina does not call from several threads at once. To use more "
            "cores, run parts of a sweep as parallel processes, e.g. one per --set sweep.workers=N --out DIR_N.");
  return [s, sweep_file, sweep_out, sweep_sets] {
    return s->parsed() ? guarded([&] { return run_grid_sweep(*sweep_file, *sweep_out, *sweep_sets); }) : -1;
  };
}

}  // namespace ina::cli::plancmd
