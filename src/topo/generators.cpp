// Topology generators (fat-tree, leaf-spine, dragonfly) and INA deployment.
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <charconv>
#include <cmath>

#include "core/rng.hpp"
#include "topo/graph.hpp"

namespace ina::topo {

Graph fat_tree(int k, int hosts_per_edge, double link_gbps) {
  if (k < 2 || k % 2 != 0 || k > 64) throw TopologyError(fmt::format("fat-tree: k must be even and in [2, 64], got {}", k));
  const int half = k / 2;
  if (hosts_per_edge == 0) hosts_per_edge = half;
  if (hosts_per_edge < 1) throw TopologyError(fmt::format("fat-tree: hosts per edge switch must be >= 1, got {}", hosts_per_edge));
  Graph g;
  g.name = fmt::format("fat-tree:{}", k);
  std::vector<NodeId> edge, agg, core;
  for (int i = 0; i < k * half; ++i) edge.push_back(g.add_switch(fmt::format("edge{}", i)));
  for (int i = 0; i < k * half; ++i) agg.push_back(g.add_switch(fmt::format("agg{}", i)));
  for (int i = 0; i < half * half; ++i) core.push_back(g.add_switch(fmt::format("core{}", i)));
  int host = 0;
  for (int e = 0; e < k * half; ++e)
    for (int h = 0; h < hosts_per_edge; ++h) g.add_link(g.add_host(fmt::format("h{}", host++)), edge[e], link_gbps);
  for (int pod = 0; pod < k; ++pod) {
    for (int i = 0; i < half; ++i)
      for (int j = 0; j < half; ++j) g.add_link(edge[pod * half + i], agg[pod * half + j], link_gbps);
    // Aggregation switch j of every pod connects to cores j*half .. j*half + half - 1.
    for (int j = 0; j < half; ++j)
      for (int c = 0; c < half; ++c) g.add_link(agg[pod * half + j], core[j * half + c], link_gbps);
  }
  return g;
}

Graph fat_tree_paper() {
  Graph g = fat_tree(8, 6, 100);
  g.name = "fat-tree-paper";
  return g;
}

Graph leaf_spine(int spines, int leaves, int hosts, double link_gbps) {
  if (spines < 1 || leaves < 1 || hosts < 1)
    throw TopologyError(fmt::format("leaf-spine: spines, leaves and hosts must be >= 1, got {}, {}, {}", spines, leaves, hosts));
  Graph g;
  g.name = fmt::format("leaf-spine:{}x{}x{}", spines, leaves, hosts);
  std::vector<NodeId> spine, leaf;
  for (int i = 0; i < spines; ++i) spine.push_back(g.add_switch(fmt::format("spine{}", i)));
  for (int i = 0; i < leaves; ++i) leaf.push_back(g.add_switch(fmt::format("leaf{}", i)));
  int host = 0;
  for (int l = 0; l < leaves; ++l) {
    const int here = hosts / leaves + (l < hosts % leaves ? 1 : 0);
    for (int h = 0; h < here; ++h) g.add_link(g.add_host(fmt::format("h{}", host++)), leaf[l], link_gbps);
  }
  for (const NodeId l : leaf)
    for (const NodeId s : spine) g.add_link(l, s, link_gbps);
  return g;
}

Graph leaf_spine_paper() {
  Graph g = leaf_spine(30, 30, 500, 100);
  g.name = "leaf-spine-paper";
  return g;
}

Graph rina_testbed(double link_gbps) {
  Graph g;
  g.name = "rina-testbed";
  const NodeId tor[2] = {g.add_switch("tor0"), g.add_switch("tor1")};
  for (int i = 0; i < 8; ++i) g.add_link(g.add_host(fmt::format("h{}", i)), tor[i / 4], link_gbps);
  g.add_link(tor[0], tor[1], link_gbps);
  return g;
}

Graph dragonfly(int a, int g, int h, int hosts_per_router, double link_gbps) {
  if (a < 1) throw TopologyError(fmt::format("dragonfly: routers per group a must be >= 1, got a={}", a));
  if (g < 2) throw TopologyError(fmt::format("dragonfly: groups g must be >= 2, got g={}", g));
  if (h < 1) throw TopologyError(fmt::format("dragonfly: global links per router h must be >= 1, got h={}", h));
  if (hosts_per_router < 1)
    throw TopologyError(fmt::format("dragonfly: hosts per router p must be >= 1, got p={}", hosts_per_router));
  if (static_cast<int64_t>(a) * g > 4096)
    throw TopologyError(fmt::format("dragonfly: at most 4096 routers, got a*g = {}*{} = {}", a, g, static_cast<int64_t>(a) * g));
  if (static_cast<int64_t>(a) * h < g - 1)
    throw TopologyError(fmt::format(
        "dragonfly: groups g={} need g-1 = {} global links per group to connect all-to-all, but a*h = {}*{} = {} "
        "(a*h >= g-1 is required)",
        g, g - 1, a, h, static_cast<int64_t>(a) * h));
  Graph gr;
  gr.name = fmt::format("dragonfly:{},{},{}", a, g, h);
  std::vector<NodeId> router;  // router[group * a + r]
  for (int grp = 0; grp < g; ++grp)
    for (int r = 0; r < a; ++r) router.push_back(gr.add_switch(fmt::format("g{}r{}", grp, r)));
  int host = 0;
  for (const NodeId r : router)
    for (int p = 0; p < hosts_per_router; ++p) gr.add_link(gr.add_host(fmt::format("h{}", host++)), r, link_gbps);
  for (int grp = 0; grp < g; ++grp)
    for (int r1 = 0; r1 < a; ++r1)
      for (int r2 = r1 + 1; r2 < a; ++r2) gr.add_link(router[grp * a + r1], router[grp * a + r2], link_gbps);
  // The k-th global link of group i (peers ascending, skipping i) sits on router k / h.
  auto port = [&](int grp, int peer) { return (peer < grp ? peer : peer - 1) / h; };
  for (int i = 0; i < g; ++i)
    for (int j = i + 1; j < g; ++j) gr.add_link(router[i * a + port(i, j)], router[j * a + port(j, i)], link_gbps);
  return gr;
}

void deploy_ina(Graph& g, const InaDeployment& d, uint64_t seed) {
  if (!(d.min_gbps > 0) || !(d.max_gbps >= d.min_gbps) || !std::isfinite(d.max_gbps))
    throw TopologyError(fmt::format("INA capacity range must satisfy 0 < min <= max, got [{}, {}]", d.min_gbps, d.max_gbps));
  std::vector<NodeId> all = g.switches();
  for (const NodeId s : all) g.set_ina(s, false);
  std::vector<NodeId> chosen;
  Rng pick(mix(seed, 0x696e612d736574ULL));  // "ina-set"
  switch (d.where) {
    case InaDeployment::Where::Tor: chosen = g.tor_switches(); break;
    case InaDeployment::Where::All: chosen = all; break;
    case InaDeployment::Where::Random: {
      if (!(d.fraction > 0 && d.fraction <= 1))
        throw TopologyError(fmt::format("INA fraction must be in (0, 1], got {}", d.fraction));
      const size_t n = std::max<size_t>(1, static_cast<size_t>(std::lround(d.fraction * static_cast<double>(all.size()))));
      for (size_t i = 0; i < n; ++i) std::swap(all[i], all[i + pick.below(all.size() - i)]);
      chosen.assign(all.begin(), all.begin() + static_cast<std::ptrdiff_t>(n));
      std::sort(chosen.begin(), chosen.end());
      break;
    }
  }
  // Capacities are drawn in node order from their own stream, so the same
  // switch gets the same capacity whichever way the set was chosen.
  Rng cap(mix(seed, 0x696e612d636170ULL));  // "ina-cap"
  std::vector<double> capacity(g.num_nodes());
  for (const NodeId s : g.switches()) capacity[s] = d.min_gbps + (d.max_gbps - d.min_gbps) * cap.uniform();
  for (const NodeId s : chosen) g.set_ina(s, true, capacity[s]);
}

void parse_ina_where(std::string_view text, InaDeployment& d) {
  if (text == "tor") {
    d.where = InaDeployment::Where::Tor;
  } else if (text == "all") {
    d.where = InaDeployment::Where::All;
  } else if (text.starts_with("random:")) {
    const std::string_view num = text.substr(7);
    double f = 0;
    const auto [end, ec] = std::from_chars(num.data(), num.data() + num.size(), f);
    if (ec != std::errc() || end != num.data() + num.size() || !(f > 0 && f <= 1))
      throw TopologyError(fmt::format("programmable switches: bad fraction in '{}' (expected random:F with 0 < F <= 1)", text));
    d.where = InaDeployment::Where::Random;
    d.fraction = f;
  } else {
    throw TopologyError(fmt::format("programmable switches: expected tor, all or random:F, got '{}'", text));
  }
}

std::optional<Graph> generate(std::string_view spec) {
  if (spec == "fat-tree-paper") return fat_tree_paper();
  if (spec == "leaf-spine-paper") return leaf_spine_paper();
  if (spec == "rina-testbed") return rina_testbed();
  if (spec.starts_with("fat-tree:")) {
    const std::string_view num = spec.substr(9);
    int k = 0;
    const auto [end, ec] = std::from_chars(num.data(), num.data() + num.size(), k);
    if (ec != std::errc() || end != num.data() + num.size())
      throw TopologyError(fmt::format("topology '{}': expected fat-tree:K with an even integer K", spec));
    return fat_tree(k);
  }
  if (spec.starts_with("dragonfly:")) {
    std::string_view rest = spec.substr(10);
    std::array<int, 3> v{};
    for (size_t i = 0; i < v.size(); ++i) {
      const size_t comma = i + 1 < v.size() ? rest.find(',') : rest.size();
      const std::string_view num = rest.substr(0, comma);
      const auto [end, ec] = std::from_chars(num.data(), num.data() + num.size(), v[i]);
      if (comma == std::string_view::npos || num.empty() || ec != std::errc() || end != num.data() + num.size())
        throw TopologyError(fmt::format("topology '{}': expected dragonfly:A,G,H with three integers", spec));
      rest = i + 1 < v.size() ? rest.substr(comma + 1) : std::string_view();
    }
    return dragonfly(v[0], v[1], v[2], std::max(1, v[0] / 2));
  }
  return std::nullopt;
}

}  // namespace ina::topo
