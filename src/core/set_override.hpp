#pragma once
// `--set key=value` for every command that reads a TOML file (ina sim, ina
// plan aoi, plan aoi-sweep, plan grid-sweep): the overrides are written into
// the parsed document before its strict reader runs, so a value given on the
// command line passes exactly the checks the same value in the file would,
// and an error names the field and the value as it would for the file.
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include <toml++/toml.h>

#include "core/config_error.hpp"

namespace ina {

// How the text after '=' is read.
enum class SetShape {
  Value,   // a TOML value (2, 0.5, true, "text", [1, 4]); text that is none of these is a string: fat-tree:4
  String,  // the text as is (text in quotes is read as a TOML string)
  Array,   // a TOML array ([1, 4]) or a comma list (1,4 or dsa,atp): each element a TOML value, else a string
};

// Which keys take which shape (a reader's schema); nullptr or SetShape::Value
// for a key it does not know: such a key takes the shape of the document's own
// value at that key when that is an array or a string.
using SetShapeOf = std::function<SetShape(std::string_view key)>;

// Writes each "key=value" of `sets` into `root`, in order (a later one wins).
// A dotted key names nested tables ("sweep.values" is [sweep] values; tables
// are created as needed); a key without a dot is a top-level key. Malformed
// text (no '=', an empty key part, a path through a value that is not a
// table, a broken TOML array, an empty element of a comma list) is a
// ConfigError "<flag> <key>=<value>: ...".
void apply_sets(toml::table& root, const std::vector<std::string>& sets, const SetShapeOf& shape = {},
                std::string_view flag = "--set");

// The key of a "key=value" override ("" if it has no '=').
std::string set_key(const std::string& set);

// " (with --set a=1 --set b=2)" for an error message, "" without overrides.
std::string sets_note(const std::vector<std::string>& sets, std::string_view flag = "--set");

}  // namespace ina
