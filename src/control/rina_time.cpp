// Time model of one allreduce; documented in rina_time.hpp.
#include "control/rina_time.hpp"
#include "control/interval_index.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <map>

namespace ina::control::rina {
namespace {

using topo::ArcId;
using topo::Graph;
using topo::NodeId;

// Eq. 1's expected delay of one step whose `senders` each wait ~ N(k / N, sigma^2), in seconds.
double straggler_step_s(const TimeParams& p, double workers, int senders) {
  return (p.straggler_k_us / workers + p.straggler_sigma_us * expected_max_normal(senders)) * 1e-6;
}

// The queues one Rina transfer meets and leaves (Model::transfer_time).
// An episode is one transfer's bytes in flight through a port over [from,
// to) (absolute time), with its round trip without queues.
struct Episode {
  double from = 0, to = 0, bytes = 0, rtt = 0;
  double queued = 0;  // bytes waiting at the port as such (a slow-start round's burst), beside `bytes` in flight
};

// Per arc (port): the flows' episodes there (flow, episode), indexed by time.
struct PortEpisodes {
  std::vector<std::pair<size_t, Episode>> list;
  IntervalIndex index;  // list's [from, to), built once the list is complete
  void clear() {
    list.clear();
    index.clear();
  }
  void add(size_t flow, const Episode& e) {
    list.push_back({flow, e});
    index.add(e.from, e.to);
  }
};
using Standing = std::vector<PortEpisodes>;

struct Queues {
  const Graph* g = nullptr;
  const Standing* standing = nullptr;  // the last schedule's episodes
  size_t self = 0;                     // this transfer's flow (its own episodes are not the others')
  const std::vector<std::vector<ArcId>>* ways = nullptr;  // sender -> receiver, the data's arcs in order
  double t0 = 0;                  // the transfer's start (its sender's step), from the last schedule
  ArcId neck = 0;                 // its bottleneck port
  bool has_neck = false;
  double copies = 1;              // its copies through that port
  bool own = false;               // its window beyond the pipe waits at that port (not paced below its share)
  bool marks = false;             // that port marks ECN (a switch's egress)
  double w0 = 0;                  // window at the start (0: the transport's window)
  bool ss0 = false;               // goes on in slow start from w0 (its sender's previous send ended in it)
  double r0 = 0;                  // its sender's smoothed round trip at the start (s; 0: none yet)
  double alone = 0;               // its rate with its ports to itself (bits/s; the acknowledgement clock's fastest)
  double line = 0;                // its sender's link (bits/s): a burst leaves no faster
  bool window_paced = false;      // its sender paces at its window's rate over the round trip (host::window_pace_gbps)
  // Its switch ports off the bottleneck (arc, its copies there): its
  // bytes in flight pass them too, at most its rate over its round trip
  // per copy (`cap`, bytes), and each marks where the flows crossing it
  // keep more in flight than it serves. (Of ports tied as its bottleneck,
  // each holds its bytes in flight, but only `neck`, where the others keep
  // the most, is checked for its echo.)
  std::vector<std::pair<ArcId, double>> others;
  double cap = 0;
  // Results.
  double w_end = 0;               // window at the end
  bool ss_end = false;            // still in slow start at the end
  double r_end = 0;               // round trip of its last round (its sender's smoothed round trip after)
  std::vector<Episode> mine;      // its bytes in flight through the port (times from the transfer's start)

  // Port a's queue at t (bytes): what the others (and `bytes` more, of
  // round trip `rtt`) keep in flight through it beyond its bandwidth-delay
  // product over the longest of their round trips.
  // Plus the bursts waiting there (Episode::queued; `queued` more).
  double queue_at(ArcId a, double t, double bytes = 0, double rtt = 0, double queued = 0) const {
    const PortEpisodes& on = (*standing)[a];
    on.index.stab(t, [&](size_t i) {
      const auto& [h, e] = on.list[i];
      if (h == self) return;
      bytes += e.bytes;
      queued += e.queued;
      rtt = std::max(rtt, e.rtt);
    });
    return std::max(0.0, bytes - g->arc_gbps(a) * 1e9 / 8 * rtt) + queued;
  }
  // Port a's rate (bytes/s) the others' bytes in flight leave free at t
  // (each sends its bytes in flight a round trip).
  double spare_at(ArcId a, double t) const {
    double used = 0;
    const PortEpisodes& on = (*standing)[a];
    on.index.stab(t, [&](size_t i) {
      const auto& [h, e] = on.list[i];
      if (h != self && e.rtt > 0) used += e.bytes / e.rtt;
    });
    return std::max(0.0, g->arc_gbps(a) * 1e9 / 8 - used);
  }
  double wait_at(ArcId a, double t) const { return queue_at(a, t) / (g->arc_gbps(a) * 1e9 / 8); }
  // Queueing delay (s) on its slowest way: the data's ports and the
  // acknowledgements' (the reverse arcs); or the reverse arcs only (the
  // agent's pull, down the members' ways).
  double delay_at(double t, bool back_only = false) const {
    double d = 0;
    for (const auto& way : *ways) {
      double w = 0;
      for (const ArcId a : way) w += (back_only ? 0 : wait_at(a, t)) + wait_at(a ^ 1u, t);
      d = std::max(d, w);
    }
    return d;
  }
};

struct Transfer {
  std::vector<ArcId> arcs;  // every arc the packets cross (deduplicated)
  double rtt = 0;           // first packet out .. its acknowledgement back (the longest receiver)
  double start = 0;         // offset before the packets leave (Rina's pull)
  uint64_t packets = 0;
  bool slow_start = false;
  double window = 0;        // packets (0: the transport window W)
  bool paced = false;       // Rina members -> ToR at ina_gbps
  NodeId from = topo::kNoNode;  // RAR / H-AR: its sender (the window carries over to its next step)
  std::vector<ArcId> route;     // RAR / H-AR: its arcs in order
};

struct Step {
  std::vector<Transfer> transfers;
  int senders = 0;  // workers that draw a straggler delay before this step's send
};

class Model {
 public:
  Model(const Graph& g, const TimeParams& p) : g_(g), p_(p), routing_(g) {
    b_ = p.header_bytes + 4.0 * p.payload_values;
    d_ = p.link_delay_us * 1e-6;
    w_ = std::max(1.0, std::floor(p.window_kb * 1000 / b_));
  }

  const TimeParams& params() const { return p_; }
  double wire() const { return b_; }
  uint64_t packets(uint64_t values) const { return (values + p_.payload_values - 1) / p_.payload_values; }
  std::vector<ArcId> path(NodeId a, NodeId b) const { return a == b ? std::vector<ArcId>{} : routing_.path(a, b); }
  // A multicast copy's way (topo::Routing::tree_path).
  std::vector<ArcId> tree_path(NodeId a, NodeId b) const {
    return a == b ? std::vector<ArcId>{} : routing_.tree_path(a, b);
  }

  // One packet out along `arcs` (in order) and an acknowledgement back.
  double rtt(const std::vector<ArcId>& arcs) const {
    double t = 0;
    for (const ArcId a : arcs) {
      const double bps = g_.arc_gbps(a) * 1e9;
      t += 8 * b_ / bps + 8.0 * p_.ack_bytes / bps + 2 * d_;
    }
    return t;
  }
  // One packet's one-way latency along `arcs`: store and forward plus propagation per link.
  double fwd(const std::vector<ArcId>& arcs) const {
    double t = 0;
    for (const ArcId a : arcs) t += 8 * b_ / (g_.arc_gbps(a) * 1e9) + d_;
    return t;
  }
  double small_hop(ArcId a) const { return 8.0 * p_.ack_bytes / (g_.arc_gbps(a) * 1e9) + d_; }

