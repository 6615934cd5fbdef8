// Optional per-datagram authentication of the UDP runtime
// (runtime/datagram_tag.hpp): SipHash-2-4 against its authors' vectors, the
// engine's tagging and verification, and a spoofer with a member's address
// and ids against a running switch, without and with tags.
#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <dirent.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/siphash.hpp"
#include "runtime/communicator.hpp"
#include "runtime/control.hpp"
#include "runtime/datagram_tag.hpp"
#include "runtime/ring_layout.hpp"
#include "runtime/ring_worker.hpp"
#include "runtime/udp_engine.hpp"
#include "wire/patch.hpp"
#include "cli_util.hpp"
#include "runtime_fixture.hpp"
#include "test_keys.hpp"

using namespace ina;
using namespace ina::rt;

namespace {

using ina::test::encoded;
using ina::test::plain_udp;
using ina::test::pump_until;
using ina::test::send_raw;

// SipHash-2-4-64 of the messages 00, 00 01, ..., 00 .. 3e (lengths 0..63)
// under the key 00 01 .. 0f: `vectors_sip64` of the reference implementation
// by the paper's authors (github.com/veorq/SipHash, vectors.h), each tag as
// its 8 output bytes, least significant first. Entry 15 is the paper's own
// example (Appendix A: a129ca6149be45e5).
const uint8_t kSipVectors[64][8] = {
    {0x31, 0x0e, 0x0e, 0xdd, 0x47, 0xdb, 0x6f, 0x72}, {0xfd, 0x67, 0xdc, 0x93, 0xc5, 0x39, 0xf8, 0x74},
    {0x5a, 0x4f, 0xa9, 0xd9, 0x09, 0x80, 0x6c, 0x0d}, {0x2d, 0x7e, 0xfb, 0xd7, 0x96, 0x66, 0x67, 0x85},
    {0xb7, 0x87, 0x71, 0x27, 0xe0, 0x94, 0x27, 0xcf}, {0x8d, 0xa6, 0x99, 0xcd, 0x64, 0x55, 0x76, 0x18},
    {0xce, 0xe3, 0xfe, 0x58, 0x6e, 0x46, 0xc9, 0xcb}, {0x37, 0xd1, 0x01, 0x8b, 0xf5, 0x00, 0x02, 0xab},
    {0x62, 0x24, 0x93, 0x9a, 0x79, 0xf5, 0xf5, 0x93}, {0xb0, 0xe4, 0xa9, 0x0b, 0xdf, 0x82, 0x00, 0x9e},
    {0xf3, 0xb9, 0xdd, 0x94, 0xc5, 0xbb, 0x5d, 0x7a}, {0xa7, 0xad, 0x6b, 0x22, 0x46, 0x2f, 0xb3, 0xf4},
    {0xfb, 0xe5, 0x0e, 0x86, 0xbc, 0x8f, 0x1e, 0x75}, {0x90, 0x3d, 0x84, 0xc0, 0x27, 0x56, 0xea, 0x14},
    {0xee, 0xf2, 0x7a, 0x8e, 0x90, 0xca, 0x23, 0xf7}, {0xe5, 0x45, 0xbe, 0x49, 0x61, 0xca, 0x29, 0xa1},
    {0xdb, 0x9b, 0xc2, 0x57, 0x7f, 0xcc, 0x2a, 0x3f}, {0x94, 0x47, 0xbe, 0x2c, 0xf5, 0xe9, 0x9a, 0x69},
    {0x9c, 0xd3, 0x8d, 0x96, 0xf0, 0xb3, 0xc1, 0x4b}, {0xbd, 0x61, 0x79, 0xa7, 0x1d, 0xc9, 0x6d, 0xbb},
    {0x98, 0xee, 0xa2, 0x1a, 0xf2, 0x5c, 0xd6, 0xbe}, {0xc7, 0x67, 0x3b, 0x2e, 0xb0, 0xcb, 0xf2, 0xd0},
    {0x88, 0x3e, 0xa3, 0xe3, 0x95, 0x67, 0x53, 0x93}, {0xc8, 0xce, 0x5c, 0xcd, 0x8c, 0x03, 0x0c, 0xa8},
    {0x94, 0xaf, 0x49, 0xf6, 0xc6, 0x50, 0xad, 0xb8}, {0xea, 0xb8, 0x85, 0x8a, 0xde, 0x92, 0xe1, 0xbc},
    {0xf3, 0x15, 0xbb, 0x5b, 0xb8, 0x35, 0xd8, 0x17}, {0xad, 0xcf, 0x6b, 0x07, 0x63, 0x61, 0x2e, 0x2f},
    {0xa5, 0xc9, 0x1d, 0xa7, 0xac, 0xaa, 0x4d, 0xde}, {0x71, 0x65, 0x95, 0x87, 0x66, 0x50, 0xa2, 0xa6},
    {0x28, 0xef, 0x49, 0x5c, 0x53, 0xa3, 0x87, 0xad}, {0x42, 0xc3, 0x41, 0xd8, 0xfa, 0x92, 0xd8, 0x32},
    {0xce, 0x7c, 0xf2, 0x72, 0x2f, 0x51, 0x27, 0x71}, {0xe3, 0x78, 0x59, 0xf9, 0x46, 0x23, 0xf3, 0xa7},
    {0x38, 0x12, 0x05, 0xbb, 0x1a, 0xb0, 0xe0, 0x12}, {0xae, 0x97, 0xa1, 0x0f, 0xd4, 0x34, 0xe0, 0x15},
    {0xb4, 0xa3, 0x15, 0x08, 0xbe, 0xff, 0x4d, 0x31}, {0x81, 0x39, 0x62, 0x29, 0xf0, 0x90, 0x79, 0x02},
    {0x4d, 0x0c, 0xf4, 0x9e, 0xe5, 0xd4, 0xdc, 0xca}, {0x5c, 0x73, 0x33, 0x6a, 0x76, 0xd8, 0xbf, 0x9a},
    {0xd0, 0xa7, 0x04, 0x53, 0x6b, 0xa9, 0x3e, 0x0e}, {0x92, 0x59, 0x58, 0xfc, 0xd6, 0x42, 0x0c, 0xad},
    {0xa9, 0x15, 0xc2, 0x9b, 0xc8, 0x06, 0x73, 0x18}, {0x95, 0x2b, 0x79, 0xf3, 0xbc, 0x0a, 0xa6, 0xd4},
    {0xf2, 0x1d, 0xf2, 0xe4, 0x1d, 0x45, 0x35, 0xf9}, {0x87, 0x57, 0x75, 0x19, 0x04, 0x8f, 0x53, 0xa9},
    {0x10, 0xa5, 0x6c, 0xf5, 0xdf, 0xcd, 0x9a, 0xdb}, {0xeb, 0x75, 0x09, 0x5c, 0xcd, 0x98, 0x6c, 0xd0},
    {0x51, 0xa9, 0xcb, 0x9e, 0xcb, 0xa3, 0x12, 0xe6}, {0x96, 0xaf, 0xad, 0xfc, 0x2c, 0xe6, 0x66, 0xc7},
    {0x72, 0xfe, 0x52, 0x97, 0x5a, 0x43, 0x64, 0xee}, {0x5a, 0x16, 0x45, 0xb2, 0x76, 0xd5, 0x92, 0xa1},
    {0xb2, 0x74, 0xcb, 0x8e, 0xbf, 0x87, 0x87, 0x0a}, {0x6f, 0x9b, 0xb4, 0x20, 0x3d, 0xe7, 0xb3, 0x81},
    {0xea, 0xec, 0xb2, 0xa3, 0x0b, 0x22, 0xa8, 0x7f}, {0x99, 0x24, 0xa4, 0x3c, 0xc1, 0x31, 0x57, 0x24},
    {0xbd, 0x83, 0x8d, 0x3a, 0xaf, 0xbf, 0x8d, 0xb7}, {0x0b, 0x1a, 0x2a, 0x32, 0x65, 0xd5, 0x1a, 0xea},
    {0x13, 0x50, 0x79, 0xa3, 0x23, 0x1c, 0xe6, 0x60}, {0x93, 0x2b, 0x28, 0x46, 0xe4, 0xd7, 0x06, 0x66},
    {0xe1, 0x91, 0x5f, 0x5c, 0xb1, 0xec, 0xa4, 0x6c}, {0xf3, 0x25, 0x96, 0x5c, 0xa1, 0x6d, 0x62, 0x9f},
    {0x57, 0x5f, 0xf2, 0x8e, 0x60, 0x38, 0x1b, 0xe5}, {0x72, 0x45, 0x06, 0xeb, 0x4c, 0x32, 0x8a, 0x95},
};

uint64_t le64(const uint8_t b[8]) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = v << 8 | b[i];
  return v;
}


