#pragma once
// The fake engine of the unit tests and the fuzz targets (fuzz/effects.hpp):
// an Effects that a test drives a single node through by hand. It
//  - records every packet the node sends (header and payload copied out, the
//    packet back to the pool at once) and every timer it sets;
//  - checks the ownership contract of proto/node.hpp: a packet from alloc()
//    or inject() belongs to the node until it sends or frees it, exactly once;
//    sending or freeing a packet the node does not own (a double free, a use
//    after send) is a violation;
//  - checks that every packet sent is one the wire decoder accepts (the UDP
//    runtime encodes it and the receiver decodes it), with count <= capacity;
//  - counts the packets out of its pool (live()), so that a test can assert
//    that none leaked.
// Violations are collected in violations() and passed to on_violation, if set
// (the fuzz targets abort there). Timers are also kept in deadline order and
// fired by advance(), as an engine would.
//
// No gtest here: the fuzz targets include this header too.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <new>
#include <queue>
#include <span>
#include <string>
#include <unordered_set>
#include <utility>
#include <vector>

#include "core/time.hpp"
#include "proto/node.hpp"
#include "wire/packet.hpp"

namespace ina::test {

// A packet as it was handed to send() or multicast().
struct Sent {
  Header h;
  std::vector<int32_t> v;

  // A Packet holding this header and payload, for readers that take one (wire/kv.hpp).
  std::shared_ptr<const Packet> packet() const {
    constexpr std::align_val_t align{alignof(Packet)};
    void* mem = ::operator new(sizeof(Packet) + 4 * v.size(), align);
    Packet* p = new (mem) Packet{};
    p->h = h;
    if (!v.empty()) std::memcpy(p->payload(), v.data(), 4 * v.size());
    return std::shared_ptr<const Packet>(p, [align](const Packet* q) {
      q->~Packet();
      ::operator delete(const_cast<Packet*>(q), align);
    });
  }
};

class FakeEffects final : public Effects {
 public:
  // `has_multicast`: multicast() replicates (records the packet once) instead
  // of leaving the packet with the node for unicast copies.
  explicit FakeEffects(uint16_t capacity = 128, bool has_multicast = false) : pool(capacity), mcast_(has_multicast) {}

  Packet* alloc() override {
    Packet* p = pool.get();
    owned_.insert(p);
    return p;
  }
  void send(Packet* p) override {
    if (!take(p, "send")) return;
    record(*p);
    pool.put(p);
  }
  void free(Packet* p) override {
    if (!take(p, "free")) return;
    ++freed;
    pool.put(p);
  }
  void set_timer(Time at, uint64_t token) override {
    timers.emplace_back(at, token);
    schedule_.push({at, seq_++, token});
  }
  bool multicast(Packet* p) override {
    if (!mcast_) return false;
    if (p->h.dst != kMulticast) violation("multicast of a packet addressed to " + std::to_string(p->h.dst));
    if (!take(p, "multicast")) return true;
    record(*p);
    pool.put(p);
    return true;
  }

  // Decodes `wire` into a fresh packet the node will own, or returns null if
  // the decoder rejects it (the runtime drops such datagrams).
  Packet* inject(std::span<const std::byte> wire) {
    Packet* p = pool.get();
    if (decode(wire, *p, pool) != DecodeError::None) {
      ++rejected_;
      pool.put(p);
      return nullptr;
    }
    owned_.insert(p);
    return p;
  }

  // The packets sent since the last take().
  std::vector<Sent> take() { return std::exchange(sent, {}); }

  // After a call into a node that keeps no packets between calls: it owns
  // none (else a leak is a violation) and the pool agrees. Returns take().
  std::vector<Sent> settle(const char* call) {
    if (!owned_.empty())
      violation(std::string(call) + " returned still owning " + std::to_string(owned_.size()) + " packet(s) (leak)");
    if (pool.in_use() != owned_.size())
      violation("pool counts " + std::to_string(pool.in_use()) + " packets in use, " + std::to_string(owned_.size()) +
                " accounted for");
    return take();
  }

  // Fires, in deadline order (ties in the order set), every timer due at or
  // before `until` through `fire(token, at)`, then moves the clock to `until`.
  template <typename Fire>
  void advance(Time until, Fire&& fire) {
    while (!schedule_.empty() && schedule_.top().at <= until) {
      const Timer t = schedule_.top();
      schedule_.pop();
      now_ = std::max(now_, t.at);
      fire(t.token, now_);
    }
    now_ = std::max(now_, until);
  }
  Time now() const { return now_; }
  Time next_timer() const { return schedule_.empty() ? kNever : schedule_.top().at; }
  size_t pending_timers() const { return schedule_.size(); }

  // Packets out of the pool: owned by the node, or taken by a test from `pool` directly.
  size_t live() const { return pool.in_use(); }
  // Packets the node owns (from alloc() or inject(), not yet sent or freed).
  size_t owned() const { return owned_.size(); }
  uint16_t capacity() const { return pool.capacity(); }
  size_t rejected() const { return rejected_; }
  const std::vector<std::string>& violations() const { return violations_; }

  PacketPool pool;
  std::vector<Sent> sent;                          // since the last take()
  std::vector<std::pair<Time, uint64_t>> timers;   // every set_timer call, in order
  size_t freed = 0;                                // free() calls
  std::function<void(const std::string&)> on_violation;

 private:
  struct Timer {
    Time at;
    uint64_t seq, token;
    bool operator>(const Timer& o) const { return at != o.at ? at > o.at : seq > o.seq; }
  };

  void violation(std::string what) {
    violations_.push_back(what);
    if (on_violation) on_violation(violations_.back());
  }
  bool take(Packet* p, const char* what) {
    if (!p) {
      violation(std::string(what) + "(nullptr)");
      return false;
    }
    if (owned_.erase(p) != 1) {
      violation(std::string(what) + " of a packet the node does not own (double send/free, or use after send)");
      return false;
    }
    return true;
  }
  void record(const Packet& p) {
    check_sendable(p);
    Sent s;
    s.h = p.h;
    s.v.assign(p.payload(), p.payload() + std::min<size_t>(p.h.count, pool.capacity()));
    sent.push_back(std::move(s));
  }
  void check_sendable(const Packet& p) {
    if (p.h.count > pool.capacity()) {
      violation("sent a packet with count " + std::to_string(p.h.count) + " > capacity " +
                std::to_string(pool.capacity()) + ": " + describe(p.h));
      return;
    }
    const std::span<std::byte> buf(buf_.data(), encoded_size(p.h));
    if (encode(p, buf) != buf.size()) {
      violation("encode failed: " + describe(p.h));
      return;
    }
    Header h;
    const DecodeError err = decode(buf, h, std::span<int32_t>(payload_.data(), p.h.count));
    if (err != DecodeError::None)
      violation(std::string("sent a packet the wire decoder rejects (") + to_string(err) + "): " + describe(p.h));
  }

  bool mcast_;
  std::vector<std::byte> buf_ = std::vector<std::byte>(encoded_size(Header{.count = pool.capacity()}));
  std::vector<int32_t> payload_ = std::vector<int32_t>(pool.capacity());
  std::unordered_set<Packet*> owned_;
  std::priority_queue<Timer, std::vector<Timer>, std::greater<Timer>> schedule_;
  uint64_t seq_ = 0;
  Time now_ = 0;
  size_t rejected_ = 0;
  std::vector<std::string> violations_;
};

}  // namespace ina::test