  // Time of one transfer at `rate` (bits/s); `bw` gets its bandwidth part.
  double transfer_time(const Transfer& t, double rate, double& bw) const {
    if (t.packets == 0) return 0;
    const double s = 8 * b_ / rate;
    bw = static_cast<double>(t.packets - 1) * s;
    const auto P = static_cast<double>(t.packets);
    double sent = 0, at = 0, win = t.slow_start ? 1 : t.window > 0 ? t.window : w_;
    for (;;) {
      if (win * s >= t.rtt || sent + win >= P) return t.start + at + (P - 1 - sent) * s + t.rtt;
      sent += win;
      at += t.rtt;
      if (t.slow_start) win *= 2;
    }
  }

  // The window a transfer starts with: one packet in a slow start of its
  // own, else its fixed window, the one its sender carries, or the transport's.
  double start_window(const Transfer& t, const Queues& q) const {
    return t.slow_start ? 1 : t.window > 0 ? t.window : q.w0 > 0 ? q.w0 : w_;
  }

  // The same, round trip by round trip, with the queues the transfer meets
  // (Rina; see Queues and the header). A round sends the window (a window
  // beyond the pipe at the rate: the round takes its time on the
  // bottleneck); its round trip grows by the queueing delay on its slowest
  // way, when the round starts and when the last packet leaves (the agent's
  // pull too, on its way down). Its bytes in flight through its bottleneck
  // port (copies x the round's packets; from its first acknowledgement on,
  // a round trip in, what they add, at most the packets left) go to the
  // port with the others'. Where the port marks (a switch's) and its queue
  // passes ecn_kb, the echo comes back a round trip and the threshold's
  // delay later and halves the window there (slow start ends; an echo
  // within a round trip of the last halving is not one more), which then
  // grows by a packet a round trip. The window at the end and its episodes
  // (from the transfer's start) go to `q`.
  double transfer_time(const Transfer& t, double rate, double& bw, Queues& q) const {
    double win = start_window(t, q);
    q.mine.clear();
    q.w_end = win;
    q.r_end = q.r0;
    q.ss_end = t.slow_start || q.ss0;
    if (t.packets == 0) return 0;
    const double s = 8 * b_ / rate;
    bw = static_cast<double>(t.packets - 1) * s;
    const auto P = static_cast<double>(t.packets);
    const double K = p_.ecn_kb * 1000, Bps = q.has_neck ? g_.arc_gbps(q.neck) * 1e9 / 8 : 0;
    constexpr double kNone = std::numeric_limits<double>::infinity();
    // The agent's pull (a paced ScatterReduce's start) waits in the queues on its way down.
    const double start = t.start + (t.paced && t.start > 0 ? q.delay_at(q.t0, true) : 0);
    // hold: the hold-off after a halving, the round trip the sender had
    // measured when the echo came (the round it came in).
    double sent = 0, at = 0, echo_at = kNone, cut = -kNone, hold = 0, last_R = 0;
    bool ss = t.slow_start || q.ss0;
    // A window-paced sender's window grows no further than it covers its
    // link's rate over the least round trip of the transfer's rounds
    // (RingEndpoint::growth_ceiling; the covering window as
    // host::window_covering, R in seconds).
    const double link_gbps = host::ring_link_gbps(t.paced, rina_pace_gbps(p_), q.line / 1e9, p_.rina_transport);
    double least_R = kNone;
    auto grown = [&](double w, double by, double R) {
      least_R = std::min(least_R, R);
      if (!q.window_paced || link_gbps <= 0) return w + by;
      return host::grow_to_ceiling(w, by, link_gbps * 1e9 * least_R / (8 * b_));
    };
    for (;;) {
      if (echo_at <= at) {
        win = std::max(1.0, win / 2);
        ss = false;
        cut = at;
        hold = last_R;
        echo_at = kNone;
      }
      const double now = q.t0 + start + at;
      // A slow-start round is clocked by the previous round's
      // acknowledgements: they come back at the rate the port serves its
      // packets (what the others' bytes in flight leave free, at least its
      // share, at most its rate alone), and each lets two packets go.
      double sr = s;
      if (ss && q.has_neck) {
        const double free_bps = 8 * q.spare_at(q.neck, now) / q.copies;
        sr = 8 * b_ / std::clamp(free_bps, rate, std::max(rate, q.alone));
      }
      const double R = t.rtt + q.delay_at(now), pipe = R / sr;
      const double rest = P - sent, n = std::min(win, rest);
      // A window-paced sender spaces the round's packets at its window's
      // rate over the round trip (no closer than the port serves them).
      const double sp = q.window_paced ? std::max(sr, 8 * b_ / (host::window_pace_gbps(win, R, b_, ss) * 1e9)) : sr;
      const double dur = std::max(R, n * sp);
      last_R = R;
      const double grow = ss ? n : n / win;
      // Below the pipe the round leaves as a burst, two packets per
      // acknowledgement (no faster than its sender's link): the port holds
      // what arrives beyond its rate, most when the burst ends. A carried
      // window's first round is paced over the round trip its sender last
      // measured (before any acknowledgement of this transfer): over a
      // shorter way than this one's, faster than the port serves it.
      double sb = sp, served = sr;
      const size_t round_first = q.mine.size();  // this round's episodes from here on
      if (ss && q.line > 0) {
        sb = std::max({8 * b_ / q.line, sr / 2, sp});
      } else if (q.window_paced && !ss && sent == 0 && q.r0 > 0 && q.line > 0 && q.has_neck) {
        // (the port's reverse traffic, acknowledgements, starts a round trip later)
        sb = std::max(8 * b_ / q.line, 8 * b_ / (host::window_pace_gbps(win, q.r0, b_, false) * 1e9));
        served = 8 * b_ * q.copies / (g_.arc_gbps(q.neck) * 1e9);
      }
      const double burst = sb < served ? q.copies * b_ * std::max(0.0, n * (1 - sb / served) - std::max(0.0, n - pipe)) : 0;
      if (q.has_neck) {
        // In flight through its port (paced below its share, no more than
        // the pace's pipe): the round's packets, and from its first
        // acknowledgement on (a round trip later) what they add, up to the
        // packets left; the port's queue with the others'.
        auto held = [&](double k) { return q.copies * b_ * (q.own ? k : std::min(k, pipe)); };
        const double h0 = held(n), h1 = held(std::min(grown(win, grow, R), rest));
        const double drain = rest <= win ? q.queue_at(q.neck, now + std::min(R, dur), dur > R ? h1 : h0, t.rtt) / Bps : 0;
        if (dur > R) {
          q.mine.push_back({start + at, start + at + R, h0, t.rtt});
          q.mine.push_back({start + at + R, start + at + dur + drain, h1, t.rtt});
        } else {
          q.mine.push_back({start + at, start + at + dur + drain, h0, t.rtt});
        }
        // The burst's queue: a triangle (up while it leaves, down until the
        // port has served it) as its peak over the half of it above half.
        if (burst > 0) q.mine.push_back({start + at + n * sb / 2, start + at + n * (sb + served) / 2, 0, t.rtt, burst});
        if ((q.marks || !q.others.empty()) && K > 0 && echo_at == kNone) {
          // The first moment of the round a port passes the threshold: its
          // start, its burst's end (the bottleneck's), its own
          // acknowledgements' return, another's round starting there.
          // The echo's return from the first of `times` at which `queue`
          // (a port of `port_Bps`) passes the threshold (kNone: none).
          auto echo_from = [&](std::vector<double>& times, double port_Bps, auto&& queue) {
            std::sort(times.begin(), times.end());
            for (const double w : times)
              if (queue(w) > K) return w - q.t0 - start + std::max(R, t.rtt + K / port_Bps);
            return kNone;
          };
          double first = kNone;
          if (q.marks) {
            std::vector<double> when = {now};
            const double burst_end = now + n * sb;  // one value: compared for equality below
            if (burst > 0) when.push_back(burst_end);
            if (dur > R) when.push_back(now + R);
            const PortEpisodes& on = (*q.standing)[q.neck];
            on.index.starting(now, now + dur, [&](size_t i) {
              if (on.list[i].first != q.self) when.push_back(on.list[i].second.from);
            });
            first = echo_from(when, Bps, [&](double w) {
              return q.queue_at(q.neck, w, w < now + R ? h0 : h1, t.rtt, burst > 0 && w == burst_end ? burst : 0);
            });
          }
          for (const auto& [a, c] : q.others) {
            const double Ba = g_.arc_gbps(a) * 1e9 / 8;
            const PortEpisodes& oa = (*q.standing)[a];
            // Every other episode over the round at once bounds the port's
            // queue there (as queue_at: bytes beyond the bandwidth-delay
            // product at the shortest round trip, plus the bursts): at or
            // below the threshold, no moment of it passes.
            double bytes = std::min(std::max(h0, h1) / q.copies, q.cap) * c, queued = 0;
            std::vector<double> wa = {now};
            oa.index.stab(now, [&](size_t i) {
              if (oa.list[i].first == q.self) return;
              bytes += oa.list[i].second.bytes;
              queued += oa.list[i].second.queued;
            });
            oa.index.starting(now, now + dur, [&](size_t i) {
              if (oa.list[i].first == q.self) return;
              bytes += oa.list[i].second.bytes;
              queued += oa.list[i].second.queued;
              wa.push_back(oa.list[i].second.from);
            });
            if (std::max(0.0, bytes - Ba * t.rtt) + queued <= K) continue;
            if (dur > R) wa.push_back(now + R);
            // (a and c copied into the capture: clang 14, which builds the
            // fuzz targets, cannot capture structured bindings)
            first = std::min(first, echo_from(wa, Ba, [&, a = a, c = c](double w) {
              return q.queue_at(a, w, std::min((w < now + R ? h0 : h1) / q.copies, q.cap) * c, t.rtt);
            }));
          }
          if (first < kNone && first - cut > hold) echo_at = first;
        }
      }
      // An echo within the round halves the window there: the round ends
      // with the packets it sent by then.
      if (echo_at > at && echo_at < at + dur) {
        // Its bytes in flight end there too: the next round's take over.
        const double cut_at = start + echo_at;
        auto& e = q.mine;
        for (size_t i = round_first; i < e.size(); ++i) e[i].to = std::min(e[i].to, cut_at);
        e.erase(std::remove_if(e.begin() + static_cast<std::ptrdiff_t>(round_first), e.end(),
                               [](const Episode& x) { return x.to <= x.from; }),
                e.end());
        const double part = (echo_at - at) / dur;
        sent += n * part;
        win = grown(win, grow * part, R);
        at = echo_at;
        continue;
      }
      if (rest <= win) {  // the last packet's round trip, through the queues as it leaves
        q.w_end = grown(win, grow, R);
        q.r_end = R;
        q.ss_end = ss;
        const double last = at + (n - 1) * sp;
        return start + last + t.rtt + q.delay_at(q.t0 + start + last);
      }
      sent += n;
      at += dur;
      win = grown(win, grow, R);
    }
  }

