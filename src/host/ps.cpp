#include "host/ps.hpp"

#include <algorithm>
#include <cstring>
#include <stdexcept>

#include "wire/quant.hpp"

namespace ina::host {

ParameterServer::ParameterServer(const PsConfig& cfg)
    : cfg_(cfg), full_(full_bitmap(static_cast<unsigned>(cfg.workers.size()))), est_(cfg.min_timeout, cfg.max_timeout) {
  if (cfg.workers.empty() || cfg.workers.size() > kMaxWorkers) throw std::invalid_argument("ps: 1..64 workers");
  if (cfg.payload_values == 0) throw std::invalid_argument("ps: payload_values must be > 0");
}

bool ParameterServer::valid(const Packet& p) const {
  return p.h.job == cfg_.job && p.h.nworkers == cfg_.workers.size() && p.h.count <= cfg_.payload_values &&
         (p.h.bitmap & ~full_) == 0;
}

// Who may say what (job isolation): FetchReplies come from the job's
// switches; gradients, results and reminders from the job's worker of the
// claimed rank, about its own contribution; partial aggregates (evicted,
// flushed, completed in the switch) and forwarded collisions from a switch
// or the worker itself.
bool ParameterServer::authentic(const Packet& p) const {
  const NodeId src = p.h.src;
  bool from_switch = src == cfg_.sw;
  for (NodeId s : cfg_.more_switches) from_switch |= src == s;
  if (p.h.type == PktType::FetchReply) return from_switch;
  if (p.h.type == PktType::Data && from_switch) return true;
  if (p.h.rank >= cfg_.workers.size() || cfg_.workers[p.h.rank] != src) return false;
  if (p.h.type == PktType::Data && p.h.has(flag::kResult)) return p.h.bitmap == full_;
  return (p.h.bitmap & ~RankBits::bit(p.h.rank)) == 0;
}

uint32_t ParameterServer::open(uint32_t psn, Time now, Effects& fx) {
  auto it = index_.find(psn);
  if (it != index_.end()) return it->second;
  uint32_t e;
  if (!free_.empty()) {
    e = free_.back();
    free_.pop_back();
  } else {
    e = static_cast<uint32_t>(slots_.size());
    slots_.emplace_back();
    vals_.resize(vals_.size() + cfg_.payload_values);
  }
  slots_[e] = Entry{};
  slots_[e].psn = psn;
  slots_[e].late = cfg_.remember_completed && completed_.count(psn) != 0;
  slots_[e].created = now;
  slots_[e].deadline = now + est_.timeout();
  std::fill_n(vals(e), cfg_.payload_values, 0);
  index_.emplace(psn, e);
  st_.max_entries = std::max<uint64_t>(st_.max_entries, index_.size());
  if (timers_.push(slots_[e].deadline, psn)) fx.set_timer(slots_[e].deadline, 0);
  return e;
}

void ParameterServer::close(uint32_t e) {
  index_.erase(slots_[e].psn);
  free_.push_back(e);
}

void ParameterServer::merge(uint32_t e, const Packet& p, Time now, Effects& fx) {
  Entry& en = slots_[e];
  const RankBits a = en.bitmap, b = p.h.bitmap;
  en.ecn |= p.h.has(flag::kEcn);
  if (b == 0) return;
  if (p.h.has(flag::kResult)) en.known = true;
  else en.waiting |= b;
  if ((a & b) == 0) {
    int32_t* v = vals(e);
    bool ovf = false;
    for (uint16_t k = 0; k < p.h.count; ++k) v[k] = sat_add(v[k], p.payload()[k], ovf);
    en.bitmap |= b;
  } else if ((b & ~a) == 0) {
    ++st_.duplicates;
    return;
  } else if ((a & ~b) == 0) {
    ++st_.superseded;
    std::memcpy(vals(e), p.payload(), 4u * p.h.count);
    en.bitmap = b;
  } else {
    ++st_.conflicts;
    remind(e, now, fx);
    return;
  }
  en.count = std::max(en.count, p.h.count);
  if (en.bitmap == full_) {
    complete(e, now, fx);
    return;
  }
  // Progress: the timeout counts from the last contribution, without backoff.
  en.reminders = 0;
  en.deadline = now + est_.timeout();
  if (timers_.push(en.deadline, en.psn)) fx.set_timer(en.deadline, 0);
}

void ParameterServer::complete(uint32_t e, Time now, Effects& fx) {
  Entry& en = slots_[e];
  ++st_.completions;
  if (cfg_.remember_completed && completed_.insert(en.psn).second) {
    completed_order_.push_back(en.psn);
    if (completed_order_.size() > kRemembered) {
      completed_.erase(completed_order_.front());
      completed_order_.pop_front();
    }
  }
  // Karn's rule: a completion the reminder helped would measure the timeout itself.
  if (!en.reminded) est_.sample(now - en.created);
  // A result some worker already held completed this task once and was
  // multicast then: only the workers that came back for it (a retransmission
  // or a reminder) still need it (see PsConfig::targeted_known_results).
  std::vector<NodeId> to;
  if (en.known) ++st_.known_results;
  if (en.known && cfg_.targeted_known_results) {
    for (size_t r = 0; r < cfg_.workers.size(); ++r)
      if (en.waiting.test(r)) to.push_back(cfg_.workers[r]);
    if (to.empty()) {
      ++st_.unneeded_results;
      close(e);
      return;
    }
    st_.unicast_results += to.size();
  } else {
    to.push_back(kMulticast);
  }
  for (NodeId dst : to) {
    Packet* a = fx.alloc();
    Header& h = a->h;
    h.type = PktType::Ack;
    h.flags = static_cast<uint16_t>(flag::kResult | (en.ecn ? flag::kEce : 0));
    h.job = cfg_.job;
    h.src = id();
    h.dst = dst;
    h.nworkers = static_cast<uint8_t>(cfg_.workers.size());
    h.psn = en.psn;
    h.bitmap = full_;
    h.count = en.count;
    std::memcpy(a->payload(), vals(e), 4u * en.count);
    fx.send(a);
  }
  close(e);
}

void ParameterServer::remind(uint32_t e, Time now, Effects& fx) {
  Entry& en = slots_[e];
  ++en.reminders;
  en.reminded = true;
  en.last_reminder = now;
  en.deadline = now + std::min<Time>(est_.timeout() << std::min<int>(en.reminders, 3), cfg_.max_timeout);
  if (timers_.push(en.deadline, en.psn)) fx.set_timer(en.deadline, 0);
  auto make = [&](PktType t, NodeId dst, uint8_t rank) {
    Packet* q = fx.alloc();
    q->h.type = t;
    q->h.job = cfg_.job;
    q->h.src = id();
    q->h.dst = dst;
    q->h.rank = rank;
    q->h.nworkers = static_cast<uint8_t>(cfg_.workers.size());
    q->h.psn = en.psn;
    fx.send(q);
  };
  if (cfg_.sw != kNoNode) {  // none: no switch aggregates this job's first hop (a PS-only collective)
    ++st_.fetches;
    make(PktType::Fetch, cfg_.sw, 0);
  }
  for (NodeId sw : cfg_.more_switches) {
    ++st_.fetches;
    make(PktType::Fetch, sw, 0);
  }
  for (size_t r = 0; r < cfg_.workers.size(); ++r) {
    if (en.bitmap.test(r)) continue;
    ++st_.grad_requests;
    make(PktType::GradRequest, cfg_.workers[r], static_cast<uint8_t>(r));
  }
}

void ParameterServer::on_packet(Packet* p, Time now, Effects& fx) {
  if (!valid(*p)) {
    ++st_.malformed;
    fx.free(p);
    return;
  }
  if (!authentic(*p)) {
    ++st_.foreign;
    fx.free(p);
    return;
  }
  switch (p->h.type) {
    case PktType::Data: {
      ++st_.data_in;
      if (p->h.has(flag::kRetired)) {  // every worker already holds this result
        auto it = index_.find(p->h.psn);
        if (it != index_.end()) {
          ++st_.retired;
          close(it->second);
        }
        break;
      }
      merge(open(p->h.psn, now, fx), *p, now, fx);
      break;
    }
    case PktType::FetchReply: {
      auto it = index_.find(p->h.psn);
      if (p->h.bitmap) ++st_.fetch_hits;
      // A reply for a task completed meanwhile carries nothing anyone needs.
      if (it != index_.end()) merge(it->second, *p, now, fx);
      break;
    }
    case PktType::Reminder: {
      ++st_.worker_reminders;
      const uint32_t e = open(p->h.psn, now, fx);
      slots_[e].waiting |= p->h.bitmap;
      // A stuck worker is acted on at once (at most once per timeout floor),
      // whatever the EWMA timeout has grown to.
      if (now - slots_[e].last_reminder >= cfg_.min_timeout) remind(e, now, fx);
      break;
    }
    default: ++st_.malformed; break;
  }
  fx.free(p);
}

void ParameterServer::on_timer(uint64_t, Time now, Effects& fx) {
  auto current = [&](uint32_t psn, Time dl) {
    auto it = index_.find(psn);
    return it != index_.end() && slots_[it->second].deadline == dl ? static_cast<int64_t>(it->second) : -1;
  };
  const Time next = timers_.expire(now, [&](uint32_t psn, Time dl) {
    const int64_t e = current(psn, dl);
    if (e < 0) return;
    ++st_.timeout_reminders;
    remind(static_cast<uint32_t>(e), now, fx);
  }, [&](uint32_t psn, Time dl) { return current(psn, dl) >= 0; });
  if (next != kNever) fx.set_timer(next, 0);
}

}  // namespace ina::host
