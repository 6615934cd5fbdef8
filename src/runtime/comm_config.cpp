// CommConfig: validation and loading from TOML and INA_* environment
// variables. One table of settings serves both sources, so a key and its
// variable cannot drift apart.
#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include <fmt/format.h>

#include "core/toml_reader.hpp"
#include "runtime/communicator.hpp"
#include "runtime/auth.hpp"

namespace ina {

namespace {

uint64_t parse_uint(const std::string& text, uint64_t lo, uint64_t hi, const std::string& where) {
  uint64_t v = 0;
  const auto [p, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc{} || p != text.data() + text.size() || v < lo || v > hi)
    throw InputError(fmt::format("invalid {} '{}': expected an integer in {}..{}", where, text, lo, hi));
  return v;
}

double parse_double(const std::string& text, double lo, double hi, const std::string& where) {
  char* end = nullptr;
  const double v = std::strtod(text.c_str(), &end);
  if (text.empty() || end != text.c_str() + text.size() || !std::isfinite(v) || v < lo || v > hi)
    throw InputError(fmt::format("invalid {} '{}': expected a number in [{}, {}]", where, text, lo, hi));
  return v;
}

bool parse_bool(const std::string& text, const std::string& where) {
  if (text == "true" || text == "1") return true;
  if (text == "false" || text == "0") return false;
  throw InputError(fmt::format("invalid {} '{}': expected true or false (or 1 or 0)", where, text));
}

Time parse_ms(const std::string& text, const std::string& where) {
  return from_ms(parse_double(text, 0.001, 86'400'000, where));
}

struct Setting {
  const char* section;
  const char* key;
  const char* env;
  void (*set)(CommConfig&, const std::string& value, const std::string& where);
};

const Setting kSettings[] = {
    // First: a profile sets several fields that the keys below may override.
    {"communicator", "profile", "INA_PROFILE",
     [](CommConfig& c, const std::string& v, const std::string& w) {
       const host::Profile* p = host::find_profile(v);
       if (!p) throw InputError(fmt::format("invalid {} '{}': expected {}", w, v, host::profile_names()));
       c.apply_profile(*p);
     }},
    {"communicator", "switch", "INA_SWITCH",
     [](CommConfig& c, const std::string& v, const std::string& w) {
       rt::Endpoint::parse(v);  // reject a bad address here, naming the setting
       c.switch_addr = v;
       (void)w;
     }},
    {"communicator", "job_key", "INA_JOB_KEY",
     [](CommConfig& c, const std::string& v, const std::string& w) {
       rt::parse_key(v, w);  // 64 hex digits, or an error naming the setting
       c.job_key = v;
     }},
    {"communicator", "bind_ip", "INA_BIND_IP",
     [](CommConfig& c, const std::string& v, const std::string&) {
       if (!v.empty()) rt::Endpoint::parse_ip(v);  // reject a bad address here, naming it
       c.bind_ip = v;
     }},
    {"communicator", "job", "INA_JOB",
     [](CommConfig& c, const std::string& v, const std::string& w) { c.job = static_cast<uint16_t>(parse_uint(v, 1, 65535, w)); }},
    {"communicator", "rank", "INA_RANK",
     [](CommConfig& c, const std::string& v, const std::string& w) { c.rank = static_cast<unsigned>(parse_uint(v, 0, 63, w)); }},
    {"communicator", "workers", "INA_WORKERS",
     [](CommConfig& c, const std::string& v, const std::string& w) { c.nworkers = static_cast<unsigned>(parse_uint(v, 1, 64, w)); }},
    {"communicator", "payload", "INA_PAYLOAD",
     [](CommConfig& c, const std::string& v, const std::string& w) {
       c.payload_values = static_cast<uint16_t>(parse_uint(v, 0, 16000, w));
     }},
    {"communicator", "priority", "INA_PRIORITY",
     [](CommConfig& c, const std::string& v, const std::string& w) {
       c.priority = static_cast<uint32_t>(parse_uint(v, 1, INT32_MAX, w));
     }},
    {"communicator", "scale", "INA_SCALE",
     [](CommConfig& c, const std::string& v, const std::string& w) {
       if (v == "agree") {
         c.scale_mode = ScaleMode::Agree;
         return;
       }
       c.scale_mode = ScaleMode::Fixed;
       c.fixed_scale = parse_double(v, 1e-300, 1e300, w + " (\"agree\" or a positive scale)");
     }},
    {"communicator", "window_kb", "INA_WINDOW_KB",
     [](CommConfig& c, const std::string& v, const std::string& w) { c.window_kb = parse_double(v, 0.001, 1e7, w); }},
    {"communicator", "max_window_kb", "INA_MAX_WINDOW_KB",
     [](CommConfig& c, const std::string& v, const std::string& w) { c.max_window_kb = parse_double(v, 0.001, 1e7, w); }},
    {"communicator", "retain_ops", "INA_RETAIN_OPS",
     [](CommConfig& c, const std::string& v, const std::string& w) { c.retain_ops = parse_uint(v, 1, 1u << 20, w); }},
    {"communicator", "min_rto_ms", "INA_MIN_RTO_MS",
     [](CommConfig& c, const std::string& v, const std::string& w) { c.min_rto = parse_ms(v, w); }},
    {"communicator", "delay_target_ms", "INA_DELAY_TARGET_MS",
     [](CommConfig& c, const std::string& v, const std::string& w) {
       c.delay_target = from_ms(parse_double(v, 0, 86'400'000, w));
     }},
    {"communicator", "fast_retransmit", "INA_FAST_RETRANSMIT",
     [](CommConfig& c, const std::string& v, const std::string& w) { c.fast_retransmit = parse_bool(v, w); }},
    {"communicator", "offload", "INA_OFFLOAD",
     [](CommConfig& c, const std::string& v, const std::string& w) { c.offload = parse_bool(v, w); }},
    {"communicator", "datagram_auth", "INA_DATAGRAM_AUTH",
     [](CommConfig& c, const std::string& v, const std::string& w) { c.datagram_auth = parse_bool(v, w); }},
    {"communicator", "connect_timeout_ms", "INA_CONNECT_TIMEOUT_MS",
     [](CommConfig& c, const std::string& v, const std::string& w) { c.connect_timeout = parse_ms(v, w); }},
    {"communicator", "rendezvous_timeout_ms", "INA_RENDEZVOUS_TIMEOUT_MS",
     [](CommConfig& c, const std::string& v, const std::string& w) { c.rendezvous_timeout = parse_ms(v, w); }},
    {"communicator", "timeout_ms", "INA_TIMEOUT_MS",
     [](CommConfig& c, const std::string& v, const std::string& w) { c.progress_timeout = parse_ms(v, w); }},
    {"communicator", "close_timeout_ms", "INA_CLOSE_TIMEOUT_MS",
     [](CommConfig& c, const std::string& v, const std::string& w) { c.close_timeout = parse_ms(v, w); }},
    {"faults", "loss", "INA_LOSS",
     [](CommConfig& c, const std::string& v, const std::string& w) { c.faults.loss = parse_double(v, 0, 0.999, w); }},
    {"faults", "duplicate", "INA_DUPLICATE",
     [](CommConfig& c, const std::string& v, const std::string& w) { c.faults.duplicate = parse_double(v, 0, 0.999, w); }},
    {"faults", "reorder", "INA_REORDER",
     [](CommConfig& c, const std::string& v, const std::string& w) { c.faults.reorder = parse_double(v, 0, 0.999, w); }},
    {"faults", "reorder_us", "INA_REORDER_US",
     [](CommConfig& c, const std::string& v, const std::string& w) {
       c.faults.reorder_delay = from_us(parse_double(v, 0, 1e7, w));
     }},
    {"faults", "delay_us", "INA_DELAY_US",
     [](CommConfig& c, const std::string& v, const std::string& w) { c.faults.delay = from_us(parse_double(v, 0, 1e7, w)); }},
    {"faults", "seed", "INA_FAULT_SEED",
     [](CommConfig& c, const std::string& v, const std::string& w) { c.faults.seed = parse_uint(v, 0, UINT64_MAX, w); }},
};

const Setting& find_setting(const std::string& section, const std::string& key, const std::string& origin) {
  for (const auto& s : kSettings)
    if (section == s.section && key == s.key) return s;
  throw InputError(fmt::format("{}: unknown key {}.{}", origin, section, key));
}

// A TOML scalar as the text the setters parse (the reader's rendering: a
// string unquoted, a number or a boolean as written).
std::string scalar_text(const toml::node& n, const std::string& where) {
  if (n.is_string() || n.is_integer() || n.is_floating_point() || n.is_boolean()) return toml_text(n);
  throw InputError(fmt::format("invalid {}: expected a number, a boolean or a string", where));
}

}  // namespace

void CommConfig::apply_profile(const host::Profile& p) {
  profile = p.name;
  retain_ops = p.retain_ops;
  min_rto = p.min_rto;
  fast_retransmit = p.fast_retransmit;
  delay_target = p.delay_target;
}

void CommConfig::validate() const {
  rt::Endpoint::parse(switch_addr);
  if (!bind_ip.empty()) rt::Endpoint::parse_ip(bind_ip);
  // (Each setting by its three names: the key of [communicator], INA_*, the flag of `ina worker`.)
  if (job == 0) throw InputError("communicator: job ids start at 1 (job, INA_JOB, --job)");
  if (nworkers == 0 || nworkers > kMaxWireWorkers)
    throw InputError(fmt::format("communicator: the worker count (workers, INA_WORKERS, --workers) must be in 1..{}, got {}",
                                 kMaxWireWorkers, nworkers));
  if (rank >= nworkers)
    throw InputError(fmt::format("communicator: rank {} (rank, INA_RANK, --rank) is not below the worker count {} "
                                 "(workers, INA_WORKERS, --workers)", rank, nworkers));
  if (scale_mode == ScaleMode::Fixed && !(fixed_scale > 0 && std::isfinite(fixed_scale)))
    throw InputError("communicator: a fixed scale must be a positive number");
  if (!(window_kb > 0) || !(max_window_kb > 0)) throw InputError("communicator: window sizes must be > 0");
  if (retain_ops == 0) throw InputError("communicator: retain_ops must be >= 1");
  if (priority == 0) throw InputError("communicator: priority must be >= 1");
  for (Time t : {min_rto, connect_timeout, rendezvous_timeout, progress_timeout, close_timeout})
    if (t <= 0) throw InputError("communicator: timeouts must be > 0");
  faults.validate();
}

nlohmann::json CommConfig::to_json() const {
  return {{"switch", switch_addr}, {"bind_ip", bind_ip}, {"job", job}, {"rank", rank}, {"workers", nworkers},
          {"payload", payload_values}, {"priority", priority},
          {"scale", scale_mode == ScaleMode::Agree ? nlohmann::json("agree") : nlohmann::json(fixed_scale)},
          {"profile", profile}, {"window_kb", window_kb}, {"max_window_kb", max_window_kb}, {"retain_ops", retain_ops},
          {"min_rto_ms", to_ms(min_rto)}, {"fast_retransmit", fast_retransmit}, {"offload", offload},
          {"datagram_auth", datagram_auth},
          {"delay_target_ms", to_ms(delay_target)}, {"connect_timeout_ms", to_ms(connect_timeout)},
          {"rendezvous_timeout_ms", to_ms(rendezvous_timeout)}, {"timeout_ms", to_ms(progress_timeout)},
          {"close_timeout_ms", to_ms(close_timeout)}, {"faults", faults.to_json()}};
}

CommConfig CommConfig::from_toml_string(const std::string& text, const std::string& origin, CommConfig base) {
  // The strict reader's syntax error, as the runtime's error type (the one
  // the C++ API and the Python package throw).
  toml::table root;
  try {
    root = parse_toml(text, origin);
  } catch (const ConfigError& e) {
    throw InputError(e.what());
  }
  // The profile first, whatever the key order: the other keys override its fields.
  if (const auto* p = root["communicator"]["profile"].node()) {
    const std::string where = fmt::format("{}: communicator.profile", origin);
    kSettings[0].set(base, scalar_text(*p, where), where);
  }
  for (const auto& [sec, node] : root) {
    const std::string section(sec.str());
    const auto* table = node.as_table();
    bool known_section = false;
    for (const auto& s : kSettings) known_section |= section == s.section;
    if (!known_section || !table)
      throw InputError(fmt::format("{}: unknown section [{}] (expected [communicator] and [faults])", origin, section));
    for (const auto& [k, v] : *table) {
      const std::string key(k.str());
      const Setting& found = find_setting(section, key, origin);
      if (&found == &kSettings[0]) continue;  // the profile, applied above
      const std::string where = fmt::format("{}: {}.{}", origin, section, key);
      found.set(base, scalar_text(v, where), where);
    }
  }
  return base;
}

CommConfig CommConfig::from_settings(const std::vector<std::pair<std::string, std::string>>& settings,
                                     const std::string& origin, CommConfig base) {
  auto split = [&](const std::string& name) {
    const size_t dot = name.find('.');
    return dot == std::string::npos ? std::pair<std::string, std::string>{"communicator", name}
                                    : std::pair<std::string, std::string>{name.substr(0, dot), name.substr(dot + 1)};
  };
  // The profile first, as in a file: the other keys override its fields.
  for (int pass = 0; pass < 2; ++pass)
    for (const auto& [name, value] : settings) {
      const auto [section, key] = split(name);
      const Setting& s = find_setting(section, key, origin);
      if ((&s == &kSettings[0]) != (pass == 0)) continue;
      s.set(base, value, fmt::format("{}: {}.{}", origin, section, key));
    }
  return base;
}

CommConfig CommConfig::from_toml_file(const std::string& path, CommConfig base) {
  // A regular file of at most 1 MiB (a configuration is a few hundred bytes):
  // a directory is not an empty configuration, nor is /dev/zero an endless one.
  const std::string text = rt::read_bounded_file(path, 1 << 20, fmt::format("communicator configuration '{}'", path),
                                                 "TOML settings ([communicator], [faults])");
  return from_toml_string(text, path, std::move(base));
}

CommConfig CommConfig::from_toml_file(const std::string& path) { return from_toml_file(path, CommConfig{}); }
CommConfig CommConfig::from_env() { return from_env(CommConfig{}); }

CommConfig CommConfig::from_env(CommConfig base) {
  if (const char* path = std::getenv("INA_CONFIG"); path && *path) {
    try {
      base = from_toml_file(path, std::move(base));
    } catch (const RuntimeError& e) {
      throw InputError(fmt::format("INA_CONFIG: {}", e.what()));
    }
  }
  for (const auto& s : kSettings)
    if (const char* v = std::getenv(s.env)) s.set(base, v, s.env);
  return base;
}

double window_packets(double kb, size_t datagram_bytes) {
  return std::max(1.0, std::floor(kb * 1024 / static_cast<double>(datagram_bytes)));
}

}  // namespace ina