void send_to(int fd, const Endpoint& to, const std::vector<std::byte>& d) {
  ASSERT_EQ(::sendto(fd, d.data(), d.size(), 0, reinterpret_cast<const sockaddr*>(&to.sa), sizeof to.sa),
            static_cast<ssize_t>(d.size()));
}

// A datagram as a tagging engine sends it: encoded, kTagged set, the tag appended.
std::vector<std::byte> tagged(const Header& h, const std::vector<int32_t>& v, const DatagramKey& k) {
  std::vector<std::byte> b(encoded_size(h) + kTagBytes);
  const size_t n = encode(h, v, b);
  set_wire_flags(b.data(), wire_flags(b.data()) | flag::kTagged);
  put_tag(b.data() + n, datagram_tag(k, b.data(), n));
  return b;
}

Header data_header(uint16_t job, NodeId src, uint32_t psn, uint16_t count) {
  Header h;
  h.type = PktType::Data;
  h.job = job;
  h.src = src;
  h.dst = 0;
  h.nworkers = 2;
  h.rank = 0;
  h.bitmap = 1;
  h.psn = psn;
  h.count = count;
  return h;
}


// A switch-side node: records what reaches it; on a timer, multicasts a result to job 1's group.
struct Recorder final : Node {
  std::vector<Header> got;
  std::vector<std::vector<int32_t>> values;
  std::vector<int32_t> result;
  void on_packet(Packet* p, Time, Effects& fx) override {
    got.push_back(p->h);
    values.emplace_back(p->values().begin(), p->values().end());
    fx.free(p);
  }
  void on_timer(uint64_t, Time, Effects& fx) override {
    Packet* p = fx.alloc();
    p->h = Header{};
    p->h.type = PktType::Ack;
    p->h.flags = flag::kResult;
    p->h.job = 1;
    p->h.dst = kMulticast;
    p->h.nworkers = 2;
    p->h.psn = 7;
    p->h.bitmap = 3;
    p->h.count = static_cast<uint16_t>(result.size());
    std::copy(result.begin(), result.end(), p->payload());
    if (!fx.multicast(p)) fx.send(p);
  }
};

