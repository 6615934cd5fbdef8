// ina-ns3-star: the star workload of `ina bench sim` (sim/star_line_rate_1ms,
// experiment/star_line_rate.hpp) in ns-3 (3.37), the baseline of
// `ina bench sim --vs-ns3`. Built only when Debian's libns3-dev is installed.
//
// N host nodes and one switch node, each host on its own ns-3 point-to-point
// link (PointToPointHelper: a PointToPointNetDevice pair and a
// PointToPointChannel; rate and one-way delay as ina's links, a drop-tail
// device queue of 1 MiB as ina's). No IP stack: the applications send with
// NetDevice::Send and receive through Node::RegisterProtocolHandler, as ina's
// nodes exchange packets with no IP model. A packet is 306 B on the wire as
// in ina: the 2 B PPP header the device adds, a 48 B header of ours (PSN,
// rank, kind) and 64 int32 values.
//  - StarHost (an ns-3 Application on each host): sends `window` packets at
//    start, then one more per result received (as ina's worker with its
//    window of 512 and at most `pool` packets past its lowest unacknowledged
//    one), every value 1; checks every value of every result (= N).
//  - StarSwitch (an Application on the switch node): SwitchML's aggregation,
//    as ina's dataplane/switchml.cpp: two pools of `pool` slots, PSN p in
//    slot ((p / pool) % 2) * pool + p % pool; a contribution is summed into
//    its slot (64 additions); when all N hosts' contributions arrived the
//    slot is complete and its result goes to every host (one copy per link).
//
// Hops: one packet delivered at the far end of one link by the end of the
// run, counted where it is delivered: up hops = data packets the switch's
// handler receives (host -> switch links), down hops = results the hosts'
// handlers receive (switch -> host links); hops = up + down. These are the
// same deliveries ina's Simulator::hops() counts (nothing else crosses a
// link in this workload), and deliveries at exactly the end time count in
// both. Time resolution is 1 ps as in ina (306 B at 100 Gbps: 24480 ps).
// The wall time is Simulator::Run() alone (setup excluded), as ina's bench
// times Simulator::run alone; the CPU time is that thread's over the same.
//
// Prints one JSON object on stdout.
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <vector>

#include <ns3/application.h>
#include <ns3/command-line.h>
#include <ns3/data-rate.h>
#include <ns3/net-device-container.h>
#include <ns3/node-container.h>
#include <ns3/node.h>
#include <ns3/nstime.h>
#include <ns3/packet.h>
#include <ns3/point-to-point-helper.h>
#include <ns3/queue-size.h>
#include <ns3/simulator.h>
#include <ns3/string.h>
#include <ns3/version-defines.h>

#include "core/resources.hpp"  // header-only: thread_cpu_seconds()

namespace {

using namespace ns3;

// PointToPointNetDevice maps only IPv4's and IPv6's EtherTypes to PPP
// protocol numbers, so packets carry IPv4's; no IP stack is installed.
constexpr uint16_t kProto = 0x0800;
constexpr uint32_t kHeaderBytes = 48;  // ours; + 2 B PPP = ina's 50 B header
constexpr uint8_t kData = 1, kResult = 2;

struct WireHeader {
  uint32_t psn;
  uint8_t kind, rank;
  uint16_t count;
  uint8_t pad[kHeaderBytes - 8];
};
static_assert(sizeof(WireHeader) == kHeaderBytes);

class StarHost : public Application {
 public:
  StarHost(Ptr<NetDevice> dev, Address sw, uint8_t rank, uint32_t hosts, uint16_t values, uint32_t window,
           uint32_t pool, uint64_t packets)
      : dev_(dev), sw_(sw), rank_(rank), hosts_(hosts), values_(values), window_(window), pool_(pool),
        packets_(packets), done_(packets, 0), buf_(kHeaderBytes + 4u * values) {}

  uint64_t results = 0, bad_values = 0, unexpected = 0;

 private:
  void StartApplication() override {
    GetNode()->RegisterProtocolHandler(MakeCallback(&StarHost::Receive, this), kProto, dev_);
    Pump();
  }

  // Sends while fewer than `window` are outstanding and the next PSN is
  // within `pool` of the lowest unacknowledged one (ina's window_cap).
  void Pump() {
    while (next_ < packets_ && next_ - low_ < pool_ && next_ - results < window_) {
      WireHeader h{};
      h.psn = static_cast<uint32_t>(next_++);
      h.kind = kData;
      h.rank = rank_;
      h.count = values_;
      std::memcpy(buf_.data(), &h, sizeof h);
      auto* v = reinterpret_cast<int32_t*>(buf_.data() + kHeaderBytes);
      for (uint16_t i = 0; i < values_; ++i) v[i] = 1;
      dev_->Send(Create<Packet>(buf_.data(), static_cast<uint32_t>(buf_.size())), sw_, kProto);
    }
  }

