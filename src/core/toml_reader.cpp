#include "core/toml_reader.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace ina {

toml::table parse_toml(std::string_view text, std::string_view origin) {
  try {
    return toml::parse(text, origin);
  } catch (const toml::parse_error& e) {
    throw ConfigError(fmt::format("{}:{}:{}: TOML syntax error: {}", origin, e.source().begin.line,
                                  e.source().begin.column, e.description()));
  }
}

std::string read_settings_file(const std::string& path, std::string_view what) {
  // A directory opens and reads as empty: refuse it (and sockets, block
  // devices) rather than read nothing.
  std::error_code ec;
  const auto st = std::filesystem::status(path, ec);
  if (std::filesystem::is_directory(st))
    throw ConfigError(fmt::format("{}: is a directory, not {} {} file", path,
                                  std::string_view("aeiou").find(what.substr(0, 1)) != std::string_view::npos ? "an" : "a",
                                  what));
  if (std::filesystem::exists(st) && !std::filesystem::is_regular_file(st) && !std::filesystem::is_fifo(st) &&
      !std::filesystem::is_character_file(st))
    throw ConfigError(fmt::format("{}: not a regular file", path));
  std::ifstream in(path, std::ios::binary);
  if (!in) throw ConfigError(fmt::format("{}: cannot open {} file (missing or unreadable)", path, what));
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) throw ConfigError(fmt::format("{}: cannot read {} file", path, what));
  return text.str();
}

namespace {

// The parts with `sep` between them. (Not fmt::join: with strings it trips a
// GCC 12 false -Wstringop-overflow in fmt 9.)
template <class S>
std::string joined(const std::vector<S>& parts, std::string_view sep = ", ", std::string_view open = "",
                   std::string_view close = "") {
  std::string out(open);
  for (size_t i = 0; i < parts.size(); ++i) {
    if (i > 0) out += sep;
    out += parts[i];
  }
  out += close;
  return out;
}

// A scalar's text (strings unquoted), or nothing for arrays, tables and dates.
std::optional<std::string> scalar_text(const toml::node& n) {
  if (auto v = n.value_exact<int64_t>()) return fmt::format("{}", *v);
  if (auto v = n.value_exact<double>()) return fmt::format("{}", *v);
  if (auto v = n.value_exact<bool>()) return fmt::format("{}", *v);
  if (auto v = n.value_exact<std::string>()) return *v;
  return std::nullopt;
}

}  // namespace

std::string toml_text(const toml::node& n) {
  if (auto v = scalar_text(n)) return *v;
  std::vector<std::string> parts;
  if (const auto* arr = n.as_array()) {
    for (const auto& e : *arr) parts.push_back(toml_text(e));
    return joined(parts, ", ", "[", "]");
  }
  if (const auto* tbl = n.as_table()) {
    for (const auto& [k, e] : *tbl) parts.push_back(fmt::format("{} = {}", k.str(), toml_text(e)));
    return joined(parts, ", ", "{", "}");
  }
  return toml_literal(n);  // dates and times
}

std::string toml_literal(const toml::node& n) {
  std::ostringstream os;
  n.visit([&os](const auto& x) { os << x; });
  return os.str();
}

std::string_view toml_type(const toml::node& n) {
  if (n.is_integer()) return "integer";
  if (n.is_floating_point()) return "floating-point";
  if (n.is_boolean()) return "boolean";
  if (n.is_string()) return "string";
  if (n.is_array()) return "array";
  if (n.is_table()) return "table";
  return "date-time";
}

void Range::check(double v) const {
  if ((lo_open ? v > lo : v >= lo) && v <= hi && (step == 0 || std::fmod(v, step) == 0)) return;
  const std::string note = why.empty() ? "" : fmt::format(" ({})", why);
  if (step != 0) throw TomlProblem{fmt::format("must be a multiple of {} in [{}, {}]{}", step, lo, hi, note)};
  if (hi < std::numeric_limits<double>::infinity())
    throw TomlProblem{fmt::format("must be in {}{}, {}]{}", lo_open ? "(" : "[", lo, hi, note)};
  throw TomlProblem{fmt::format("must be {} {}{}", lo_open ? ">" : ">=", lo, note)};
}

void check_choice(std::string_view v, const std::vector<std::string_view>& choices) {
  if (!choices.empty() && std::find(choices.begin(), choices.end(), v) == choices.end())
    throw TomlProblem{fmt::format("must be one of: {}", joined(choices))};
}

int64_t read_integer(const toml::node& n, const Range& range) {
  const auto v = n.value_exact<int64_t>();
  if (!v) throw TomlProblem{fmt::format("expected an integer, got {}", toml_type(n))};
  range.check(static_cast<double>(*v));
  return *v;
}

double read_number(const toml::node& n, const Range& range) {
  double d = 0;
  if (const auto i = n.value_exact<int64_t>()) d = static_cast<double>(*i);
  else if (const auto x = n.value_exact<double>()) d = *x;
  else throw TomlProblem{fmt::format("expected a number, got {}", toml_type(n))};
  if (!std::isfinite(d)) throw TomlProblem{"must be finite"};
  range.check(d);
  return d;
}