// A switch-side engine that tags and checks datagrams.
EngineConfig tagged_router(uint16_t payload_values) {
  EngineConfig ec;
  ec.mode = EngineMode::Router;
  ec.payload_values = payload_values;
  ec.datagram_tags = true;
  return ec;
}

}  // namespace

TEST(SipHash, ReferenceVectorsOfTheAuthors) {
  uint8_t key[16], msg[64];
  for (int i = 0; i < 16; ++i) key[i] = static_cast<uint8_t>(i);
  for (int i = 0; i < 64; ++i) msg[i] = static_cast<uint8_t>(i);
  for (size_t len = 0; len < 64; ++len) {
    EXPECT_EQ(SipHash24::hash(key, msg, len), le64(kSipVectors[len])) << "length " << len;
    // The same message in pieces of every split (the incremental path the engine uses).
    for (size_t cut = 0; cut <= len; ++cut) {
      SipHash24 s(key);
      s.update(msg, cut);
      s.update(msg + cut, len - cut);
      ASSERT_EQ(s.final(), le64(kSipVectors[len])) << "length " << len << " cut at " << cut;
    }
  }
  EXPECT_EQ(SipHash24::hash(key, msg, 15), 0xa129ca6149be45e5ULL);  // the paper's Appendix A
}

// The datagram key is HMAC-SHA256(job key, "ina datagram key v1" || salt),
// its first 16 bytes: not the job key itself (the control plane's
// credential); another job's, or another run's (salt) of the same job, is
// another key.
TEST(DatagramAuth, DatagramKeyIsDerivedFromTheJobKeyAndTheRunsSalt) {
  const Key jk = job_key(ina::test::test_switch_key(), 3);
  Key salt{};
  for (size_t i = 0; i < salt.size(); ++i) salt[i] = static_cast<uint8_t>(0xa0 + i);
  const DatagramKey dk = datagram_key(jk, salt);
  const std::string want = proof(jk, std::string("ina datagram key v1") + std::string(salt.begin(), salt.end()));
  std::string got;
  for (uint8_t b : dk.k) got += fmt::format("{:02x}", b);
  EXPECT_EQ(got, want.substr(0, 32));  // proof(): HMAC-SHA256 as hex
  EXPECT_NE(0, std::memcmp(dk.k, jk.data(), 16));
  EXPECT_FALSE(datagram_key(job_key(ina::test::test_switch_key(), 4), salt) == dk);
  Key salt2 = salt;
  salt2[31] ^= 1;
  EXPECT_FALSE(datagram_key(jk, salt2) == dk);
}

// Verification in the engine. A datagram from a member's address gets to the
// node only with its job's correct tag: a flipped payload bit, a changed PSN
// (a replay of a tagged datagram under another sequence number), another
// job's key and no tag at all are each counted as rx_bad_tag and dropped;
// one from a non-member's address stays rx_foreign.
TEST(DatagramAuth, EngineDropsEveryDatagramWithoutItsJobsCorrectTag) {
  UdpEngine eng(tagged_router(16));
  Recorder sw;
  sw.set_id(0);
  eng.add_node(sw);
  eng.start();
  const DatagramKey k1 = datagram_key(job_key(ina::test::test_switch_key(), 1), Key{});
  const DatagramKey k2 = datagram_key(job_key(ina::test::test_switch_key(), 2), Key{});
  eng.set_datagram_key(1, k1);
  eng.set_datagram_key(2, k2);
  UniqueFd member = plain_udp(), stranger = plain_udp();
  eng.set_route(5, local_endpoint(member.get()));

  const std::vector<int32_t> vals{1, -2, 3, 1 << 20};
  const auto good = tagged(data_header(1, 5, 4, 4), vals, k1);
  auto flipped = good;
  flipped[kHeaderBytes + 9] ^= std::byte{0x10};  // one payload bit
  auto replayed = good;
  replayed[15] ^= std::byte{0x01};  // the PSN's low byte: the tagged datagram of psn 4 offered as psn 5
  const auto wrong_key = tagged(data_header(1, 5, 4, 4), vals, k2);
  std::vector<std::byte> untagged(encoded_size(data_header(1, 5, 4, 4)));
  encode(data_header(1, 5, 4, 4), vals, untagged);

  send_to(member.get(), eng.local(), flipped);
  send_to(member.get(), eng.local(), replayed);
  send_to(member.get(), eng.local(), wrong_key);
  send_to(member.get(), eng.local(), untagged);
  send_to(stranger.get(), eng.local(), good);
  send_to(member.get(), eng.local(), good);
  ASSERT_TRUE(pump_until(eng, [&] { return eng.stats().rx_datagrams == 6; }));
  const EngineStats& s = eng.stats();
  EXPECT_EQ(s.rx_bad_tag, 4u);
  EXPECT_EQ(s.rx_foreign, 1u);
  EXPECT_EQ(s.rx_malformed, 0u);
  ASSERT_EQ(sw.got.size(), 1u);
  EXPECT_EQ(sw.got[0].psn, 4u);
  EXPECT_EQ(sw.got[0].flags, 0) << "the tag's header bit reached the node";
  EXPECT_EQ(sw.values[0], vals);
  EXPECT_EQ(eng.packets_in_use(), 0u);
}

