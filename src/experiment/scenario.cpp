#include "experiment/scenario.hpp"
#include "core/set_override.hpp"
#include "core/toml_reader.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "experiment/network_point.hpp"
#include "experiment/sparse_point.hpp"
#include "schemes/registry.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <filesystem>
#include <limits>
#include <optional>
#include <string_view>
#include <utility>
#include <variant>

namespace ina::exp {
namespace {

template <class... F>
struct Overloaded : F... {
  using F::operator()...;
};
// Deduction guide: clang < 17 has no CTAD for aggregates (the fuzz build uses clang-14).
template <class... F>
Overloaded(F...) -> Overloaded<F...>;

constexpr double kMiBytes = 1 << 20;  // switch.memory_mb and workload.partition_mb are MiB (workload::kMiB)

// A problem with one value (core/toml_reader.hpp): the caller knows the
// origin and the field and turns it into a ScenarioError.
using Problem = ina::TomlProblem;

[[noreturn]] void fail(std::string_view origin, std::string_view key, std::string_view what,
                       std::string_view value) {
  fail_field(origin, key, what, value);
}

// The allowed values of a field: a numeric interval (ina::Range) or a set of strings.
struct Rule {
  Range range = {};
  std::vector<std::string_view> choices = {};
  Rule() = default;
  Rule(Range r) : range(r) {}
  void check(double v) const { range.check(v); }
  void check(const std::string& v) const { check_choice(v, choices); }
};

Rule one_of(std::vector<std::string_view> choices) {
  Rule r;
  r.choices = std::move(choices);
  return r;
}

// A settings field and a parsed value. The alternatives are in the same order
// (integer, number, boolean, string), so index() names the type in both.
using Member = std::variant<int Settings::*, double Settings::*, bool Settings::*, std::string Settings::*>;
using Value = std::variant<int64_t, double, bool, std::string>;

constexpr std::string_view kExpected[] = {"an integer", "a number", "a boolean", "a string"};
constexpr std::string_view kValueType[] = {"integer", "floating-point", "boolean", "string"};

struct Field {
  std::string_view key;  // "section.key"
  Member member;
  Rule rule = {};
};

// The one table of settings fields: file sections, series overrides, sweep
// values and `--set key=value` all go through it.
const std::vector<Field>& settings_fields() {
  // Every numeric field has physically meaningful bounds: they keep the
  // simulator's integer picosecond arithmetic exact (a link slower than
  // 1 Mbps or a time beyond ~10^6 s would overflow or divide by zero in
  // core/time.hpp) and every allocation a field sizes bounded
  // (experiment/estimate.hpp checks the total against the machine's memory).
  static const std::vector<Field> fields = {
      {"topology.kind", &Settings::topology_kind,
       one_of({"star", "fat-tree", "dragonfly", "leaf-spine", "testbed", "file"})},
      {"topology.hosts", &Settings::hosts, between(1, 4096)},
      {"topology.k", &Settings::k, Range{.lo = 2, .hi = 32, .step = 2}},
      {"topology.hosts_per_edge", &Settings::hosts_per_edge, between(0, 64, "0 = k/2")},
      {"topology.dragonfly", &Settings::dragonfly},
      {"topology.spines", &Settings::spines, between(1, 1024)},
      {"topology.leaves", &Settings::leaves, between(1, 1024)},
      {"topology.file", &Settings::topology_file},
      {"topology.link_gbps", &Settings::link_gbps, between(0.001, 100000, "Gbps: 1 Mbps to 100 Tbps")},
      {"topology.rtt_us", &Settings::rtt_us, between(0.001, 1e6, "microseconds: 1 ns to 1 s")},
      {"topology.queue_kb", &Settings::queue_kb, positive_up_to(1e6, "KB per output queue: at most 1 GB")},
      {"topology.ecn_kb", &Settings::ecn_kb, between(0, 1e6, "KB: at most 1 GB; 0 = off")},
      {"topology.host_ecn", &Settings::host_ecn},
      {"topology.host_delay_us", &Settings::host_delay_us, between(0, 1e6, "microseconds: at most 1 s")},
      {"switch.memory_mb", &Settings::memory_mb, positive_up_to(1024, "MiB of aggregator memory: at most 1 GiB")},
      {"switch.payload_bytes", &Settings::payload_bytes, Range{.lo = 4, .hi = 8192, .step = 4}},
      {"switch.header_bytes", &Settings::header_bytes, between(0, 1500)},
      {"switch.packets", &Settings::packets, one_of({"scenario", "per-scheme"})},
      {"switch.ina", &Settings::ina},
      {"switch.ina_count", &Settings::ina_count, between(-1, 100000, "switches; -1 = use switch.ina")},
      {"switch.ina_percent", &Settings::ina_percent, between(-1, 100, "-1 = use switch.ina")},
      {"switch.memory_mb_per_switch", &Settings::memory_mb_per_switch},
      {"switch.ina_gbps", &Settings::ina_gbps, between(0, 100000, "Gbps; 0 = line rate")},
      {"switch.ring_memory", &Settings::ring_memory, one_of({"region", "pool"})},
      {"switch.pool_policy", &Settings::pool_policy, one_of(schemes::ring_pool_names())},
      {"atp.pool", &Settings::atp_pool, one_of({"hashed", "contiguous"})},
      {"switch.segments", &Settings::segments},
      {"workload.model", &Settings::model,
       one_of({"A", "B", "mixed", "ResNet50", "VGG16", "InceptionV3", "ResNet101", "BERT-base"})},
      {"workload.jobs", &Settings::jobs, between(1, 4096, "at most one job per host")},
      {"workload.workers_per_job", &Settings::workers_per_job, between(1, 64)},
      {"workload.job_workers", &Settings::job_workers},
      {"workload.iterations", &Settings::iterations, between(1, 100000)},
      {"workload.start_jitter_us", &Settings::start_jitter_us, between(0, 1e8, "microseconds: at most 100 s")},
      {"workload.send_jitter_us", &Settings::send_jitter_us, between(0, 1e8, "microseconds: at most 100 s")},
      {"workload.partition_mb", &Settings::partition_mb,
       between(0, 1024, "MiB per gradient partition: at most 1 GiB; 0 = the model's own")},
      {"workload.compute_ms", &Settings::compute_ms, between(0, 1e6, "milliseconds: at most 1000 s")},
      {"workload.workers", &Settings::workers, between(0, 4096, "0 = every host of the topology")},
      {"workload.placement", &Settings::placement, one_of({"rack-packed", "interleaved"})},
      {"workload.job_priorities", &Settings::job_priorities},
      {"workload.gradient_mb", &Settings::gradient_mb, between(0, 4096, "MiB per worker: at most 4 GiB; 0 = the model's")},
      {"workload.gradient_scale", &Settings::gradient_scale, positive_up_to(1, "a fraction of the gradient")},
      {"workload.straggler_sigma_us", &Settings::straggler_sigma_us, between(0, 1e8, "microseconds: at most 100 s")},
      {"workload.straggler_k_us", &Settings::straggler_k_us, between(0, 1e8, "microseconds: at most 100 s")},
      {"workload.step_overhead_us", &Settings::step_overhead_us, between(0, 1e8, "microseconds: at most 100 s")},
      {"workload.step_barrier", &Settings::step_barrier},
      {"workload.rina_allgather_start", &Settings::rina_allgather_start, one_of({"agent", "rack"})},
      {"workload.rina_transport", &Settings::rina_transport, one_of({"paper", "aimd"})},
      {"workload.rina_ag_relay", &Settings::rina_ag_relay, one_of({"members", "agent"})},
      {"workload.eq1_priority", &Settings::eq1_priority, one_of({"packet", "tensor"})},
      {"transport.init_window_kb", &Settings::init_window_kb, positive_up_to(1e6, "KB: at most 1 GB")},
      {"transport.ring_min_rto_us", &Settings::ring_min_rto_us, between(0, 1e8, "microseconds: at most 100 s; 0 = 200 us")},
      {"transport.min_rto_us", &Settings::min_rto_us, between(0, 1e8, "microseconds: at most 100 s; 0 = the profile's")},
      {"transport.reminder_after", &Settings::reminder_after, between(1, 1000)},
      {"transport.ecn_per_window", &Settings::ecn_per_window},
      {"faults.loss", &Settings::loss, between(0, 1)},
      {"faults.dup", &Settings::dup, between(0, 1)},
      {"faults.reorder", &Settings::reorder, between(0, 1)},
      {"faults.reorder_delay_us", &Settings::reorder_delay_us, between(0, 1e8, "microseconds: at most 100 s")},
      {"faults.worker_loss", &Settings::worker_loss, between(0, 1)},
      {"faults.ps_loss", &Settings::ps_loss, between(0, 1)},
      {"faults.fail_rank", &Settings::fail_rank, between(-1, 4095, "-1 = none")},
      {"workload.sparse_model", &Settings::sparse_model, one_of({"", "oa", "se", "deeplight", "ncf", "lstm", "trace"})},
      {"workload.sparse_trace", &Settings::sparse_trace},
      {"workload.sparse_scale", &Settings::sparse_scale, positive_up_to(1, "a fraction of the model")},
      {"workload.sparse_row_width", &Settings::sparse_row_width, between(1, 1024, "values per key")},
      {"workload.sparse_draws", &Settings::sparse_draws, between(0, 1e8, "0 = the model's own")},
      {"zebra.hot_keys", &Settings::hot_keys, between(0, 1e8)},
      {"zebra.principle_p", &Settings::principle_p, between(0, 0.999999, "0 = zebra.hot_keys")},
      {"zebra.principle_c", &Settings::principle_c, positive_up_to(1, "a fraction of switch.memory_mb")},
      {"zebra.sample_rate", &Settings::sample_rate, positive_up_to(1, "a fraction of the batches")},
      {"zebra.profile_iterations", &Settings::profile_iterations, between(0, 100000)},
      {"zebra.registers", &Settings::registers, between(1, 64)},
      {"zebra.placement", &Settings::zebra_placement, one_of({"heat", "random"})},
      {"zebra.layout_aware", &Settings::layout_aware},
      {"zebra.table_entries", &Settings::table_entries, between(1, 1 << 24)},
      {"zebra.pairs", &Settings::pairs, between(1, 9, "the prototype's 192 B packet holds 9")},
      {"zebra.ps_pairs", &Settings::ps_pairs, between(0, 120, "0 = zebra.pairs; 120 fill a 1500-byte frame")},
      {"zebra.ps_ack_every", &Settings::ps_ack_every, between(1, 64)},
      {"topology.machines", &Settings::machines, between(0, 4096, "0 = a NIC per worker")},
      {"zebra.arith", &Settings::zebra_arith, one_of({"fixed", "float16-table"})},
      {"zebra.hot_results", &Settings::zebra_hot_results, one_of({"via-ps", "multicast"})},
      {"zebra.pool", &Settings::sparse_pool},
      {"zebra.dense_workers", &Settings::dense_workers, between(0, 64)},
      {"zebra.dense_mb", &Settings::dense_mb, between(0, 1e5, "MiB per worker")},
      {"zebra.dense_iterations", &Settings::dense_iterations, between(1, 100000)},
      {"faults.fail_at_ms", &Settings::fail_at_ms, between(0, 1e9, "simulated milliseconds")},
      {"run.profile", &Settings::profile, one_of({"paper", "runtime"})},
      {"run.verify", &Settings::verify},
      {"run.step_records", &Settings::step_records},
      {"run.queue_trace", &Settings::queue_trace},
      {"run.queue_trace_links", &Settings::queue_trace_links},
      {"run.queue_trace_from_ms", &Settings::queue_trace_from_ms, between(0, 1e9, "simulated milliseconds")},
      {"run.queue_trace_to_ms", &Settings::queue_trace_to_ms, between(0, 1e9, "simulated milliseconds; 0 = the run's end")},
      {"run.max_sim_ms", &Settings::max_sim_ms, positive_up_to(1e9, "simulated milliseconds: at most ~11.6 days")},
      {"run.threads", &Settings::threads, between(1, 256, "threads one simulation runs on")},
      {"run.partitions", &Settings::partitions, between(0, 256, "partitions per process one simulation splits into (0: the default)")},
  };
  return fields;
}

const Field* find_field(std::string_view key) {
  const auto& fields = settings_fields();
  auto it = std::find_if(fields.begin(), fields.end(), [&](const Field& f) { return f.key == key; });
  return it == fields.end() ? nullptr : &*it;
}

// Stores `v` into the field after checking its type and range.
void assign(Settings& s, const Field& f, const Value& v) {
  auto mismatch = [&] {
    return Problem{fmt::format("expected {}, got {}", kExpected[f.member.index()], kValueType[v.index()])};
  };
  std::visit(Overloaded{
                 [&](int Settings::*m) {
                   const auto* i = std::get_if<int64_t>(&v);
                   if (!i) throw mismatch();
                   f.rule.check(static_cast<double>(*i));
                   if (*i > std::numeric_limits<int>::max())
                     throw Problem{fmt::format("must be <= {}", std::numeric_limits<int>::max())};
                   s.*m = static_cast<int>(*i);
                 },
                 [&](double Settings::*m) {
                   double d = 0;
                   if (const auto* i = std::get_if<int64_t>(&v)) d = static_cast<double>(*i);
                   else if (const auto* x = std::get_if<double>(&v)) d = *x;
                   else throw mismatch();
                   if (!std::isfinite(d)) throw Problem{"must be finite"};
                   f.rule.check(d);
                   s.*m = d;
                 },
                 [&](bool Settings::*m) {
                   const auto* b = std::get_if<bool>(&v);
                   if (!b) throw mismatch();
                   s.*m = *b;
                 },
                 [&](std::string Settings::*m) {
                   const auto* t = std::get_if<std::string>(&v);
                   if (!t) throw mismatch();
                   f.rule.check(*t);
                   s.*m = *t;
                 },
             },
             f.member);
}

template <class T>
std::optional<T> parse_full(std::string_view text) {
  T v{};
  const char* end = text.data() + text.size();
  auto [p, ec] = std::from_chars(text.data(), end, v);
  if (text.empty() || ec != std::errc{} || p != end) return std::nullopt;
  return v;
}

// Text (series overrides, sweep values, --set) is read as the field's type.
Value from_text(const Field& f, const std::string& text) {
  std::optional<Value> v;
  switch (f.member.index()) {
    case 0: if (auto i = parse_full<int64_t>(text)) v = *i; break;
    case 1: if (auto d = parse_full<double>(text)) v = *d; break;
    case 2: if (text == "true" || text == "false") v = text == "true"; break;
    default: v = text;
  }
  if (!v) throw Problem{fmt::format("expected {}", kExpected[f.member.index()])};
  return *v;
}

std::optional<Value> scalar(const toml::node& n) {
  if (auto v = n.value_exact<int64_t>()) return *v;
  if (auto v = n.value_exact<double>()) return *v;
  if (auto v = n.value_exact<bool>()) return *v;
  if (auto v = n.value_exact<std::string>()) return *v;
  return std::nullopt;
}

std::string text_of(const Value& v) {
  return std::visit([](const auto& x) { return fmt::format("{}", x); }, v);
}

std::string text_of(const toml::node& n) { return toml_text(n); }
std::string_view type_of(const toml::node& n) { return toml_type(n); }

Value value_of(const Field& f, const toml::node& n) {
  if (auto v = scalar(n)) return *v;
  throw Problem{fmt::format("expected {}, got {}", kExpected[f.member.index()], type_of(n))};
}

// Keys of the scenario itself (not of Settings); each reads its node into the scenario.
struct MetaField {
  std::string_view key;
  void (*read)(Scenario&, const toml::node&);
};

const std::vector<MetaField>& meta_fields() {
  static const std::vector<MetaField> fields = {
      {"scenario.name", [](Scenario& sc, const toml::node& n) { sc.name = read_string(n); }},
      {"scenario.title", [](Scenario& sc, const toml::node& n) { sc.title = read_string(n); }},
      {"run.schemes",
       [](Scenario& sc, const toml::node& n) {
         // Names and aliases as the registry knows them, stored canonical (results are keyed by them).
         sc.schemes.clear();
         for (const auto& name : read_strings(n)) {
           const schemes::Scheme* scheme = schemes::lookup(name);
           if (!scheme || !(scheme->supports(schemes::Engine::SimStar) ||
                            scheme->supports(schemes::Engine::SimNetwork) ||
                            scheme->supports(schemes::Engine::SimSparse)))
             throw Problem{fmt::format("{} (star: {}; multi-switch topologies: {}; sparse workloads: {})",
                                       scheme ? "not supported by the star simulator, on multi-switch topologies or for sparse workloads"
                                              : "unknown scheme",
                                       schemes::names_text(schemes::Engine::SimStar),
                                       schemes::names_text(schemes::Engine::SimNetwork),
                                       schemes::names_text(schemes::Engine::SimSparse)),
                           name};
           sc.schemes.push_back(scheme->name);
         }
       }},
      {"run.seeds",
       [](Scenario& sc, const toml::node& n) { sc.seeds = read_seeds(n); }},
      {"sweep.key",
       [](Scenario& sc, const toml::node& n) {
         sc.sweep_key = read_string(n);
         if (!find_field(sc.sweep_key)) throw Problem{"not a settings key"};
       }},
      {"sweep.values",
       [](Scenario& sc, const toml::node& n) {
         sc.sweep_values.clear();
         for (const auto& e : read_array(n)) {
           auto v = scalar(e);
           if (!v) throw Problem{fmt::format("expected numbers or strings, got {}", type_of(e)), text_of(e)};
           sc.sweep_values.push_back(text_of(*v));
         }
       }},
      {"sweep.label", [](Scenario& sc, const toml::node& n) { sc.x_label = read_string(n); }},
      {"output.metrics", [](Scenario& sc, const toml::node& n) { sc.metrics = read_strings(n); }},
      {"output.y_label", [](Scenario& sc, const toml::node& n) { sc.y_label = read_string(n); }},
      {"output.x_log",
       [](Scenario& sc, const toml::node& n) { sc.x_log = read_boolean(n); }},
  };
  return fields;
}

const MetaField* find_meta(std::string_view key) {
  const auto& fields = meta_fields();
  auto it = std::find_if(fields.begin(), fields.end(), [&](const MetaField& f) { return f.key == key; });
  return it == fields.end() ? nullptr : &*it;
}

std::string_view section_of(std::string_view key) { return key.substr(0, key.find('.')); }

// All keys allowed in a scenario file (with_meta) or in apply_setting.
std::vector<std::string_view> known_keys(bool with_meta) {
  std::vector<std::string_view> keys;
  for (const auto& f : settings_fields()) keys.push_back(f.key);
  if (with_meta)
    for (const auto& f : meta_fields()) keys.push_back(f.key);
  return keys;
}

std::vector<std::string_view> known_sections(bool with_meta) {
  std::vector<std::string_view> sections;
  for (auto key : known_keys(with_meta))
    if (std::find(sections.begin(), sections.end(), section_of(key)) == sections.end())
      sections.push_back(section_of(key));
  return sections;
}

// "unknown key", listing what the section does accept.
Problem unknown_key(std::string_view key, bool with_meta) {
  std::vector<std::string_view> names;
  for (auto k : known_keys(with_meta))
    if (section_of(k) == section_of(key)) names.push_back(k.substr(k.find('.') + 1));
  if (names.empty())
    return {fmt::format("unknown section [{}] (sections: {})", section_of(key),
                        fmt::join(known_sections(with_meta), ", "))};
  return ina::unknown_key(section_of(key), names);
}

// Reads one key of a file section into the scenario.
void read_key(Scenario& sc, const std::string& key, const toml::node& n) {
  try {
    if (const Field* f = find_field(key)) assign(sc.base, *f, value_of(*f, n));
    else if (const MetaField* m = find_meta(key)) m->read(sc, n);
    else throw unknown_key(key, true);
  } catch (const Problem& p) {
    fail(sc.file, key, p.what, p.value.value_or(text_of(n)));
  }
}

void read_series(Scenario& sc, const toml::node& n) {
  const auto* arr = n.as_array();
  if (!arr || !arr->is_array_of_tables()) fail(sc.file, "series", "expected [[series]] tables", text_of(n));
  for (const auto& elem : *arr) {
    const auto& tbl = *elem.as_table();
    Series se;
    auto name = tbl["name"].value_exact<std::string>();
    if (!name || name->empty()) fail(sc.file, "series.name", "every [[series]] needs a non-empty name", text_of(elem));
    se.name = *name;
    for (const auto& other : sc.series)
      if (other.name == se.name) fail(sc.file, "series.name", "duplicate series name", se.name);
    const std::string origin = fmt::format("{} [series '{}']", sc.file, se.name);
    // Keys are "section.key" (quoted); unquoted dotted keys arrive as nested tables.
    const auto entries = flatten_toml(tbl);
    Settings scratch = sc.base;
    for (const auto& [key, node] : entries) {
      if (key == "name") continue;
      try {
        const Field* f = find_field(key);
        if (!f) throw unknown_key(key, false);
        assign(scratch, *f, value_of(*f, *node));  // typed check here; expand() applies the text
      } catch (const Problem& p) {
        fail(origin, key, p.what, p.value.value_or(text_of(*node)));
      }
      se.overrides[key] = text_of(*node);
    }
    sc.series.push_back(std::move(se));
  }
}

}  // namespace

const std::vector<std::string>& known_schemes() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> out = schemes::names(schemes::Engine::SimStar);
    for (auto& n : schemes::names(schemes::Engine::SimNetwork))
      if (std::find(out.begin(), out.end(), n) == out.end()) out.push_back(std::move(n));
    for (auto& n : schemes::names(schemes::Engine::SimSparse))
      if (std::find(out.begin(), out.end(), n) == out.end()) out.push_back(std::move(n));
    return out;
  }();
  return names;
}