  void Receive(Ptr<NetDevice>, Ptr<const Packet> p, uint16_t, const Address&, const Address&, NetDevice::PacketType) {
    if (p->GetSize() != buf_.size()) { ++unexpected; return; }
    p->CopyData(buf_.data(), static_cast<uint32_t>(buf_.size()));
    WireHeader h;
    std::memcpy(&h, buf_.data(), sizeof h);
    if (h.kind != kResult || h.psn >= next_ || done_[h.psn]) { ++unexpected; return; }
    const auto* v = reinterpret_cast<const int32_t*>(buf_.data() + kHeaderBytes);
    for (uint16_t i = 0; i < values_; ++i) bad_values += v[i] != static_cast<int32_t>(hosts_);
    done_[h.psn] = 1;
    ++results;
    while (low_ < next_ && done_[low_]) ++low_;
    Pump();
  }

  Ptr<NetDevice> dev_;
  Address sw_;
  uint8_t rank_;
  uint32_t hosts_;
  uint16_t values_;
  uint32_t window_, pool_;
  uint64_t packets_, next_ = 0, low_ = 0;
  std::vector<uint8_t> done_;
  std::vector<uint8_t> buf_;
};

class StarSwitch : public Application {
 public:
  StarSwitch(NetDeviceContainer devs, std::vector<Address> hosts, uint16_t values, uint32_t pool)
      : devs_(devs), hosts_(std::move(hosts)), values_(values), pool_(pool), slots_(2ull * pool),
        sums_(2ull * pool * values), buf_(kHeaderBytes + 4u * values) {}

  uint64_t data_in = 0, aggregations = 0, duplicates = 0, stale = 0, unexpected = 0;

 private:
  struct Slot {
    uint64_t psn = UINT64_MAX;  // the phase it holds
    uint64_t bitmap = 0;        // hosts that contributed
  };

  void StartApplication() override {
    for (uint32_t i = 0; i < devs_.GetN(); ++i)
      GetNode()->RegisterProtocolHandler(MakeCallback(&StarSwitch::Receive, this), kProto, devs_.Get(i));
  }

  void Receive(Ptr<NetDevice>, Ptr<const Packet> p, uint16_t, const Address&, const Address&, NetDevice::PacketType) {
    ++data_in;
    if (p->GetSize() != buf_.size()) { ++unexpected; return; }
    p->CopyData(buf_.data(), static_cast<uint32_t>(buf_.size()));
    WireHeader h;
    std::memcpy(&h, buf_.data(), sizeof h);
    if (h.kind != kData || h.rank >= hosts_.size()) { ++unexpected; return; }
    const uint64_t i = ((h.psn / pool_) % 2) * pool_ + h.psn % pool_;
    Slot& s = slots_[i];
    const auto* v = reinterpret_cast<const int32_t*>(buf_.data() + kHeaderBytes);
    int32_t* sum = &sums_[i * values_];
    const uint64_t bit = uint64_t{1} << h.rank;
    if (s.psn == h.psn) {
      if (s.bitmap & bit) { ++duplicates; return; }
      for (uint16_t k = 0; k < values_; ++k) sum[k] += v[k];
      s.bitmap |= bit;
    } else if (s.psn == UINT64_MAX || s.psn < h.psn) {  // a new phase of this slot
      std::memcpy(sum, v, 4u * values_);
      s.psn = h.psn;
      s.bitmap = bit;
    } else {
      ++stale;
      return;
    }
    if (static_cast<size_t>(__builtin_popcountll(s.bitmap)) != hosts_.size()) return;
    ++aggregations;
    h.kind = kResult;
    std::memcpy(buf_.data(), &h, sizeof h);
    std::memcpy(buf_.data() + kHeaderBytes, sum, 4u * values_);
    const Ptr<Packet> result = Create<Packet>(buf_.data(), static_cast<uint32_t>(buf_.size()));
    for (uint32_t d = 0; d < devs_.GetN(); ++d) devs_.Get(d)->Send(result->Copy(), hosts_[d], kProto);
  }

  NetDeviceContainer devs_;
  std::vector<Address> hosts_;
  uint16_t values_;
  uint32_t pool_;
  std::vector<Slot> slots_;
  std::vector<int32_t> sums_;
  std::vector<uint8_t> buf_;
};

}  // namespace

