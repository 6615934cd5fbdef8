// The step compiler: a rank's stages (a plan's entry) into the op's steps
// in order (what each sends and receives, to and from whom, from which
// values), the receive ordinals, the kept range and the barrier codes.
#include <algorithm>
#include <stdexcept>

#include <fmt/format.h>

#include "host/ring_detail.hpp"

namespace ina::host {

namespace {

// The node a group receives ScatterReduce data at (its agent or its one worker).
NodeId entry(const RingGroup& g, const std::vector<NodeId>& nodes) { return nodes.at(g.ranks[0]); }

// The rack position that sends an INA rack's AllGather step s of k
// positions: the agent (0) at s = 0; later, the members in turn, or the
// agent alone (RingConfig::agent_relays).
size_t ag_turn(size_t s, size_t k, bool agent_relays) { return agent_relays ? 0 : s % k; }

// The node that sends a group's AllGather step s: an INA rack's member at
// ag_turn, or the one worker.
NodeId ag_sender_of(const RingGroup& g, size_t s, bool agent_relays, const std::vector<NodeId>& nodes) {
  return nodes.at(g.ranks[g.ina() ? ag_turn(s, g.ranks.size(), agent_relays) : 0]);
}

}  // namespace

void RingEndpoint::build_steps() {
  const auto& nodes = cfg_.nodes;
  const uint16_t me = cfg_.rank;
  barrier_codes_.clear();
  uint8_t code = 0;
  int ridx = 0;
  uint64_t kept_lo = UINT64_MAX, kept_hi = 0;
  auto keep_range = [&](uint64_t off, uint64_t len) {
    kept_lo = std::min(kept_lo, off);
    kept_hi = std::max(kept_hi, off + len);
  };
  for (size_t si = 0; si < cfg_.stages.size(); ++si) {
    const RingStage& st = cfg_.stages[si];
    const bool last = si + 1 == cfg_.stages.size();
    const size_t G = st.groups.size();
    size_t q = G;
    for (size_t i = 0; i < G; ++i)
      if (std::find(st.groups[i].ranks.begin(), st.groups[i].ranks.end(), me) != st.groups[i].ranks.end()) q = i;
    if (q == G) throw std::invalid_argument(fmt::format("ring: rank {} is in no group of stage {}", me, si));
    const RingGroup& mine = st.groups[q];
    const RingGroup& next = st.groups[(q + 1) % G];
    const RingGroup& prev = st.groups[(q + G - 1) % G];
    const bool ina = mine.ina();
    const bool agent = ina && mine.ranks[0] == me;
    const bool sr = st.kind != RingStage::Kind::AllGather, ag = st.kind != RingStage::Kind::ReduceScatter;
    auto shard = [&](size_t c, uint64_t& off, uint64_t& len) {
      c %= G;
      off = shard_begin(st, c);
      len = shard_begin(st, c + 1) - off;
    };
    const NodeId next_entry = entry(next, nodes);
    const NodeId prev_sr_exit = prev.ina() ? prev.tor : nodes.at(prev.ranks[0]);
    // AllGather data goes to an INA rack's ToR, which copies it to every member.
    auto ag_entry = [&](const RingGroup& g) { return g.ina() ? g.tor : nodes.at(g.ranks[0]); };
    auto ag_sender = [&](const RingGroup& g, size_t s) { return ag_sender_of(g, s, cfg_.agent_relays, nodes); };
    uint64_t my_bit = 0;
    NodeId my_entry = mine.tor;  // where this rank's ScatterReduce shards go (RingGroup::entry)
    for (size_t i = 0; i < mine.ranks.size(); ++i)
      if (mine.ranks[i] == me) {
        my_bit = 1ULL << i;
        if (!mine.entry.empty()) my_entry = mine.entry[i];
      }
    if (code + 2 * G + 1 > 256) throw std::invalid_argument("ring: too many steps per op (step codes are 8 bits)");
    const uint8_t base = code;
    // Barrier codes (step_barrier): the codes in which some rank of this
    // stage sends or receives, from the stage's shape alone (H-AR's stages
    // differ between ranks only in their members and ranges).
    {
      const bool any_ina = std::any_of(st.groups.begin(), st.groups.end(), [](const RingGroup& g) { return g.ina(); });
      if (sr) {
        for (size_t s = 0; s + 1 < G; ++s) barrier_codes_.push_back(static_cast<uint8_t>(base + s));
        if (any_ina) barrier_codes_.push_back(static_cast<uint8_t>(base + G - 1));  // through the ToR to the agent
      }
      if (ag) {
        const size_t n = any_ina ? std::max<size_t>(G - 1, 1) : G - 1;
        for (size_t s = 0; s < n; ++s) barrier_codes_.push_back(static_cast<uint8_t>(base + G + s));
      }
    }
    auto add = [&](Step s) {
      s.stage = si;
      s.last_stage = last;
      if (s.recvs) s.ridx = ridx++;
      steps_.push_back(std::move(s));
    };
    // ScatterReduce.
    if (sr) {
      for (size_t s = 0; s + 1 < G; ++s) {
        Step x;
        x.code = static_cast<uint8_t>(base + s);
        x.sends = true;
        shard(q + G - s % G, x.off, x.len);
        x.add_local = true;
        if (s > 0 && !(ina && !agent)) x.add_recv = static_cast<int>(steps_.size()) - 1;
        if (ina) {
          x.to_tor = x.region_cap = true;
          x.tor_bit = my_bit;
          x.dst = my_entry;
          x.fwd = next_entry;
          x.ackers = {my_entry};
          x.pull_first = agent;
          x.rack_step = true;
          x.pulled = !agent;
        } else {
          x.dst = next_entry;
          x.ackers = {next_entry};
        }
        if (!ina || agent) {
          x.recvs = true;
          shard(q + 2 * G - 1 - s, x.r_off, x.r_len);
          x.r_src = prev_sr_exit;
          x.r_keep = true;
          if (prev.ina()) x.r_parts = full_bitmap(static_cast<unsigned>(prev.ranks.size())).lo();  // racks: <= 64 ranks
        }
        add(std::move(x));
      }
      // The complete shard (q + 1).
      Step f;
      f.code = static_cast<uint8_t>(base + G - 1);
      uint64_t off, len;
      shard(q + 1, off, len);
      const int last_recv = G > 1 && (!ina || agent) ? static_cast<int>(steps_.size()) - 1 : -1;
      if (ina) {
        f.sends = true;
        f.off = off;
        f.len = len;
        f.add_local = true;
        f.add_recv = agent ? last_recv : -1;
        f.to_tor = f.region_cap = true;
        f.tor_bit = my_bit;
        f.dst = my_entry;
        f.fwd = nodes.at(mine.ranks[0]);  // back to the agent
        f.ackers = {my_entry};
        f.pull_first = agent;
        f.rack_step = true;
        f.pulled = !agent;
        if (agent) {
          f.recvs = true;
          f.r_off = off;
          f.r_len = len;
          f.r_src = mine.tor;
          f.r_to_kept = true;
          f.r_parts = full_bitmap(static_cast<unsigned>(mine.ranks.size())).lo();
          f.r_write = last && ag;
        }
      } else {
        f.finish = true;
        f.finish_recv = last_recv;
        f.off = off;
        f.len = len;
      }
      keep_range(off, len);
      add(std::move(f));
    } else if (ina) {
      throw std::invalid_argument("ring: an AllGather-only stage cannot have INA groups");
    }
    // AllGather.
    if (ag) {
      uint64_t own_off, own_len;
      shard(q + 1, own_off, own_len);
      keep_range(own_off, own_len);
      if (!sr) {
        // Start from the shard a previous stage left here.
        Step w;
        w.code = static_cast<uint8_t>(base + G - 1);
        w.write_kept = last;
        w.off = own_off;
        w.len = own_len;
        add(std::move(w));
      }
      const size_t k = mine.ranks.size();
      size_t pos = 0;
      while (mine.ranks[pos] != me) ++pos;
      if (ina && !agent) {
        // The rack's own complete shard, from the agent's broadcast (through the ToR).
        Step o;
        o.code = static_cast<uint8_t>(base + G);
        o.recvs = true;
        o.r_off = own_off;
        o.r_len = own_len;
        o.r_src = my_entry;
        o.r_orig = nodes.at(mine.ranks[0]);
        o.r_to_kept = !last;
        o.r_write = last;
        add(std::move(o));
      }
      // Step s forwards shard (q + 1 - s): the own one at s = 0, then the one
      // received in step s - 1. An INA rack's step-0 send is its agent's
      // broadcast; later ones go to the rack position ag_turn names. A
      // position's first AllGather send is then step s = pos: the agent's
      // at 0, a member's at its turn (agent_relays: members send none).
      const size_t nsteps = ina ? std::max<size_t>(G - 1, 1) : G - 1;
      for (size_t s = 0; s < nsteps; ++s) {
        Step x;
        x.code = static_cast<uint8_t>(base + G + s);
        x.gather = true;
        if (ag_turn(s, k, cfg_.agent_relays) == pos) {
          x.sends = true;
          x.rack_gather = ina;
          x.rack_gather_first = ina && s == pos;
          shard(q + 1 + G - s, x.off, x.len);
          if (s == 0) x.from_kept = true;
          else x.add_recv = static_cast<int>(steps_.size()) - 1;
          if (ina && s == 0) {
            x.bcast = true;
            x.dst = mine.tor;
            x.region_cap = true;
            x.ackers = {mine.tor};
            if (G > 1) {
              x.fwd = ag_entry(next);
              x.ackers.push_back(ag_entry(next));
            }
          } else {
            x.dst = ag_entry(next);
            x.region_cap = next.ina();
            x.ackers = {x.dst};
          }
        }
        if (G > 1) {
          x.recvs = true;
          shard(q + G - s, x.r_off, x.r_len);
          if (ina) {
            x.r_src = my_entry;  // the switch right above: the top, or a level copying down from it
            x.r_orig = ag_sender(prev, s);
          } else {
            x.r_src = ag_sender(prev, s);
          }
          x.r_keep = s + 1 < G - 1 && ag_turn(s + 1, k, cfg_.agent_relays) == pos;
          x.r_to_kept = !last;
          x.r_write = last;
        }
        add(std::move(x));
      }
    }
    code = static_cast<uint8_t>(base + 2 * G);
  }
  nrecv_ = static_cast<uint64_t>(ridx);
  if (!barrier_codes_.empty()) barrier_codes_.pop_back();  // the op's last step: nothing in the op follows it
  if (kept_lo < kept_hi) {
    kept_off_ = kept_lo;
    kept_.assign(kept_hi - kept_lo, kept_lo);
  }
}

}  // namespace ina::host