void apply_setting(Settings& s, const std::string& key, const std::string& value, const std::string& origin) {
  try {
    const Field* f = find_field(key);
    if (!f) throw unknown_key(key, false);
    assign(s, *f, from_text(*f, value));
  } catch (const Problem& p) {
    fail(origin, key, p.what, p.value.value_or(value));
  }
}

namespace {

// "a,b,c" split at commas, each part trimmed; "" gives no parts.
std::vector<std::string> split_list(const std::string& text) {
  std::vector<std::string> out;
  if (text.find_first_not_of(" \t") == std::string::npos) return out;
  size_t at = 0;
  while (true) {
    const size_t comma = text.find(',', at);
    std::string part = text.substr(at, comma == std::string::npos ? std::string::npos : comma - at);
    const size_t b = part.find_first_not_of(" \t"), e = part.find_last_not_of(" \t");
    out.push_back(b == std::string::npos ? "" : part.substr(b, e - b + 1));
    if (comma == std::string::npos) break;
    at = comma + 1;
  }
  return out;
}

}  // namespace

std::vector<int> star_job_workers(const Settings& s, const std::string& origin) {
  if (s.job_workers.empty()) return std::vector<int>(static_cast<size_t>(s.jobs), s.workers_per_job);
  std::vector<int> out;
  for (const auto& part : split_list(s.job_workers)) {
    const auto w = parse_full<int>(part);
    if (!w || *w < 1 || *w > 64)
      fail(origin, "workload.job_workers", fmt::format("each job's workers must be an integer in [1, 64], not '{}'", part),
           s.job_workers);
    out.push_back(*w);
  }
  if (out.size() != static_cast<size_t>(s.jobs))
    fail(origin, "workload.job_workers",
         fmt::format("gives {} jobs but workload.jobs is {} (one worker count per job)", out.size(), s.jobs),
         s.job_workers);
  return out;
}

