#include "core/set_override.hpp"

#include <optional>

#include <fmt/format.h>

#include "core/config_error.hpp"

namespace ina {

std::string set_key(const std::string& set) {
  const auto eq = set.find('=');
  return eq == std::string::npos ? std::string() : set.substr(0, eq);
}

std::string sets_note(const std::vector<std::string>& sets, std::string_view flag) {
  std::string out;
  for (const auto& s : sets) out += fmt::format(" {} {}", flag, s);
  return out.empty() ? out : " (with" + out + ")";
}

void apply_sets(toml::table& root, const std::vector<std::string>& sets, const SetShapeOf& shape,
                std::string_view flag) {
  for (const std::string& kv : sets) {
    const auto eq = kv.find('=');
    if (eq == std::string::npos || eq == 0)
      throw ConfigError(fmt::format("{} expects section.key=value, got '{}'", flag, kv));
    const std::string key = kv.substr(0, eq), text = kv.substr(eq + 1);
    auto bad = [&](const std::string& what) {
      return ConfigError(fmt::format("{} {}: {}", flag, kv, what));
    };
    // The table that holds the last part of the key, made as needed.
    toml::table* t = &root;
    std::string rest = key;
    for (auto dot = rest.find('.'); dot != std::string::npos; dot = rest.find('.')) {
      const std::string head = rest.substr(0, dot);
      if (head.empty()) throw bad(fmt::format("'{}' has an empty part", key));
      if (!t->contains(head)) t->insert(head, toml::table{});
      toml::node* n = t->get(head);
      if (!n->is_table())
        throw bad(fmt::format("'{}' is {}, not a table of keys", head,
                              n->is_array() ? "an array (of tables: not settable with " + std::string(flag) + ")"
                                            : "a value"));
      t = n->as_table();
      rest = rest.substr(dot + 1);
    }
    if (rest.empty()) throw bad(fmt::format("'{}' has an empty part", key));
    SetShape how = shape ? shape(key) : SetShape::Value;
    if (how == SetShape::Value)
      if (const toml::node* old = t->get(rest)) how = old->is_array() ? SetShape::Array : old->is_string() ? SetShape::String : how;
    // One TOML value, or nothing if the text is not one.
    auto parse_value = [](const std::string& s) -> std::optional<toml::table> {
      try {
        return toml::parse("v = " + s);
      } catch (const toml::parse_error&) {
        return std::nullopt;
      }
    };
    auto value_or_string = [&](const std::string& s, toml::array& into) {
      if (auto doc = parse_value(s); doc && !doc->get("v")->is_array() && !doc->get("v")->is_table())
        into.push_back(*doc->get("v"));
      else
        into.push_back(s);
    };
    const bool quoted = !text.empty() && (text.front() == '"' || text.front() == '\'');
    const bool bracketed = text.find_first_not_of(" \t") != std::string::npos && text[text.find_first_not_of(" \t")] == '[';
    if (how == SetShape::Array && bracketed) {
      try {
        const toml::table doc = toml::parse("v = " + text);
        t->insert_or_assign(rest, *doc.get("v"));
      } catch (const toml::parse_error& e) {
        throw bad(fmt::format("not a TOML array: {}", e.description()));
      }
    } else if (how == SetShape::Array) {
      // A comma list; "" is the empty array (the reader says whether it may be empty).
      toml::array arr;
      if (text.find_first_not_of(" \t") != std::string::npos) {
        size_t at = 0;
        while (true) {
          const size_t comma = text.find(',', at);
          std::string part = text.substr(at, comma == std::string::npos ? std::string::npos : comma - at);
          const size_t b = part.find_first_not_of(" \t"), e = part.find_last_not_of(" \t");
          if (b == std::string::npos) throw bad("an empty element in the comma list");
          value_or_string(part.substr(b, e - b + 1), arr);
          if (comma == std::string::npos) break;
          at = comma + 1;
        }
      }
      t->insert_or_assign(rest, std::move(arr));
    } else if (how == SetShape::String && !quoted) {
      t->insert_or_assign(rest, text);
    } else if (auto doc = parse_value(text)) {
      t->insert_or_assign(rest, *doc->get("v"));
    } else if (quoted) {
      throw bad("not a TOML string (unbalanced quotes?)");
    } else {
      t->insert_or_assign(rest, text);
    }
  }
}

}  // namespace ina
