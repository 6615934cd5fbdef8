// Wire format (encode/decode with validation) and the fixed-point codec.
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "core/rng.hpp"
#include "wire/packet.hpp"
#include "wire/quant.hpp"

namespace ina {
namespace {

// A header with every field set to a distinctive, valid value.
Header full_header(PktType type = PktType::Data) {
  Header h;
  h.version = kWireVersion;
  h.type = type;
  h.flags = flag::kAll;
  h.job = 0xBEEF;
  h.src = 0x1234;
  h.dst = kMulticast;
  h.rank = 63;
  h.nworkers = 64;
  h.psn = 0xDEADBEEF;
  h.bitmap = ~0ULL;
  h.priority = 0xFEDCBA98;
  h.agg_index = 0x01020304;
  h.count = 64;
  h.reserved = 0xABCD;
  return h;
}

std::vector<int32_t> payload_of(size_t n, uint64_t seed) {
  std::vector<int32_t> v(n);
  Rng rng(seed);
  for (auto& x : v) x = static_cast<int32_t>(static_cast<uint32_t>(rng.next()));
  if (n > 0) v[0] = std::numeric_limits<int32_t>::min();
  if (n > 1) v[1] = std::numeric_limits<int32_t>::max();
  if (n > 2) v[2] = -1;
  if (n > 3) v[3] = 0;
  return v;
}

std::vector<std::byte> encode_vec(const Header& h, const std::vector<int32_t>& payload) {
  std::vector<std::byte> buf(encoded_size(h));
  EXPECT_EQ(encode(h, payload, buf), buf.size());
  return buf;
}

void expect_same(const Header& a, const Header& b) {
  EXPECT_EQ(a.version, b.version);
  EXPECT_EQ(a.type, b.type);
  EXPECT_EQ(a.flags, b.flags);
  EXPECT_EQ(a.job, b.job);
  EXPECT_EQ(a.src, b.src);
  EXPECT_EQ(a.dst, b.dst);
  EXPECT_EQ(a.rank, b.rank);
  EXPECT_EQ(a.nworkers, b.nworkers);
  EXPECT_EQ(a.psn, b.psn);
  EXPECT_EQ(a.bitmap, b.bitmap);
  EXPECT_EQ(a.priority, b.priority);
  EXPECT_EQ(a.agg_index, b.agg_index);
  EXPECT_EQ(a.count, b.count);
  EXPECT_EQ(a.reserved, b.reserved);
}

DecodeError decode_of(const Header& h, const std::vector<int32_t>& payload, size_t out_cap = 1024) {
  const auto buf = encode_vec(h, payload);
  Header got;
  std::vector<int32_t> out(out_cap);
  return decode(buf, got, out);
}

// ---------------------------------------------------------------- round trip

TEST(Wire, RoundTripEveryFieldAndType) {
  for (uint8_t t = 1; t <= kMaxPktType; ++t) {
    SCOPED_TRACE(int(t));
    const Header h = full_header(static_cast<PktType>(t));
    const auto payload = payload_of(h.count, t);
    const auto buf = encode_vec(h, payload);
    ASSERT_EQ(buf.size(), kHeaderBytes + 4u * 64);
    Header got;
    std::vector<int32_t> out(64, 7);
    ASSERT_EQ(decode(buf, got, out), DecodeError::None);
    expect_same(got, h);
    EXPECT_EQ(out, payload);
  }
}

TEST(Wire, RoundTripSmallValuesAndEmptyPayload) {
  Rng rng(99);
  for (int it = 0; it < 500; ++it) {
    Header h;
    h.type = static_cast<PktType>(1 + rng.below(kMaxPktType));
    h.flags = static_cast<uint16_t>(rng.below(flag::kAll + 1));
    h.job = static_cast<uint16_t>(rng.next());
    h.src = static_cast<NodeId>(rng.next());
    h.dst = static_cast<NodeId>(rng.next());
    h.nworkers = static_cast<uint8_t>(1 + rng.below(kMaxWireWorkers));
    h.rank = static_cast<uint8_t>(rng.below(h.nworkers));
    h.bitmap = rng.next() & full_bitmap(h.nworkers);
    h.psn = static_cast<uint32_t>(rng.next());
    h.priority = static_cast<uint32_t>(rng.next());
    h.agg_index = static_cast<uint32_t>(rng.next());
    h.count = static_cast<uint16_t>(rng.below(100));
    h.reserved = static_cast<uint16_t>(rng.next());
    const auto payload = payload_of(h.count, it);
    const auto buf = encode_vec(h, payload);
    Header got;
    std::vector<int32_t> out(h.count);
    ASSERT_EQ(decode(buf, got, out), DecodeError::None) << describe(h);
    expect_same(got, h);
    EXPECT_EQ(out, payload);
  }
}

TEST(Wire, NetworkByteOrderOfPayload) {
  Header h;
  h.nworkers = 1;
  h.count = 2;
  const std::vector<int32_t> payload = {0x01020304, -2};
  const auto buf = encode_vec(h, payload);
  ASSERT_EQ(buf.size(), kHeaderBytes + 8);
  EXPECT_EQ(buf[0], std::byte{kWireVersion});
  EXPECT_EQ(buf[1], std::byte{static_cast<uint8_t>(PktType::Data)});
  EXPECT_EQ(buf[kHeaderBytes + 0], std::byte{0x01});
  EXPECT_EQ(buf[kHeaderBytes + 1], std::byte{0x02});
  EXPECT_EQ(buf[kHeaderBytes + 2], std::byte{0x03});
  EXPECT_EQ(buf[kHeaderBytes + 3], std::byte{0x04});
  EXPECT_EQ(buf[kHeaderBytes + 4], std::byte{0xFF});
  EXPECT_EQ(buf[kHeaderBytes + 7], std::byte{0xFE});
}

// The payload's byte swap runs vectorized (AVX2 / SSSE3 clones) on long
// payloads, with a scalar tail: every word of a 8197-value payload (the
// vector body and a tail of 5) is big-endian, byte by byte, and decodes back.
TEST(Wire, LongPayloadsAreBigEndianInEveryWord) {
  Header h;
  h.nworkers = 1;
  h.count = 8197;
  std::vector<int32_t> payload(h.count);
  for (size_t i = 0; i < payload.size(); ++i) payload[i] = static_cast<int32_t>(0x9E3779B9u * (i + 1));
  const auto buf = encode_vec(h, payload);
  ASSERT_EQ(buf.size(), kHeaderBytes + 4u * h.count);
  for (size_t i = 0; i < payload.size(); ++i) {
    const auto v = static_cast<uint32_t>(payload[i]);
    for (int b = 0; b < 4; ++b)
      ASSERT_EQ(buf[kHeaderBytes + 4 * i + b], std::byte{static_cast<uint8_t>(v >> (24 - 8 * b))}) << "word " << i;
  }
  Header back;
  std::vector<int32_t> out(h.count);
  ASSERT_EQ(decode(buf, back, out), DecodeError::None);
  EXPECT_EQ(out, payload);
}

// A 64-value pool's packets start on cache lines (header one line, values
// four), and one handed out again carries nothing of its last use: the
// free list's link lives in a free packet's multicast set.
TEST(PacketPool, PacketsStartOnCacheLinesAndComeBackCleared) {
  PacketPool pool(64, 8);
  std::vector<Packet*> got;
  for (int i = 0; i < 20; ++i) got.push_back(pool.get());  // three slabs
  for (Packet* p : got) {
    EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % 64, 0u);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(p->payload()) % 64, 0u);
    p->h = full_header(PktType::Ack);
    p->h.count = 64;
    p->mcast = RankBits::first(100);
  }
  for (Packet* p : got) pool.put(p);
  EXPECT_EQ(pool.in_use(), 0u);
  EXPECT_EQ(pool.free_count(), 24u);
  Packet* src = pool.get();
  EXPECT_EQ(src->mcast, RankBits{});
  src->h = full_header(PktType::Data);
  src->h.count = 3;
  for (int i = 0; i < 24 - 1; ++i) {
    Packet* p = i % 2 ? pool.get() : pool.clone(*src);
    EXPECT_EQ(p->mcast, RankBits{}) << i;
    EXPECT_EQ(p->h.count, i % 2 ? 0 : 3) << i;  // a default header, or src's
    EXPECT_EQ(p->h.psn, i % 2 ? 0u : src->h.psn) << i;
  }
  EXPECT_EQ(pool.in_use(), 24u);
  EXPECT_EQ(pool.allocated(), 24u) << "every get came off the free list";
}