std::vector<std::pair<uint32_t, uint32_t>> star_segments(const Settings& s, const std::string& origin) {
  std::vector<std::pair<uint32_t, uint32_t>> out;
  const uint64_t aggregators = static_cast<uint64_t>(std::floor(s.memory_mb * kMiBytes / s.payload_bytes));
  for (const auto& part : split_list(s.segments)) {
    const size_t colon = part.find(':');
    const auto mem = colon == std::string::npos ? std::nullopt : parse_full<uint32_t>(part.substr(0, colon));
    const auto size = colon == std::string::npos ? std::nullopt : parse_full<uint32_t>(part.substr(colon + 1));
    if (!mem || !size || *size == 0)
      fail(origin, "switch.segments",
           fmt::format("job {}'s segment '{}' is not MemID:Size (aggregators, Size >= 1)", out.size() + 1, part),
           s.segments);
    if (uint64_t{*mem} + *size > aggregators)
      fail(origin, "switch.segments",
           fmt::format("job {}'s segment [{}, {}) lies beyond the {} aggregators of switch.memory_mb = {} "
                       "(switch.payload_bytes = {} B each)",
                       out.size() + 1, *mem, uint64_t{*mem} + *size, aggregators, s.memory_mb, s.payload_bytes),
           s.segments);
    for (size_t j = 0; j < out.size(); ++j)
      if (*mem < out[j].first + out[j].second && out[j].first < *mem + *size)
        fail(origin, "switch.segments",
             fmt::format("job {}'s segment [{}, {}) overlaps job {}'s [{}, {})", out.size() + 1, *mem, *mem + *size,
                         j + 1, out[j].first, out[j].first + out[j].second),
             s.segments);
    out.emplace_back(*mem, *size);
  }
  if (!out.empty() && out.size() != static_cast<size_t>(s.jobs))
    fail(origin, "switch.segments",
         fmt::format("gives {} segments but workload.jobs is {} (one per job)", out.size(), s.jobs), s.segments);
  return out;
}