// Without tags the same engine takes the untagged datagram and refuses the
// tagged one as malformed (its header bit is no flag decode() knows).
TEST(DatagramAuth, UntaggedEngineRefusesTaggedDatagramsAsMalformed) {
  EngineConfig ec;
  ec.mode = EngineMode::Router;
  ec.payload_values = 16;
  UdpEngine eng(ec);
  Recorder sw;
  sw.set_id(0);
  eng.add_node(sw);
  eng.start();
  UniqueFd member = plain_udp();
  eng.set_route(5, local_endpoint(member.get()));
  const DatagramKey k1 = datagram_key(job_key(ina::test::test_switch_key(), 1), Key{});
  send_to(member.get(), eng.local(), tagged(data_header(1, 5, 4, 2), {7, 8}, k1));
  std::vector<std::byte> untagged(encoded_size(data_header(1, 5, 4, 2)));
  encode(data_header(1, 5, 4, 2), std::vector<int32_t>{7, 8}, untagged);
  send_to(member.get(), eng.local(), untagged);
  ASSERT_TRUE(pump_until(eng, [&] { return eng.stats().rx_datagrams == 2; }));
  EXPECT_EQ(eng.stats().rx_malformed, 1u);
  EXPECT_EQ(eng.stats().decode_errors[static_cast<size_t>(DecodeError::BadFlags)], 1u);
  ASSERT_EQ(sw.got.size(), 1u);
  EXPECT_EQ(sw.values[0], (std::vector<int32_t>{7, 8}));
}

// Sending: each copy of a multicast result (one encoding, shared payload,
// segmentation offload) carries its own correct tag over its own header; a
// job without a key sends nothing (tx_no_key).
TEST(DatagramAuth, EveryMulticastCopyCarriesItsOwnCorrectTag) {
  UdpEngine eng(tagged_router(512));
  Recorder sw;
  sw.set_id(0);
  for (int i = 0; i < 512; ++i) sw.result.push_back(i * 7919 - 100000);
  eng.add_node(sw);
  const DatagramKey k1 = datagram_key(job_key(ina::test::test_switch_key(), 1), Key{});
  std::vector<UniqueFd> w;
  w.push_back(plain_udp());
  w.push_back(plain_udp());
  eng.set_route(11, local_endpoint(w[0].get()));
  eng.set_route(12, local_endpoint(w[1].get()));
  eng.set_group(1, {11, 12});
  eng.start();
  eng.invoke(sw, [&](Time now, Effects& fx) { fx.set_timer(now, 1); });  // no key yet: nothing leaves
  ASSERT_TRUE(pump_until(eng, [&] { return eng.stats().timers_fired == 1; }));
  EXPECT_EQ(eng.stats().tx_no_key, 2u);
  EXPECT_EQ(eng.stats().tx_datagrams, 0u);
  eng.set_datagram_key(1, k1);
  for (int i = 0; i < 3; ++i) eng.invoke(sw, [&](Time now, Effects& fx) { fx.set_timer(now, 1); });
  ASSERT_TRUE(pump_until(eng, [&] { return eng.stats().tx_datagrams == 6; }));
  EXPECT_GT(eng.stats().tx_shared_copies, 0u);
  for (unsigned r = 0; r < 2; ++r)
    for (int i = 0; i < 3; ++i) {
      std::vector<std::byte> buf(8192);
      const ssize_t n = ::recv(w[r].get(), buf.data(), buf.size(), 0);
      ASSERT_EQ(n, static_cast<ssize_t>(kHeaderBytes + 4 * 512 + kTagBytes));
      EXPECT_TRUE(tag_matches(k1, buf.data(), static_cast<size_t>(n))) << "copy " << i << " to rank " << r;
      set_wire_flags(buf.data(), wire_flags(buf.data()) & ~flag::kTagged);
      Header h;
      std::vector<int32_t> v(512);
      ASSERT_EQ(decode(std::span<const std::byte>(buf.data(), static_cast<size_t>(n) - kTagBytes), h, v),
                DecodeError::None);
      EXPECT_EQ(h.dst, 11 + r);
      EXPECT_EQ(v, sw.result);
    }
}

// The worker's side: a Host engine takes from its gateway (the switch) only
// the results that carry their job's correct tag.
TEST(DatagramAuth, HostEngineTakesOnlyCorrectlyTaggedResultsFromItsGateway) {
  UniqueFd gw = plain_udp();
  EngineConfig ec;
  ec.mode = EngineMode::Host;
  ec.payload_values = 16;
  ec.gateway = local_endpoint(gw.get());
  ec.datagram_tags = true;
  UdpEngine eng(ec);
  Recorder w;
  w.set_id(11);
  eng.add_node(w);
  eng.start();
  const DatagramKey k1 = datagram_key(job_key(ina::test::test_switch_key(), 1), Key{});
  eng.set_datagram_key(1, k1);
  Header h = data_header(1, 0, 9, 3);
  h.type = PktType::Ack;
  h.flags = flag::kResult;
  h.dst = 11;
  h.bitmap = 3;
  const std::vector<int32_t> sum{10, 20, 30};
  const auto good = tagged(h, sum, k1);
  auto flipped = good;
  flipped[kHeaderBytes + 4] ^= std::byte{0x80};
  std::vector<std::byte> untagged(encoded_size(h));
  encode(h, sum, untagged);
  send_to(gw.get(), eng.local(), flipped);
  send_to(gw.get(), eng.local(), untagged);
  send_to(gw.get(), eng.local(), good);
  ASSERT_TRUE(pump_until(eng, [&] { return eng.stats().rx_datagrams == 3; }));
  EXPECT_EQ(eng.stats().rx_bad_tag, 2u);
  ASSERT_EQ(w.got.size(), 1u);
  EXPECT_EQ(w.values[0], sum);
  EXPECT_EQ(w.got[0].flags, flag::kResult);
}