TEST(Wire, PacketOverloadsRoundTrip) {
  PacketPool pool(64);
  Packet* p = pool.get();
  p->h = full_header(PktType::Ack);
  p->h.count = 10;
  for (int i = 0; i < 10; ++i) p->payload()[i] = i * 1000 - 4000;
  std::vector<std::byte> buf(encoded_size(p->h));
  ASSERT_EQ(encode(*p, buf), buf.size());
  Packet* q = pool.get();
  ASSERT_EQ(decode(buf, *q, pool), DecodeError::None);
  expect_same(q->h, p->h);
  for (int i = 0; i < 10; ++i) EXPECT_EQ(q->payload()[i], p->payload()[i]);
  pool.put(p);
  pool.put(q);
  EXPECT_EQ(pool.in_use(), 0u);
}

TEST(Wire, EncodeRefusesSmallBuffers) {
  const Header h = full_header();
  const auto payload = payload_of(64, 1);
  std::vector<std::byte> buf(encoded_size(h) - 1);
  EXPECT_EQ(encode(h, payload, buf), 0u);
  std::vector<std::byte> ok(encoded_size(h));
  const std::vector<int32_t> short_payload(63, 1);
  EXPECT_EQ(encode(h, short_payload, ok), 0u);
}

// The wire's bitmap is 64 bits: a header whose bitmap names a rank >= 64
// (a simulator-only job, kMaxWorkers = 128) is not encoded at all, rather
// than sent with those ranks cut off.
TEST(Wire, EncodeRefusesRanksBeyondTheWireBitmap) {
  Header h = full_header();
  const auto payload = payload_of(64, 1);
  std::vector<std::byte> buf(encoded_size(h));
  h.bitmap = RankBits::bit(64);
  EXPECT_EQ(encode(h, payload, buf), 0u);
  h.bitmap = RankBits::bit(63);
  EXPECT_EQ(encode(h, payload, buf), encoded_size(h));
}

