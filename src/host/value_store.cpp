#include "host/value_store.hpp"

#include <algorithm>
#include <cstring>
#include <iterator>

namespace ina::host {

namespace {
int32_t affine_value(const AffineBasis& b, int64_t A, int64_t C, uint64_t i) {
  return static_cast<int32_t>(static_cast<uint32_t>(static_cast<uint64_t>(b.at(i)) * static_cast<uint64_t>(A) +
                                                    static_cast<uint64_t>(C)));
}
}  // namespace

void ValueStore::assign(uint64_t len, uint64_t base) {
  clear();
  len_ = len;
  base_ = base;
}

void ValueStore::clear() {
  len_ = 0;
  layout_ = Layout::Unset;
  std::vector<int32_t>().swap(flat_);
  segs_.clear();
}

bool ValueStore::fits(const Seg& s, uint64_t first, std::span<const int32_t> v) {
  if (!s.affine) return false;
  const AffineBasis b{s.stream};
  for (size_t k = 0; k < v.size(); ++k)
    if (affine_value(b, s.A, s.C, first + k) != v[k]) return false;
  return true;
}

// Splits the records overlapping [lo, hi) at lo and hi and drops what lies inside.
void ValueStore::carve(uint64_t lo, uint64_t hi) {
  auto it = segs_.upper_bound(lo);
  if (it != segs_.begin()) {
    auto prev = std::prev(it);
    const uint64_t start = prev->first, end = start + prev->second.len;
    if (end > lo) {
      if (end > hi) {  // prev covers [lo, hi) and more: keep its tail
        const Seg& s = prev->second;
        Seg tail{.len = end - hi, .affine = s.affine, .stream = s.stream, .A = s.A, .C = s.C, .raw = {}};
        if (!tail.affine) tail.raw.assign(s.raw.begin() + static_cast<std::ptrdiff_t>(hi - start), s.raw.end());
        segs_.emplace(hi, std::move(tail));
      }
      prev->second.len = lo - start;
      if (!prev->second.affine) prev->second.raw.resize(lo - start);
      if (prev->second.len == 0) segs_.erase(prev);
    }
  }
  it = segs_.lower_bound(lo);
  while (it != segs_.end() && it->first < hi) {
    const uint64_t start = it->first, end = start + it->second.len;
    if (end > hi) {
      Seg tail = std::move(it->second);
      tail.len = end - hi;
      if (!tail.affine) tail.raw.erase(tail.raw.begin(), tail.raw.begin() + static_cast<std::ptrdiff_t>(hi - start));
      segs_.erase(it);
      segs_.emplace(hi, std::move(tail));
      break;
    }
    it = segs_.erase(it);
  }
}

// `b` continues `a`: a takes it. Plain runs grow the longer one's values, so
// packets written in order into a long run copy only themselves.
void ValueStore::join(Seg& a, Seg& b) {
  if (!a.affine) {
    if (a.raw.size() >= b.raw.size()) {
      a.raw.insert(a.raw.end(), b.raw.begin(), b.raw.end());
    } else {
      b.raw.insert(b.raw.begin(), a.raw.begin(), a.raw.end());
      a.raw.swap(b.raw);
    }
  }
  a.len += b.len;
}

// Merges the record at `it` with its neighbours where they continue each other.
void ValueStore::merge_at(std::map<uint64_t, Seg>::iterator it) {
  auto same = [](const Seg& a, const Seg& b) {
    return a.affine == b.affine && (!a.affine || (a.stream == b.stream && a.A == b.A && a.C == b.C));
  };
  if (it != segs_.begin()) {
    auto prev = std::prev(it);
    if (prev->first + prev->second.len == it->first && same(prev->second, it->second)) {
      join(prev->second, it->second);
      segs_.erase(it);
      it = prev;
    }
  }
  auto next = std::next(it);
  if (next != segs_.end() && it->first + it->second.len == next->first && same(it->second, next->second)) {
    join(it->second, next->second);
    segs_.erase(next);
  }
}

void ValueStore::write(uint64_t pos, std::span<const int32_t> v, const std::optional<AffineBasis>& basis) {
  if (v.empty()) return;
  if (layout_ == Layout::Unset) layout_ = basis ? Layout::Records : Layout::Flat;
  if (layout_ == Layout::Records && !basis) {  // a tensor without a basis from now on: plain values
    std::vector<int32_t> all(len_);
    read(0, all);
    segs_.clear();
    flat_.swap(all);
    layout_ = Layout::Flat;
  }
  if (layout_ == Layout::Flat) {
    if (flat_.empty()) flat_.assign(len_, 0);
    std::memcpy(flat_.data() + pos, v.data(), v.size_bytes());
    return;
  }
  const uint64_t first = base_ + pos;
  Seg s;
  s.len = v.size();
  if (basis) {
    s.affine = true;
    s.stream = basis->stream;
    // The common case: the record just before continues through v.
    auto it = segs_.upper_bound(pos);
    bool found = false;
    if (it != segs_.begin()) {
      const Seg& prev = std::prev(it)->second;
      if (prev.affine && prev.stream == s.stream) {
        s.A = prev.A;
        s.C = prev.C;
        found = fits(s, first, v);
      }
    }
    if (!found) {
      // Two indices with different basis values determine A and C.
      const int64_t a0 = basis->at(first);
      size_t k = 1;
      while (k < v.size() && basis->at(first + k) == a0) ++k;
      if (k < v.size()) {
        const int64_t da = basis->at(first + k) - a0, dv = static_cast<int64_t>(v[k]) - v[0];
        if (dv % da == 0) {
          s.A = dv / da;
          s.C = v[0] - a0 * s.A;
          found = fits(s, first, v);
        }
      }
    }
    s.affine = found;
  }
  if (!s.affine) s.raw.assign(v.begin(), v.end());
  carve(pos, pos + v.size());
  merge_at(segs_.emplace(pos, std::move(s)).first);
}

void ValueStore::add(uint64_t pos, std::span<const int32_t> v, const std::optional<AffineBasis>& basis) {
  std::vector<int32_t> sum(v.size());
  read(pos, sum);
  for (size_t k = 0; k < v.size(); ++k) sum[k] = wrap_add(sum[k], v[k]);
  write(pos, sum, basis);
}

void ValueStore::read(uint64_t pos, std::span<int32_t> out) const {
  if (out.empty()) return;
  if (layout_ != Layout::Records) {
    if (flat_.empty()) std::fill(out.begin(), out.end(), 0);
    else std::memcpy(out.data(), flat_.data() + pos, out.size_bytes());
    return;
  }
  const uint64_t hi = pos + out.size();
  uint64_t at = pos;  // next position to fill
  auto it = segs_.upper_bound(pos);
  if (it != segs_.begin()) --it;
  for (; at < hi; ++it) {
    if (it == segs_.end() || it->first >= hi) {
      std::fill(out.begin() + static_cast<std::ptrdiff_t>(at - pos), out.end(), 0);
      break;
    }
    const uint64_t start = it->first, end = start + it->second.len;
    if (end <= at) continue;
    if (start > at) {  // a gap never written
      std::fill_n(out.begin() + static_cast<std::ptrdiff_t>(at - pos), start - at, 0);
      at = start;
    }
    const uint64_t stop = std::min(end, hi);
    const Seg& s = it->second;
    if (s.affine) {
      const AffineBasis b{s.stream};
      for (uint64_t i = at; i < stop; ++i) out[i - pos] = affine_value(b, s.A, s.C, base_ + i);
    } else {
      std::copy(s.raw.begin() + static_cast<std::ptrdiff_t>(at - start), s.raw.begin() + static_cast<std::ptrdiff_t>(stop - start),
                out.begin() + static_cast<std::ptrdiff_t>(at - pos));
    }
    at = stop;
  }
}

uint64_t ValueStore::bytes() const {
  static_assert(sizeof(Seg) + sizeof(uint64_t) + 32 <= kValueRecordBytes);
  uint64_t b = 4 * flat_.capacity() + kValueRecordBytes * segs_.size();
  for (const auto& [start, s] : segs_) b += 4 * s.raw.capacity();
  return b;
}

}  // namespace ina::host
