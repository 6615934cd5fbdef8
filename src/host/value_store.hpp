#pragma once
// A range of int32 values a ring endpoint holds between steps (a received
// partial, a stage's output), stored by what they are rather than one by one.
//
// Gradients from host::SyntheticTensor, and every sum of them, are affine
// in their tensor's per-index basis: v(i) = a(i) * A + C with A and C the
// same over a shard (a sum over one set of ranks). A write that fits such a
// form exactly is kept as its (A, C); consecutive writes with the same form
// merge, so a shard summed over one set of ranks costs one record however
// large it is. Anything else (a tensor with no basis, a value that does not
// fit) is kept as plain values. Reads give back exactly what was written,
// and positions never written read as 0.
//
// The first write decides the layout: with a basis the store keeps records
// (and plain runs where a write does not fit); without one, one flat array
// as any buffer would, and a later write without a basis turns records into
// that array. The simulator runs every rank of a datacenter in one
// process, where this is what makes a full-size gradient fit; a runtime
// worker with real tensors keeps the flat array.
#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <vector>

#include "host/tensor_io.hpp"

namespace ina::host {

// Sum of two values modulo 2^32, as int32 registers add (no signed overflow).
inline int32_t wrap_add(int32_t a, int32_t b) {
  return static_cast<int32_t>(static_cast<uint32_t>(a) + static_cast<uint32_t>(b));
}

// A record's heap bytes: the record, its key and a map node's links.
inline constexpr uint64_t kValueRecordBytes = 112;

class ValueStore {
 public:
  // [0, len) reads as 0; position 0 is the tensor's index `base`.
  void assign(uint64_t len, uint64_t base);
  void clear();  // frees everything; size() becomes 0
  uint64_t size() const { return len_; }
  bool empty() const { return len_ == 0; }

  void write(uint64_t pos, std::span<const int32_t> v, const std::optional<AffineBasis>& basis);
  void add(uint64_t pos, std::span<const int32_t> v, const std::optional<AffineBasis>& basis);
  void read(uint64_t pos, std::span<int32_t> out) const;

  // Heap bytes held (records, plain runs, the flat array).
  uint64_t bytes() const;
  // Records and plain runs (0 for the flat array).
  size_t records() const { return segs_.size(); }

 private:
  struct Seg {
    uint64_t len = 0;
    bool affine = false;
    uint64_t stream = 0;
    int64_t A = 0, C = 0;
    std::vector<int32_t> raw;  // !affine: the values
  };
  enum class Layout : uint8_t { Unset, Flat, Records };
  void carve(uint64_t lo, uint64_t hi);
  void merge_at(std::map<uint64_t, Seg>::iterator it);
  static void join(Seg& a, Seg& b);
  static bool fits(const Seg& s, uint64_t first, std::span<const int32_t> v);
  uint64_t len_ = 0, base_ = 0;
  Layout layout_ = Layout::Unset;
  std::vector<int32_t> flat_;
  std::map<uint64_t, Seg> segs_;  // by start position; disjoint
};

}  // namespace ina::host