namespace {

// The UDP ports of this process's IPv4 datagram sockets.
std::set<uint16_t> own_udp_ports() {
  std::set<uint16_t> ports;
  DIR* d = opendir("/proc/self/fd");
  if (!d) return ports;
  while (dirent* e = readdir(d)) {
    const int fd = std::atoi(e->d_name);
    if (fd <= 2) continue;
    int type = 0;
    socklen_t tl = sizeof type;
    sockaddr_in sa{};
    socklen_t sl = sizeof sa;
    if (getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &tl) != 0 || type != SOCK_DGRAM) continue;
    if (getsockname(fd, reinterpret_cast<sockaddr*>(&sa), &sl) != 0 || sa.sin_family != AF_INET) continue;
    ports.insert(ntohs(sa.sin_port));
  }
  closedir(d);
  return ports;
}

// Sends `datagram` to `to` as UDP from 127.0.0.1:`src_port`, an address this
// process does not own: a raw socket writes the UDP header itself (what a
// root process on a member's host, or anyone on its path, can do).
bool spoof(const Endpoint& to, uint16_t src_port, const std::vector<std::byte>& datagram) {
  UniqueFd raw(::socket(AF_INET, SOCK_RAW, IPPROTO_UDP));
  if (!raw) return false;
  std::vector<std::byte> pkt(8 + datagram.size());
  const uint16_t fields[4] = {htons(src_port), to.sa.sin_port, htons(static_cast<uint16_t>(pkt.size())), 0};  // checksum 0: none
  std::memcpy(pkt.data(), fields, 8);
  std::memcpy(pkt.data() + 8, datagram.data(), datagram.size());
  sockaddr_in dst = to.sa;
  dst.sin_port = 0;
  return ::sendto(raw.get(), pkt.data(), pkt.size(), 0, reinterpret_cast<sockaddr*>(&dst), sizeof dst) ==
         static_cast<ssize_t>(pkt.size());
}

struct SpoofOutcome {
  bool skipped = false;
  std::vector<std::string> errors;
  std::vector<std::vector<int32_t>> results;  // by rank
  nlohmann::json engine;                      // the switch's engine counters
};

// Job 1 of two workers on a SwitchML switch; before their first allreduce, a
// spoofer sends rank 0's Data packets of that op (rank 0's address, node id,
// job, rank and bitmap, PSNs 0..3) with values of its own.
SpoofOutcome spoofed_job(bool tags) {
  SpoofOutcome out;
  SwitchDaemonConfig sc = ina::test::switch_config("switchml", 64);
  sc.datagram_auth = tags;
  ina::test::LocalSwitch sw(sc);
  const std::set<uint16_t> before = own_udp_ports();
  std::mutex mu;
  std::condition_variable cv;
  int joined = 0;
  bool go = false;
  uint16_t rank0_port = 0;
  out.results.resize(2);
  out.errors.resize(2);
  std::vector<std::thread> ts;
  for (unsigned r = 0; r < 2; ++r) {
    ts.emplace_back([&, r] {
      try {
        CommConfig c = ina::test::comm_config(sw.addr(), 1, r, 2);
        c.datagram_auth = tags;
        Communicator comm(c);
        {
          std::unique_lock lk(mu);
          ++joined;
          cv.notify_all();
          cv.wait(lk, [&] { return go; });
        }
        std::vector<int32_t> v(256);
        for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<int32_t>(1000 * (r + 1) + i);
        comm.allreduce(std::span<int32_t>(v));
        out.results[r] = v;
        comm.close();
      } catch (const std::exception& e) {
        out.errors[r] = e.what();
        std::lock_guard lk(mu);
        ++joined;
        go = true;
        cv.notify_all();
      }
    });
    if (r == 0) {  // rank 0's data socket: the one new UDP socket once it has bound it (before it joins)
      const Time end = monotonic_now() + 5 * kSec;
      for (;;) {
        for (uint16_t p : own_udp_ports())
          if (!before.count(p)) rank0_port = p;
        if (rank0_port || monotonic_now() > end) break;
        usleep(1000);
      }
    }
  }
  {
    std::unique_lock lk(mu);
    cv.wait(lk, [&] { return joined == 2; });
  }
  // In a fresh switch the job's members get node ids 1, 2, ... by rank.
  bool sent = rank0_port != 0;
  for (uint32_t psn = 0; psn < 4 && sent; ++psn) {
    Header h = data_header(1, 1, psn, 64);
    std::vector<int32_t> forged(64, 5'000'000);
    std::vector<std::byte> d(encoded_size(h));
    encode(h, forged, d);
    sent = spoof(sw.d.endpoint(), rank0_port, d);
  }
  out.skipped = !sent;
  if (sent) {  // the forged datagrams are in the switch's socket before any worker sends
    const Time end = monotonic_now() + 2 * kSec;
    do {
      out.engine = query_switch_stats(sw.d.endpoint(), kSec, &ina::test::test_switch_key(), 0)["engine"];
    } while (out.engine["rx_datagrams"].get<uint64_t>() < 4 && monotonic_now() < end);
  }
  {
    std::lock_guard lk(mu);
    go = true;
    cv.notify_all();
  }
  for (auto& t : ts) t.join();
  if (sent) out.engine = query_switch_stats(sw.d.endpoint(), kSec, &ina::test::test_switch_key(), 0)["engine"];
  return out;
}

}  // namespace