void validate(const Settings& s, const std::string& origin) {
  const std::vector<int> per_job = star_job_workers(s, origin);
  int64_t need = 0;
  for (int w : per_job) need += w;
  if (need > s.hosts)
    fail(origin, s.job_workers.empty() ? "workload.jobs" : "workload.job_workers",
         s.job_workers.empty()
             ? fmt::format("{} jobs x {} workers need {} hosts but topology.hosts is {}", s.jobs, s.workers_per_job,
                           need, s.hosts)
             : fmt::format("the jobs' workers need {} hosts but topology.hosts is {}", need, s.hosts),
         s.job_workers.empty() ? std::to_string(s.jobs) : s.job_workers);
  if (s.ecn_kb > s.queue_kb)
    fail(origin, "topology.ecn_kb", fmt::format("ECN threshold exceeds topology.queue_kb = {}", s.queue_kb),
         fmt::format("{}", s.ecn_kb));
  const int packet = s.payload_bytes + s.header_bytes;
  if (s.queue_kb * 1000 < packet)
    fail(origin, "topology.queue_kb",
         fmt::format("a queue must hold one packet (switch.payload_bytes + switch.header_bytes = {} B)", packet),
         fmt::format("{}", s.queue_kb));
  if (s.memory_mb * kMiBytes < s.payload_bytes)
    fail(origin, "switch.memory_mb",
         fmt::format("holds no aggregator of switch.payload_bytes = {} B", s.payload_bytes),
         fmt::format("{}", s.memory_mb));
  if (s.partition_mb > 0 && s.partition_mb * kMiBytes < 4)
    fail(origin, "workload.partition_mb", "must be 0 (the model's own) or at least 4 bytes",
         fmt::format("{}", s.partition_mb));
}

