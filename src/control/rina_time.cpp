// Time model of one allreduce; documented in rina_time.hpp.
#include "control/rina_time.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>

namespace ina::control::rina {
namespace {

using topo::ArcId;
using topo::Graph;
using topo::NodeId;

struct Transfer {
  std::vector<ArcId> arcs;  // every arc the packets cross (deduplicated)
  double rtt = 0;           // first packet out .. its acknowledgement back (the longest receiver)
  double start = 0;         // offset before the packets leave (Rina's pull)
  uint64_t packets = 0;
  bool slow_start = false;
  bool paced = false;       // Rina members -> ToR at ina_gbps
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

  double wire() const { return b_; }
  uint64_t packets(uint64_t values) const { return (values + p_.payload_values - 1) / p_.payload_values; }
  std::vector<ArcId> path(NodeId a, NodeId b) const { return a == b ? std::vector<ArcId>{} : routing_.path(a, b); }

  // One packet out along `arcs` (in order) and an acknowledgement back.
  double rtt(const std::vector<ArcId>& arcs) const {
    double t = 0;
    for (const ArcId a : arcs) {
      const double bps = g_.arc_gbps(a) * 1e9;
      t += 8 * b_ / bps + 8.0 * p_.ack_bytes / bps + 2 * d_;
    }
    return t;
  }
  double small_hop(ArcId a) const { return 8.0 * p_.ack_bytes / (g_.arc_gbps(a) * 1e9) + d_; }

  // Time of one transfer at `rate` (bits/s); `bw` gets its bandwidth part.
  double transfer_time(const Transfer& t, double rate, double& bw) const {
    if (t.packets == 0) return 0;
    const double s = 8 * b_ / rate;
    bw = static_cast<double>(t.packets - 1) * s;
    const auto P = static_cast<double>(t.packets);
    double sent = 0, at = 0, win = t.slow_start ? 1 : w_;
    for (;;) {
      if (win * s >= t.rtt || sent + win >= P) return t.start + at + (P - 1 - sent) * s + t.rtt;
      sent += win;
      at += t.rtt;
      if (t.slow_start) win *= 2;
    }
  }

