#include "runtime/ring_layout.hpp"

#include <algorithm>
#include <charconv>
#include <fstream>
#include <stdexcept>

#include <fmt/format.h>

#include "core/json_depth.hpp"
#include "runtime/auth.hpp"
#include "schemes/ring_plan.hpp"

namespace ina::rt {

bool is_ring_scheme(const schemes::Scheme& s) {
  using schemes::Collective;
  return s.supports(schemes::Engine::Runtime) &&
         (s.collective == Collective::Ring || s.collective == Collective::Hierarchical ||
          s.collective == Collective::RingIna);
}

bool is_layout_scheme(const schemes::Scheme& s) { return s.supports(schemes::Engine::Layout); }

bool RingLayout::tree() const { return scheme_info().collective == schemes::Collective::PsIna || routed(); }

bool RingLayout::routed() const { return scheme_info().routed; }

bool RingLayout::serving_tor(size_t rack) const {
  if (tree()) return racks.at(rack).ina;  // ATP at every INA ToR
  return scheme_info().collective == schemes::Collective::RingIna && racks.at(rack).ina && racks[rack].ranks.size() >= 2;
}

const std::optional<Endpoint>& RingLayout::switch_addr(size_t s) const {
  return s < racks.size() ? racks[s].sw : aggregation.at(s - racks.size()).sw;
}

bool RingLayout::serving_switch(size_t s) const { return s < racks.size() ? serving_tor(s) : s < switch_count(); }

bool RingLayout::under_aggregation(size_t rack) const {
  for (const auto& a : aggregation)
    if (std::find(a.racks.begin(), a.racks.end(), rack) != a.racks.end()) return true;
  return false;
}

std::vector<host::RinaGroupTree> RingLayout::rina_groups() const {
  std::vector<host::RinaGroupTree> out;
  for (size_t a = 0; a < aggregation.size(); ++a) {
    const NodeId top = switch_id(racks.size() + a);
    std::vector<uint16_t> ranks;
    std::vector<host::RinaHop> hops;  // leaves first: every rank's hop, then each serving ToR's up
    for (size_t q : aggregation[a].racks)
      for (uint16_t r : racks.at(q).ranks) {
        ranks.push_back(r);
        hops.push_back({true, r, kNoNode, serving_tor(q) ? tor_id(q) : top});
      }
    for (size_t q : aggregation[a].racks)
      if (serving_tor(q)) hops.push_back({false, 0, tor_id(q), top});
    out.push_back(host::rina_group_tree(std::move(ranks), top, hops));
  }
  return out;
}

size_t RingLayout::rack_of(size_t rank) const {
  for (size_t q = 0; q < racks.size(); ++q)
    for (uint16_t r : racks[q].ranks)
      if (r == rank) return q;
  throw InputError(fmt::format("layout: rank {} is in no rack", rank));
}

size_t RingLayout::root_rack() const {
  for (size_t q = 0; q < racks.size(); ++q)
    if (racks[q].ina) return q;
  throw InputError("layout: ATP over racks needs at least one INA rack");
}

schemes::AtpTree RingLayout::atp_tree() const {
  schemes::AtpTreeBuilder build(static_cast<size_t>(ps_id()) + 1);
  const NodeId root = routed() ? ps_id() : tor_id(root_rack());
  const schemes::AtpTreeBuilder::Up up = [&](NodeId tor) { return tor == root || routed() ? ps_id() : root; };
  build.start(ps_id(), n());
  for (size_t q = 0; q < racks.size(); ++q)  // racks in order: the root's children are the later INA racks
    for (uint16_t r : racks[q].ranks) build.leaf(r, racks[q].ina ? tor_id(q) : ps_id(), up);
  return build.finish();
}

RingLayout::TreeJob RingLayout::tree_job(size_t rack) const {
  if (racks.at(rack).ranks.empty()) throw InputError(fmt::format("layout: rack {} has no rank", rack));
  if (!racks[rack].ina) throw InputError(fmt::format("layout: rack {} has no INA ToR: it is on no tree", rack));
  const schemes::AtpTree t = atp_tree();
  const schemes::AtpTree::Entry& e = *t.find(tor_id(rack));  // a rank's first hop: on the tree
  return TreeJob{e.parent, e.subtree, e.direct, e.children};
}

Endpoint RingLayout::address(NodeId id) const {
  if (id == ps_id()) return *ps;
  for (size_t q = 0; q < racks.size(); ++q)
    if (id == tor_id(q)) {
      if (!racks[q].sw) throw InputError(fmt::format("layout: racks[{}] has no switch to route to", q));
      return *racks[q].sw;
    }
  return workers.at(static_cast<size_t>(id) - 1);
}

Endpoint RingLayout::tree_route(size_t rack, NodeId id) const {
  if (routed()) return address(id);
  const size_t root = root_rack();
  if (id == ps_id()) return rack == root ? *ps : *racks.at(root).sw;
  if (id > worker_id(n() - 1)) return address(id);
  const size_t rank = static_cast<size_t>(id) - 1;
  const size_t home = rack_of(rank);
  return home == rack || !racks.at(home).ina ? workers.at(rank) : *racks.at(home).sw;
}

Endpoint RingLayout::ps_route(NodeId id) const {
  if (routed()) {  // a rank hears only its first hop (a host engine's one peer): through its planned switch
    if (id >= worker_id(0) && id <= worker_id(n() - 1)) {
      const size_t q = rack_of(static_cast<size_t>(id) - 1);
      if (racks[q].ina) return address(tor_id(q));
    }
    return address(id);
  }
  const size_t root = root_rack();
  if (id >= worker_id(0) && id <= worker_id(n() - 1) && !racks.at(rack_of(static_cast<size_t>(id) - 1)).ina)
    return workers.at(static_cast<size_t>(id) - 1);
  return *racks.at(root).sw;
}

std::vector<size_t> RingLayout::relay_racks(size_t rack) const {
  std::vector<size_t> out;
  if (routed()) return out;
  for (size_t q = 0; q < racks.size(); ++q)
    if (q != rack && racks[q].ina) out.push_back(q);
  return out;
}

std::vector<Endpoint> RingLayout::ps_relays() const {
  std::vector<Endpoint> out;
  const schemes::AtpTree t = atp_tree();
  for (NodeId c : t.find(t.ps)->children) out.push_back(address(c));
  return out;
}

std::vector<std::vector<host::RingStage>> RingLayout::plan(uint64_t elems) const {
  std::vector<std::vector<uint16_t>> rk;
  std::vector<NodeId> tors;
  for (size_t q = 0; q < racks.size(); ++q) {
    rk.push_back(racks[q].ranks);
    tors.push_back(serving_tor(q) ? tor_id(q) : kNoNode);
  }
  if (tree()) return {};  // no ring: a tree
  auto plan = schemes::ring_plan(scheme_info(), n(), rk, tors, elems);
  for (const host::RinaGroupTree& t : rina_groups()) host::merge_rina_group(plan, t.ranks, t.top, t.entry);
  return plan;
}

nlohmann::json RingLayout::to_json() const {
  nlohmann::json w = nlohmann::json::array(), r = nlohmann::json::array();
  for (const auto& e : workers) w.push_back(e.str());
  for (const auto& k : racks)
    r.push_back({{"ranks", k.ranks}, {"ina", k.ina}, {"switch", k.sw ? nlohmann::json(k.sw->str()) : nlohmann::json()}});
  nlohmann::json out = {{"job", job}, {"scheme", scheme}, {"payload", payload}, {"memory_bytes", memory_bytes},
                        {"workers", w}, {"racks", r}};
  if (ps) out["ps"] = ps->str();
  if (!rates_gbps.empty()) out["rates_gbps"] = rates_gbps;
  if (!aggregation.empty()) {
    nlohmann::json a = nlohmann::json::array();
    for (const auto& e : aggregation)
      a.push_back({{"racks", e.racks}, {"switch", e.sw ? nlohmann::json(e.sw->str()) : nlohmann::json()}});
    out["aggregation"] = a;
  }
  if (datagram_salt) out["datagram_salt"] = to_hex(*datagram_salt);
  return out;
}

namespace {

// "aggregation" (ring_layout.hpp): Rina's switches above racks.
template <class Bad>
void read_aggregation(RingLayout& L, const nlohmann::json& j, const Bad& bad, bool need_switches) {
  const auto& v = j["aggregation"];
  if (L.scheme_info().collective != schemes::Collective::RingIna)
    throw bad("aggregation", v, fmt::format("only rina has INA switches above the ToR (Rina IV-D), not {}", L.scheme));
  if (!v.is_array() || v.empty())
    throw bad("aggregation", v, "expected a non-empty list of {\"switch\": \"ip:port\", \"racks\": [...]}");
  std::vector<int> under(L.racks.size(), -1);
  for (size_t a = 0; a < v.size(); ++a) {
    const auto& e = v[a];
    const std::string f = fmt::format("aggregation[{}]", a);
    if (!e.is_object()) throw bad(f, e, "expected {\"switch\": \"ip:port\"|null, \"racks\": [...]}");
    for (const auto& [k, x] : e.items())
      if (k != "racks" && k != "switch") throw bad(f + "." + k, x, "unknown field");
    RingAggregation ag;
    if (!e.contains("racks") || !e["racks"].is_array() || e["racks"].empty())
      throw bad(f + ".racks", e.value("racks", nlohmann::json()), "expected a non-empty list of rack indices");
    size_t ranks = 0;
    for (const auto& x : e["racks"]) {
      if (!x.is_number_unsigned() || x.get<uint64_t>() >= L.racks.size())
        throw bad(f + ".racks", e["racks"], fmt::format("no such rack: {} (the layout has racks 0..{})", x.dump(),
                                                        L.racks.size() - 1));
      const auto q = x.get<size_t>();
      if (under[q] >= 0)
        throw bad(f + ".racks", e["racks"], fmt::format("rack {} is already under aggregation[{}]", q, under[q]));
      under[q] = static_cast<int>(a);
      ag.racks.push_back(q);
      ranks += L.racks[q].ranks.size();
    }
    if (ranks < 2 || ranks > 64)
      throw bad(f + ".racks", e["racks"], fmt::format("a group above the ToR needs 2..64 ranks below it, these racks hold {}", ranks));
    if (e.contains("switch") && !e["switch"].is_null()) {
      if (!e["switch"].is_string()) throw bad(f + ".switch", e["switch"], "expected \"ip:port\" or null");
      try {
        ag.sw = Endpoint::parse(e["switch"].get<std::string>());
      } catch (const RuntimeError& err) {
        throw bad(f + ".switch", e["switch"], err.what());
      }
      for (size_t r = 0; r < L.n(); ++r)
        if (L.workers[r] == *ag.sw) throw bad(f + ".switch", e["switch"], fmt::format("the same address as workers[{}]", r));
      for (size_t q = 0; q < L.racks.size(); ++q)
        if (L.racks[q].sw && *L.racks[q].sw == *ag.sw)
          throw bad(f + ".switch", e["switch"], fmt::format("the same address as racks[{}].switch", q));
    } else if (need_switches) {
      throw bad(f + ".switch", e.value("switch", nlohmann::json()), "give this INA switch's \"ip:port\"");
    }
    L.aggregation.push_back(std::move(ag));
  }
}

}  // namespace

RingLayout RingLayout::from_json(const nlohmann::json& j, const std::string& where, bool need_switches) {
  auto bad = [&](const std::string& field, const nlohmann::json& v, const std::string& why) {
    return InputError(fmt::format("layout {}: field '{}' = {}: {}", where, printable(field), quote_json(v), why));
  };
  if (!j.is_object()) throw InputError(fmt::format("layout {}: expected a JSON object", where));
  for (const auto& [k, v] : j.items())
    if (k != "job" && k != "scheme" && k != "payload" && k != "memory_bytes" && k != "workers" && k != "racks" && k != "ps" &&
        k != "datagram_salt" && k != "aggregation" && k != "rates_gbps")
      throw bad(k, v, "unknown field");
  auto uint_field = [&](const char* k, uint64_t lo, uint64_t hi) -> uint64_t {
    if (!j.contains(k)) throw InputError(fmt::format("layout {}: field '{}' is missing", where, k));
    const auto& v = j[k];
    if (!v.is_number_unsigned() || v.get<uint64_t>() < lo || v.get<uint64_t>() > hi)
      throw bad(k, v, fmt::format("expected an integer in {}..{}", lo, hi));
    return v.get<uint64_t>();
  };
  RingLayout L;
  L.job = static_cast<uint16_t>(uint_field("job", 1, 65535));
  L.payload = static_cast<uint16_t>(uint_field("payload", 1, 16000));
  L.memory_bytes = uint_field("memory_bytes", 4ULL * L.payload, 1ULL << 30);
  if (!j.contains("scheme") || !j["scheme"].is_string()) throw bad("scheme", j.value("scheme", nlohmann::json()), "expected a scheme name");
  const schemes::Scheme* s = schemes::lookup(j["scheme"].get<std::string>());
  if (!s || !is_layout_scheme(*s))
    throw bad("scheme", j["scheme"], fmt::format("not a scheme of the runtime's static layouts ({})",
                                                 schemes::names_text(schemes::Engine::Layout)));
  L.scheme = s->name;
  if (!j.contains("workers") || !j["workers"].is_array() || j["workers"].size() < 2 || j["workers"].size() > kMaxRingWorkers)
    throw bad("workers", j.value("workers", nlohmann::json()), fmt::format("expected 2..{} \"ip:port\" addresses", kMaxRingWorkers));
  for (size_t r = 0; r < j["workers"].size(); ++r) {
    const auto& v = j["workers"][r];
    const std::string f = fmt::format("workers[{}]", r);
    if (!v.is_string()) throw bad(f, v, "expected \"ip:port\"");
    try {
      L.workers.push_back(Endpoint::parse(v.get<std::string>()));
    } catch (const RuntimeError& e) {
      throw bad(f, v, e.what());
    }
    for (size_t o = 0; o < r; ++o)
      if (L.workers[o] == L.workers[r]) throw bad(f, v, fmt::format("the same address as workers[{}]", o));
  }
  const size_t n = L.workers.size();
  if (!j.contains("racks") || !j["racks"].is_array() || j["racks"].empty() || j["racks"].size() > n)
    throw bad("racks", j.value("racks", nlohmann::json()), fmt::format("expected 1..{} racks", n));
  std::vector<int> seen(n, -1);
  for (size_t q = 0; q < j["racks"].size(); ++q) {
    const auto& v = j["racks"][q];
    const std::string f = fmt::format("racks[{}]", q);
    if (!v.is_object()) throw bad(f, v, "expected {\"ranks\": [...], \"ina\": bool, \"switch\": \"ip:port\"|null}");
    for (const auto& [k, x] : v.items())
      if (k != "ranks" && k != "ina" && k != "switch") throw bad(f + "." + k, x, "unknown field");
    RingRack rk;
    if (!v.contains("ranks") || !v["ranks"].is_array() || v["ranks"].empty())
      throw bad(f + ".ranks", v.value("ranks", nlohmann::json()), "expected a non-empty list of ranks");
    for (const auto& x : v["ranks"]) {
      if (!x.is_number_unsigned() || x.get<uint64_t>() >= n)
        throw bad(f + ".ranks", v["ranks"], fmt::format("every rank must be in 0..{}", n - 1));
      const auto r = x.get<uint16_t>();
      if (seen[r] >= 0) throw bad(f + ".ranks", v["ranks"], fmt::format("rank {} is already in racks[{}]", r, seen[r]));
      if (!rk.ranks.empty() && r < rk.ranks.back()) throw bad(f + ".ranks", v["ranks"], "ranks must ascend (the agent first)");
      seen[r] = static_cast<int>(q);
      rk.ranks.push_back(r);
    }
    if (v.contains("ina")) {
      if (!v["ina"].is_boolean()) throw bad(f + ".ina", v["ina"], "expected true or false");
      rk.ina = v["ina"].get<bool>();
    }
    if (v.contains("switch") && !v["switch"].is_null()) {
      if (!v["switch"].is_string()) throw bad(f + ".switch", v["switch"], "expected \"ip:port\" or null");
      try {
        rk.sw = Endpoint::parse(v["switch"].get<std::string>());
      } catch (const RuntimeError& e) {
        throw bad(f + ".switch", v["switch"], e.what());
      }
    }
    L.racks.push_back(std::move(rk));
  }
  for (size_t r = 0; r < n; ++r)
    if (seen[r] < 0) throw bad("racks", j["racks"], fmt::format("rank {} is in no rack", r));
  if (L.tree()) {
    // A tree's racks are INA unless they say otherwise; at least one must be (the root).
    for (size_t q = 0; q < L.racks.size(); ++q)
      if (!j["racks"][q].contains("ina")) L.racks[q].ina = true;
    if (!L.routed() && std::none_of(L.racks.begin(), L.racks.end(), [](const RingRack& k) { return k.ina; }))
      throw bad("racks", j["racks"], "ATP over racks needs at least one INA rack (\"ina\": true): the root of its tree");
    if (!j.contains("ps") || !j["ps"].is_string())
      throw bad("ps", j.value("ps", nlohmann::json()), "PS-based INA over racks needs its PS's \"ip:port\"");
    try {
      L.ps = Endpoint::parse(j["ps"].get<std::string>());
    } catch (const RuntimeError& e) {
      throw bad("ps", j["ps"], e.what());
    }
    for (size_t r = 0; r < n; ++r)
      if (L.workers[r] == *L.ps) throw bad("ps", j["ps"], fmt::format("the same address as workers[{}]", r));
    for (size_t q = 0; q < L.racks.size(); ++q)
      if (L.racks[q].sw && *L.racks[q].sw == *L.ps)
        throw bad("ps", j["ps"], fmt::format("the same address as racks[{}].switch", q));
    if (n > kMaxWireWorkers) throw bad("workers", j["workers"], fmt::format("ATP's wire bitmaps hold at most {} ranks", kMaxWireWorkers));
  } else if (j.contains("ps")) {
    throw bad("ps", j["ps"], fmt::format("{} has no PS", L.scheme));
  }
  if (j.contains("rates_gbps")) {
    const auto& v = j["rates_gbps"];
    if (!L.tree()) throw bad("rates_gbps", v, fmt::format("{}'s ring workers pace by their window, not a planned rate", L.scheme));
    if (!v.is_array() || v.size() != n) throw bad("rates_gbps", v, fmt::format("expected {} rates, one per rank", n));
    for (size_t r = 0; r < n; ++r) {
      if (!v[r].is_number() || !(v[r].get<double>() >= 1e-6 && v[r].get<double>() <= 1e4))
        throw bad(fmt::format("rates_gbps[{}]", r), v[r], "expected a rate in [1e-06, 10000] Gbit/s (1 kbit/s..10 Tbit/s)");
      L.rates_gbps.push_back(v[r].get<double>());
    }
  }
  if (j.contains("datagram_salt")) {
    const auto& v = j["datagram_salt"];
    const std::string what = "expected 64 hex digits (the run's salt of its datagram key)";
    if (!v.is_string() || v.get<std::string>().size() != 2 * Key{}.size()) throw bad("datagram_salt", v, what);
    try {
      L.datagram_salt = parse_key(v.get<std::string>(), "datagram_salt");
    } catch (const RuntimeError&) {
      throw bad("datagram_salt", v, what);
    }
  }
  if (j.contains("aggregation")) read_aggregation(L, j, bad, need_switches);
  for (size_t q = 0; q < L.racks.size(); ++q)
    if (need_switches && L.serving_tor(q) && !L.racks[q].sw)
      throw bad(fmt::format("racks[{}].switch", q), j["racks"][q].value("switch", nlohmann::json()),
                "this rack's INA ToR serves the job: give its ina switch's \"ip:port\"");
  try {
    (void)L.plan(n);  // e.g. H-AR needs racks of equal size
  } catch (const std::invalid_argument& e) {
    throw bad("racks", j["racks"], e.what());
  }
  return L;
}

RingLayout RingLayout::read(const std::string& path, bool need_switches) {
  // A layout of kMaxRingWorkers workers is a few tens of KB; the depth is
  // checked before the (recursive) parser sees the text (core/json_depth.hpp).
  const std::string text = read_bounded_file(path, 4 << 20, fmt::format("layout {}", path),
                                             "a job's layout (JSON: workers, racks)");
  try {
    check_json_depth(text, kMaxJsonDepth, fmt::format("layout {}", path));
  } catch (const JsonDepthError& e) {
    throw InputError(e.what());
  }
  const auto j = nlohmann::json::parse(text, nullptr, false);
  if (j.is_discarded()) throw InputError(fmt::format("layout {}: not valid JSON", path));
  return from_json(j, path, need_switches);
}

void RingLayout::write(const std::string& path) const {
  std::ofstream f(path);
  f << to_json().dump(1) << "\n";
  if (!f) throw RuntimeError(fmt::format("cannot write the layout {}", path));
}

std::vector<RingRack> split_racks(size_t n, unsigned racks, const std::vector<unsigned>& ina_racks) {
  if (racks < 1 || racks > n || n % racks != 0)
    throw InputError(fmt::format("--racks {}: must divide the {} workers into equal racks (a divisor of {})", racks, n, n));
  std::vector<RingRack> out(racks);
  const size_t per = n / racks;
  for (size_t r = 0; r < n; ++r) out[r / per].ranks.push_back(static_cast<uint16_t>(r));
  for (unsigned q : ina_racks) {
    if (q >= racks)
      throw InputError(fmt::format("--ina-racks names rack {}, which does not exist (--racks {}: racks 0..{})", q, racks,
                                   racks - 1));
    out[q].ina = true;
  }
  return out;
}

std::vector<unsigned> parse_rack_list(const std::string& flag, const std::string& text) {
  std::vector<unsigned> v;
  size_t at = 0;
  for (;;) {
    const size_t comma = text.find(',', at);
    const std::string part = text.substr(at, comma == std::string::npos ? std::string::npos : comma - at);
    unsigned q = 0;
    const auto [p, ec] = std::from_chars(part.data(), part.data() + part.size(), q);
    if (part.empty() || ec != std::errc{} || p != part.data() + part.size())
      throw InputError(fmt::format("{}: expected rack numbers like 0,1, got '{}' (bad entry '{}')", flag, text, part));
    if (std::find(v.begin(), v.end(), q) != v.end()) throw InputError(fmt::format("{} '{}' names rack {} twice", flag, text, q));
    v.push_back(q);
    if (comma == std::string::npos) return v;
    at = comma + 1;
  }
}

}  // namespace ina::rt