void validate(const Settings& s, const std::vector<std::string>& scheme_names, const std::string& origin) {
  if (is_sparse(s) || is_network(s)) {  // star-only settings would be silently ignored: refuse them
    if (!s.job_workers.empty())
      fail(origin, "workload.job_workers", "applies to the dense star only (topology.kind = \"star\")", s.job_workers);
    if (!s.segments.empty())
      fail(origin, "switch.segments", "applies to the dense star only (topology.kind = \"star\")", s.segments);
    if (s.host_delay_us != 0)
      fail(origin, "topology.host_delay_us", "applies to the dense star only (topology.kind = \"star\")",
           fmt::format("{}", s.host_delay_us));
    if (s.ecn_per_window)
      fail(origin, "transport.ecn_per_window", "applies to the dense star only (topology.kind = \"star\")", "true");
    if (is_sparse(s) && s.eq1_priority != "tensor")
      fail(origin, "workload.eq1_priority", "applies to the dense schemes (DSA's Eq. 1), not a sparse run", s.eq1_priority);
  }
  if (s.eq1_priority != "tensor" &&
      std::none_of(scheme_names.begin(), scheme_names.end(), [](const std::string& n) {
        const schemes::Scheme* sc = schemes::lookup(n);
        return sc && sc->eq1_priority;
      }))
    fail(origin, "workload.eq1_priority", "applies to a scheme computing DSA's Eq. 1, and run.schemes has none",
         s.eq1_priority);
  if (s.hosts_per_edge != 0 && s.topology_kind != "fat-tree")
    fail(origin, "topology.hosts_per_edge", fmt::format("sizes a fat-tree's racks, not topology.kind = \"{}\"", s.topology_kind),
         std::to_string(s.hosts_per_edge));
  if (s.threads != 1 && !is_network(s))
    fail(origin, "run.threads",
         fmt::format("splits a multi-switch topology across threads; topology.kind = \"{}\" runs on one (-j runs "
                     "several simulations at once)",
                     s.topology_kind),
         std::to_string(s.threads));
  if (s.partitions != 0 && !is_network(s))
    fail(origin, "run.partitions",
         fmt::format("splits a multi-switch topology by racks; topology.kind = \"{}\" has one switch", s.topology_kind),
         std::to_string(s.partitions));
  if (s.partitions != 0 && s.partitions < s.threads)
    fail(origin, "run.partitions",
         fmt::format("must be at least run.threads ({}), or 0 for the default (one per 64 of the jobs' hosts)", s.threads),
         std::to_string(s.partitions));
  if (is_sparse(s)) return validate_sparse(s, scheme_names, origin);
  {  // Sparse-only settings in a dense scenario would be silently ignored: refuse them.
    const Settings d;
    const std::pair<const char*, bool> sparse_only[] = {
        {"workload.sparse_trace", !s.sparse_trace.empty()},
        {"workload.sparse_scale", s.sparse_scale != d.sparse_scale},
        {"workload.sparse_row_width", s.sparse_row_width != d.sparse_row_width},
        {"workload.sparse_draws", s.sparse_draws != d.sparse_draws},
        {"zebra.hot_keys", s.hot_keys != d.hot_keys},
        {"zebra.principle_p", s.principle_p != d.principle_p},
        {"zebra.principle_c", s.principle_c != d.principle_c},
        {"zebra.sample_rate", s.sample_rate != d.sample_rate},
        {"zebra.profile_iterations", s.profile_iterations != d.profile_iterations},
        {"zebra.registers", s.registers != d.registers},
        {"zebra.placement", s.zebra_placement != d.zebra_placement},
        {"zebra.layout_aware", s.layout_aware != d.layout_aware},
        {"zebra.table_entries", s.table_entries != d.table_entries},
        {"zebra.pairs", s.pairs != d.pairs},
        {"zebra.ps_pairs", s.ps_pairs != d.ps_pairs},
        {"zebra.ps_ack_every", s.ps_ack_every != d.ps_ack_every},
        {"topology.machines", s.machines != d.machines},
        {"zebra.arith", s.zebra_arith != d.zebra_arith},
        {"zebra.hot_results", s.zebra_hot_results != d.zebra_hot_results},
        {"zebra.pool", s.sparse_pool != d.sparse_pool},
        {"zebra.dense_workers", s.dense_workers != d.dense_workers},
        {"zebra.dense_mb", s.dense_mb != d.dense_mb},
        {"zebra.dense_iterations", s.dense_iterations != d.dense_iterations}};
    for (const auto& [key, set] : sparse_only)
      if (set) fail(origin, key, "applies to sparse scenarios only (set workload.sparse_model)", "set");
  }
  if (is_network(s)) return validate_network(s, scheme_names, origin);
  // The multi-switch collectives' settings on the star would be silently ignored: refuse them.
  for (const auto& [key, value] : collective_settings_set(s))
    fail(origin, key, "applies to the multi-switch collectives, not topology.kind = \"star\"", value);
  if (s.step_barrier)
    fail(origin, "workload.step_barrier",
         "applies to the ring collectives (rar, h-ar, rina) on multi-switch topologies, not topology.kind = \"star\"",
         "true");
  if (s.host_ecn)
    fail(origin, "topology.host_ecn",
         "applies to multi-switch topologies; the star's NICs never mark (switch ports do)",
         "true");
  if (s.atp_pool != "hashed")
    fail(origin, "atp.pool", "applies to the sharded PSes of PS-based INA on multi-switch topologies, not the star",
         s.atp_pool);
  if (!s.segments.empty()) {
    for (const auto& name : scheme_names)
      if (!schemes::find(name).segments)
        fail(origin, "switch.segments",
             fmt::format("applies to schemes whose jobs get segments (p4inc-aoi), and run.schemes has {}", name),
             s.segments);
    star_segments(s, origin);
  }
  for (const auto& name : scheme_names) {  // equal segments: at least one aggregator per job
    const double aggregators = std::floor(s.memory_mb * kMiBytes / s.payload_bytes);
    if (schemes::find(name).segments && s.segments.empty() && aggregators < s.jobs)
      fail(origin, "switch.memory_mb",
           fmt::format("{} gives each job a segment: {:.0f} aggregators of {} B for {} jobs", name, aggregators,
                       s.payload_bytes, s.jobs),
           fmt::format("{}", s.memory_mb));
  }
  for (const auto& name : scheme_names)
    if (!schemes::find(name).supports(schemes::Engine::SimStar))
      fail(origin, "run.schemes",
           fmt::format("{} runs only on multi-switch topologies (topology.kind = fat-tree, dragonfly, leaf-spine, "
                       "testbed or file); on the star run one of: {}",
                       name, schemes::names_text(schemes::Engine::SimStar)),
           name);
  validate(s, origin);
  // An isolated scheme (SwitchML) gives each job two pools of at least one slot (cluster::register_jobs).
  const double aggregators = std::floor(s.memory_mb * kMiBytes / s.payload_bytes);
  for (const auto& name : scheme_names) {
    if (!schemes::find(name).isolated || aggregators / s.jobs >= 2) continue;
    fail(origin, "switch.memory_mb",
         fmt::format("{} needs 2 aggregators per job: {:.0f} aggregators of {} B for {} jobs", name, aggregators,
                     s.payload_bytes, s.jobs),
         fmt::format("{}", s.memory_mb));
  }
}