// The attack of a root process on a member's host: rank 0's Data packets from
// rank 0's own address with its ids. Without tags the switch aggregates them
// (the workers get the forged values in their sums, nothing counted as
// foreign); with --datagram-auth each is counted as bad_tag and dropped, and
// the job's sums stay exact.
TEST(DatagramAuth, SpoofedMemberDataCorruptsTheJobWithoutTagsAndIsDroppedWithThem) {
  std::vector<int32_t> exact(256);
  for (size_t i = 0; i < exact.size(); ++i) exact[i] = static_cast<int32_t>(1000 + i + 2000 + i);

  const SpoofOutcome off = spoofed_job(false);
  if (off.skipped) GTEST_SKIP() << "raw sockets (CAP_NET_RAW) are needed to send from another socket's address";
  ASSERT_EQ(off.errors, (std::vector<std::string>{"", ""}));
  EXPECT_EQ(off.engine["rx_foreign"], 0);
  EXPECT_EQ(off.results[0], off.results[1]);
  for (size_t i = 0; i < exact.size(); ++i)  // every value: the forged 5'000'000 in place of rank 0's
    ASSERT_EQ(off.results[0][i], 5'000'000 + 2000 + static_cast<int32_t>(i)) << "value " << i;

  const SpoofOutcome on = spoofed_job(true);
  ASSERT_FALSE(on.skipped);
  ASSERT_EQ(on.errors, (std::vector<std::string>{"", ""}));
  EXPECT_EQ(on.engine["rx_bad_tag"], 4);
  EXPECT_EQ(on.engine["rx_foreign"], 0);
  EXPECT_EQ(on.engine["rx_malformed"], 0);
  EXPECT_EQ(on.results[0], exact);
  EXPECT_EQ(on.results[1], exact);
}

// A member that requires tags refuses a switch that does not tag, naming the flag.
TEST(DatagramAuth, MemberRequiringTagsRefusesASwitchWithout) {
  ina::test::LocalSwitch sw(ina::test::switch_config("switchml", 64));
  CommConfig c = ina::test::comm_config(sw.addr(), 1, 0, 1);
  c.datagram_auth = true;
  try {
    Communicator comm(c);
    FAIL() << "joined a switch without datagram tags";
  } catch (const RuntimeError& e) {
    EXPECT_NE(std::string(e.what()).find("does not tag datagrams: start it with --datagram-auth"), std::string::npos)
        << e.what();
  }
}

namespace {

namespace fs = std::filesystem;

// `ina ARGS` (stdout and stderr), under `env_prefix` (e.g. "env -u X").
ina_test::CliResult ina_cmd(const std::vector<std::string>& args, const std::string& env_prefix = "") {
  std::string line = env_prefix + (env_prefix.empty() ? "" : " ") + INA_BINARY;
  for (const auto& a : args) line += " '" + a + "'";
  return ina_test::run_command(line);
}

// Every engine counter `name` in a ring run's report: the ranks (and ATP's PS), then the ToRs.
std::vector<uint64_t> engine_counters(const nlohmann::json& run, const char* name) {
  std::vector<uint64_t> v;
  for (const auto& w : run["jobs"][0]["workers"]) v.push_back(w["stats"]["engine"].value(name, uint64_t{99}));
  for (const auto& s : run["switches"]) v.push_back(s["engine"].value(name, uint64_t{99}));
  return v;
}

}  // namespace

