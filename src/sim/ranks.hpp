#pragma once
// The processes one simulation is split over (`mpirun -np N ina sim FILE
// --partition`): each builds the whole network, runs the partitions it owns
// (Simulator::set_partitions) and trades with the others at every window's
// end. Ranks is how they trade: the CLI's runs over MPI (cli/mpi_ranks),
// LocalRanks runs them as threads of one process (the same protocol, for
// tests and for machines without MPI).
#include <memory>
#include <string>
#include <vector>

namespace ina::sim {

class Ranks {
 public:
  virtual ~Ranks() = default;
  virtual unsigned rank() const = 0;
  virtual unsigned size() const = 0;
  // Every rank calls it, each the same number of times: out[r] (size()
  // entries; this rank's own is ignored) goes to rank r. Returns what each
  // rank sent this one, by sender (its own slot empty).
  virtual std::vector<std::string> exchange(std::vector<std::string> out) = 0;
  // The same bytes to every other rank; what each sent, by sender.
  std::vector<std::string> share(const std::string& mine) {
    return exchange(std::vector<std::string>(size(), mine));
  }
};

// `n` ranks as threads of one process: one handle per thread, each used by
// its own thread only.
std::vector<std::unique_ptr<Ranks>> local_ranks(unsigned n);

}  // namespace ina::sim
