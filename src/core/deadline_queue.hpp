#pragma once
// Per-item deadlines behind a single engine timer. Items are never removed
// early; the owner checks, when one expires, whether it is still current
// (lazy deletion). Deadlines pushed in non-decreasing order (the common case:
// now + timeout) go to a FIFO in O(1); the others (backed-off retries) to a
// min-heap. Expiry merges the two in deadline order.
#include <cstdint>
#include <deque>
#include <functional>
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
    if (at >= armed_) return false;
    armed_ = at;
    return true;
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
  struct Item {
    Time at;
    Key key;
    bool operator>(const Item& o) const { return at > o.at || (at == o.at && key > o.key); }
  };
  std::deque<Item> fifo_;
  std::priority_queue<Item, std::vector<Item>, std::greater<Item>> heap_;
  Time armed_ = kNever;
};

}  // namespace ina
