#pragma once
// Per-item deadlines behind a single engine timer. Items are never removed
// early; the owner checks, when one expires, whether it is still current
// (lazy deletion). Deadlines pushed in non-decreasing order (the common case:
// now + timeout) go to a FIFO in O(1); the others (backed-off retries) to a
// min-heap. Expiry merges the two in deadline order. The FIFO is a ring
// that doubles when full: nothing is allocated per item once it has grown
// to the queue's working size (a deque allocates and frees a block every few
// dozen items, i.e. per batch of packets on the runtime's data path).
#include <cstdint>
#include <functional>
#include <memory>
#include <queue>
#include <vector>

#include "core/time.hpp"

namespace ina {

template <typename Key>
class DeadlineQueue {
 public:
  // Adds an item; returns true if the engine timer must be (re)armed at `at`.
  bool push(Time at, Key key) {
    if (fifo_.empty() || at >= fifo_.back().at) fifo_.push_back({at, key});
    else heap_.push({at, key});
    return arm(at);
  }
  // The same, but before the FIFO ring would grow, the items at its front
  // that `live` says are no longer current are dropped (expire() would skip
  // them): the ring then holds about the live span, not every push since the
  // earliest deadline (a transport pushes one item per packet sent and most
  // are answered long before their deadline). Which items fire, and in what
  // order, is unchanged: only dead items go, and only when `at` joins the
  // FIFO either way.
  // If that drops less than a quarter of the ring, the dead items behind a
  // live front go too (a packet waiting out a long timeout at the front,
  // answered ones behind it: the ring would otherwise span every push
  // until that deadline), and if that still frees less than a quarter the
  // ring doubles: with about as many live items as slots, every push would
  // otherwise drop one item and ask `live` twice; at twice the live span it
  // asks about once.
  // (Inline: a deadline onto a FIFO with room, the common case; the rest
  // out of line in push_slow().)
  template <typename Live>
  [[gnu::always_inline]] bool push(Time at, Key key, Live&& live) {
    if (!fifo_.has_room() || (!fifo_.empty() && at < fifo_.back().at)) [[unlikely]] return push_slow(at, key, live);
    fifo_.push_back_with_room({at, key});
    return arm(at);
  }
  // On the engine timer: hands every expired item to `fn` in deadline order,
  // drops items at the front that `live` says are no longer current (so a
  // timer is not armed for each of them), then returns the time to re-arm at
  // (kNever: nothing to arm). fn may push().
  // A firing earlier than the armed time is a superseded engine timer and is
  // ignored, so duplicate timers never multiply. (Invariant: armed_ <= every
  // item's deadline.)
  template <typename Fn, typename Live>
  Time expire(Time now, Fn&& fn, Live&& live) {
    if (now < armed_) return kNever;
    armed_ = kNever;
    for (;;) {
      const bool f = !fifo_.empty() && fifo_.front().at <= now;
      const bool h = !heap_.empty() && heap_.top().at <= now;
      if (!f && !h) break;
      Item it;
      if (f && (!h || fifo_.front().at <= heap_.top().at)) { it = fifo_.front(); fifo_.pop_front(); }
      else { it = heap_.top(); heap_.pop(); }
      fn(it.key, it.at);
    }
    while (!fifo_.empty() && !live(fifo_.front().key, fifo_.front().at)) fifo_.pop_front();
    while (!heap_.empty() && !live(heap_.top().key, heap_.top().at)) heap_.pop();
    Time next = kNever;
    if (!fifo_.empty()) next = fifo_.front().at;
    if (!heap_.empty() && heap_.top().at < next) next = heap_.top().at;
    if (next >= armed_) return kNever;  // fn already armed an earlier timer
    armed_ = next;
    return next;
  }
  size_t size() const { return fifo_.size() + heap_.size(); }

 private:
  bool arm(Time at) {
    if (at >= armed_) return false;
    armed_ = at;
    return true;
  }
  template <typename Live>
  [[gnu::noinline]] bool push_slow(Time at, Key key, Live& live) {
    if (fifo_.full() && at >= fifo_.back().at) {
      const size_t cap = fifo_.size();
      while (!fifo_.empty() && !live(fifo_.front().key, fifo_.front().at)) fifo_.pop_front();
      if (cap - fifo_.size() < cap / 4) fifo_.keep_if([&](const Item& it) { return live(it.key, it.at); });
      if (cap - fifo_.size() < cap / 4) fifo_.grow();
    }
    return push(at, key);
  }
  struct Item {
    Time at;
    Key key;
    bool operator>(const Item& o) const { return at > o.at || (at == o.at && key > o.key); }
  };
  // FIFO ring over a power-of-two buffer.
  class Ring {
   public:
    bool empty() const { return n_ == 0; }
    bool full() const { return n_ != 0 && n_ == cap_; }  // the next push_back grows it
    bool has_room() const { return n_ < cap_; }
    size_t size() const { return n_; }
    const Item& front() const { return buf_[head_]; }
    const Item& back() const { return buf_[(head_ + n_ - 1) & mask()]; }
    void pop_front() {
      head_ = (head_ + 1) & mask();
      --n_;
    }
    void push_back(const Item& it) {
      if (n_ == cap_) grow();
      push_back_with_room(it);
    }
    void push_back_with_room(const Item& it) {
      buf_[(head_ + n_) & mask()] = it;
      ++n_;
    }

    // Keeps the items `keep` says to, in order.
    template <typename Keep>
    void keep_if(Keep&& keep) {
      size_t kept = 0;
      for (size_t i = 0; i < n_; ++i) {
        const Item& it = buf_[(head_ + i) & mask()];
        if (keep(it)) buf_[(head_ + kept++) & mask()] = it;
      }
      n_ = kept;
    }
    [[gnu::noinline]] void grow() {
      const size_t cap = cap_ ? 2 * cap_ : 16;
      auto b = std::make_unique<Item[]>(cap);
      for (size_t i = 0; i < n_; ++i) b[i] = buf_[(head_ + i) & mask()];
      buf_ = std::move(b);
      cap_ = cap;
      head_ = 0;
    }

   private:
    size_t mask() const { return cap_ - 1; }
    std::unique_ptr<Item[]> buf_;
    size_t cap_ = 0, head_ = 0, n_ = 0;
  };
  Ring fifo_;
  std::priority_queue<Item, std::vector<Item>, std::greater<Item>> heap_;
  Time armed_ = kNever;
};

}  // namespace ina