std::vector<Point> expand(const Scenario& sc) {
  const std::vector<Series> all = sc.series.empty() ? std::vector<Series>{Series{}} : sc.series;
  auto where = [&](std::vector<std::string> context) {
    return context.empty() ? sc.file : fmt::format("{} [{}]", sc.file, fmt::join(context, ", "));
  };
  std::vector<Point> points;
  for (const Series& se : all) {
    std::vector<std::string> context;
    if (!se.name.empty()) context.push_back(fmt::format("series '{}'", se.name));
    Settings settings = sc.base;
    for (const auto& [key, value] : se.overrides) apply_setting(settings, key, value, where(context));
    if (sc.sweep_key.empty()) {
      validate(settings, sc.schemes, where(context));
      points.push_back({se.name, 0, settings});
      continue;
    }
    for (const std::string& value : sc.sweep_values) {
      std::vector<std::string> at = context;
      at.push_back(fmt::format("sweep {} = {}", sc.sweep_key, value));
      const std::string origin = where(at);
      Point p{se.name, 0, settings};
      apply_setting(p.settings, sc.sweep_key, value, origin);
      auto x = parse_full<double>(value);
      if (!x) fail(origin, "sweep.values", "must be numeric (it is the x axis)", value);
      p.x = *x;
      validate(p.settings, sc.schemes, origin);
      points.push_back(std::move(p));
    }
  }
  return points;
}