  // Sum of the steps' slowest transfers.
  void run(const std::vector<Step>& steps, int n_workers, TimeResult& out) const {
    for (const Step& st : steps) {
      std::map<ArcId, int> load;
      for (const Transfer& t : st.transfers)
        for (const ArcId a : t.arcs) ++load[a];
      double worst = 0, worst_bw = 0;
      for (const Transfer& t : st.transfers) {
        double rate = std::numeric_limits<double>::infinity();
        for (const ArcId a : t.arcs) rate = std::min(rate, g_.arc_gbps(a) * 1e9 / load[a]);
        if (t.paced && p_.ina_gbps > 0) rate = std::min(rate, p_.ina_gbps * 1e9);
        double bw = 0;
        const double x = transfer_time(t, rate, bw);
        if (x > worst) {
          worst = x;
          worst_bw = bw;
        }
      }
      out.transfer_s += worst;
      out.bandwidth_s += worst_bw;
      if (st.senders > 0 && (p_.straggler_sigma_us > 0 || p_.straggler_k_us > 0))
        out.straggler_s += (p_.straggler_k_us / n_workers + p_.straggler_sigma_us * expected_max_normal(st.senders)) * 1e-6;
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

std::vector<Step> rina_steps(const Model& m, const Graph& g, const std::vector<NodeId>& workers,
                             const std::vector<NodeId>& ina, uint64_t elems, TimeResult& out) {
  const RinaResult rr = rina_throughput(g, workers, ina);
  const auto& gr = rr.groups;
  const size_t G = gr.size();
  out.groups = static_cast<int>(G);
  const uint64_t pk = m.packets(max_shard(elems, G));
  bool any_ina = false;
  for (const Group& x : gr) any_ina = any_ina || x.sender != x.agent;
  // The rack's members -> ToR (and their acknowledgement path), longest first hop.
  auto rack_in = [&](const Group& x, Transfer& t, double& first) {
    first = 0;
    for (const NodeId w : x.members) {
      const auto a = m.path(w, x.sender);
      append(t.arcs, a);
      first = std::max(first, m.rtt(a));
    }
  };
  auto pull = [&](const Group& x) {
    double worst = 0;
    for (const NodeId w : x.members) {
      double t = 0;
      for (const ArcId a : m.path(x.agent, x.sender)) t += m.small_hop(a);
      for (const ArcId a : m.path(x.sender, w)) t += m.small_hop(a);
      if (w != x.agent) worst = std::max(worst, t);
    }
    return worst;
  };
  auto direct = [&](Transfer& t, NodeId from, NodeId to) {
    t.arcs = m.path(from, to);
    t.rtt = m.rtt(t.arcs);
  };
  Step sr, own;
  for (size_t i = 0; i < G; ++i) {
    const Group& x = gr[i];
    const NodeId next = gr[(i + 1) % G].agent;
    const bool rack = x.sender != x.agent;
    const int n = static_cast<int>(x.members.size());
    {
      Transfer t;
      t.packets = pk;
      if (rack) {
        double first = 0;
        rack_in(x, t, first);
        const auto on = m.path(x.sender, next);
        append(t.arcs, on);
        t.rtt = first + m.rtt(on);
        t.start = pull(x);
        t.paced = true;
      } else {
        direct(t, x.sender, next);
      }
      dedup(t.arcs);
      sr.transfers.push_back(t);
      sr.senders += n;
    }
    if (rack) {
      Transfer t;
      t.packets = pk;
      double first = 0;
      rack_in(x, t, first);
      const auto back = m.path(x.sender, x.agent);
      append(t.arcs, back);
      t.rtt = first + m.rtt(back);
      t.start = pull(x);
      t.paced = true;
      dedup(t.arcs);
      own.transfers.push_back(t);
      own.senders += n;
    }
  }
  // AllGather step s: group i's shard goes to the next group (to an INA
  // rack's ToR, which copies it to every member and acknowledges for the
  // rack). An INA rack's step-0 send is its agent's, through its own ToR,
  // which also copies it to the rack's other members (slow-started from one
  // packet); a later step's send is member s mod k's, with the normal window.
  std::vector<Step> ag(G > 1 ? G - 1 : 0);
  for (size_t s = 0; s < ag.size(); ++s)
    for (size_t i = 0; i < G; ++i) {
      const Group& x = gr[i];
      const bool rack = x.sender != x.agent;
      const NodeId from = rack ? x.members[s % x.members.size()] : x.agent;
      Transfer t;
      t.packets = pk;
      auto reach = [&](const std::vector<ArcId>& via) {  // one receiver's path from `from`
        append(t.arcs, via);
        t.rtt = std::max(t.rtt, m.rtt(via));
      };
      auto to_group = [&](const std::vector<ArcId>& head, NodeId at, const Group& y) {
        std::vector<ArcId> a = head;
        if (y.sender == y.agent) {
          append(a, m.path(at, y.agent));
          return reach(a);
        }
        append(a, m.path(at, y.sender));
        for (const NodeId w : y.members) {
          std::vector<ArcId> b = a;
          append(b, m.path(y.sender, w));
          reach(b);
        }
      };
      const Group& next = gr[(i + 1) % G];
      if (rack && s == 0) {
        const auto up = m.path(from, x.sender);
        for (const NodeId w : x.members)
          if (w != from) {
            std::vector<ArcId> b = up;
            append(b, m.path(x.sender, w));
            reach(b);
          }
        to_group(up, x.sender, next);
        t.slow_start = true;
      } else {
        to_group({}, from, next);
      }
      dedup(t.arcs);
      ag[s].transfers.push_back(t);
      ++ag[s].senders;
    }
  std::vector<Step> steps;
  if (G > 1) steps.insert(steps.end(), G - 1, sr);
  if (any_ina) steps.push_back(own);
  steps.insert(steps.end(), ag.begin(), ag.end());
  return steps;
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
  for (size_t k = 0; k < n; ++k) {
    const NodeId ps = workers[k];
    const double wire = static_cast<double>(m.packets(max_shard(elems, n))) * m.wire();
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
        segs.emplace(std::make_pair(x, y), true);
        lat += m.rtt(m.path(x, y));
        x = y;
      }
      latency = std::max(latency, lat);
    }
    std::vector<bool> down(g.num_arcs(), false);
    for (const auto& [seg, unused] : segs) {
      for (const ArcId a : m.path(seg.first, seg.second)) {
        bytes[a] += wire;
        down[a ^ 1u] = true;
      }
    }
    for (ArcId a = 0; a < g.num_arcs(); ++a)
      if (down[a]) bytes[a] += wire;
  }
  double busiest = 0;
  for (ArcId a = 0; a < g.num_arcs(); ++a) busiest = std::max(busiest, 8 * bytes[a] / (g.arc_gbps(a) * 1e9));
  out.bandwidth_s = busiest;
  out.transfer_s = busiest + latency;
  out.steps = 1;
  out.groups = static_cast<int>(n);
}

}  // namespace

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
    case schemes::Collective::RingIna:
      m.run(rina_steps(m, g, workers, ina, elems, out), static_cast<int>(workers.size()), out);
      break;
    case schemes::Collective::Ps: ps_round(m, g, workers, {}, elems, out); break;
    case schemes::Collective::PsIna: ps_round(m, g, workers, ina, elems, out); break;
    default: throw BomError(fmt::format("no time model for collective '{}'", schemes::to_string(c)));
  }
  out.seconds = out.transfer_s + out.straggler_s;
  out.gbps = 8.0 * 4.0 * static_cast<double>(elems) / out.seconds / 1e9;
  return out;
}

}  // namespace ina::control::rina
