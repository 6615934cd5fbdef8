#include "sim/ranks.hpp"

#include <barrier>
#include <algorithm>
#include <stdexcept>

#include <fmt/format.h>

namespace ina::sim {
namespace {

// A mailbox per (sender, receiver), filled before the first barrier and read
// before the second: no slot is written while another rank reads it.
struct Board {
  explicit Board(unsigned n) : n(n), box(n * n), filled(n), read(n) {}
  unsigned n;
  std::vector<std::string> box;  // box[from * n + to]
  std::barrier<> filled, read;
};

class LocalRank final : public Ranks {
 public:
  LocalRank(std::shared_ptr<Board> b, unsigned r) : board_(std::move(b)), rank_(r) {}
  unsigned rank() const override { return rank_; }
  unsigned size() const override { return board_->n; }

 protected:
  std::vector<std::string> trade(std::vector<std::string> out) override {
    Board& b = *board_;
    for (unsigned to = 0; to < b.n; ++to)
      if (to != rank_) b.box[rank_ * b.n + to] = std::move(out[to]);
    b.filled.arrive_and_wait();
    std::vector<std::string> in(b.n);
    for (unsigned from = 0; from < b.n; ++from)
      if (from != rank_) in[from] = std::move(b.box[from * b.n + rank_]);
    b.read.arrive_and_wait();
    return in;
  }

 private:
  std::shared_ptr<Board> board_;
  unsigned rank_;
};

}  // namespace

std::vector<std::string> Ranks::exchange(std::vector<std::string> out, std::string_view step) {
  if (out.size() != size()) throw std::invalid_argument("Ranks::exchange: one entry per rank");
  // Each message starts with the sender's step: its count and name.
  const std::string head = std::to_string(++steps_) + " " + std::string(step) + "\n";
  for (std::string& m : out) m.insert(0, head);
  std::vector<std::string> in = trade(std::move(out));
  for (unsigned r = 0; r < in.size(); ++r) {
    if (r == rank()) continue;
    if (!in[r].starts_with(head)) {
      const std::string theirs = in[r].substr(0, std::min(in[r].find('\n'), size_t{80}));
      out_of_step(fmt::format("ranks out of step: rank {} is at exchange {}, rank {} at {}", rank(),
                              head.substr(0, head.size() - 1), r, theirs.empty() ? "none" : theirs));
    }
    in[r].erase(0, head.size());
  }
  return in;
}

void RemoteNode::misplaced() const {
  throw std::logic_error(fmt::format("node {} runs in another process, not this one", id()));
}

void Ranks::out_of_step(const std::string& what) { throw std::logic_error(what); }

std::vector<std::unique_ptr<Ranks>> local_ranks(unsigned n) {
  if (n == 0) throw std::invalid_argument("local_ranks: at least one rank");
  auto board = std::make_shared<Board>(n);
  std::vector<std::unique_ptr<Ranks>> out;
  for (unsigned r = 0; r < n; ++r) out.push_back(std::make_unique<LocalRank>(board, r));
  return out;
}

}  // namespace ina::sim