// How `--set` reads a scenario key: the arrays and the strings of the file.
static SetShape scenario_set_shape(std::string_view key) {
  for (std::string_view k : {"run.schemes", "run.seeds", "sweep.values", "output.metrics"})
    if (key == k) return SetShape::Array;
  for (std::string_view k : {"scenario.name", "scenario.title", "sweep.key", "sweep.label", "output.y_label"})
    if (key == k) return SetShape::String;
  if (const Field* f = find_field(key)) return f->member.index() == 3 ? SetShape::String : SetShape::Value;
  return SetShape::Value;
}

static Scenario read_scenario(toml::table root, const std::string& origin);

Scenario parse_scenario(const std::string& toml_text, const std::string& origin, const std::vector<std::string>& sets) {
  toml::table root = parse_toml(toml_text, origin);
  if (sets.empty()) return read_scenario(std::move(root), origin);
  apply_sets(root, sets, scenario_set_shape);
  Scenario sc;
  try {
    sc = read_scenario(std::move(root), origin);
  } catch (const ScenarioError& e) {
    throw ScenarioError(e.what() + sets_note(sets));
  }
  // The sweep would overwrite such a value at every point: refuse it rather than ignore it.
  for (const auto& kv : sets)
    if (!sc.sweep_key.empty() && set_key(kv) == sc.sweep_key)
      throw ScenarioError(fmt::format("--set {}: {} is the sweep's key (sweep.key), set at every point by "
                                      "sweep.values; give the points with --set sweep.values=V1,V2,...",
                                      kv, sc.sweep_key));
  return sc;
}

