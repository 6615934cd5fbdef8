#pragma once
// Per-item deadlines behind a single engine timer: a min-heap of
// (deadline, key) plus the time of the engine timer currently armed. Items
// are never removed early; the owner checks, when one expires, whether it is
// still current (lazy deletion), which keeps every operation O(log n).
#include <cstdint>
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
    heap_.push({at, key});
    if (at >= armed_) return false;
    armed_ = at;
    return true;
  }
  // On the engine timer: hands every expired item to `fn`, then returns the
  // time to re-arm at (kNever if nothing is left). fn may push().
  // A firing earlier than the armed time is a superseded engine timer: ignored,
  // so duplicates never multiply. (Invariant: armed_ <= every item's deadline.)
  template <typename Fn>
  Time expire(Time now, Fn&& fn) {
    if (now < armed_) return kNever;
    armed_ = kNever;
    while (!heap_.empty() && heap_.top().at <= now) {
      const Item it = heap_.top();
      heap_.pop();
      fn(it.key, it.at);
    }
    if (heap_.empty()) return kNever;
    const Time next = heap_.top().at;
    if (next >= armed_) return kNever;  // fn already armed an earlier timer
    armed_ = next;
    return next;
  }
  size_t size() const { return heap_.size(); }

 private:
  struct Item {
    Time at;
    Key key;
    bool operator>(const Item& o) const { return at > o.at || (at == o.at && key > o.key); }
  };
  std::priority_queue<Item, std::vector<Item>, std::greater<Item>> heap_;
  Time armed_ = kNever;
};

}  // namespace ina