// RankBits at its word boundary and its ends.
TEST(RankBits, BitsFirstAndLowestAcrossTheWordBoundary) {
  for (unsigned r : {0u, 1u, 62u, 63u, 64u, 65u, 126u, 127u}) {
    const RankBits b = RankBits::bit(r);
    EXPECT_EQ(b.count(), 1) << r;
    EXPECT_EQ(b.lowest(), r);
    for (unsigned q = 0; q < kRankBits; ++q) EXPECT_EQ(b.test(q), q == r) << r << " " << q;
    EXPECT_EQ(r < 64 ? b.lo() : b.hi(), 1ULL << (r % 64));
    EXPECT_EQ(r < 64 ? b.hi() : b.lo(), 0u);
  }
  EXPECT_FALSE(RankBits::bit(200).any());  // beyond the set: no bit, never another rank's
  const struct {
    unsigned n;
    uint64_t lo, hi;
  } firsts[] = {{0, 0, 0}, {1, 1, 0}, {63, ~0ULL >> 1, 0}, {64, ~0ULL, 0}, {65, ~0ULL, 1},
                {72, ~0ULL, 0xFF}, {127, ~0ULL, ~0ULL >> 1}, {128, ~0ULL, ~0ULL}};
  for (const auto& f : firsts) {
    const RankBits b = RankBits::first(f.n);
    EXPECT_EQ(b.lo(), f.lo) << f.n;
    EXPECT_EQ(b.hi(), f.hi) << f.n;
    EXPECT_EQ(b.count(), static_cast<int>(f.n));
  }
  EXPECT_EQ(RankBits{}.lowest(), kRankBits);
  // Set algebra over both words: 72 ranks, one missing on each side of 64.
  RankBits have = RankBits::first(72) ^ RankBits::bit(5) ^ RankBits::bit(70);
  EXPECT_EQ(have.count(), 70);
  EXPECT_NE(have, RankBits::first(72));
  EXPECT_EQ(RankBits::first(72) & ~have, RankBits::bit(5) | RankBits::bit(70));
  have |= RankBits::bit(70);
  EXPECT_EQ((RankBits::first(72) & ~have).lowest(), 5u);
  EXPECT_EQ(RankBits(0b101), RankBits::bit(0) | RankBits::bit(2));  // a uint64_t is the low word
}