// `ina run --datagram-auth` over a static layout (2 racks of 2): RAR between
// ring workers only, Rina through both racks' INA ToRs, ATP through a tree of
// two ToRs and a PS. The launcher writes the run's salt into the layout and
// hands each worker (and the PS) the job's key; every datagram is tagged and
// verified: the sums are exact, no engine refuses a tag or lacks a key, and
// every datagram every process sent carried a tag.
TEST(DatagramAuthLayouts, RarRinaAndAtpOverRacksExactWithEveryDatagramTagged) {
  const fs::path dir = ina_test::fresh_dir("dga_layouts");
  for (const std::string scheme : {"rar", "rina", "atp"}) {
    SCOPED_TRACE(scheme);
    nlohmann::json runs[2];
    for (int tags = 0; tags < 2; ++tags) {
      const fs::path json = dir / fmt::format("{}{}.json", scheme, tags);
      std::vector<std::string> a{"run", "--scheme", scheme, "--workers", "4", "--racks", "2", "--size", "16384",
                                 "--iterations", "2", "--payload", "64", "--json", json.string(), "--timeout", "30"};
      if (tags) a.push_back("--datagram-auth");
      const auto o = ina_cmd(a);
      ASSERT_EQ(o.status, 0) << o.output;
      std::ifstream in(json);
      runs[tags] = nlohmann::json::parse(in, nullptr, false);
      ASSERT_TRUE(runs[tags].is_object()) << o.output;
      EXPECT_TRUE(runs[tags]["ok"].get<bool>()) << runs[tags]["problems"] << o.output;
      EXPECT_EQ(runs[tags]["jobs"][0]["mismatches"], 0);
      EXPECT_EQ(runs[tags]["jobs"][0]["verified"].get<uint64_t>(), uint64_t{16384 / 4} * 2 * 4);
    }
    const auto& on = runs[1];
    EXPECT_FALSE(runs[0]["layout"].contains("datagram_salt"));
    ASSERT_TRUE(on["layout"].contains("datagram_salt"));
    EXPECT_EQ(on["layout"]["datagram_salt"].get<std::string>().size(), 64u);
    const size_t processes = on["jobs"][0]["workers"].size() + on["switches"].size();
    EXPECT_EQ(on["switches"].size(), scheme == "rar" ? 0u : 2u);
    EXPECT_EQ(engine_counters(on, "rx_bad_tag"), std::vector<uint64_t>(processes, 0));
    EXPECT_EQ(engine_counters(on, "tx_no_key"), std::vector<uint64_t>(processes, 0));
    EXPECT_EQ(engine_counters(on, "rx_malformed"), std::vector<uint64_t>(processes, 0));
    // Every datagram each process sent carried a tag (and none without tags);
    // every receiver checks them, so none was refused above.
    const auto tx = engine_counters(on, "tx_datagrams");
    EXPECT_EQ(engine_counters(on, "tx_tagged"), tx);
    for (size_t i = 0; i < tx.size(); ++i) EXPECT_GT(tx[i], 0u) << "process " << i;
    EXPECT_EQ(engine_counters(runs[0], "tx_tagged"), std::vector<uint64_t>(processes, 0));
  }
  fs::remove_all(dir);
}

// A layout with "datagram_salt" needs the job's key: a ring worker without
// one (no --key-file, no INA_JOB_KEY or INA_SWITCH_KEY) refuses, naming the
// layout's field and where the key comes from; a bad salt is refused like
// any field; --datagram-auth (ring worker or switch) refuses a layout
// without a salt.
TEST(DatagramAuthLayouts, SaltWithoutKeyAndBadSaltAreRefusedNamingTheField) {
  const fs::path dir = ina_test::fresh_dir("dga_nokey");
  const fs::path layout = dir / "layout.json", bar = dir / "bar";
  fs::create_directories(bar);
  const std::string head = R"({"job": 1, "scheme": "rar", "payload": 64, "memory_bytes": 100000,
    "workers": ["127.0.0.1:1", "127.0.0.1:2"], "racks": [{"ranks": [0, 1]}])";
  const std::vector<std::string> rank0{"ring-worker", "--layout", layout.string(), "--rank", "0", "--size", "64",
                                       "--barrier", bar.string(), "--timeout", "2"};
  std::ofstream(layout) << head << R"(, "datagram_salt": ")" << to_hex(random_key()) << "\"}";
  const auto a = ina_cmd(rank0, "env -u INA_JOB_KEY -u INA_SWITCH_KEY");
  EXPECT_EQ(a.status, 2) << a.output;
  EXPECT_NE(a.output.find("field 'datagram_salt'"), std::string::npos) << a.output;
  EXPECT_NE(a.output.find("--key-file"), std::string::npos) << a.output;
  EXPECT_NE(a.output.find(layout.string()), std::string::npos) << a.output;
  std::ofstream(layout) << head << R"(, "datagram_salt": "0123"})";
  const auto b = ina_cmd(rank0);
  EXPECT_EQ(b.status, 2) << b.output;
  EXPECT_NE(b.output.find("field 'datagram_salt' = \"0123\""), std::string::npos) << b.output;
  EXPECT_NE(b.output.find("64 hex digits"), std::string::npos) << b.output;
  std::ofstream(layout) << head << "}";
  std::vector<std::string> required = rank0;
  required.push_back("--datagram-auth");
  const auto c = ina_cmd(required);
  EXPECT_EQ(c.status, 2) << c.output;
  EXPECT_NE(c.output.find("--datagram-auth: the layout"), std::string::npos) << c.output;
  EXPECT_NE(c.output.find("no field 'datagram_salt'"), std::string::npos) << c.output;
  std::ofstream(layout) << R"({"job": 1, "scheme": "rina", "payload": 64, "memory_bytes": 100000,
    "workers": ["127.0.0.1:1", "127.0.0.1:2"], "racks": [{"ranks": [0, 1], "ina": true}]})";
  const fs::path key = dir / "switch.key";
  write_key_file(key.string(), random_key());
  const auto d = ina_cmd({"switch", "--key-file", key.string(), "--listen", "127.0.0.1:0", "--policy", "rina", "--layout",
                          layout.string(), "--rack", "0", "--datagram-auth"});
  EXPECT_EQ(d.status, 2) << d.output;
  EXPECT_NE(d.output.find("no field 'datagram_salt'"), std::string::npos) << d.output;
  fs::remove_all(dir);
}

