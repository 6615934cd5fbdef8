#pragma once
// Zebra's sparse pipeline settings (zebra.cpp): the zebra program's, and
// those of a shared-pool program that hosts sparse jobs (kv_pool), and what
// a sparse job's entry holds beyond the common fields.
#include <cstdint>

#include "wire/fp16.hpp"
#include "wire/kv.hpp"
#include "wire/packet.hpp"

namespace ina::dp {

// Defaults from the authors' public prototype where the paper is silent: a
// 32,768-entry exact-match table (key -> register index), at most 9 <key,
// value> pairs per packet. The zebra program's value registers are
// SwitchConfig::memory_bytes / 4 (the paper's 1 MB cap: 262,144).
struct ZebraConfig {
  uint32_t kv_table_entries = 32768;
  uint16_t kv_pairs = 9;
  KvArith kv_arith = KvArith::Fixed;  // hot values: int32 sums, or float16 added by fp16::TableAdder (wire/fp16.hpp)
  double recirc_gbps = 100;           // the recirculation port: every extra pipeline pass is serialized on it
  kv::HotRoute hot_results = kv::HotRoute::ViaPs;  // where the hot results go (wire/kv.hpp); the hosts' SparseConfig agrees
  // Beyond the paper: a shared-pool program (ATP, DSA; the registry's
  // Scheme::hosts_sparse) also runs sparse jobs through this pipeline. A
  // sparse job's hot values then live in aggregators of the pool, pinned
  // while its hot-set table is installed; a dense packet that maps to a
  // pinned aggregator takes the scheme's collision path (ATP: to the PS;
  // DSA: to the PS, never preempting it). The zebra program refuses it.
  bool kv_pool = false;
};

// A sparse job's entry (SwitchJob::zebra).
struct ZebraJob {
  NodeId cpu = kNoNode;  // the switch CPU that keeps result copies and retransmits them
};

}  // namespace ina::dp
