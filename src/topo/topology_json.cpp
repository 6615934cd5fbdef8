// The JSON topology format (documented in graph.hpp). Strict: every problem
// is reported as "<file>: field '<field>': <what> (value: <value>)", like
// scenario files.
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <sstream>

#include "core/json_depth.hpp"
#include "topo/graph.hpp"

namespace ina::topo {
namespace {

using json = nlohmann::json;

struct Reader {
  std::string origin;

  [[noreturn]] void fail(const std::string& field, const std::string& what, const json& value) const {
    throw TopologyError(fmt::format("{}: field '{}': {} (value: {})", origin, field, what, value.dump()));
  }
  [[noreturn]] void fail(const std::string& field, const std::string& what) const {
    throw TopologyError(fmt::format("{}: field '{}': {}", origin, field, what));
  }

  void only_keys(const json& obj, const std::string& field, std::initializer_list<std::string_view> keys) const {
    if (!obj.is_object()) fail(field, "expected an object", obj);
    for (const auto& [key, value] : obj.items()) {
      if (std::find(keys.begin(), keys.end(), key) != keys.end()) continue;
      std::string known;
      for (auto k : keys) known += (known.empty() ? "" : ", ") + std::string(k);
      fail(field.empty() ? key : field + "." + key, fmt::format("unknown key (known: {})", known), value);
    }
  }

  std::string string(const json& v, const std::string& field) const {
    if (!v.is_string() || v.get_ref<const std::string&>().empty()) fail(field, "expected a non-empty string", v);
    return v.get<std::string>();
  }

  double gbps(const json& v, const std::string& field) const {
    if (!v.is_number()) fail(field, "expected a number (Gbps)", v);
    const double x = v.get<double>();
    if (!(x > 0 && std::isfinite(x))) fail(field, "capacity must be > 0", v);
    return x;
  }

