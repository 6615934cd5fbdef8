// Writes the seed corpora of the packet targets (wire_decode, switch_program,
// ps) with the encoder, in the framing of fuzz.hpp. Run once and commit the
// output; re-run after changing a target's input format:
//   cmake --build build --target fuzz_make_seeds && ./build/fuzz/fuzz_make_seeds fuzz/corpus
// The parser targets' seeds are copies of scenarios/ files (fuzz/README.md).
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "fuzz.hpp"

using namespace ina;
using ina::fuzz::Writer;
namespace fs = std::filesystem;

namespace {

fs::path g_root;

void write(const std::string& target, const std::string& name, const std::vector<uint8_t>& bytes) {
  const fs::path dir = g_root / target;
  fs::create_directories(dir);
  std::ofstream out(dir / name, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
}

std::vector<int32_t> values(uint16_t count, int32_t base) {
  std::vector<int32_t> v(count);
  for (uint16_t k = 0; k < count; ++k) v[k] = base + k;
  return v;
}

Header hdr(PktType t, uint16_t job, NodeId src, NodeId dst, uint8_t rank, uint8_t nworkers, uint32_t psn,
           uint64_t bitmap, uint16_t count, uint16_t flags = 0, uint32_t priority = 0) {
  Header h;
  h.type = t;
  h.job = job;
  h.src = src;
  h.dst = dst;
  h.rank = rank;
  h.nworkers = nworkers;
  h.psn = psn;
  h.bitmap = bitmap;
  h.count = count;
  h.flags = flags;
  h.priority = priority;
  return h;
}

// ---- wire_decode: one datagram per file ----

void wire_seeds() {
  auto put = [](const std::string& name, const Header& h) {
    const auto v = values(h.count, -2);
    std::vector<std::byte> buf(encoded_size(h));
    encode(h, v, buf);
    std::vector<uint8_t> b(buf.size());
    for (size_t i = 0; i < buf.size(); ++i) b[i] = static_cast<uint8_t>(buf[i]);
    write("wire_decode", name, b);
  };
  put("data", hdr(PktType::Data, 1, 1, 50, 0, 3, 7, 0b001, 4, 0, 1234));
  put("data_resend_ecn", hdr(PktType::Data, 1, 2, 50, 1, 3, 8, 0b010, 4, flag::kResend | flag::kEcn));
  put("data_partial_to_ps", hdr(PktType::Data, 1, 50, 100, 0, 3, 9, 0b011, 4, flag::kPartial | flag::kCollision));
  put("data_retired", hdr(PktType::Data, 1, 1, 100, 0, 3, 9, 0, 0, flag::kRetired));
  put("ack_result", hdr(PktType::Ack, 1, 100, kMulticast, 0, 3, 7, 0b111, 4, flag::kResult | flag::kEce));
  put("fetch", hdr(PktType::Fetch, 1, 100, 50, 0, 3, 7, 0, 0));
  put("fetch_reply", hdr(PktType::FetchReply, 1, 50, 100, 0, 3, 7, 0b101, 4, flag::kPartial));
  put("grad_request", hdr(PktType::GradRequest, 1, 100, 2, 1, 3, 7, 0, 0));
  put("reminder", hdr(PktType::Reminder, 1, 3, 100, 2, 3, 7, 0b100, 0));
  put("rate_sync", hdr(PktType::RateSync, 1, 50, 1, 0, 3, 7, 0b001, 0, flag::kEce));
  Header big = hdr(PktType::Data, 0xFFFF, 0x1234, kMulticast, 63, 64, 0xFFFFFFFF, ~0ULL, 64, flag::kAll, ~0u);
  big.agg_index = 0x01020304;
  big.reserved = 0xABCD;
  put("all_fields_64_workers", big);
}

// ---- switch_program: 6 config bytes, then events ----

constexpr NodeId kSw = 50;

// Config bytes: policy, b1 (preempt | multicast 4 | wide 8), values selector
// (3 -> 4 values), aggregators (6 + b), b4 (Routed capacity/masks), evict_after - 1.
Writer sw_config(int policy, uint8_t b1, uint8_t aggs, uint8_t b4 = 0, uint8_t b2 = 3) {
  Writer w;
  for (uint8_t b : {static_cast<uint8_t>(policy), b1, b2, aggs, b4, uint8_t{2}}) w.byte(b);
  return w;
}

void data(Writer& w, uint16_t job, uint8_t rank, uint8_t nworkers, NodeId worker, uint32_t psn, uint16_t flags = 0,
          uint32_t prio = 100, fuzz::Kind k = fuzz::kBurst, unsigned arg = 0) {
  const auto v = values(4, static_cast<int32_t>(psn * 10 + rank));
  w.packet(hdr(PktType::Data, job, worker, kSw, rank, nworkers, psn, 1ULL << rank, 4, flags, prio), v, k, arg);
}

void switch_seeds() {
  const char* names[] = {"isolated", "atp", "dsa", "grid"};
  for (int pol = 0; pol < 4; ++pol) {
    const std::string P = names[pol];
    {  // every task completes in order: job 1 (3 workers), job 2 (1 worker)
      Writer w = sw_config(pol, 0, 10, pol == 3 ? 0x00 : 0);
      for (uint32_t psn = 0; psn < 4; ++psn)
        for (uint8_t r = 0; r < 3; ++r) data(w, 1, r, 3, static_cast<NodeId>(1 + r), psn, 0, 100, fuzz::kPacket, 1);
      for (uint32_t psn = 0; psn < 3; ++psn) data(w, 2, 0, 1, 4, psn);
      write("switch_program", P + "_complete", w.bytes());
    }
    {  // retransmissions before and after completion, multicast trees
      Writer w = sw_config(pol, 4, 10);
      data(w, 1, 0, 3, 1, 0);
      data(w, 1, 1, 3, 2, 0);
      data(w, 1, 0, 3, 1, 0, flag::kResend, 100, fuzz::kPacket, 20);
      data(w, 1, 1, 3, 2, 0);  // duplicate
      data(w, 1, 2, 3, 3, 0);
      data(w, 1, 2, 3, 3, 0, flag::kResend, 100, fuzz::kPacket, 30);
      data(w, 1, 0, 3, 1, 1, flag::kResend);
      write("switch_program", P + "_resend", w.bytes());
    }
    {  // few aggregators: jobs 1 and 2 collide; priorities differ; PS fetches and acks
      Writer w = sw_config(pol, 1, 0);
      for (uint32_t psn = 0; psn < 12; ++psn) {
        data(w, 1, static_cast<uint8_t>(psn % 3), 3, static_cast<NodeId>(1 + psn % 3), psn, 0, 50 + psn);
        data(w, 2, 0, 1, 4, psn, 0, 500 - psn);
      }
      for (uint32_t psn = 0; psn < 4; ++psn) {
        w.packet(hdr(PktType::Fetch, 1, 100, kSw, 0, 3, psn, 0, 0), {}, fuzz::kBurst);
        const auto v = values(4, 7);
        w.packet(hdr(PktType::Ack, 1, 100, kMulticast, 0, 3, psn + 4, 0b111, 4, flag::kResult), v, fuzz::kBurst);
      }
      w.event(fuzz::kAdvance, 2);
      w.event(fuzz::kControl, 0);  // remove job 1
      data(w, 1, 0, 3, 1, 20);
      w.event(fuzz::kControl, 0);  // and register it again
      data(w, 1, 0, 3, 1, 20);
      write("switch_program", P + "_collide", w.bytes());
    }
    {  // packets not for the switch, malformed data, a 64-worker job
      Writer w = sw_config(pol, 8, 20, pol == 3 ? 0xC5 : 0x08);
      const auto v = values(4, 1);
      w.packet(hdr(PktType::Ack, 1, 100, 1, 0, 3, 3, 0b111, 4, flag::kResult), v);
      w.packet(hdr(PktType::GradRequest, 1, 100, 2, 1, 3, 3, 0, 0), {});
      w.packet(hdr(PktType::Reminder, 1, 3, 100, 2, 3, 3, 0b100, 0), {});
      w.packet(hdr(PktType::Data, 1, 1, kSw, 0, 4, 3, 0b1, 4), v);  // wrong worker count
      w.packet(hdr(PktType::Data, 1, 1, kSw, 0, 3, 3, 0b1, 0), {});  // empty
      w.packet(hdr(PktType::Data, 9, 1, kSw, 0, 3, 3, 0b1, 4), v);  // unknown job
      w.packet(hdr(PktType::RateSync, 1, kSw, kSw, 0, 3, 3, 0b1, 0), {});
      for (uint8_t r = 0; r < 64; ++r)
        w.packet(hdr(PktType::Data, 3, static_cast<NodeId>(200 + r), kSw, r, 64, 5, 1ULL << r, 4), v, fuzz::kBurst);
      write("switch_program", P + "_misc", w.bytes());
    }
  }
}

// ---- ps: 3 config bytes, then events ----

constexpr NodeId kPsNode = 100;

void ps_packet(Writer& w, PktType t, NodeId src, uint8_t rank, uint32_t psn, uint64_t bitmap, uint16_t flags,
               fuzz::Kind k = fuzz::kPacket, unsigned arg = 1, uint8_t nworkers = 3, uint16_t count = 4) {
  const auto v = values(count, static_cast<int32_t>(bitmap * 3));
  w.packet(hdr(t, 1, src, kPsNode, rank, nworkers, psn, bitmap, count, flags), v, k, arg);
}

void ps_seeds() {
  auto config = [](uint8_t b0, uint8_t b1) {
    Writer w;
    w.byte(b0);
    w.byte(b1);
    w.byte(3);  // 4 values
    return w;
  };
  {  // a collision fallback and a flushed partial complete the task
    Writer w = config(2, 0);
    ps_packet(w, PktType::Data, kSw, 0, 0, 0b011, flag::kPartial);
    ps_packet(w, PktType::Data, kSw, 2, 0, 0b100, flag::kCollision);
    ps_packet(w, PktType::Data, kSw, 0, 1, 0b101, flag::kPartial | flag::kEvicted);
    ps_packet(w, PktType::Data, kSw, 1, 1, 0b010, flag::kCollision | flag::kEcn);
    write("ps", "complete", w.bytes());
  }
  {  // the entry times out: the reminder fetches and asks; the answers complete it
    Writer w = config(2, 2);  // one further switch
    ps_packet(w, PktType::Data, kSw, 0, 5, 0b001, flag::kCollision);
    w.event(fuzz::kAdvance, 5);
    ps_packet(w, PktType::FetchReply, kSw, 0, 5, 0b010, flag::kPartial);
    ps_packet(w, PktType::FetchReply, kSw + 1, 0, 5, 0, 0, fuzz::kBurst, 0, 3, 0);
    w.event(fuzz::kAdvance, 10);
    ps_packet(w, PktType::Data, 3, 2, 5, 0b100, flag::kToPs);
    write("ps", "timeout", w.bytes());
  }
  {  // a worker's reminder; a worker answers with the finished result (targeted)
    Writer w = config(2, 1);
    ps_packet(w, PktType::Reminder, 2, 1, 7, 0b010, 0, fuzz::kPacket, 1, 3, 0);
    ps_packet(w, PktType::Data, 1, 0, 7, 0b111, flag::kResult);
    ps_packet(w, PktType::Data, 1, 0, 8, 0b111, flag::kResult);
    w.event(fuzz::kControl, 0);  // a stale timer
    write("ps", "reminder_known_result", w.bytes());
  }
  {  // superseded, duplicate, conflicting and retired contributions
    Writer w = config(2, 0);
    ps_packet(w, PktType::Data, kSw, 0, 3, 0b001, flag::kPartial);
    ps_packet(w, PktType::Data, kSw, 0, 3, 0b011, flag::kPartial);
    ps_packet(w, PktType::Data, kSw, 0, 3, 0b001, flag::kPartial);
    ps_packet(w, PktType::Data, kSw, 1, 3, 0b110, flag::kPartial);
    ps_packet(w, PktType::Data, 1, 0, 3, 0, flag::kRetired, fuzz::kPacket, 1, 3, 0);
    ps_packet(w, PktType::FetchReply, kSw, 0, 99, 0b001, flag::kPartial);
    ps_packet(w, PktType::Ack, kSw, 0, 3, 0b111, flag::kResult);
    w.event(fuzz::kAdvance, 63);
    write("ps", "merge_cases", w.bytes());
  }
  {  // 64 workers, each one's gradient at the PS
    Writer w = config(8, 0);
    for (uint8_t r = 0; r < 64; ++r)
      ps_packet(w, PktType::Data, static_cast<NodeId>(1 + r), r, 0, 1ULL << r, flag::kToPs, fuzz::kBurst, 0, 64);
    write("ps", "workers64", w.bytes());
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s <fuzz/corpus>\n", argv[0]);
    return 2;
  }
  g_root = argv[1];
  wire_seeds();
  switch_seeds();
  ps_seeds();
  std::printf("seeds written under %s\n", argv[1]);
  return 0;
}
