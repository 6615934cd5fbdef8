#include "dataplane/zebra_layout.hpp"

#include <algorithm>
#include <stdexcept>

#include "core/rng.hpp"

namespace ina::dp::zebra {

HotSet HotSet::from_ranked(std::vector<uint64_t> ranked, uint32_t version) {
  HotSet h;
  h.version = version;
  h.keys = std::move(ranked);
  h.index.reserve(h.keys.size());
  for (size_t i = 0; i < h.keys.size(); ++i)
    if (!h.index.emplace(h.keys[i], static_cast<uint32_t>(i)).second)
      throw std::invalid_argument("hot set: key " + std::to_string(h.keys[i]) + " is ranked twice");
  return h;
}

Table heat_table(std::vector<uint64_t> ranked, uint32_t from, uint32_t version, uint32_t registers) {
  Table t;
  t.from = from;
  auto hot = std::make_shared<const HotSet>(HotSet::from_ranked(std::move(ranked), version));
  t.layout = std::make_shared<const Layout>(Layout::make(hot->size(), registers, Placement::Heat, 0));
  t.hot = std::move(hot);
  return t;
}

void add_table(std::vector<Table>& tables, Table t) {
  while (!tables.empty() && tables.back().from >= t.from) tables.pop_back();
  tables.push_back(std::move(t));
}

const Table* table_for(std::span<const Table> tables, uint32_t iter) {
  const Table* t = nullptr;
  for (const auto& x : tables)
    if (x.from <= iter) t = &x;
  return t;
}

Layout Layout::make(size_t indices, uint32_t registers, Placement pl, uint64_t seed) {
  if (registers == 0) throw std::invalid_argument("layout: registers must be >= 1");
  Layout L;
  L.placement = pl;
  L.registers = registers;
  L.slots = static_cast<uint32_t>((indices + registers - 1) / registers);
  L.reg_of.resize(indices);
  L.slot_of.resize(indices);
  const uint64_t total = static_cast<uint64_t>(L.slots) * registers;
  std::vector<uint32_t> cell(total);
  for (uint64_t s = 0; s < total; ++s) cell[s] = static_cast<uint32_t>(s);
  if (pl == Placement::Random) {
    Rng rng(seed);
    for (uint64_t s = total; s > 1; --s) std::swap(cell[s - 1], cell[rng.below(s)]);
  }
  // Heat: index i takes cell i, i.e. register i % m, slot i / m.
  for (size_t i = 0; i < indices; ++i) {
    L.reg_of[i] = cell[i] % registers;
    L.slot_of[i] = cell[i] / registers;
  }
  return L;
}

uint32_t passes(const Layout& L, std::span<const uint32_t> indices) {
  if (indices.empty()) return 1;
  // A packet carries at most a few dozen pairs: count per register in a small array.
  std::vector<uint32_t> n(L.registers, 0);
  uint32_t most = 0;
  for (uint32_t i : indices) most = std::max(most, ++n[L.reg(i)]);
  return most;
}

std::vector<std::vector<uint32_t>> package(const Layout& L, std::vector<uint32_t> indices,
                                           unsigned per_packet, bool layout_aware) {
  if (per_packet == 0) throw std::invalid_argument("package: per_packet must be >= 1");
  std::vector<std::vector<uint32_t>> out;
  if (!layout_aware) {
    for (size_t b = 0; b < indices.size(); b += per_packet)
      out.emplace_back(indices.begin() + static_cast<std::ptrdiff_t>(b),
                       indices.begin() + static_cast<std::ptrdiff_t>(std::min(indices.size(), b + per_packet)));
    return out;
  }
  // Line 1: P, the estimated packets (as many as the gradients need when full).
  const size_t np = (indices.size() + per_packet - 1) / per_packet;
  std::vector<std::vector<uint32_t>> P(np);
  const uint32_t m = L.registers;
  // has[p * m + k]: packet p already carries an index of register k.
  std::vector<uint8_t> has(np * m, 0);
  // cursor[k]: the first packet that is neither full nor holds register k
  // (packets only fill up, so the cursor only moves forward: same_reg_pkt_find
  // and P2.first() in amortized O(1)).
  std::vector<size_t> cursor(m, 0);
  std::vector<uint32_t> rest;  // G'
  for (uint32_t theta : indices) {
    const uint32_t k = L.reg(theta);
    size_t& c = cursor[k];
    while (c < np && (P[c].size() >= per_packet || has[c * m + k])) ++c;
    if (c == np) {
      rest.push_back(theta);
      continue;
    }
    P[c].push_back(theta);
    has[c * m + k] = 1;
  }
  for (auto& p : P)
    if (!p.empty()) out.push_back(std::move(p));
  // Lines 16-17: the rest in new packets, without regard to the layout.
  for (size_t b = 0; b < rest.size(); b += per_packet)
    out.emplace_back(rest.begin() + static_cast<std::ptrdiff_t>(b),
                     rest.begin() + static_cast<std::ptrdiff_t>(std::min(rest.size(), b + per_packet)));
  return out;
}

}  // namespace ina::dp::zebra