// ---------------------------------------------------------------- malformed

TEST(Wire, TruncatedHeader) {
  const Header h = full_header();
  const auto buf = encode_vec(h, payload_of(64, 2));
  Header got;
  std::vector<int32_t> out(64);
  for (size_t len = 0; len < kHeaderBytes; ++len)
    EXPECT_EQ(decode(std::span(buf.data(), len), got, out), DecodeError::Truncated) << len;
}

TEST(Wire, BadVersion) {
  for (uint8_t v : {0, 2, 255}) {
    Header h = full_header();
    h.version = v;
    EXPECT_EQ(decode_of(h, payload_of(64, 3)), DecodeError::BadVersion) << int(v);
  }
}

TEST(Wire, BadType) {
  for (uint8_t t : {0, kMaxPktType + 1, 200, 255}) {
    Header h = full_header();
    h.type = static_cast<PktType>(t);
    EXPECT_EQ(decode_of(h, payload_of(64, 3)), DecodeError::BadType) << int(t);
  }
}

TEST(Wire, UnknownFlags) {
  for (uint16_t f : {uint16_t(flag::kAll + 1), uint16_t(1u << 15), uint16_t(flag::kAckNow | (1u << 15))}) {
    Header h = full_header();
    h.flags = f;
    EXPECT_EQ(decode_of(h, payload_of(64, 3)), DecodeError::BadFlags) << f;
  }
}

TEST(Wire, WorkerCountOutOfRange) {
  for (uint8_t n : {0, 65, 255}) {
    Header h = full_header();
    h.nworkers = n;
    h.rank = 0;
    h.bitmap = 1;
    EXPECT_EQ(decode_of(h, payload_of(64, 3)), DecodeError::BadWorkerCount) << int(n);
  }
  // The bounds themselves are valid.
  for (uint8_t n : {1, 64}) {
    Header h = full_header();
    h.nworkers = n;
    h.rank = 0;
    h.bitmap = 1;
    EXPECT_EQ(decode_of(h, payload_of(64, 3)), DecodeError::None) << int(n);
  }
}

TEST(Wire, RankNotBelowWorkerCount) {
  for (auto [n, r] : std::vector<std::pair<uint8_t, uint8_t>>{{4, 4}, {4, 200}, {1, 1}, {64, 64}}) {
    Header h = full_header();
    h.nworkers = n;
    h.rank = r;
    h.bitmap = 1;
    EXPECT_EQ(decode_of(h, payload_of(64, 3)), DecodeError::BadRank) << int(n) << " " << int(r);
  }
  Header h = full_header();
  h.nworkers = 4;
  h.rank = 3;
  h.bitmap = 0xF;
  EXPECT_EQ(decode_of(h, payload_of(64, 3)), DecodeError::None);
}

TEST(Wire, BitmapBeyondWorkerCount) {
  for (auto [n, b] : std::vector<std::pair<uint8_t, uint64_t>>{{4, 0x10}, {4, 0x1F}, {1, 0x2}, {63, 1ULL << 63}}) {
    Header h = full_header();
    h.nworkers = n;
    h.rank = 0;
    h.bitmap = b;
    EXPECT_EQ(decode_of(h, payload_of(64, 3)), DecodeError::BadBitmap) << int(n) << " " << b;
  }
}

