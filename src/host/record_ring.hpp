#pragma once
// The records of a worker transport's packets that are sent and not done,
// by packet index, sized to what is in flight.
//
// Most packets are done in about the order they were sent, so the records
// live in a ring indexed by packet index (idx & mask) over [base, next),
// with a done bit per slot beside it: a result advances the op's lowest
// not-done index reading bits, not records, and the ring's lines stay in
// cache. A packet that stays out for long (lost, preempted, waiting for its
// retransmission timeout) would make that ring span every packet sent
// since, a window's worth per round trip: under DSA's preemptions at 2 048
// workers the rings grew to ~10 GB, against ~64 MB of windows. So when
// the ring is full and at most a quarter of it is open, its older half
// leaves it: the open records there move to a short list of stragglers,
// kept in index order, and the ring's base moves up by half. It grows
// (doubling) only when more than a quarter is open: its size stays within
// about four times the packets in flight.
//
// Indexes below base are done unless they are stragglers. Callers ask
// for records (operator[]) only of packets sent and not done, and pass
// `low`, the op's lowest index not done, to open(): no straggler is below it.
// A reference to a record lasts until the next open() or set_done() (a
// straggler's record goes with set_done()).
#include <algorithm>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

namespace ina::host {

template <typename Rec>
class RecordRing {
 public:
  static constexpr size_t kMinRecs = 8;

  Rec& operator[](uint32_t idx) { return idx >= base_ ? buf_[idx & mask_] : straggler(idx); }
  bool done(uint32_t idx) const {
    if (idx >= base_) return bits_[(idx & mask_) >> 6] >> (idx & mask_ & 63) & 1;
    return !find(idx);
  }
  void set_done(uint32_t idx) {
    if (idx >= base_) {
      bits_[(idx & mask_) >> 6] |= uint64_t{1} << (idx & mask_ & 63);
      --open_;
      return;
    }
    const auto it = lower(idx);
    if (it != strays_.end() && it->first == idx) strays_.erase(it);
  }
  // The least index in [idx, end) not done (end if none): the stragglers,
  // then the ring's bits a word at a time.
  uint32_t next_open(uint32_t idx, uint32_t end) const {
    if (idx < base_) {
      const auto it = lower(idx);
      if (it != strays_.end() && it->first < end) return it->first;
      idx = base_;
    }
    while (idx < end) {
      const uint32_t s = idx & mask_;
      // The slots from s to the end of its word or of the ring (rings of
      // fewer than 64 slots use part of one word).
      const uint32_t room = std::min<uint32_t>(64 - (s & 63), mask_ + 1 - s);
      uint64_t open = ~bits_[s >> 6] >> (s & 63);
      if (room < 64) open &= (uint64_t{1} << room) - 1;
      if (open) {
        const uint32_t at = idx + static_cast<uint32_t>(std::countr_zero(open));
        return at < end ? at : end;
      }
      idx += room;
    }
    return end;
  }
  // A fresh record for packet idx (the op's next), keeping the open ones
  // of [low, idx).
  Rec& open(uint32_t low, uint32_t idx) {
    base_ = std::max(base_, low);
    if (idx - base_ >= buf_.size()) make_room(idx);
    Rec& r = buf_[idx & mask_];
    r = Rec{};
    bits_[(idx & mask_) >> 6] &= ~(uint64_t{1} << (idx & mask_ & 63));
    ++open_;
    return r;
  }
  // Its address if it is in the ring (a prefetch hint), else nullptr.
  const Rec* peek(uint32_t idx) const { return idx >= base_ && !buf_.empty() ? &buf_[idx & mask_] : nullptr; }
  void clear() {
    std::vector<Rec>().swap(buf_);
    std::vector<uint64_t>().swap(bits_);
    std::vector<std::pair<uint32_t, Rec>>().swap(strays_);
    mask_ = base_ = open_ = 0;
  }
  size_t capacity() const { return buf_.size(); }
  size_t stragglers() const { return strays_.size(); }

 private:
  using Strays = std::vector<std::pair<uint32_t, Rec>>;
  typename Strays::const_iterator lower(uint32_t idx) const {
    return std::lower_bound(strays_.begin(), strays_.end(), idx, [](const auto& s, uint32_t i) { return s.first < i; });
  }
  typename Strays::iterator lower(uint32_t idx) {
    return std::lower_bound(strays_.begin(), strays_.end(), idx, [](const auto& s, uint32_t i) { return s.first < i; });
  }
  const Rec* find(uint32_t idx) const {
    const auto it = lower(idx);
    return it != strays_.end() && it->first == idx ? &it->second : nullptr;
  }
  Rec& straggler(uint32_t idx) { return lower(idx)->second; }

  // The ring holds [base, idx) and has no room for idx.
  void make_room(uint32_t idx) {
    const size_t cap = buf_.size();
    if (cap >= kMinRecs && 4 * open_ <= cap) {  // mostly done: its older half leaves
      const uint32_t to = base_ + static_cast<uint32_t>(cap / 2);
      for (uint32_t i = next_open(base_, to); i < to; i = next_open(i + 1, to)) {
        strays_.emplace_back(i, buf_[i & mask_]);  // (above every straggler: still in order)
        --open_;
      }
      base_ = to;
      if (idx - base_ < cap) return;
    }
    size_t grown = cap ? 2 * cap : kMinRecs;
    while (grown <= idx - base_) grown *= 2;
    std::vector<Rec> b(grown);
    std::vector<uint64_t> bits((grown + 63) / 64);  // slot s's bit: bit s & 63 of word s >> 6
    for (uint32_t i = base_; i < idx && cap; ++i) {
      b[i & (grown - 1)] = buf_[i & mask_];
      if (done(i)) bits[(i & (grown - 1)) >> 6] |= uint64_t{1} << (i & (grown - 1) & 63);
    }
    buf_.swap(b);
    bits_.swap(bits);
    mask_ = static_cast<uint32_t>(grown - 1);
  }

  std::vector<Rec> buf_;
  std::vector<uint64_t> bits_;
  Strays strays_;           // open records below base_, by index
  uint32_t mask_ = 0;
  uint32_t base_ = 0;       // the ring holds [base_, next)
  uint32_t open_ = 0;       // open records in the ring
};

}  // namespace ina::host
