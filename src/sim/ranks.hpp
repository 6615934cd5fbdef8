#pragma once
// The processes one simulation is split over (`mpirun -np N ina sim FILE
// --partition`): each builds the whole network, runs the partitions it owns
// (Simulator::set_partitions) and trades with the others at every window's
// end. Ranks is how they trade: the CLI's runs over MPI (cli/mpi_ranks),
// LocalRanks runs them as threads of one process (the same protocol, for
// tests and for machines without MPI).
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "proto/node.hpp"

namespace ina::sim {

class Ranks {
 public:
  virtual ~Ranks() = default;
  virtual unsigned rank() const = 0;
  virtual unsigned size() const = 0;
  // Every rank calls it at the same step of the same protocol: out[r]
  // (size() entries; this rank's own is ignored) goes to rank r. Returns
  // what each rank sent this one, by sender (its own slot empty). `step`
  // names the step: ranks at different steps (a rank that left the protocol
  // early, say) cannot go on together, and out_of_step() says which.
  std::vector<std::string> exchange(std::vector<std::string> out, std::string_view step);
  // The same bytes to every other rank; what each sent, by sender.
  std::vector<std::string> share(const std::string& mine, std::string_view step) {
    return exchange(std::vector<std::string>(size(), mine), step);
  }

 protected:
  // The all-to-all itself, as exchange() says.
  virtual std::vector<std::string> trade(std::vector<std::string> out) = 0;
  // Throws std::logic_error(what); an MPI job ends instead (its other ranks
  // may be waiting in a call this one will not make).
  [[noreturn]] virtual void out_of_step(const std::string& what);

 private:
  uint64_t steps_ = 0;  // exchanges so far
};

// A node another process runs (a split run builds only its own): it holds
// no state here, and handing it an event is a logic error.
class RemoteNode final : public Node {
 public:
  void on_packet(Packet*, Time, Effects&) override { misplaced(); }
  void on_timer(uint64_t, Time, Effects&) override { misplaced(); }
  void on_start(Time, Effects&) override { misplaced(); }

 private:
  [[noreturn]] void misplaced() const;
};

// `n` ranks as threads of one process: one handle per thread, each used by
// its own thread only.
std::vector<std::unique_ptr<Ranks>> local_ranks(unsigned n);

}  // namespace ina::sim