TEST(Wire, PayloadLengthMismatch) {
  const Header h = full_header();
  const auto buf = encode_vec(h, payload_of(64, 4));
  Header got;
  std::vector<int32_t> out(128);
  // One value short, a stray byte, one value too many.
  EXPECT_EQ(decode(std::span(buf.data(), buf.size() - 4), got, out), DecodeError::PayloadLength);
  EXPECT_EQ(decode(std::span(buf.data(), buf.size() - 1), got, out), DecodeError::PayloadLength);
  auto longer = buf;
  longer.resize(buf.size() + 4);
  EXPECT_EQ(decode(longer, got, out), DecodeError::PayloadLength);
  longer.resize(buf.size() + 1);
  EXPECT_EQ(decode(longer, got, out), DecodeError::PayloadLength);
  // count = 0 with a trailing value.
  Header z = full_header();
  z.count = 0;
  auto zb = encode_vec(z, {});
  ASSERT_EQ(zb.size(), kHeaderBytes);
  EXPECT_EQ(decode(zb, got, out), DecodeError::None);
  zb.resize(kHeaderBytes + 4);
  EXPECT_EQ(decode(zb, got, out), DecodeError::PayloadLength);
}

TEST(Wire, PayloadLargerThanBuffer) {
  const Header h = full_header();  // 64 values
  EXPECT_EQ(decode_of(h, payload_of(64, 5), 63), DecodeError::PayloadTooLarge);
  EXPECT_EQ(decode_of(h, payload_of(64, 5), 0), DecodeError::PayloadTooLarge);
  EXPECT_EQ(decode_of(h, payload_of(64, 5), 64), DecodeError::None);
  // Through the Packet overload: the pool's capacity is the limit.
  PacketPool small(32);
  Packet* p = small.get();
  const auto buf = encode_vec(h, payload_of(64, 5));
  EXPECT_EQ(decode(buf, *p, small), DecodeError::PayloadTooLarge);
  small.put(p);
}

TEST(Wire, FailedDecodeLeavesOutputsUntouchedWhenTooLarge) {
  // A rejected packet must not be half-written into the caller's header.
  Header h = full_header();
  const auto buf = encode_vec(h, payload_of(64, 6));
  Header got;
  got.psn = 42;
  std::vector<int32_t> out(10, 9);
  ASSERT_EQ(decode(buf, got, out), DecodeError::PayloadTooLarge);
  EXPECT_EQ(got.psn, 42u);
  EXPECT_EQ(out, std::vector<int32_t>(10, 9));
}

TEST(Wire, ErrorNames) {
  for (int e = 0; e <= static_cast<int>(DecodeError::PayloadTooLarge); ++e)
    EXPECT_STRNE(to_string(static_cast<DecodeError>(e)), "?") << e;
}

// ---------------------------------------------------------------- bounds