// Two RAR ranks of a tagged layout (in this process, as `ina run` starts
// them: sockets bound first, the job's key in a key file). Before they start,
// a forger holding rank 1's socket (a duplicate of its descriptor: rank 1's
// own address, what a process on rank 1's host or path can send from) sends
// rank 0 untagged datagrams claiming rank 1's node id: rank 0 counts each as
// rx_bad_tag and drops it, and both ranks' sums stay exact.
TEST(DatagramAuthLayouts, ForgedUntaggedDatagramFromAPeersAddressIsDroppedAndTheRingStaysExact) {
  const fs::path dir = ina_test::fresh_dir("dga_forge");
  const fs::path layout = dir / "layout.json", bar = dir / "bar", key = dir / "job.key";
  fs::create_directories(bar);
  UniqueFd s0 = plain_udp(), s1 = plain_udp();
  RingLayout L;
  L.scheme = "rar";
  L.workers = {local_endpoint(s0.get()), local_endpoint(s1.get())};
  L.racks = split_racks(2, 1, {});
  L.datagram_salt = random_key();
  L.write(layout.string());
  write_key_file(key.string(), job_key(random_key(), L.job));
  const UniqueFd forger(::dup(s1.get()));
  ASSERT_TRUE(forger);
  constexpr int kForged = 5;
  for (uint32_t psn = 0; psn < kForged; ++psn) {
    Header h = data_header(L.job, RingLayout::worker_id(1), RingLayout::worker_id(0), 64);
    h.rank = 1;
    h.psn = psn;
    send_raw(forger.get(), L.workers[0], encoded(h, std::vector<int32_t>(64, 5'000'000)).data(), encoded_size(h));
  }
  std::vector<std::string> errors(2);
  std::vector<int> status(2, -1);
  std::vector<std::thread> ts;
  for (unsigned r = 0; r < 2; ++r) {
    ts.emplace_back([&, r, fd = (r == 0 ? s0 : s1).release()] {
      RingWorkerConfig c;
      c.layout = layout.string();
      c.rank = r;
      c.bytes = 16384;
      c.iterations = 2;
      c.udp_fd = fd;
      c.barrier = bar.string();
      c.report = (dir / fmt::format("rank{}.json", r)).string();
      c.timeout_s = 20;
      c.log = false;
      c.key_file = key.string();
      c.datagram_auth = true;
      try {
        status[r] = run_ring_worker(c);
      } catch (const std::exception& e) {
        errors[r] = e.what();
      }
    });
  }
  for (auto& t : ts) t.join();
  ASSERT_EQ(errors, (std::vector<std::string>{"", ""}));
  EXPECT_EQ(status, (std::vector<int>{0, 0}));
  for (unsigned r = 0; r < 2; ++r) {
    std::ifstream in(dir / fmt::format("rank{}.json", r));
    const auto rep = nlohmann::json::parse(in, nullptr, false);
    ASSERT_TRUE(rep.is_object()) << "rank " << r;
    EXPECT_EQ(rep["mismatches"], 0) << "rank " << r;
    EXPECT_EQ(rep["verified"].get<uint64_t>(), uint64_t{16384 / 4} * 2) << "rank " << r;
    const auto& e = rep["stats"]["engine"];
    EXPECT_EQ(e["rx_bad_tag"], r == 0 ? kForged : 0) << "rank " << r;
    EXPECT_EQ(e["rx_foreign"], 0) << "rank " << r;
    EXPECT_EQ(e["rx_malformed"], 0) << "rank " << r;
    EXPECT_EQ(e["tx_no_key"], 0) << "rank " << r;
  }
  fs::remove_all(dir);
}

// Failover under tags: rank 4 (rack 1's agent) of a tagged Rina job of 2
// racks of 4 stops inside op 1; the survivors detect it, the control node
// re-registers the job at both ToRs over TCP, and the 7 survivors finish
// exactly, every datagram of both epochs tagged and none refused.
TEST(DatagramAuthLayouts, RinaFailoverKeepsEveryDatagramTagged) {
  const fs::path dir = ina_test::fresh_dir("dga_failover");
  const fs::path json = dir / "run.json";
  const auto o = ina_cmd({"run", "--scheme", "rina", "--workers", "8", "--racks", "2", "--size", "131072", "--iterations",
                          "3", "--payload", "64", "--fail-rank", "4", "--fail-at-op", "1", "--fail-detect-ms", "400",
                          "--datagram-auth", "--json", json.string(), "--timeout", "40"});
  ASSERT_EQ(o.status, 0) << o.output;
  std::ifstream in(json);
  const auto j = nlohmann::json::parse(in, nullptr, false);
  ASSERT_TRUE(j.is_object()) << o.output;
  EXPECT_TRUE(j["ok"].get<bool>()) << j["problems"] << o.output;
  ASSERT_TRUE(j["layout"].contains("datagram_salt"));
  const auto& job = j["jobs"][0];
  EXPECT_EQ(job["failover"]["epoch"], 1);
  EXPECT_EQ(job["failover"]["failed"], nlohmann::json::array({4}));
  EXPECT_EQ(job["mismatches"], 0);
  EXPECT_EQ(job["verified"].get<uint64_t>(), uint64_t{131072 / 4} * 2 * 7);
  EXPECT_EQ(engine_counters(j, "rx_bad_tag"), std::vector<uint64_t>(8 + 2, 0));
  EXPECT_EQ(engine_counters(j, "tx_no_key"), std::vector<uint64_t>(8 + 2, 0));
  for (const auto& s : j["switches"]) EXPECT_EQ(s["layout"]["epoch"], 1);
  fs::remove_all(dir);
}