bool read_boolean(const toml::node& n) {
  const auto v = n.value_exact<bool>();
  if (!v) throw TomlProblem{fmt::format("expected a boolean, got {}", toml_type(n))};
  return *v;
}

std::string read_string(const toml::node& n, const std::vector<std::string_view>& choices) {
  auto v = n.value_exact<std::string>();
  if (!v) throw TomlProblem{fmt::format("expected a string, got {}", toml_type(n))};
  check_choice(*v, choices);
  return std::move(*v);
}

const toml::array& read_array(const toml::node& n) {
  const auto* arr = n.as_array();
  if (!arr) throw TomlProblem{fmt::format("expected an array, got {}", toml_type(n))};
  if (arr->empty()) throw TomlProblem{"must not be empty"};
  return *arr;
}

std::vector<std::string> read_strings(const toml::node& n, const std::vector<std::string_view>& choices) {
  std::vector<std::string> out;
  for (const auto& e : read_array(n)) {
    auto v = e.value_exact<std::string>();
    if (!v) throw TomlProblem{fmt::format("expected strings, got {}", toml_type(e)), toml_text(e)};
    try {
      check_choice(*v, choices);
    } catch (TomlProblem& p) {
      p.value = *v;
      throw;
    }
    out.push_back(std::move(*v));
  }
  return out;
}

std::vector<int64_t> read_integers(const toml::node& n, const Range& range) {
  std::vector<int64_t> out;
  for (const auto& e : read_array(n)) {
    const auto v = e.value_exact<int64_t>();
    if (!v) throw TomlProblem{fmt::format("expected integers, got {}", toml_type(e)), toml_text(e)};
    try {
      range.check(static_cast<double>(*v));
    } catch (TomlProblem& p) {
      p.value = toml_text(e);
      throw;
    }
    out.push_back(*v);
  }
  return out;
}

std::vector<uint64_t> read_seeds(const toml::node& n) {
  std::vector<uint64_t> out;
  for (const auto& e : read_array(n)) {
    const auto v = e.value_exact<int64_t>();
    if (!v || *v < 0) throw TomlProblem{"expected non-negative integers", toml_text(e)};
    out.push_back(static_cast<uint64_t>(*v));
  }
  return out;
}

TomlProblem unknown_key(std::string_view section, const std::vector<std::string_view>& known) {
  if (section.empty()) return {fmt::format("unknown key (known: {})", joined(known))};
  return {fmt::format("unknown key (known in [{}]: {})", section, joined(known))};
}

namespace {

void flatten_into(const toml::table& t, const std::string& prefix,
                  std::vector<std::pair<std::string, const toml::node*>>& out) {
  for (const auto& [k, v] : t) {
    std::string key = prefix + std::string(k.str());
    if (const auto* sub = v.as_table()) flatten_into(*sub, key + ".", out);
    else out.emplace_back(std::move(key), &v);
  }
}

}  // namespace

std::vector<std::pair<std::string, const toml::node*>> flatten_toml(const toml::table& t) {
  std::vector<std::pair<std::string, const toml::node*>> out;
  flatten_into(t, "", out);
  return out;
}

void fail_value(std::string_view origin, std::string_view field, const TomlProblem& p, const toml::node& n) {
  fail_field(origin, field, p.what, p.value ? *p.value : toml_text(n));
}

std::string TomlTable::field(std::string_view key) const {
  return section_.empty() ? std::string(key) : fmt::format("{}.{}", section_, key);
}

void TomlTable::only(const std::vector<std::string_view>& known) const {
  for (const auto& [k, n] : *t_)
    if (std::find(known.begin(), known.end(), k.str()) == known.end())
      fail_value(origin_, field(k.str()), unknown_key(section_, known), n);
}

double TomlTable::number(std::string_view key, double def, const Range& range) const {
  read(key, [&](const toml::node& n) { def = read_number(n, range); });
  return def;
}

int64_t TomlTable::integer(std::string_view key, int64_t def, const Range& range) const {
  read(key, [&](const toml::node& n) { def = read_integer(n, range); });
  return def;
}

bool TomlTable::boolean(std::string_view key, bool def) const {
  read(key, [&](const toml::node& n) { def = read_boolean(n); });
  return def;
}

std::string TomlTable::string(std::string_view key, std::string def,
                              const std::vector<std::string_view>& choices) const {
  read(key, [&](const toml::node& n) { def = read_string(n, choices); });
  return def;
}

std::optional<TomlTable> TomlTable::table(std::string_view key) const {
  const toml::node* n = t_->get(key);
  if (!n) return std::nullopt;
  if (!n->is_table()) fail(key, fmt::format("expected a table, got {}", toml_type(*n)));
  return TomlTable(*n->as_table(), origin_, field(key));
}

void TomlTable::fail(std::string_view key, std::string_view what, std::string_view value) const {
  fail_field(origin_, field(key), what, value);
}

void TomlTable::fail(std::string_view key, std::string_view what) const {
  const toml::node* n = t_->get(key);
  fail_field(origin_, field(key), what, n ? toml_text(*n) : "(missing)");
}

}  // namespace ina
