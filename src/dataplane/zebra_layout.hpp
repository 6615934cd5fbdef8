#pragma once
// Zebra's parameter orchestration (paper §III-D): rank-mapped indices, the
// placement of hot parameters in switch registers and the layout-aware
// packaging of a worker's hot gradients (Algorithm 1).
//
// A hot set is the top-k keys by update frequency; a key's index is its rank
// (0 = hottest). The switch has `registers` register arrays; index i lives in
// register reg(i) at slot slot(i). One register can be accessed once per
// pipeline pass, so a packet carrying two indices of one register needs a
// recirculation per extra access.
#include <cstdint>
#include <memory>
#include <span>
#include <unordered_map>
#include <vector>

namespace ina::dp::zebra {

// Heat-based placement (the paper): register i % m holds ranks i + m*j.
// Random placement (the Fig. 10 baseline): a seeded shuffle of the same slots.
enum class Placement : uint8_t { Heat, Random };

struct HotSet {
  uint32_t version = 0;            // bumped on every update (online identification)
  std::vector<uint64_t> keys;      // by rank: keys[i] is the key of index i
  std::unordered_map<uint64_t, uint32_t> index;  // key -> rank index
  static HotSet from_ranked(std::vector<uint64_t> ranked, uint32_t version);
  bool contains(uint64_t key) const { return index.count(key) != 0; }
  size_t size() const { return keys.size(); }
};

struct Layout {
  Placement placement = Placement::Heat;
  uint32_t registers = 16;  // m
  uint32_t slots = 0;       // per register (r); M = m * r >= hot-set size
  std::vector<uint32_t> reg_of;  // by index
  std::vector<uint32_t> slot_of; // by index
  static Layout make(size_t indices, uint32_t registers, Placement pl, uint64_t seed);
  uint32_t reg(uint32_t i) const { return reg_of[i]; }
  uint32_t slot(uint32_t i) const { return slot_of[i]; }
};

// A hot-set table as workers and switch use it: from iteration `from` on
// (until a later table), the keys of `hot` are aggregated in the switch in
// the registers `layout` gives their rank indices.
struct Table {
  uint32_t from = 0;
  std::shared_ptr<const HotSet> hot;
  std::shared_ptr<const Layout> layout;
};

// The runtime's table (switch and workers build it alike from the same
// list): the ranked keys (hottest first; a key twice throws
// std::invalid_argument) with heat-based placement over `registers`.
Table heat_table(std::vector<uint64_t> ranked, uint32_t from, uint32_t version, uint32_t registers);

// A holder's tables, ascending `from` (switch, workers, PS): `t` replaces
// every table from t.from on; the one that applies to iteration `iter` is
// the last with from <= iter (nullptr: none yet).
void add_table(std::vector<Table>& tables, Table t);
const Table* table_for(std::span<const Table> tables, uint32_t iter);

// Pipeline passes a packet of these indices needs: the most indices of one register.
uint32_t passes(const Layout& L, std::span<const uint32_t> indices);

// Algorithm 1: packs the indices (a worker's hot gradients, any order) into
// packets of at most `per_packet`, layout-aware: no packet gets a second index
// of a register it already holds while a fitting packet exists; what cannot be
// placed goes, in order, into new packets without regard to the layout
// (create_pkt_padding). `layout_aware = false` packs in key order (the baseline).
std::vector<std::vector<uint32_t>> package(const Layout& L, std::vector<uint32_t> indices,
                                           unsigned per_packet, bool layout_aware = true);

}  // namespace ina::dp::zebra