  // Sum of the steps' slowest transfers.
  void run(const std::vector<Step>& steps, int n_workers, TimeResult& out) const {
    const Standing none(g_.num_arcs());
    std::map<NodeId, double> window, next_window;  // per sender, in packets
    std::map<NodeId, double> srtt, next_srtt;      // per sender, its last round trip (s)
    for (const Step& st : steps) {
      // A transfer's packets load its arcs, and its acknowledgements (one
      // per packet, ack_bytes against b) the reverse arcs for the part of
      // its sending they overlap: they start a round trip after its first
      // packet, so a shard sent within a round trip leaves no
      // acknowledgement beside the data (fraction 1 - R / its time at the
      // share without them).
      std::map<ArcId, double> data;
      for (const Transfer& t : st.transfers)
        for (const ArcId a : t.arcs) data[a] += 1;
      auto share = [&](const Transfer& t, const std::map<ArcId, double>& load) {
        double rate = std::numeric_limits<double>::infinity();
        for (const ArcId a : t.arcs) rate = std::min(rate, g_.arc_gbps(a) * 1e9 / load.at(a));
        if (t.paced && rina_pace_gbps(p_) > 0) rate = std::min(rate, rina_pace_gbps(p_) * 1e9);
        return rate;
      };
      std::map<ArcId, double> load = data;
      for (const Transfer& t : st.transfers) {
        if (t.packets < 2) continue;
        const double sending = static_cast<double>(t.packets - 1) * 8 * b_ / share(t, data);
        const double overlap = std::max(0.0, 1 - t.rtt / sending);
        for (const ArcId a : t.arcs)
          if (data.count(a ^ 1u)) load[a ^ 1u] += overlap * p_.ack_bytes / b_;
      }
      double worst = 0, worst_bw = 0;
      for (const Transfer& t : st.transfers) {
        const double rate = share(t, load);
        double bw = 0;
        double x = 0;
        if (t.from == topo::kNoNode) {
          x = transfer_time(t, rate, bw);
        } else {
          // Its window from its sender's last step, grown and halved by ECN
          // round by round at its bottleneck port (the first of its ways at
          // its share), where this step's transfers through that port queue
          // alike (copies).
          Queues q;
          const std::vector<std::vector<ArcId>> ways = {t.route};
          q.g = &g_;
          q.standing = &none;
          q.ways = &ways;
          double neck = std::numeric_limits<double>::infinity();
          for (const ArcId a : t.route)
            if (const double c = g_.arc_gbps(a) * 1e9 / load.at(a); c < neck * (1 - 1e-9)) {
              neck = c;
              q.neck = a;
            }
          q.has_neck = !t.route.empty();
          q.copies = q.has_neck ? data.at(q.neck) : 1;
          q.own = true;
          q.marks = q.has_neck && !g_.is_host(g_.arc_from(q.neck));
          const auto w = window.find(t.from);
          q.w0 = w == window.end() ? 0 : w->second;
          const auto r = srtt.find(t.from);
          q.r0 = r == srtt.end() ? 0 : r->second;
          q.alone = rate;
          q.line = q.has_neck ? g_.arc_gbps(t.route.front()) * 1e9 : 0;
          q.window_paced = p_.rina_transport == host::RinaTransport::Paper;
          x = transfer_time(t, rate, bw, q);
          next_window[t.from] = q.w_end;
          next_srtt[t.from] = q.r_end;
        }
        if (x > worst) {
          worst = x;
          worst_bw = bw;
        }
      }
      for (const auto& [v, w] : next_window) window[v] = w;
      for (const auto& [v, r] : next_srtt) srtt[v] = r;
      next_window.clear();
      next_srtt.clear();
      out.transfer_s += worst;
      out.bandwidth_s += worst_bw;
      if (st.senders > 0 && (p_.straggler_sigma_us > 0 || p_.straggler_k_us > 0))
        out.straggler_s += straggler_step_s(p_, n_workers, st.senders);
    }
    out.steps = static_cast<int>(steps.size());
  }