  const json& array(const json& obj, const char* key) const {
    if (!obj.contains(key)) fail(key, "required");
    const json& v = obj.at(key);
    if (!v.is_array()) fail(key, "expected an array", v);
    return v;
  }
};

}  // namespace

TopologyFile parse_topology_json(const std::string& text, const std::string& origin) {
  const Reader rd{origin};
  json root;
  // nlohmann parses recursively: a deeply nested document would overflow the
  // stack, so the nesting is bounded (kMaxJsonDepth) before it parses.
  if (const size_t depth = json_nesting_depth(text); depth > kMaxJsonDepth)
    throw TopologyError(fmt::format("{}: JSON nested {} levels deep; the limit is {} (core/json_depth.hpp)", origin,
                                    depth, kMaxJsonDepth));
  try {
    root = json::parse(text);
  } catch (const json::exception& e) {
    // parse_error, and out_of_range for a number beyond double (e.g. 1e999).
    throw TopologyError(fmt::format("{}: JSON syntax error: {}", origin, e.what()));
  }
  rd.only_keys(root, "", {"name", "description", "link_gbps", "nodes", "links", "job"});

  TopologyFile out;
  Graph& g = out.graph;
  g.name = root.contains("name") ? rd.string(root["name"], "name") : std::filesystem::path(origin).stem().string();
  if (root.contains("description")) {
    if (!root["description"].is_string()) rd.fail("description", "expected a string", root["description"]);
    out.description = root["description"].get<std::string>();
  }
  std::optional<double> default_gbps;
  if (root.contains("link_gbps")) default_gbps = rd.gbps(root["link_gbps"], "link_gbps");

  const json& nodes = rd.array(root, "nodes");
  if (nodes.empty()) rd.fail("nodes", "must not be empty");
  for (size_t i = 0; i < nodes.size(); ++i) {
    const std::string field = fmt::format("nodes[{}]", i);
    const json& n = nodes[i];
    rd.only_keys(n, field, {"name", "kind", "ina", "capacity_gbps"});
    if (!n.contains("name")) rd.fail(field + ".name", "required");
    if (!n.contains("kind")) rd.fail(field + ".kind", "required (\"host\" or \"switch\")");
    const std::string name = rd.string(n["name"], field + ".name");
    if (g.find(name)) rd.fail(field + ".name", "duplicate node name", n["name"]);
    const std::string kind = rd.string(n["kind"], field + ".kind");
    if (kind == "host") {
      for (const char* k : {"ina", "capacity_gbps"})
        if (n.contains(k)) rd.fail(field + "." + k, "applies to switches only", n[k]);
      g.add_host(name);
    } else if (kind == "switch") {
      bool ina = false;
      if (n.contains("ina")) {
        if (!n["ina"].is_boolean()) rd.fail(field + ".ina", "expected true or false", n["ina"]);
        ina = n["ina"].get<bool>();
      }
      double capacity = 0;
      if (ina) {
        if (!n.contains("capacity_gbps")) rd.fail(field + ".capacity_gbps", "required for a programmable (ina) switch");
        capacity = rd.gbps(n["capacity_gbps"], field + ".capacity_gbps");
      } else if (n.contains("capacity_gbps")) {
        rd.fail(field + ".capacity_gbps", "only a programmable switch (\"ina\": true) has a processing capacity",
                n["capacity_gbps"]);
      }
      g.add_switch(name, ina, capacity);
    } else {
      rd.fail(field + ".kind", "expected \"host\" or \"switch\"", n["kind"]);
    }
  }

  const json& links = rd.array(root, "links");
  for (size_t i = 0; i < links.size(); ++i) {
    const std::string field = fmt::format("links[{}]", i);
    const json& l = links[i];
    rd.only_keys(l, field, {"a", "b", "gbps"});
    NodeId ends[2];
    for (int e = 0; e < 2; ++e) {
      const char* key = e == 0 ? "a" : "b";
      if (!l.contains(key)) rd.fail(field + "." + key, "required");
      const std::string name = rd.string(l[key], field + "." + key);
      const auto id = g.find(name);
      if (!id) rd.fail(field + "." + key, "unknown node", l[key]);
      ends[e] = *id;
    }
    double gbps = 0;
    if (l.contains("gbps")) gbps = rd.gbps(l["gbps"], field + ".gbps");
    else if (default_gbps) gbps = *default_gbps;
    else rd.fail(field + ".gbps", "required (or give a top-level \"link_gbps\")");
    if (ends[0] == ends[1]) rd.fail(field, "a node cannot link to itself", l);
    for (const auto& adj : g.neighbors(ends[0]))
      if (adj.peer == ends[1]) rd.fail(field, "duplicate link", l);
    g.add_link(ends[0], ends[1], gbps);
  }

  if (root.contains("job")) {
    const json& j = root["job"];
    rd.only_keys(j, "job", {"ps", "workers"});
    if (!j.contains("ps")) rd.fail("job.ps", "required");
    if (!j.contains("workers")) rd.fail("job.workers", "required");
    JobSpec spec;
    spec.ps = rd.string(j["ps"], "job.ps");
    if (!g.find(spec.ps)) rd.fail("job.ps", "unknown node", j["ps"]);
    const json& ws = j["workers"];
    if (!ws.is_array() || ws.empty()) rd.fail("job.workers", "expected a non-empty array of host names", ws);
    for (size_t i = 0; i < ws.size(); ++i) {
      const std::string field = fmt::format("job.workers[{}]", i);
      spec.workers.push_back(rd.string(ws[i], field));
      if (!g.find(spec.workers.back())) rd.fail(field, "unknown node", ws[i]);
    }
    resolve_job(g, spec, fmt::format("{}: field 'job'", origin));
    out.job = std::move(spec);
  }
  return out;
}

TopologyFile load_topology_file(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec))
    throw TopologyError(fmt::format("{}: is a directory, not a topology file", path));
  std::ifstream in(path, std::ios::binary);
  if (!in) throw TopologyError(fmt::format("{}: cannot open topology file", path));
  std::ostringstream text;
  text << in.rdbuf();
  return parse_topology_json(text.str(), path);
}

}  // namespace ina::topo
