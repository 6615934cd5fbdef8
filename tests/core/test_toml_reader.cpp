// The strict TOML reader (core/toml_reader.hpp) every settings file goes
// through: the exact message of each kind of problem, and what it reads.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "core/toml_reader.hpp"

namespace ina {
namespace {

// The ConfigError message of `f()`, or "" if it throws none.
template <class F>
std::string toml_error_of(F&& f) {
  try {
    f();
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}

// The TomlProblem of `f()` as "what | value" ("-" without a value).
template <class F>
std::string problem_of(F&& f) {
  try {
    f();
  } catch (const TomlProblem& p) {
    return p.what + " | " + p.value.value_or("-");
  }
  return "";
}

TEST(TomlReader, SyntaxErrorNamesOriginLineAndColumn) {
  EXPECT_EQ(toml_error_of([] { parse_toml("x = 1\ny = = 2\n", "s.toml"); }),
            "s.toml:2:5: TOML syntax error: Error while parsing value: could not determine value type");
  EXPECT_EQ(parse_toml("[a]\nb = 2\n", "s.toml")["a"]["b"].value<int64_t>(), 2);
}

TEST(TomlReader, UnknownKeysNameTheSectionAndWhatItKnows) {
  const toml::table doc = parse_toml("top = 1\n[net]\nunits = 2\ncolour = \"red\"\n", "f.toml");
  const TomlTable root(doc, "f.toml");
  EXPECT_EQ(toml_error_of([&] { root.only({"net"}); }),
            "f.toml: field 'top': unknown key (known: net) (value: 1)");
  const TomlTable net = *root.table("net");
  EXPECT_EQ(toml_error_of([&] { net.only({"units", "ports"}); }),
            "f.toml: field 'net.colour': unknown key (known in [net]: units, ports) (value: red)");
  EXPECT_EQ(toml_error_of([&] { net.only({"units", "colour"}); }), "");
}

TEST(TomlReader, WrongTypesNameExpectedAndGot) {
  const toml::table doc =
      parse_toml("[s]\nn = \"ten\"\nx = true\nb = 1\nt = [1, 2]\nsub = 3\n", "f.toml");
  const TomlTable s(doc["s"].ref<toml::table>(), "f.toml", "s");
  EXPECT_EQ(toml_error_of([&] { s.integer("n", 0); }), "f.toml: field 's.n': expected an integer, got string (value: ten)");
  EXPECT_EQ(toml_error_of([&] { s.number("x", 0); }), "f.toml: field 's.x': expected a number, got boolean (value: true)");
  EXPECT_EQ(toml_error_of([&] { s.boolean("b", false); }), "f.toml: field 's.b': expected a boolean, got integer (value: 1)");
  EXPECT_EQ(toml_error_of([&] { s.string("t", ""); }), "f.toml: field 's.t': expected a string, got array (value: [1, 2])");
  EXPECT_EQ(toml_error_of([&] { s.table("sub"); }), "f.toml: field 's.sub': expected a table, got integer (value: 3)");
}

TEST(TomlReader, RangesAndChoicesNameTheirBounds) {
  const toml::table doc = parse_toml("[r]\nw = 0\nf = 0.0\nk = 3\nh = nan\nm = \"blue\"\n", "f.toml");
  const TomlTable r(doc["r"].ref<toml::table>(), "f.toml", "r");
  EXPECT_EQ(toml_error_of([&] { r.integer("w", 1, between(1, 64)); }), "f.toml: field 'r.w': must be in [1, 64] (value: 0)");
  EXPECT_EQ(toml_error_of([&] { r.number("f", 1, positive_up_to(1, "a fraction")); }),
            "f.toml: field 'r.f': must be in (0, 1] (a fraction) (value: 0)");
  EXPECT_EQ(toml_error_of([&] { r.integer("w", 1, Range{.lo = 1}); }), "f.toml: field 'r.w': must be >= 1 (value: 0)");
  EXPECT_EQ(toml_error_of([&] { r.number("f", 1, Range{.lo = 0, .lo_open = true}); }),
            "f.toml: field 'r.f': must be > 0 (value: 0)");
  EXPECT_EQ(toml_error_of([&] { r.integer("k", 2, Range{.lo = 2, .hi = 32, .step = 2}); }),
            "f.toml: field 'r.k': must be a multiple of 2 in [2, 32] (value: 3)");
  EXPECT_EQ(toml_error_of([&] { r.number("h", 1); }), "f.toml: field 'r.h': must be finite (value: nan)");
  EXPECT_EQ(toml_error_of([&] { r.string("m", "red", {"red", "green"}); }),
            "f.toml: field 'r.m': must be one of: red, green (value: blue)");
}

TEST(TomlReader, ValuesWithinTheRulesAreReadAndAbsentKeysTakeTheDefault) {
  const toml::table doc = parse_toml("w = 4\nf = 2\nm = \"green\"\nb = true\n", "f.toml");
  const TomlTable t(doc, "f.toml");
  EXPECT_EQ(t.integer("w", 1, between(1, 64)), 4);
  EXPECT_EQ(t.number("f", 0), 2.0);  // an integer is a number
  EXPECT_EQ(t.string("m", "red", {"red", "green"}), "green");
  EXPECT_TRUE(t.boolean("b", false));
  EXPECT_EQ(t.integer("absent", 7), 7);
  EXPECT_EQ(t.string("absent", "dflt"), "dflt");
  EXPECT_FALSE(t.table("absent").has_value());
}

TEST(TomlReader, ArrayProblemsShowTheElementAtFault) {
  const toml::table doc =
      parse_toml("e = []\ns = [\"a\", 3]\nc = [\"a\", \"z\"]\ni = [4, 0]\nseeds = [1, -2]\nx = 5\n", "f.toml");
  EXPECT_EQ(problem_of([&] { read_array(*doc.get("e")); }), "must not be empty | -");
  EXPECT_EQ(problem_of([&] { read_array(*doc.get("x")); }), "expected an array, got integer | -");
  EXPECT_EQ(problem_of([&] { read_strings(*doc.get("s")); }), "expected strings, got integer | 3");
  EXPECT_EQ(problem_of([&] { read_strings(*doc.get("c"), {"a", "b"}); }), "must be one of: a, b | z");
  EXPECT_EQ(problem_of([&] { read_integers(*doc.get("i"), between(1, 8)); }), "must be in [1, 8] | 0");
  EXPECT_EQ(problem_of([&] { read_seeds(*doc.get("seeds")); }), "expected non-negative integers | -2");
  EXPECT_EQ(read_seeds(*parse_toml("s = [3, 1]", "f").get("s")), (std::vector<uint64_t>{3, 1}));
  // Through a table: the field is named, the element shown as the value.
  const TomlTable t(doc, "f.toml");
  EXPECT_EQ(toml_error_of([&] { t.read("s", [](const toml::node& n) { read_strings(n); }); }),
            "f.toml: field 's': expected strings, got integer (value: 3)");
}

TEST(TomlReader, TextForMessagesAndLiteralsForOverrides) {
  const toml::table doc = parse_toml("f = 1.0\ng = 'x'\ni = [1, 'a', 2.5]\nj = {k = 1}\n", "f");
  EXPECT_EQ(toml_text(*doc.get("f")), "1");
  EXPECT_EQ(toml_literal(*doc.get("f")), "1.0");  // passed on as --set f=1.0, it stays a float
  EXPECT_EQ(toml_text(*doc.get("g")), "x");
  EXPECT_EQ(toml_literal(*doc.get("g")), "'x'");
  EXPECT_EQ(toml_text(*doc.get("i")), "[1, a, 2.5]");
  EXPECT_EQ(toml_text(*doc.get("j")), "{k = 1}");
  EXPECT_EQ(toml_type(*doc.get("f")), "floating-point");
  EXPECT_EQ(toml_type(*doc.get("j")), "table");
}

TEST(TomlReader, FlattenGivesDottedPathsOfQuotedAndNestedKeys) {
  const toml::table doc = parse_toml("name = \"s\"\n\"topology.kind\" = \"x\"\njob.ps = \"last\"\n", "f");
  std::vector<std::string> keys;
  for (const auto& [k, n] : flatten_toml(doc)) keys.push_back(k + "=" + toml_text(*n));
  // In key order (toml++'s tables are ordered maps).
  EXPECT_EQ(keys, (std::vector<std::string>{"job.ps=last", "name=s", "topology.kind=x"}));
}

TEST(TomlReader, SettingsFilesThatAreNotReadableFilesAreNamed) {
  const auto d = std::filesystem::temp_directory_path() / "ina_toml_reader_dir";
  std::filesystem::create_directories(d);
  EXPECT_EQ(toml_error_of([&] { read_settings_file(d.string(), "scenario"); }),
            d.string() + ": is a directory, not a scenario file");
  EXPECT_EQ(toml_error_of([&] { read_settings_file(d.string(), "overlay"); }),
            d.string() + ": is a directory, not an overlay file");
  const std::string missing = (d / "missing.toml").string();
  EXPECT_EQ(toml_error_of([&] { read_settings_file(missing, "sweep"); }),
            missing + ": cannot open sweep file (missing or unreadable)");
  std::ofstream(d / "ok.toml") << "a = 1\n";
  EXPECT_EQ(read_settings_file((d / "ok.toml").string(), "sweep"), "a = 1\n");
  std::filesystem::remove_all(d);
}

}  // namespace
}  // namespace ina
