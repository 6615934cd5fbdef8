#pragma once
// Nesting depth of JSON text, found by a linear scan before a parser sees it.
// nlohmann::json parses recursively: a document nested 100k deep overflows
// the stack. Every reader of untrusted JSON (topology files, control
// messages) checks the depth first with check_json_depth.
//
// Brackets inside strings (with backslash escapes) do not count. The scan
// does not validate the JSON; the parser does that afterwards.
#include <cstddef>
#include <stdexcept>
#include <string>
#include <string_view>

namespace ina {

// Documented limit for ina's JSON inputs: no legitimate file comes close.
inline constexpr size_t kMaxJsonDepth = 64;

// The maximum number of simultaneously open '[' / '{' outside strings.
inline size_t json_nesting_depth(std::string_view text) {
  size_t depth = 0, max_depth = 0;
  bool in_string = false, escaped = false;
  for (const char c : text) {
    if (in_string) {
      if (escaped) escaped = false;
      else if (c == '\\') escaped = true;
      else if (c == '"') in_string = false;
      continue;
    }
    switch (c) {
      case '"': in_string = true; break;
      case '[':
      case '{':
        if (++depth > max_depth) max_depth = depth;
        break;
      case ']':
      case '}':
        if (depth > 0) --depth;
        break;
      default: break;
    }
  }
  return max_depth;
}

struct JsonDepthError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Throws JsonDepthError "<what>: JSON nested N levels deep; the limit is L"
// if the text nests deeper than `limit`.
inline void check_json_depth(std::string_view text, size_t limit, const std::string& what) {
  const size_t d = json_nesting_depth(text);
  if (d > limit)
    throw JsonDepthError(what + ": JSON nested " + std::to_string(d) + " levels deep; the limit is " +
                         std::to_string(limit));
}

}  // namespace ina
