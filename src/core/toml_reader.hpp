#pragma once
// The strict reader of every TOML settings file (scenarios, overlays, AOI
// scenarios and sweeps, GRID sweeps): parsing with a syntax error that names
// the place, refusing keys and sections the reader does not know, typed
// values with range checks. Every error is a ConfigError naming the origin,
// the field and the value (fail_field's "<origin>: field '<key>': <what>
// (value: <value>)").
//
// Only the readers include this header: it brings toml++ with it.
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <toml++/toml.h>

#include "core/config_error.hpp"

namespace ina {

// The document, or the ConfigError "<origin>:<line>:<column>: TOML syntax error: <description>".
toml::table parse_toml(std::string_view text, std::string_view origin);

// The whole text of a settings file. A directory, a path that is not a
// regular file (or a pipe, a character device), a file that cannot be opened
// or read is a ConfigError naming the path; `what` names the kind of file
// ("scenario", "sweep"): "<path>: cannot open <what> file (missing or unreadable)".
std::string read_settings_file(const std::string& path, std::string_view what);

// One-line rendering of a value for messages and stored overrides: scalars as
// written but strings without quotes (3, 0.5, true, text), arrays "[a, b]",
// tables "{k = v}".
std::string toml_text(const toml::node& n);
// The value as TOML writes it (strings quoted, 1.0 keeps its ".0"): a value
// passed on as the text of a `--set key=value` reads back as the same value.
std::string toml_literal(const toml::node& n);
// The value's type for messages: integer, floating-point, boolean, string,
// array, table, date-time.
std::string_view toml_type(const toml::node& n);

// A problem with one value, thrown by the value readers below. The reader,
// which knows the origin and the field, turns it into fail_field's
// ConfigError; `value` replaces the shown value when the culprit is a part of
// it (one array element).
struct TomlProblem {
  std::string what;
  std::optional<std::string> value = std::nullopt;
};

// The allowed values of a number: an interval, closed or open below,
// optionally whole multiples of `step`; `why` (what the bounds mean) is
// appended to the message in parentheses.
struct Range {
  double lo = -std::numeric_limits<double>::infinity();
  double hi = std::numeric_limits<double>::infinity();
  bool lo_open = false;
  int step = 0;
  std::string_view why = {};

  // Throws TomlProblem "must be in [lo, hi] (why)", "must be in (lo, hi]",
  // "must be >= lo", "must be > lo" or "must be a multiple of S in [lo, hi]".
  void check(double v) const;
};
inline Range between(double lo, double hi, std::string_view why = {}) { return {.lo = lo, .hi = hi, .why = why}; }
inline Range positive_up_to(double hi, std::string_view why = {}) {
  return {.lo = 0, .hi = hi, .lo_open = true, .why = why};
}

// Throws TomlProblem "must be one of: a, b" unless `v` is one of `choices` (none: any).
void check_choice(std::string_view v, const std::vector<std::string_view>& choices);

// Typed value readers; each throws TomlProblem "expected <a type>, got <type>" for a value of another type.
int64_t read_integer(const toml::node& n, const Range& range = {});
double read_number(const toml::node& n, const Range& range = {});  // an integer or a float; "must be finite"
bool read_boolean(const toml::node& n);
std::string read_string(const toml::node& n, const std::vector<std::string_view>& choices = {});
// A non-empty array ("must not be empty").
const toml::array& read_array(const toml::node& n);
// A non-empty array of strings ("expected strings, got <type>", the element shown), each one of `choices` if given.
std::vector<std::string> read_strings(const toml::node& n, const std::vector<std::string_view>& choices = {});
// A non-empty array of integers in `range` ("expected integers, got <type>", the element shown).
std::vector<int64_t> read_integers(const toml::node& n, const Range& range = {});
// Seeds: a non-empty array of non-negative integers ("expected non-negative integers", the element shown).
std::vector<uint64_t> read_seeds(const toml::node& n);

// "unknown key (known in [<section>]: a, b)", or "unknown key (known: a, b)" for the root ("").
TomlProblem unknown_key(std::string_view section, const std::vector<std::string_view>& known);

// The keys under `t` as "a.b.c" paths to their values (tables are descended
// into): a [[series]] table's quoted "section.key" keys and unquoted dotted
// keys alike.
std::vector<std::pair<std::string, const toml::node*>> flatten_toml(const toml::table& t);

// The ConfigError of a problem with the value `n` of `field`.
[[noreturn]] void fail_value(std::string_view origin, std::string_view field, const TomlProblem& p,
                             const toml::node& n);

// One table of a settings file being read strictly. `section` names it in
// messages ("net", "job[2]"; "" for the document's root), and a key's field
// is "<section>.<key>" (the key alone at the root).
class TomlTable {
 public:
  TomlTable(const toml::table& t, std::string origin, std::string section = {})
      : t_(&t), origin_(std::move(origin)), section_(std::move(section)) {}

  const toml::table& table() const { return *t_; }
  const std::string& origin() const { return origin_; }
  std::string field(std::string_view key) const;
  const toml::node* get(std::string_view key) const { return t_->get(key); }
  bool contains(std::string_view key) const { return t_->contains(key); }

  // Refuses the first key not in `known`: unknown_key's message, its value shown.
  void only(const std::vector<std::string_view>& known) const;

  // The key's value, or `def` when the key is absent.
  double number(std::string_view key, double def, const Range& range = {}) const;
  int64_t integer(std::string_view key, int64_t def, const Range& range = {}) const;
  bool boolean(std::string_view key, bool def) const;
  std::string string(std::string_view key, std::string def, const std::vector<std::string_view>& choices = {}) const;
  // The sub-table, or nothing when the key is absent ("expected a table, got <type>" otherwise).
  std::optional<TomlTable> table(std::string_view key) const;

  // Calls read(node) when the key is present and turns a TomlProblem into the field's ConfigError.
  template <class F>
  void read(std::string_view key, F&& read) const {
    if (const toml::node* n = t_->get(key)) {
      try {
        read(*n);
      } catch (const TomlProblem& p) {
        fail_value(origin_, field(key), p, *n);
      }
    }
  }

  [[noreturn]] void fail(std::string_view key, std::string_view what, std::string_view value) const;
  [[noreturn]] void fail(std::string_view key, std::string_view what) const;  // the key's value shown

 private:
  const toml::table* t_;
  std::string origin_, section_;
};

}  // namespace ina