  const Graph& g_;
  const TimeParams& p_;
  topo::Routing routing_;
  double b_ = 0, d_ = 0, w_ = 1;
};

void dedup(std::vector<ArcId>& a) {
  std::sort(a.begin(), a.end());
  a.erase(std::unique(a.begin(), a.end()), a.end());
}

void append(std::vector<ArcId>& to, const std::vector<ArcId>& from) { to.insert(to.end(), from.begin(), from.end()); }

// The largest of `parts` near-equal shards of `len` values (host::shard_begin's split).
uint64_t max_shard(uint64_t len, uint64_t parts) {
  uint64_t m = 0;
  for (uint64_t c = 0; c < parts; ++c) m = std::max(m, len * (c + 1) / parts - len * c / parts);
  return m;
}

NodeId tor_of(const Graph& g, NodeId w) {
  for (const auto& e : g.neighbors(w))
    if (!g.is_host(e.peer)) return e.peer;
  throw BomError(fmt::format("worker '{}' is not attached to a switch", g.node(w).name));
}

// A plain ring step among `ring` (each sends `pk` packets to the next).
Step ring_step(const Model& m, const std::vector<std::vector<NodeId>>& rings, uint64_t pk) {
  Step st;
  for (const auto& ring : rings)
    for (size_t i = 0; i < ring.size(); ++i) {
      Transfer t;
      t.arcs = m.path(ring[i], ring[(i + 1) % ring.size()]);
      t.rtt = m.rtt(t.arcs);
      t.from = ring[i];
      t.route = t.arcs;
      dedup(t.arcs);
      t.packets = pk;
      st.transfers.push_back(std::move(t));
      ++st.senders;
    }
  return st;
}

std::vector<Step> rar_steps(const Model& m, const std::vector<NodeId>& workers, uint64_t elems, TimeResult& out) {
  const uint64_t pk = m.packets(max_shard(elems, workers.size()));
  out.groups = static_cast<int>(workers.size());
  return std::vector<Step>(2 * (workers.size() - 1), ring_step(m, {workers}, pk));
}

std::vector<Step> har_steps(const Model& m, const Graph& g, const std::vector<NodeId>& workers, uint64_t elems,
                            TimeResult& out) {
  std::vector<std::vector<NodeId>> racks;
  std::vector<NodeId> tors;
  for (const NodeId w : workers) {
    const NodeId t = tor_of(g, w);
    const auto it = std::find(tors.begin(), tors.end(), t);
    if (it == tors.end()) {
      tors.push_back(t);
      racks.push_back({w});
    } else {
      racks[static_cast<size_t>(it - tors.begin())].push_back(w);
    }
  }
  const size_t k = racks[0].size(), R = racks.size();
  for (size_t r = 0; r < R; ++r)
    if (racks[r].size() != k)
      throw BomError(fmt::format("h-ar needs the same number of workers in every rack (rack of '{}' has {}, of '{}' has {})",
                                 g.node(tors[0]).name, k, g.node(tors[r]).name, racks[r].size()));
  out.groups = static_cast<int>(R);
  std::vector<Step> steps;
  const uint64_t rack_shard = max_shard(elems, k);
  if (k > 1) steps.insert(steps.end(), k - 1, ring_step(m, racks, m.packets(rack_shard)));
  if (R > 1) {
    std::vector<std::vector<NodeId>> across(k);
    for (size_t p = 0; p < k; ++p)
      for (size_t r = 0; r < R; ++r) across[p].push_back(racks[r][p]);
    steps.insert(steps.end(), 2 * (R - 1), ring_step(m, across, m.packets(max_shard(rack_shard, R))));
  }
  if (k > 1) steps.insert(steps.end(), k - 1, ring_step(m, racks, m.packets(rack_shard)));
  return steps;
}

// Rina as a dependency graph (see the header): one flow per transfer, and
// per worker its steps in the endpoint's order (host/ring_step_compiler.cpp).
struct Flow {
  Transfer t;
  NodeId sender = topo::kNoNode;                 // the worker whose step start starts it
  std::vector<std::pair<size_t, double>> recv;  // receiving worker, its last packet's one-way latency
  std::vector<double> load;                      // per arc of t.arcs: transfers sharing it (time-weighted)
  std::vector<ArcId> extra;                      // a copy more on this arc, per entry (a tree above the ToR: one
                                                 //   transmission per hop, several hops over one arc)
  std::vector<double> copies;                    // per arc of t.arcs: 1 + its entries in `extra`
  double t0 = -1, dur = 0, bw = 0, rate = 0;    // its sender's step start; time to the last acknowledgement
  double bw_before = 0;                          // bandwidth time on the chain before t0
  std::vector<std::vector<ArcId>> routes;        // each sender -> receiver way (in order; acknowledgements come back on it)
  std::vector<size_t> neck;                      // indices into t.arcs: the ports its rate is the share of
  int prev = -1;                                 // its sender's previous flow (the window carries over)
  bool keeps_slow_start = false;                 // goes on in slow start if the previous flow ended in it
  double w_carry = 0;                            // the window it hands its sender's next flow (damped; 0: none yet)
  bool ss_carry = false;                         // and whether it ended in slow start
  Queues q;
};

struct WorkerStep {
  int send = -1, recv = -1;  // flows (-1: none)
};

// Schedules every worker's steps with the flows' current loads; returns
// each worker's completion and (bw) the bandwidth part on its chain.
std::vector<double> schedule(const Model& m, const TimeParams& p, const Graph& g, const std::vector<NodeId>& workers,
                             const std::vector<std::vector<WorkerStep>>& plan, std::vector<Flow>& flows,
                             const Standing& standing, std::vector<double>& bw) {
  // The rates and times first, every flow with the others' queues of the
  // last schedule (their episodes) and its sender's window from it.
  for (size_t fi = 0; fi < flows.size(); ++fi) {
    Flow& f = flows[fi];
    double share = std::numeric_limits<double>::infinity();
    for (size_t i = 0; i < f.t.arcs.size(); ++i) share = std::min(share, g.arc_gbps(f.t.arcs[i]) * 1e9 / f.load[i]);
    f.rate = share;
    if (f.t.paced && rina_pace_gbps(p) > 0) f.rate = std::min(f.rate, rina_pace_gbps(p) * 1e9);
    // Its bottleneck ports: on each of its ways the first arc its rate is
    // the share of (the queue forms there; the arcs after it see no more
    // than that rate; a sender's own link when it is one of them).
    f.neck.clear();
    for (const auto& way : f.routes)
      for (const ArcId a : way) {
        const size_t i = static_cast<size_t>(std::lower_bound(f.t.arcs.begin(), f.t.arcs.end(), a) - f.t.arcs.begin());
        if (g.arc_gbps(a) * 1e9 / f.load[i] <= share * (1 + 1e-9)) {
          if (std::find(f.neck.begin(), f.neck.end(), i) == f.neck.end()) f.neck.push_back(i);
          break;
        }
      }
    Queues& q = f.q;
    q.g = &g;
    q.standing = &standing;
    q.self = fi;
    q.ways = &f.routes;
    q.t0 = std::max(f.t0, 0.0);
    q.w0 = f.prev >= 0 ? flows[static_cast<size_t>(f.prev)].w_carry : 0;
    q.ss0 = f.keeps_slow_start && f.prev >= 0 && flows[static_cast<size_t>(f.prev)].ss_carry;
    q.own = f.rate >= share * (1 - 1e-9);  // paced below its share, the excess waits at the sender
    q.has_neck = false;
    q.copies = 1;
    q.alone = std::numeric_limits<double>::infinity();
    for (size_t i = 0; i < f.t.arcs.size(); ++i) q.alone = std::min(q.alone, g.arc_gbps(f.t.arcs[i]) * 1e9 / f.copies[i]);
    q.line = f.routes.empty() || f.routes[0].empty() ? 0 : g.arc_gbps(f.routes[0][0]) * 1e9;
    q.window_paced = p.rina_transport == host::RinaTransport::Paper;
    q.marks = false;
    // Its bottleneck port: of the tied ones, where the others keep the most in flight.
    double most = -1;
    for (const size_t i : f.neck) {
      double sum = 0;
      for (const auto& [h, e] : standing[f.t.arcs[i]].list)
        if (h != fi) sum += e.bytes * (e.to - e.from);
      if (sum > most) {
        most = sum;
        q.neck = f.t.arcs[i];
        q.has_neck = true;
        q.copies = f.copies[i];
        q.marks = !g.is_host(g.arc_from(q.neck));
      }
    }
    q.others.clear();
    q.cap = f.rate * f.t.rtt / 8;
    for (size_t i = 0; i < f.t.arcs.size(); ++i)
      if (std::find(f.neck.begin(), f.neck.end(), i) == f.neck.end() && !g.is_host(g.arc_from(f.t.arcs[i])))
        q.others.push_back({f.t.arcs[i], f.copies[i]});
    f.dur = m.transfer_time(f.t, f.rate, f.bw, q);
  }
  for (Flow& f : flows) f.t0 = -1;
  const size_t n = workers.size();
  std::vector<size_t> at(n, 0);
  std::vector<double> cur(n, 0);
  bw.assign(n, 0);
  for (bool progress = true; progress;) {
    progress = false;
    for (size_t w = 0; w < n; ++w)
      while (at[w] < plan[w].size()) {
        const WorkerStep& st = plan[w][at[w]];
        double done = cur[w], done_bw = bw[w];
        auto later = [&](double t, double b) {
          if (t > done) {
            done = t;
            done_bw = b;
          }
        };
        if (st.send >= 0) {
          Flow& f = flows[static_cast<size_t>(st.send)];
          if (f.sender == workers[w] && f.t0 < 0) {
            f.t0 = cur[w];
            f.bw_before = bw[w];
          }
          if (f.t0 < 0) break;
          later(f.t0 + f.dur, f.bw_before + f.bw);
        }
        if (st.recv >= 0) {
          const Flow& f = flows[static_cast<size_t>(st.recv)];
          if (f.t0 < 0) break;
          double lat = 0;
          for (const auto& [r, l] : f.recv)
            if (r == w) lat = l;
          later(f.t0 + f.dur - f.t.rtt + lat, f.bw_before + f.bw);
        }
        cur[w] = done;
        bw[w] = done_bw;
        ++at[w];
        progress = true;
      }
  }
  for (size_t w = 0; w < n; ++w)
    if (at[w] < plan[w].size())
      throw BomError(fmt::format("rina time model: worker '{}' waits for a flow that never starts (step {})",
                                 g.node(workers[w]).name, at[w]));
  return cur;
}

void rina_time(const Model& m, const TimeParams& p, const Graph& g, const std::vector<NodeId>& workers,
               const std::vector<NodeId>& ina, uint64_t elems, TimeResult& out) {
  // The groups above the ToR too (rina_bom.hpp, Aggregation::Tree), as the simulator runs them.
  const RinaResult rr = rina_throughput(g, workers, ina, Aggregation::Tree);
  const auto& gr = rr.groups;
  const size_t G = gr.size(), n = workers.size();
  out.groups = static_cast<int>(G);
  const uint64_t pk = m.packets(max_shard(elems, G));
  std::map<NodeId, size_t> index;
  for (size_t i = 0; i < n; ++i) index[workers[i]] = i;
  auto rack = [](const Group& x) { return x.sender != x.agent; };
  std::vector<Flow> flows;
  auto add = [&](Flow f) {
    dedup(f.t.arcs);
    f.load.assign(f.t.arcs.size(), 1);
    for (const ArcId a : f.extra)
      f.load[static_cast<size_t>(std::lower_bound(f.t.arcs.begin(), f.t.arcs.end(), a) - f.t.arcs.begin())] += 1;
    f.copies = f.load;
    flows.push_back(std::move(f));
    return static_cast<int>(flows.size() - 1);
  };
  // A member's way up its group's tree to the top (an INA rack: member ->
  // ToR; above the ToR, Group::hops: member -> level -> ... -> top), and the
  // top's copy down to it (the same hops, reversed).
  std::map<NodeId, NodeId> up_of;
  for (const Group& x : gr)
    for (const Hop& h : x.hops) up_of[h.from] = h.to;
  auto up = [&](NodeId w, NodeId top) {
    std::vector<ArcId> a;
    for (NodeId v = w; v != top;) {
      const auto it = up_of.find(v);
      const NodeId nxt = it == up_of.end() ? top : it->second;
      append(a, m.path(v, nxt));
      v = nxt;
    }
    return a;
  };
  auto down = [&](NodeId top, NodeId w) {
    std::vector<std::vector<ArcId>> legs;
    for (NodeId v = w; v != top;) {
      const auto it = up_of.find(v);
      const NodeId nxt = it == up_of.end() ? top : it->second;
      legs.push_back(m.path(nxt, v));
      v = nxt;
    }
    std::vector<ArcId> a;
    for (auto it = legs.rbegin(); it != legs.rend(); ++it) append(a, *it);
    return a;
  };
  // A group above the ToR sends one transmission per hop of its tree (up in
  // ScatterReduce, copies down in AllGather): an arc several hops cross
  // carries that many copies of the transfer.
  auto above = [&](const Group& x) {
    for (const Hop& h : x.hops)
      if (!g.is_host(h.from) || m.path(h.from, h.to).size() > 1) return true;
    return false;
  };
  auto legs = [&](const Group& x, bool downward, NodeId skip) {
    std::vector<std::vector<ArcId>> out;
    for (const Hop& h : x.hops)
      if (h.from != skip) out.push_back(downward ? m.path(h.to, h.from) : m.path(h.from, h.to));
    return out;
  };
  auto extras = [](const std::vector<std::vector<ArcId>>& tx) {
    std::map<ArcId, int> n;
    for (const auto& t : tx)
      for (const ArcId a : t) ++n[a];
    std::vector<ArcId> out;
    for (const auto& [a, c] : n) out.insert(out.end(), static_cast<size_t>(c - 1), a);
    return out;
  };
  auto pull = [&](const Group& x) {
    double worst = 0;
    for (const NodeId w : x.members) {
      double t = 0;
      for (const ArcId a : up(x.agent, x.sender)) t += m.small_hop(a);
      for (const ArcId a : m.path(x.sender, w)) t += m.small_hop(a);
      if (w != x.agent) worst = std::max(worst, t);
    }
    return worst;
  };
  // ScatterReduce of group i (to the next group's agent, or for an INA
  // rack's extra step to its own agent): an INA rack's members -> ToR, one
  // aggregate on (after the agent's pull); an autonomous worker's shard.
  auto scatter = [&](size_t i, NodeId to) {
    const Group& x = gr[i];
    Flow f;
    f.t.packets = pk;
    f.sender = x.agent;
    if (rack(x)) {
      double first_rtt = 0, first_fwd = 0;
      const auto on = m.path(x.sender, to);
      for (const NodeId w : x.members) {
        const auto a = up(w, x.sender);
        append(f.t.arcs, a);
        first_rtt = std::max(first_rtt, m.rtt(a));
        first_fwd = std::max(first_fwd, m.fwd(a));
        f.routes.push_back(a);
        append(f.routes.back(), on);
      }
      append(f.t.arcs, on);
      if (above(x)) {
        auto tx = legs(x, false, topo::kNoNode);
        tx.push_back(on);
        f.extra = extras(tx);
      }
      f.t.rtt = first_rtt + m.rtt(on);
      f.t.start = pull(x);
      f.t.paced = true;
      f.recv = {{index.at(to), first_fwd + m.fwd(on)}};
    } else {
      f.t.arcs = m.path(x.agent, to);
      f.t.rtt = m.rtt(f.t.arcs);
      f.recv = {{index.at(to), m.fwd(f.t.arcs)}};
      f.routes = {f.t.arcs};
    }
    return add(std::move(f));
  };
  // AllGather step s of group i: to the next group's entry (an INA rack's
  // ToR copies it to every member and acknowledges for the rack); an INA
  // rack's step 0 is its agent's, through its own ToR to its other members
  // too, slow-started; later steps are member s mod k's.
  auto gather = [&](size_t i, size_t s) {
    const Group& x = gr[i];
    const bool r = rack(x);
    const NodeId from = r ? x.members[s % x.members.size()] : x.agent;
    Flow f;
    f.t.packets = pk;
    f.sender = from;
    auto reach = [&](const std::vector<ArcId>& via, NodeId w) {
      append(f.t.arcs, via);
      f.t.rtt = std::max(f.t.rtt, m.rtt(via));
      f.recv.emplace_back(index.at(w), m.fwd(via));
      f.routes.push_back(via);
    };
    std::vector<std::vector<ArcId>> tx;  // transmissions, when a group above the ToR is involved
    bool tree = false;
    auto to_group = [&](const std::vector<ArcId>& head, NodeId at, const Group& y) {
      tx.push_back(m.path(at, rack(y) ? y.sender : y.agent));
      if (rack(y)) {
        auto d = legs(y, true, topo::kNoNode);
        tx.insert(tx.end(), d.begin(), d.end());
        tree = tree || above(y);
      }
      std::vector<ArcId> a = head;
      if (!rack(y)) {
        append(a, m.path(at, y.agent));
        return reach(a, y.agent);
      }
      append(a, m.path(at, y.sender));
      for (const NodeId w : y.members) {
        std::vector<ArcId> b = a;
        append(b, down(y.sender, w));
        reach(b, w);
      }
    };
    if (r && s == 0) {
      const auto own_up = up(from, x.sender);
      for (NodeId v = from; v != x.sender;) {
        const auto it = up_of.find(v);
        const NodeId nxt = it == up_of.end() ? x.sender : it->second;
        tx.push_back(m.path(v, nxt));
        v = nxt;
      }
      auto d = legs(x, true, from);
      tx.insert(tx.end(), d.begin(), d.end());
      tree = tree || above(x);
      for (const NodeId w : x.members)
        if (w != from) {
          std::vector<ArcId> b = own_up;
          append(b, down(x.sender, w));
          reach(b, w);
        }
      if (G > 1) to_group(own_up, x.sender, gr[(i + 1) % G]);
      f.t.slow_start = true;
    } else {
      to_group({}, from, gr[(i + 1) % G]);
      // A member's first AllGather send starts from one packet; its later
      // ones go on with the window its previous send ended with (Flow::prev),
      // in slow start still if it ended in it (RingEndpoint::begin_send).
      if (r && p.rina_transport == host::RinaTransport::Paper) {
        if (s < x.members.size()) f.t.slow_start = true;
        else f.keeps_slow_start = true;
      }
    }
    if (tree) f.extra = extras(tx);
    return add(std::move(f));
  };
  auto ag_steps = [&](const Group& x) { return rack(x) ? std::max<size_t>(G - 1, 1) : G - 1; };
  std::vector<std::vector<int>> sr(G), ag(G);
  std::vector<int> own(G, -1);
  for (size_t i = 0; i < G; ++i) {
    for (size_t s = 0; s + 1 < G; ++s) sr[i].push_back(scatter(i, gr[(i + 1) % G].agent));
    if (rack(gr[i])) own[i] = scatter(i, gr[i].agent);
    for (size_t s = 0; s < ag_steps(gr[i]); ++s) ag[i].push_back(gather(i, s));
  }
  // Each worker's steps (host/ring_step_compiler.cpp's build_steps).
  std::vector<std::vector<WorkerStep>> plan(n);
  for (size_t i = 0; i < G; ++i) {
    const Group& x = gr[i];
    const size_t prev = (i + G - 1) % G, k = x.members.size();
    for (size_t pos = 0; pos < k; ++pos) {
      auto& st = plan[index.at(x.members[pos])];
      for (size_t s = 0; s + 1 < G; ++s) st.push_back({sr[i][s], pos == 0 ? sr[prev][s] : -1});
      if (rack(x)) {
        st.push_back({own[i], pos == 0 ? own[i] : -1});
        if (pos != 0) st.push_back({-1, ag[i][0]});  // the rack's own shard, from the agent's broadcast
      } else {
        st.push_back({});  // the complete shard, locally
      }
      for (size_t s = 0; s < ag_steps(x); ++s)
        st.push_back({rack(x) && s % k != pos ? -1 : ag[i][s], G > 1 ? ag[prev][s] : -1});
    }
  }
  // Flows share an arc for as long as they overlap in time: each flow's
  // load on an arc is 1 + the other flows' overlap with its packets' time
  // on the wire (first packet out .. last packet out), over that time;
  // fixed point of schedule -> loads (damped; from no sharing).
  std::vector<double> bw, done;
  // Per arc, its flows and their position in each flow's (sorted) arc list.
  std::vector<std::vector<std::pair<size_t, size_t>>> on_arc(g.num_arcs());
  for (size_t f = 0; f < flows.size(); ++f)
    for (size_t ai = 0; ai < flows[f].t.arcs.size(); ++ai) on_arc[flows[f].t.arcs[ai]].emplace_back(f, ai);
  std::vector<std::pair<double, double>> span(flows.size());
  std::vector<std::vector<double>> load(flows.size());
  // Each sender's flows in its steps' order: the window carries over.
  for (size_t w = 0; w < n; ++w) {
    int last = -1;
    for (const WorkerStep& st : plan[w])
      if (st.send >= 0 && flows[static_cast<size_t>(st.send)].sender == workers[w]) {
        Flow& f = flows[static_cast<size_t>(st.send)];
        if (f.prev < 0 && last != st.send) f.prev = last;
        last = st.send;
      }
  }
  // Standing queues of the last schedule (Queues), for the next one.
  Standing standing(g.num_arcs());
  auto stand = [&] {
    for (PortEpisodes& v : standing) v.clear();
    for (size_t f = 0; f < flows.size(); ++f) {
      const Flow& x = flows[f];
      if (x.t0 < 0) continue;
      for (const size_t i : x.neck)
        for (const Episode& e : x.q.mine)
          if (x.t0 + e.to > x.t0 + e.from)  // an empty episode holds nothing, and begins nothing
            standing[x.t.arcs[i]].add(f, {x.t0 + e.from, x.t0 + e.to, e.bytes / x.q.copies * x.copies[i], e.rtt,
                                          e.queued / x.q.copies * x.copies[i]});
      // Its other switch ports (Queues::others): its bytes in flight, at
      // most its rate over the round trip per copy; a burst waits at the
      // bottleneck only.
      for (const auto& [a, c] : x.q.others)
        for (const Episode& e : x.q.mine)
          if (x.t0 + e.to > x.t0 + e.from && e.bytes > 0)
            standing[a].add(f, {x.t0 + e.from, x.t0 + e.to, std::min(e.bytes / x.q.copies, x.q.cap) * c, e.rtt, 0});
    }
    for (PortEpisodes& v : standing) v.index.build();
  };
  std::vector<double> dur_before(flows.size(), -1);
  constexpr int kMaxRounds = 200;
  // Settled: the loads never stop, but the last kSettle schedules'
  // completions lie within kSettleRel of each other. Where an echo comes
  // and goes from one round to the next (a port's backlog at its ECN
  // threshold), the loads cycle for good while the answer moves by a few
  // parts in a million. Judged after the last round, not as a stop: a
  // plateau of kSettle rounds can still move on later.
  constexpr int kSettle = 8;
  constexpr double kSettleRel = 1e-5;
  std::array<double, kSettle> finish{};
  // Not settled after kMaxRounds: each worker's completion is its mean
  // over the last kMeanRounds rounds (the bandwidth part alike), a number
  // that does not hang on which state of the swing the last round drew.
  constexpr int kMeanRounds = 100;
  std::vector<double> done_sum, bw_sum;
  out.sharing_converged = false;
  for (int iter = 0; iter < kMaxRounds; ++iter) {
    out.sharing_rounds = iter + 1;
    done = schedule(m, p, g, workers, plan, flows, standing, bw);
    stand();
    // The windows a sender carries from one transfer to its next, damped
    // as the loads are: undamped, a window that builds a queue in one
    // schedule ends halved, the next schedule starts small and builds none,
    // and the schedules alternate instead of settling.
    double carried = 0;
    for (Flow& f : flows) {
      const double next = iter == 0 ? f.q.w_end : 0.5 * (f.w_carry + f.q.w_end);
      carried = std::max(carried, std::abs(next - f.w_carry));
      f.w_carry = next;
      f.ss_carry = f.q.ss_end;
    }
    double moved = 0;  // the queues' effect: flows' times moved (s)
    for (size_t f = 0; f < flows.size(); ++f) {
      moved = std::max(moved, std::abs(flows[f].dur - dur_before[f]));
      dur_before[f] = flows[f].dur;
    }
    for (size_t f = 0; f < flows.size(); ++f) {
      const Flow& x = flows[f];
      const double b = x.t0 + x.t.start;
      span[f] = {b, std::max(b + 8 * m.wire() / x.rate, x.t0 + x.dur - x.t.rtt)};
      load[f] = x.copies;
    }
    // Overlaps on each arc, its flows in order of their first packet.
    for (auto& on : on_arc) {
      std::sort(on.begin(), on.end(), [&](const auto& u, const auto& v) { return span[u.first] < span[v.first]; });
      for (size_t i = 0; i < on.size(); ++i) {
        const auto [b0, e0] = span[on[i].first];
        for (size_t j = i + 1; j < on.size() && span[on[j].first].first < e0; ++j) {
          const auto [b1, e1] = span[on[j].first];
          const double o = std::min(e0, e1) - b1;
          load[on[i].first][on[i].second] += flows[on[j].first].copies[on[j].second] * o / (e0 - b0);
          load[on[j].first][on[j].second] += flows[on[i].first].copies[on[i].second] * o / (e1 - b1);
        }
      }
    }
    double change = 0;
    for (size_t f = 0; f < flows.size(); ++f)
      for (size_t ai = 0; ai < flows[f].load.size(); ++ai) {
        double& l = flows[f].load[ai];
        const double next = 0.5 * (l + load[f][ai]);
        change = std::max(change, std::abs(next - l));
        l = next;
      }
    finish[static_cast<size_t>(iter % kSettle)] = *std::max_element(done.begin(), done.end());
    if (iter >= kMaxRounds - kMeanRounds) {
      done_sum.resize(done.size(), 0);
      bw_sum.resize(bw.size(), 0);
      for (size_t w = 0; w < done.size(); ++w) {
        done_sum[w] += done[w];
        bw_sum[w] += bw[w];
      }
    }
    if (iter + 1 >= kSettle) {
      const auto [lo, hi] = std::minmax_element(finish.begin(), finish.end());
      out.sharing_spread = (*hi - *lo) / *hi;
    }
    if (change < 1e-6 && moved < 1e-12 && carried < 1e-6) {
      out.sharing_converged = true;
      break;
    }
  }
  if (!out.sharing_converged && out.sharing_spread <= kSettleRel) out.sharing_converged = true;  // settled
  done = schedule(m, p, g, workers, plan, flows, standing, bw);
  if (!out.sharing_converged) {
    out.sharing_mean_rounds = kMeanRounds;
    for (size_t w = 0; w < done.size(); ++w) {
      done[w] = done_sum[w] / kMeanRounds;
      bw[w] = bw_sum[w] / kMeanRounds;
    }
  }
  out.send_windows.assign(n, {});
  for (size_t w = 0; w < n; ++w)
    for (const WorkerStep& st : plan[w])
      if (st.send >= 0 && flows[static_cast<size_t>(st.send)].sender == workers[w]) {
        const Flow& f = flows[static_cast<size_t>(st.send)];
        out.send_windows[w].push_back(m.start_window(f.t, f.q));
      }
  // Eq. 1's straggler term: G - 1 ScatterReduce steps (every worker sends),
  // the INA racks' step (their members), G - 1 AllGather steps (G senders).
  double strag = 0;
  if (p.straggler_sigma_us > 0 || p.straggler_k_us > 0) {
    int rack_members = 0;
    for (const Group& x : gr)
      if (rack(x)) rack_members += static_cast<int>(x.members.size());
    auto step = [&](int senders) { return straggler_step_s(p, static_cast<double>(n), senders); };
    if (G > 1) strag += static_cast<double>(G - 1) * (step(static_cast<int>(n)) + step(static_cast<int>(G)));
    if (rack_members > 0) strag += step(rack_members);
  }
  bool any_ina = false;
  for (const Group& x : gr) any_ina = any_ina || rack(x);
  out.steps = static_cast<int>(2 * (G - 1) + (any_ina ? 1 : 0));
  out.straggler_s = strag;
  double rate_sum = 0;
  for (size_t w = 0; w < n; ++w) {
    if (done[w] > out.transfer_s) {
      out.transfer_s = done[w];
      out.bandwidth_s = bw[w];
    }
    out.worker_s.push_back(done[w] + strag);
    rate_sum += 8.0 * 4.0 * static_cast<double>(elems) / (done[w] + strag) / 1e9;
  }
  out.seconds = out.transfer_s + strag;
  out.gbps = rate_sum / static_cast<double>(n);
}

// The share of its capacity a port keeps busy under window-limited streams
// that halve together when its queue passes `threshold` bytes, its
// bandwidth-delay product `pipe` bytes (the streams' round trip without
// queues). Their windows' sum W grows by one packet per stream per round
// trip from (pipe + threshold) / 2 to pipe + threshold; below the pipe the
// port sends W per round trip, above it at its rate while the round trip
// grows with the queue. Over one cycle: 3/4 (pipe + threshold)^2 /
// (pipe^2 + pipe threshold + threshold^2); 1 with a threshold at or above
// the pipe, 3/4 with none (the synchronized sawtooth of TCP with a buffer
// of `threshold`).
double synchronized_utilization(double pipe, double threshold) {
  if (threshold >= pipe) return 1;
  const double top = pipe + threshold;
  return 0.75 * top * top / (pipe * pipe + pipe * threshold + threshold * threshold);
}

// PS and PS-based INA: one fluid round (see the header).
void ps_round(const Model& m, const Graph& g, const std::vector<NodeId>& workers, const std::vector<NodeId>& ina,
              uint64_t elems, TimeResult& out) {
  (void)rina_throughput(g, workers, ina);  // validates the job and the INA set
  std::vector<bool> is_ina(g.num_nodes(), false);
  for (const NodeId s : ina) is_ina[s] = true;
  const size_t n = workers.size();
  std::vector<double> bytes(g.num_arcs(), 0);
  double latency = 0;
  bool ina_tree = false;  // some shard's tree has an INA switch
  const double wire = static_cast<double>(m.packets(max_shard(elems, n))) * m.wire();  // a shard's bytes
  for (size_t k = 0; k < n; ++k) {
    const NodeId ps = workers[k];
    auto up = [&](NodeId from) {
      for (const ArcId a : m.path(from, ps)) {
        const NodeId v = g.arc_to(a);
        if (v != ps && is_ina[v]) return v;
      }
      return ps;
    };
    // Tree segments (from, to): each carries one flow up and the result down once.
    std::map<std::pair<NodeId, NodeId>, bool> segs;
    for (size_t r = 0; r < n; ++r) {
      if (r == k) continue;
      double lat = 0;  // the gradient up and the result back down the same links
      for (NodeId x = workers[r]; x != ps;) {
        const NodeId y = up(x);
        ina_tree = ina_tree || y != ps;
        segs.emplace(std::make_pair(x, y), true);
        lat += m.rtt(m.path(x, y));
        x = y;
      }
      latency = std::max(latency, lat);
    }
    // The result down: the PS multicasts to the ranks it aggregates
    // directly (its multicast tree's ways), an INA switch down the arcs its
    // children's aggregates came up.
    std::vector<bool> down(g.num_arcs(), false);
    for (const auto& [seg, unused] : segs) {
      const bool direct = seg.second == ps && g.is_host(seg.first);  // a rank the PS aggregates itself
      for (const ArcId a : m.path(seg.first, seg.second)) {
        bytes[a] += wire;
        if (!direct) down[a ^ 1u] = true;
      }
      if (direct)
        for (const ArcId a : m.tree_path(ps, seg.first)) down[a] = true;
    }
    for (ArcId a = 0; a < g.num_arcs(); ++a)
      if (down[a]) bytes[a] += wire;
  }
  double busiest = 0;
  ArcId neck = 0;
  for (ArcId a = 0; a < g.num_arcs(); ++a)
    if (const double t = 8 * bytes[a] / (g.arc_gbps(a) * 1e9); t > busiest) {
      busiest = t;
      neck = a;
    }
  // Where the busiest port is a switch's, which marks ECN, the streams
  // through it halve together (their results, which acknowledge them, come
  // back together), and it idles for part of each cycle.
  double busy = busiest;
  if (!g.is_host(g.arc_from(neck)) && m.params().ecn_kb > 0)
    busy /= synchronized_utilization(g.arc_gbps(neck) * 1e9 / 8 * latency, m.params().ecn_kb * 1000);
  if (ina_tree && m.params().ina_gbps > 0 && n > 1) {  // every transport of such a tree at ina_gbps / (N - 1)
    busiest = std::max(busiest, 8 * wire / (m.params().ina_gbps * 1e9 / static_cast<double>(n - 1)));
    busy = std::max(busy, busiest);
  }
  out.bandwidth_s = busiest;
  out.transfer_s = busy + latency;
  out.steps = 1;
  out.groups = static_cast<int>(n);
}

}  // namespace

double rina_pace_gbps(const TimeParams& p) { return host::rina_pace_gbps(p.ina_gbps, p.rina_transport); }

double expected_max_normal(int n) {
  if (n < 1) throw BomError(fmt::format("expected_max_normal: n must be >= 1, got {}", n));
  if (n == 1) return 0;
  // E[max] = integral of x * n * phi(x) * Phi(x)^(n-1) dx, trapezoid on [-10, 10].
  const double h = 1e-3;
  double sum = 0;
  for (double x = -10; x <= 10; x += h) {
    const double phi = std::exp(-0.5 * x * x) / std::sqrt(2 * M_PI);
    const double Phi = 0.5 * std::erfc(-x / std::sqrt(2.0));
    sum += x * n * phi * std::pow(Phi, n - 1) * h;
  }
  return sum;
}

TimeResult allreduce_time(const Graph& g, const std::vector<NodeId>& workers, const std::vector<NodeId>& ina,
                          schemes::Collective c, const TimeParams& p) {
  auto positive = [](double v, const char* field) {
    if (!(v > 0) || !std::isfinite(v)) throw BomError(fmt::format("{} must be > 0, got {}", field, v));
  };
  auto non_negative = [](double v, const char* field) {
    if (!(v >= 0) || !std::isfinite(v)) throw BomError(fmt::format("{} must be >= 0, got {}", field, v));
  };
  positive(p.gradient_mb, "gradient_mb");
  positive(p.payload_values, "payload_values");
  positive(p.window_kb, "window_kb");
  non_negative(p.link_delay_us, "link_delay_us");
  non_negative(p.ina_gbps, "ina_gbps");
  non_negative(p.straggler_sigma_us, "straggler_sigma_us");
  non_negative(p.straggler_k_us, "straggler_k_us");
  const auto elems = static_cast<uint64_t>(p.gradient_mb * 1024 * 1024 / 4);
  if (elems == 0) throw BomError(fmt::format("gradient_mb = {} gives no values", p.gradient_mb));
  const Model m(g, p);
  TimeResult out;
  switch (c) {
    case schemes::Collective::Ring: m.run(rar_steps(m, workers, elems, out), static_cast<int>(workers.size()), out); break;
    case schemes::Collective::Hierarchical:
      (void)rina_throughput(g, workers, ina);
      m.run(har_steps(m, g, workers, elems, out), static_cast<int>(workers.size()), out);
      break;
    case schemes::Collective::RingIna: {
      // With no INA group Rina's steps are RAR's (the simulator runs the same ones).
      const auto groups = rina_throughput(g, workers, ina, Aggregation::Tree).groups;
      if (std::none_of(groups.begin(), groups.end(), [](const Group& x) { return x.sender != x.agent; })) {
        m.run(rar_steps(m, workers, elems, out), static_cast<int>(workers.size()), out);
        break;
      }
      rina_time(m, p, g, workers, ina, elems, out);
      return out;
    }
    case schemes::Collective::Ps: ps_round(m, g, workers, {}, elems, out); break;
    case schemes::Collective::PsIna: ps_round(m, g, workers, ina, elems, out); break;
    default: throw BomError(fmt::format("no time model for collective '{}'", schemes::to_string(c)));
  }
  out.seconds = out.transfer_s + out.straggler_s;
  out.gbps = 8.0 * 4.0 * static_cast<double>(elems) / out.seconds / 1e9;
  return out;
}

}  // namespace ina::control::rina
