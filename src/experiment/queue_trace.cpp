#include "experiment/queue_trace.hpp"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <stdexcept>

#include <fmt/format.h>

#include "experiment/collective.hpp"
#include "sim/engine.hpp"
#include "sim/ranks.hpp"

namespace ina::exp {
namespace {

std::string trimmed(std::string_view s) {
  const auto b = s.find_first_not_of(" \t");
  if (b == std::string_view::npos) return {};
  return std::string(s.substr(b, s.find_last_not_of(" \t") - b + 1));
}

// A few of g's node names, for an error: its first and last switches and hosts.
std::string some_names(const topo::Graph& g) {
  auto ends = [&](const std::vector<topo::NodeId>& v, const char* what) {
    if (v.empty()) return fmt::format("no {}", what);
    if (v.size() <= 3) {
      std::string out;
      for (const auto n : v) out += (out.empty() ? "" : ", ") + g.node(n).name;
      return fmt::format("{} {}", what, out);
    }
    return fmt::format("{} {} of {}, {}, ..., {}", v.size(), what, g.node(v[0]).name, g.node(v[1]).name,
                       g.node(v.back()).name);
  };
  return ends(g.switches(), "switches") + "; " + ends(g.hosts(), "hosts");
}

}  // namespace

std::vector<std::pair<topo::NodeId, topo::NodeId>> queue_trace_links(const topo::Graph& g, const std::string& list) {
  std::vector<std::pair<topo::NodeId, topo::NodeId>> out;
  size_t at = 0;
  while (at <= list.size()) {
    const size_t comma = std::min(list.find(',', at), list.size());
    const std::string item = trimmed(std::string_view(list).substr(at, comma - at));
    at = comma + 1;
    if (item.empty()) continue;
    const size_t arrow = item.find("->");
    if (arrow == std::string::npos)
      throw std::invalid_argument(fmt::format("'{}' is not a link: write it as \"from->to\" by node names", item));
    const std::string from = trimmed(std::string_view(item).substr(0, arrow)), to = trimmed(std::string_view(item).substr(arrow + 2));
    const auto a = g.find(from), b = g.find(to);
    if (!a || !b)
      throw std::invalid_argument(
          fmt::format("'{}': {} has no node '{}' (its nodes: {})", item, g.name, !a ? from : to, some_names(g)));
    const auto nb = g.neighbors(*a);
    if (std::none_of(nb.begin(), nb.end(), [&](const auto& e) { return e.peer == *b; })) {
      std::string peers;
      for (const auto& e : nb) peers += (peers.empty() ? "" : ", ") + g.node(e.peer).name;
      throw std::invalid_argument(
          fmt::format("'{}': no link joins {} and {} in {} ({}'s links go to {})", item, from, to, g.name, from, peers));
    }
    if (std::find(out.begin(), out.end(), std::pair{*a, *b}) != out.end())
      throw std::invalid_argument(fmt::format("'{}' is named twice", item));
    out.emplace_back(*a, *b);
  }
  if (out.empty()) throw std::invalid_argument("names no link: write \"from->to\" by node names, comma-separated");
  return out;
}

void make_trace_dir(const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec || !std::filesystem::is_directory(dir))
    throw std::runtime_error(fmt::format("run.queue_trace: cannot make the directory '{}': {}", dir,
                                         ec ? ec.message() : "a file of that name is in the way"));
}

std::vector<uint32_t> watch_queue_links(sim::Simulator& sim, const topo::Graph& g, const std::string& list,
                                        unsigned processes, Time from, Time to) {
  if (processes > 1)
    throw std::invalid_argument(fmt::format(
        "run.queue_trace: one simulation over {} processes (--partition) would split a trace over them; trace in one "
        "process (threads are fine)",
        processes));
  std::vector<uint32_t> ids;
  for (const auto& [a, b] : queue_trace_links(g, list)) {
    uint32_t id = sim::kNoLink;
    for (uint32_t l = 0; l < sim.link_count() && id == sim::kNoLink; ++l)
      if (sim.link(l).from == a && sim.link(l).to == b) id = l;
    if (id == sim::kNoLink)
      throw std::logic_error(fmt::format("queue trace: the simulator has no link {}->{}", g.node(a).name, g.node(b).name));
    sim.watch_link(id, from, to);
    ids.push_back(id);
  }
  return ids;
}

std::vector<uint32_t> start_queue_trace(sim::Simulator& sim, const topo::Graph& g, const CollectiveSettings& s) {
  if (s.queue_trace.empty()) return {};
  make_trace_dir(s.queue_trace);
  return watch_queue_links(sim, g, s.queue_trace_links, s.ranks ? s.ranks->size() : 1, from_ms(s.queue_trace_from_ms),
                           s.queue_trace_to_ms > 0 ? from_ms(s.queue_trace_to_ms) : kNever);
}

void finish_queue_trace(const sim::Simulator& sim, const topo::Graph& g, const CollectiveSettings& s, uint64_t digest,
                        const std::vector<uint32_t>& links) {
  if (!s.queue_trace.empty()) write_queue_trace(s.queue_trace, digest, sim, g, links);
}

void write_queue_trace(const std::string& dir, uint64_t digest, const sim::Simulator& sim, const topo::Graph& g,
                       const std::vector<uint32_t>& links) {
  make_trace_dir(dir);
  const std::string path = fmt::format("{}/queue-{:016x}.csv", dir, digest);
  std::ofstream f(path);
  if (!f) throw std::runtime_error(fmt::format("run.queue_trace: cannot write {}: {}", path, std::strerror(errno)));
  const auto name = [&](NodeId n) { return n < g.num_nodes() ? g.node(n).name : std::to_string(n); };
  static constexpr const char* kFate[] = {"sent", "dropped", "lost"};
  f << "link,t_ps,backlog_ps,bytes,type,fate,marked,job,flags,psn,priority,src,dst\n";
  for (const uint32_t l : links) {
    const sim::Link& k = sim.link(l);
    const std::string link = name(k.from) + "->" + name(k.to);
    for (const sim::QueueSample& q : sim.link_samples(l))
      f << fmt::format("{},{},{},{},{},{},{},{},{},{},{},{},{}\n", link, q.t, q.backlog, q.bytes, pkt_type_name(q.type),
                       kFate[q.fate], q.marked ? 1 : 0, q.job, q.flags, q.psn, q.priority, name(q.src), name(q.dst));
  }
  if (!f) throw std::runtime_error(fmt::format("run.queue_trace: cannot write {}", path));
}

}  // namespace ina::exp