void apply_setting_sets(Scenario& sc, const std::vector<std::string>& sets) {
  toml::table root;
  apply_sets(root, sets, scenario_set_shape);
  Scenario next = sc;
  for (const auto& kv : sets) {
    const std::string key = set_key(kv);
    const Field* f = find_field(key);
    if (!f) continue;  // not a setting: read with the file already
    const toml::node* n = root.at_path(key).node();
    try {
      assign(next.base, *f, value_of(*f, *n));
    } catch (const Problem& p) {
      fail("--set", key, p.what, p.value.value_or(text_of(*n)));
    }
  }
  expand(next);
  sc = std::move(next);
}

void keep_series(Scenario& sc, const std::vector<std::string>& names) {
  if (names.empty()) return;
  std::vector<std::string> have;
  for (const auto& se : sc.series) have.push_back(fmt::format("'{}'", se.name));
  for (const auto& n : names) {
    const bool found = std::any_of(sc.series.begin(), sc.series.end(), [&](const Series& se) { return se.name == n; });
    if (!found)
      throw ScenarioError(fmt::format("{}: --series '{}': no such series (the file has {})", sc.file, n,
                                      have.empty() ? "none: no [[series]] table" : fmt::format("{}", fmt::join(have, ", "))));
  }
  std::erase_if(sc.series, [&](const Series& se) { return std::find(names.begin(), names.end(), se.name) == names.end(); });
}

static Scenario read_scenario(toml::table root, const std::string& origin) {
  Scenario sc;
  sc.file = origin;
  sc.base.scenario_dir = std::filesystem::path(origin).parent_path().string();
  const auto sections = known_sections(true);
  for (const auto& [name, node] : root) {
    const std::string section(name.str());
    if (section == "series") {
      read_series(sc, node);
      continue;
    }
    if (std::find(sections.begin(), sections.end(), section) == sections.end())
      fail(origin, section,
           fmt::format("unknown section (sections: {}, [[series]])", fmt::join(sections, ", ")), text_of(node));
    const auto* tbl = node.as_table();
    if (!tbl) fail(origin, section, fmt::format("expected a [{}] table, got {}", section, type_of(node)), text_of(node));
    for (const auto& [key, value] : *tbl) read_key(sc, section + "." + std::string(key.str()), value);
  }
  if (sc.sweep_key.empty() != sc.sweep_values.empty())
    fail(origin, sc.sweep_key.empty() ? "sweep.key" : "sweep.values",
         "sweep.key and sweep.values must be given together", "(missing)");
  if (sc.x_label.empty()) sc.x_label = sc.sweep_key;
  // A multi-switch scenario's runs have no JCT: its default metric is the per-worker throughput.
  if (is_network(sc.base) && !root["output"]["metrics"]) sc.metrics = {"throughput_gbps"};
  if (is_sparse(sc.base) && !root["output"]["metrics"]) sc.metrics = {"agg_throughput_gbps"};
  expand(sc);  // every concrete point is checked at load time, before anything runs
  return sc;
}

void apply_overlay(Scenario& sc, const std::string& toml_text, const std::string& origin) {
  const toml::table root = parse_toml(toml_text, origin);
  if (root.empty()) throw ScenarioError(fmt::format("{}: empty overlay (no section or key)", origin));
  Scenario next = sc;  // sc stays as it was if anything below throws
  std::string name, title;
  for (const auto& [sec, node] : root) {
    const std::string section(sec.str());
    const auto* tbl = node.as_table();
    if (!tbl) fail(origin, section, fmt::format("expected a [{}] table, got {}", section, type_of(node)), text_of(node));
    for (const auto& [k, v] : *tbl) {
      const std::string key = section + "." + std::string(k.str());
      try {
        if (section == "overlay") {
          if (key != "overlay.name" && key != "overlay.title") throw Problem{"unknown key (known in [overlay]: name, title)"};
          (key == "overlay.name" ? name : title) = read_string(v);
          continue;
        }
        const Field* f = find_field(key);
        if (!f)
          throw find_meta(key) ? Problem{"an overlay sets settings only (not the scenario's runs, sweep or output)"}
                               : unknown_key(key, false);
        assign(next.base, *f, value_of(*f, v));
      } catch (const Problem& p) {
        fail(origin, key, p.what, p.value.value_or(text_of(v)));
      }
    }
  }
  if (!name.empty()) next.name += "-" + name;
  if (!title.empty()) next.title += " | " + title;
  try {
    expand(next);  // every concrete point checked again, with the overlay
  } catch (const ScenarioError& e) {
    throw ScenarioError(fmt::format("{} (with the overlay {})", e.what(), origin));
  }
  sc = std::move(next);
}

Scenario load_overlay_file(Scenario sc, const std::string& path) {
  apply_overlay(sc, read_settings_file(path, "overlay"), path);
  return sc;
}

Scenario load_scenario_file(const std::string& path, const std::vector<std::string>& sets) {
  // An empty file parses as "all defaults" and would silently run the
  // built-in scenario (a directory, which reads as empty, is refused too).
  const std::string body = read_settings_file(path, "scenario");
  Scenario sc = parse_scenario(body, path, sets);
  // Nothing but whitespace and comments: the file sets nothing at all.
  if (parse_toml(body, path).empty())
    throw ScenarioError(fmt::format("{}: empty scenario file (no section or key; it would run the built-in defaults)",
                                    path));
  return sc;
}

}  // namespace ina::exp
