#pragma once
// A fake engine for the node targets: owns a PacketPool, tracks which packets
// the node owns, and checks the ownership contract of proto/node.hpp:
//  - a packet handed to on_packet or obtained from alloc() is sent or freed
//    exactly once, before the call returns (the switch and the PS keep no
//    packets between calls);
//  - send/free/multicast of a packet the node does not own (double free,
//    use after send) is a finding;
//  - everything sent must be a packet the wire decoder accepts (the UDP
//    runtime encodes it and the receiver decodes it), with count <= capacity.
//    (Where it goes is the target's to check: a switch forwards whatever it
//    is not the destination of, kNoNode included.)
// Timers are kept in a min-heap and fired by advance(), as an engine would.
#include <algorithm>
#include <functional>
#include <queue>
#include <unordered_set>
#include <vector>

#include "fuzz.hpp"
#include "proto/node.hpp"

namespace ina::fuzz {

class FakeEffects final : public Effects {
 public:
  FakeEffects(uint16_t capacity, bool has_multicast) : pool_(capacity, 64), mcast_(has_multicast) {}
  ~FakeEffects() override {
    for (Packet* p : owned_) pool_.put(p);
  }

  Packet* alloc() override {
    Packet* p = pool_.get();
    owned_.insert(p);
    return p;
  }
  void send(Packet* p) override {
    take(p, "send");
    check_sendable(*p);
    sent_.push_back(p);
  }
  void free(Packet* p) override {
    take(p, "free");
    pool_.put(p);
  }
  void set_timer(Time at, uint64_t token) override { timers_.push({at, token}); }
  bool multicast(Packet* p) override {
    if (!mcast_) return false;
    FUZZ_CHECK(p->h.dst == kMulticast, "multicast of a packet addressed to %u", p->h.dst);
    take(p, "multicast");
    check_sendable(*p);
    sent_.push_back(p);
    return true;
  }

  // Decodes `wire` into a fresh packet the node will own, or returns null if
  // the decoder rejects it (the runtime drops such datagrams).
  Packet* inject(std::span<const std::byte> wire) {
    Packet* p = pool_.get();
    if (decode(wire, *p) != DecodeError::None) {
      ++rejected_;
      pool_.put(p);
      return nullptr;
    }
    owned_.insert(p);
    return p;
  }

  // After each call into the node: nothing may still be owned by it.
  // Returns the packets sent during the call (valid until the next settle).
  const std::vector<Packet*>& settle(const char* call) {
    FUZZ_CHECK(owned_.empty(), "%s returned still owning %zu packet(s) (leak)", call, owned_.size());
    for (Packet* p : last_) pool_.put(p);
    last_.swap(sent_);
    sent_.clear();
    FUZZ_CHECK(pool_.in_use() == last_.size(), "pool counts %zu packets in use, %zu accounted for", pool_.in_use(),
               last_.size());
    return last_;
  }

  // Fires, in deadline order, every timer due at or before `until` through
  // `fire(token, at)`, then moves the clock to `until`.
  template <typename Fire>
  void advance(Time until, Fire&& fire) {
    while (!timers_.empty() && timers_.top().at <= until) {
      const Timer t = timers_.top();
      timers_.pop();
      now_ = std::max(now_, t.at);
      fire(t.token, now_);
    }
    now_ = std::max(now_, until);
  }
  Time now() const { return now_; }
  Time next_timer() const { return timers_.empty() ? kNever : timers_.top().at; }
  size_t pending_timers() const { return timers_.size(); }
  uint16_t capacity() const { return pool_.capacity(); }
  size_t rejected() const { return rejected_; }

 private:
  struct Timer {
    Time at;
    uint64_t token;
    bool operator>(const Timer& o) const { return at > o.at; }
  };

  void take(Packet* p, const char* what) {
    FUZZ_CHECK(p != nullptr, "%s(nullptr)", what);
    FUZZ_CHECK(owned_.erase(p) == 1, "%s of a packet the node does not own (double send/free, or use after send)",
               what);
  }
  void check_sendable(const Packet& p) {
    FUZZ_CHECK(p.h.count <= pool_.capacity(), "sent a packet with count %u > capacity %u: %s", p.h.count,
               pool_.capacity(), describe(p.h).c_str());
    const std::span<std::byte> buf(buf_.data(), encoded_size(p.h));
    FUZZ_CHECK(encode(p, buf) == buf.size(), "encode failed: %s", describe(p.h).c_str());
    Header h;
    const DecodeError err = decode(buf, h, std::span<int32_t>(payload_.data(), p.h.count));
    FUZZ_CHECK(err == DecodeError::None, "sent a packet the wire decoder rejects (%s): %s", to_string(err),
               describe(p.h).c_str());
  }

  PacketPool pool_;
  bool mcast_;
  std::vector<std::byte> buf_ = std::vector<std::byte>(encoded_size(Header{.count = pool_.capacity()}));
  std::vector<int32_t> payload_ = std::vector<int32_t>(pool_.capacity());
  std::unordered_set<Packet*> owned_;
  std::vector<Packet*> sent_, last_;
  std::priority_queue<Timer, std::vector<Timer>, std::greater<Timer>> timers_;
  Time now_ = 0;
  size_t rejected_ = 0;
};

// INA_FUZZ_VERBOSE=1: the targets print what an input exercised (to check seeds).
inline bool verbose() {
  static const bool v = std::getenv("INA_FUZZ_VERBOSE") != nullptr;
  return v;
}

}  // namespace ina::fuzz