int main(int argc, char** argv) {
  Time::SetResolution(Time::PS);
  uint32_t hosts = 16, window = 512, pool = 10240, values = 64;
  double duration_us = 1000, gbps = 100, delay_ns = 2500;
  CommandLine cmd(__FILE__);
  cmd.AddValue("hosts", "hosts on the switch (1..64)", hosts);
  cmd.AddValue("duration-us", "simulated time (us)", duration_us);
  cmd.AddValue("gbps", "link rate (Gbit/s)", gbps);
  cmd.AddValue("delay-ns", "one-way link delay (ns)", delay_ns);
  cmd.AddValue("values", "int32 values per packet", values);
  cmd.AddValue("window", "packets outstanding per host", window);
  cmd.AddValue("pool", "switch slots per pool (two pools)", pool);
  cmd.Parse(argc, argv);
  if (hosts < 1 || hosts > 64 || values < 1 || values > 16384 || window < 1 || pool < 1 || !(duration_us > 0) ||
      !(gbps > 0) || !(delay_ns >= 0)) {
    std::fprintf(stderr, "ina-ns3-star: invalid argument (hosts 1..64, values 1..16384, window and pool >= 1, "
                         "duration-us and gbps > 0, delay-ns >= 0)\n");
    return 2;
  }
  const Time duration = PicoSeconds(static_cast<int64_t>(duration_us * 1e6 + 0.5));
  const double pkt_bits = 8.0 * (kHeaderBytes + 2 + 4.0 * values);
  const auto packets = static_cast<uint64_t>(duration_us * 1e-6 * gbps * 1e9 / pkt_bits) + window + 1;

  NodeContainer hostNodes(hosts);
  Ptr<Node> sw = CreateObject<Node>();
  PointToPointHelper p2p;
  p2p.SetDeviceAttribute("DataRate", DataRateValue(DataRate(static_cast<uint64_t>(gbps * 1e9))));
  p2p.SetChannelAttribute("Delay", TimeValue(PicoSeconds(static_cast<int64_t>(delay_ns * 1e3 + 0.5))));
  p2p.SetQueue("ns3::DropTailQueue<Packet>", "MaxSize", QueueSizeValue(QueueSize(QueueSizeUnit::BYTES, 1u << 20)));
  NetDeviceContainer swDevs;
  std::vector<Address> hostAddrs;
  std::vector<Ptr<StarHost>> apps;
  for (uint32_t r = 0; r < hosts; ++r) {
    const NetDeviceContainer link = p2p.Install(hostNodes.Get(r), sw);  // [host side, switch side]
    swDevs.Add(link.Get(1));
    hostAddrs.push_back(link.Get(0)->GetAddress());
    auto app = CreateObject<StarHost>(link.Get(0), link.Get(1)->GetAddress(), static_cast<uint8_t>(r), hosts,
                                static_cast<uint16_t>(values), window, pool, packets);
    hostNodes.Get(r)->AddApplication(app);
    app->SetStartTime(Seconds(0));
    apps.push_back(app);
  }
  auto swApp = CreateObject<StarSwitch>(swDevs, hostAddrs, static_cast<uint16_t>(values), pool);
  sw->AddApplication(swApp);
  swApp->SetStartTime(Seconds(0));

  // Events at exactly `duration` run (the stop event is scheduled before them).
  Simulator::Stop(duration + PicoSeconds(1));
  // CPU time: this thread's, as ina's side (ns-3's default simulator runs in the calling thread).
  const auto t0 = std::chrono::steady_clock::now();
  const double c0 = ina::thread_cpu_seconds();
  Simulator::Run();
  const double cpu = ina::thread_cpu_seconds() - c0;
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const uint64_t events = Simulator::GetEventCount();

  uint64_t down = 0, bad = 0, unexpected = swApp->unexpected;
  for (const auto& a : apps) {
    down += a->results;
    bad += a->bad_values;
    unexpected += a->unexpected;
  }
  const uint64_t hops = swApp->data_in + down;
  std::printf("{\"simulator\": \"ns-3 %d.%d (%s)\", \"hosts\": %u, \"duration_us\": %.6g, \"gbps\": %.6g, "
              "\"delay_ns\": %.6g, \"wire_bytes\": %u, \"window\": %u, \"pool\": %u, "
              "\"hops\": %" PRIu64 ", \"up_hops\": %" PRIu64 ", \"down_hops\": %" PRIu64 ", "
              "\"aggregations\": %" PRIu64 ", \"duplicates\": %" PRIu64 ", \"stale\": %" PRIu64 ", "
              "\"unexpected\": %" PRIu64 ", \"bad_values\": %" PRIu64 ", \"events\": %" PRIu64 ", "
              "\"wall_s\": %.6f, \"hops_per_s\": %.1f, \"cpu_s\": %.6f, \"hops_per_cpu_s\": %.1f}\n",
              NS3_VERSION_MAJOR, NS3_VERSION_MINOR, NS3_VERSION_BUILD_PROFILE, hosts, duration_us, gbps, delay_ns,
              kHeaderBytes + 2 + 4 * values, window, pool, hops, swApp->data_in, down, swApp->aggregations,
              swApp->duplicates, swApp->stale, unexpected, bad, events, wall, static_cast<double>(hops) / wall, cpu,
              static_cast<double>(hops) / cpu);
  Simulator::Destroy();
  return bad || unexpected ? 1 : 0;
}