// Bytes placed right before an inaccessible page: any read past the end faults.
class GuardedBuffer {
 public:
  GuardedBuffer() {
    page_ = static_cast<size_t>(sysconf(_SC_PAGESIZE));
    base_ = static_cast<std::byte*>(mmap(nullptr, 2 * page_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
    if (base_ == MAP_FAILED) base_ = nullptr;
    if (base_) mprotect(base_ + page_, page_, PROT_NONE);
  }
  ~GuardedBuffer() {
    if (base_) munmap(base_, 2 * page_);
  }
  bool ok() const { return base_ != nullptr; }
  std::span<const std::byte> place(std::span<const std::byte> data) {
    std::byte* at = base_ + page_ - data.size();
    std::memcpy(at, data.data(), data.size());
    return {at, data.size()};
  }

 private:
  size_t page_ = 0;
  std::byte* base_ = nullptr;
};

TEST(Wire, DecodeNeverReadsPastTheBuffer) {
  GuardedBuffer g;
  ASSERT_TRUE(g.ok());
  const Header h = full_header();
  const auto buf = encode_vec(h, payload_of(64, 7));
  std::vector<int32_t> out(1024);
  for (size_t len = 0; len <= buf.size(); ++len) {
    Header got;
    const auto in = g.place(std::span(buf.data(), len));
    const DecodeError e = decode(in, got, out);
    if (len < kHeaderBytes) EXPECT_EQ(e, DecodeError::Truncated) << len;
    else if (len < buf.size()) EXPECT_EQ(e, DecodeError::PayloadLength) << len;
    else EXPECT_EQ(e, DecodeError::None);
  }
}

TEST(Wire, FuzzedBytesNeverCrashAndAcceptedPacketsReencodeIdentically) {
  GuardedBuffer g;
  ASSERT_TRUE(g.ok());
  Rng rng(2024);
  Header base = full_header();
  base.nworkers = 8;
  base.rank = 3;
  base.bitmap = 0x5A;
  base.count = 16;
  const auto valid = encode_vec(base, payload_of(16, 8));
  std::vector<int32_t> out(64);
  size_t accepted = 0;
  for (int it = 0; it < 20000; ++it) {
    auto b = valid;
    const int flips = 1 + static_cast<int>(rng.below(4));
    for (int f = 0; f < flips; ++f) b[rng.below(b.size())] = static_cast<std::byte>(rng.next());
    if (rng.bernoulli(0.2)) b.resize(rng.below(b.size() + 8));
    const auto in = g.place(b);
    Header got;
    if (decode(in, got, out) != DecodeError::None) continue;
    ++accepted;
    std::vector<std::byte> again(encoded_size(got));
    ASSERT_EQ(encode(got, std::span<const int32_t>(out.data(), got.count), again), again.size());
    ASSERT_EQ(again, b) << "accepted bytes must re-encode identically";
  }
  EXPECT_GT(accepted, 0u);
}

// ---------------------------------------------------------------- fixed point

TEST(FixedPoint, ExactRoundTripForRepresentableValues) {
  const FixedPointCodec c(256.0, 8);
  std::vector<float> in;
  for (int k = -5000; k <= 5000; k += 7) in.push_back(static_cast<float>(k) / 256.0f);
  in.push_back(1.5f);
  in.push_back(-3.25f);
  in.push_back(0.0f);
  in.push_back(1000.125f);
  std::vector<int32_t> q(in.size());
  const QuantStats st = c.encode(in, q);
  EXPECT_EQ(st.overflowed, 0u);
  for (size_t i = 0; i < in.size(); ++i) EXPECT_EQ(q[i], static_cast<int32_t>(std::lround(in[i] * 256.0)));
  std::vector<float> back(in.size());
  c.decode(q, back);
  for (size_t i = 0; i < in.size(); ++i) EXPECT_EQ(back[i], in[i]) << i;
  EXPECT_FLOAT_EQ(st.max_abs, 5000.0f / 256.0f > 1000.125f ? 5000.0f / 256.0f : 1000.125f);
  // The average: divide by the worker count.
  std::vector<float> avg(in.size());
  c.decode(q, avg, 2.0);
  for (size_t i = 0; i < in.size(); ++i) EXPECT_EQ(avg[i], in[i] / 2) << i;
}

TEST(FixedPoint, RoundsToNearest) {
  const FixedPointCodec c(2.0, 1);
  const std::vector<float> in = {0.3f, -0.3f, 0.8f, -0.8f, 10.2f};
  std::vector<int32_t> q(in.size());
  EXPECT_EQ(c.encode(in, q).overflowed, 0u);
  EXPECT_EQ(q, (std::vector<int32_t>{1, -1, 2, -2, 20}));
}

// Ties go to even, also where floats have a single fractional bit (2^22 ..
// 2^23) and where they have none (from 2^23 on). Hand-derived values.
TEST(FixedPoint, TiesRoundToEvenAtEveryMagnitude) {
  const FixedPointCodec c(1.0, 1);
  const std::vector<float> in = {0.5f, 1.5f, 2.5f, -0.5f, -1.5f, -2.5f, 4194304.5f, 4194305.5f, -4194305.5f,
                                 8388609.0f, 16777218.0f, 0.49999997f};
  std::vector<int32_t> q(in.size());
  EXPECT_EQ(c.encode(in, q).overflowed, 0u);
  EXPECT_EQ(q, (std::vector<int32_t>{0, 2, 2, 0, -2, -2, 4194304, 4194306, -4194306, 8388609, 16777218, 0}));
}

// The single-precision loop (power-of-two scales) against the
// double-precision one, value by value, on the edges: ties, the limit and the
// floats next to it, infinities, NaN, subnormals, the float range's ends, and
// random floats of every exponent; for scales from 2^-126 to 2^127 and worker
// counts whose limits are and are not floats.
TEST(FixedPoint, PowerOfTwoLoopEqualsTheDoubleLoopValueByValue) {
  std::vector<float> base = {0.0f, -0.0f, 0.5f, -0.5f, 1.5f, 2.5f, 4194304.5f, 8388607.5f, 8388608.0f,
                             std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity(),
                             std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::denorm_min(),
                             -std::numeric_limits<float>::denorm_min(), std::numeric_limits<float>::min(),
                             std::numeric_limits<float>::max(), -std::numeric_limits<float>::max()};
  Rng rng(2026);
  for (int i = 0; i < 20000; ++i) {
    uint32_t bits = static_cast<uint32_t>(rng.next());
    float f;
    std::memcpy(&f, &bits, sizeof f);
    base.push_back(f);
  }
  for (const int k : {-126, -3, 0, 1, 10, 23, 30, 60, 127})
    for (const unsigned n : {1u, 2u, 3u, 7u, 64u}) {
      const FixedPointCodec c(std::ldexp(1.0, k), n);
      std::vector<float> in = base;
      // The limit and its neighbours, and ties, in this scale.
      for (const double v : {double(c.limit()), double(c.limit()) + 1, double(c.limit()) - 1, double(c.limit()) - 64,
                             double(c.limit()) + 64, 2.5, 3.5, 1048576.5})
        for (const double sgn : {1.0, -1.0}) in.push_back(static_cast<float>(sgn * std::ldexp(v, -k)));
      std::vector<int32_t> fast(in.size()), ref(in.size());
      const QuantStats a = c.encode(in, fast), b = c.encode_double(in, ref);
      for (size_t i = 0; i < in.size(); ++i) ASSERT_EQ(fast[i], ref[i]) << "scale 2^" << k << ", " << n << " workers, x = " << in[i];
      EXPECT_EQ(a.overflowed, b.overflowed) << k << " " << n;
      EXPECT_EQ(a.max_abs, b.max_abs) << k << " " << n;
    }
}

TEST(FixedPoint, SaturatesBeyondLimitAndCounts) {
  const FixedPointCodec c(1.0, 4);
  EXPECT_EQ(c.limit(), INT32_MAX / 4);
  const float inf = std::numeric_limits<float>::infinity();
  const std::vector<float> in = {1e9f, -1e9f, inf, -inf, 536870880.0f, -536870880.0f, 12.0f};
  std::vector<int32_t> q(in.size());
  const QuantStats st = c.encode(in, q);
  EXPECT_EQ(st.overflowed, 4u);
  EXPECT_EQ(q[0], c.limit());
  EXPECT_EQ(q[1], -c.limit());
  EXPECT_EQ(q[2], c.limit());
  EXPECT_EQ(q[3], -c.limit());
  EXPECT_EQ(q[4], 536870880);  // just below the limit: exact
  EXPECT_EQ(q[5], -536870880);
  EXPECT_EQ(q[6], 12);
  EXPECT_FLOAT_EQ(st.max_abs, 1e9f);  // infinities are not finite values seen
}

TEST(FixedPoint, NanEncodesAsZeroAndCounts) {
  const FixedPointCodec c(1024.0, 2);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const std::vector<float> in = {nan, 1.0f, -nan, 2.0f};
  std::vector<int32_t> q(in.size(), 77);
  const QuantStats st = c.encode(in, q);
  EXPECT_EQ(st.overflowed, 2u);
  EXPECT_EQ(q[0], 0);
  EXPECT_EQ(q[1], 1024);
  EXPECT_EQ(q[2], 0);
  EXPECT_EQ(q[3], 2048);
  EXPECT_FLOAT_EQ(st.max_abs, 2.0f);
}

TEST(FixedPoint, SumOfSaturatedValuesNeverOverflows) {
  const float inf = std::numeric_limits<float>::infinity();
  for (unsigned n = 1; n <= 64; ++n) {
    const FixedPointCodec c(1e6, n);
    const std::vector<float> in = {inf, -inf, 3e38f, -3e38f};
    std::vector<int32_t> q(in.size());
    EXPECT_EQ(c.encode(in, q).overflowed, 4u);
    for (size_t k = 0; k < in.size(); ++k) {
      int32_t acc = 0;
      bool ovf = false;
      for (unsigned w = 0; w < n; ++w) acc = sat_add(acc, q[k], ovf);
      EXPECT_FALSE(ovf) << "n=" << n << " k=" << k;
      EXPECT_EQ(static_cast<int64_t>(acc), static_cast<int64_t>(q[k]) * n);
    }
  }
}

TEST(FixedPoint, SafeScaleGivesNoOverflow) {
  Rng rng(5);
  for (unsigned n : {1u, 2u, 3u, 8u, 17u, 64u}) {
    for (double mag : {1e-6, 0.01, 0.5, 1.0, 3.7, 1000.0, 123456.0, 1e9, 1e20, 3e38}) {
      const float max_abs = static_cast<float>(mag);
      const double s = FixedPointCodec::safe_scale(max_abs, n);
      ASSERT_GT(s, 0);
      EXPECT_EQ(std::exp2(std::round(std::log2(s))), s) << "not a power of two: " << s;
      const FixedPointCodec c(s, n);
      std::vector<float> in = {max_abs, -max_abs};
      for (int i = 0; i < 200; ++i) in.push_back(static_cast<float>((rng.uniform() * 2 - 1) * mag));
      std::vector<int32_t> q(in.size());
      EXPECT_EQ(c.encode(in, q).overflowed, 0u) << "n=" << n << " max_abs=" << max_abs << " scale=" << s;
      // n workers all sending the extreme: no int32 overflow in the switch.
      for (int32_t v : {q[0], q[1]}) {
        int32_t acc = 0;
        bool ovf = false;
        for (unsigned w = 0; w < n; ++w) acc = sat_add(acc, v, ovf);
        EXPECT_FALSE(ovf);
      }
      // Not needlessly small: four times the scale overflows at max_abs.
      if (s * 4 * mag < 1e300) {
        const FixedPointCodec big(s * 4, n);
        std::vector<int32_t> q2(1);
        EXPECT_EQ(big.encode(std::span<const float>(in.data(), 1), q2).overflowed, 1u)
            << "n=" << n << " max_abs=" << max_abs << " scale=" << s;
      }
    }
  }
  // Degenerate inputs fall back to 1.
  EXPECT_EQ(FixedPointCodec::safe_scale(0.0f, 4), 1.0);
  EXPECT_EQ(FixedPointCodec::safe_scale(std::numeric_limits<float>::quiet_NaN(), 4), 1.0);
}

TEST(FixedPoint, RejectsBadParameters) {
  EXPECT_THROW(FixedPointCodec(0.0, 4), std::invalid_argument);
  EXPECT_THROW(FixedPointCodec(-1.0, 4), std::invalid_argument);
  EXPECT_THROW(FixedPointCodec(std::numeric_limits<double>::quiet_NaN(), 4), std::invalid_argument);
  EXPECT_THROW(FixedPointCodec(std::numeric_limits<double>::infinity(), 4), std::invalid_argument);
  EXPECT_THROW(FixedPointCodec(1.0, 0), std::invalid_argument);
  EXPECT_THROW(FixedPointCodec(1.0, 65), std::invalid_argument);
  EXPECT_NO_THROW(FixedPointCodec(1.0, 64));
}

}  // namespace
}  // namespace ina
