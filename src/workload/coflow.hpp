#pragma once
// A coflow trace in the Coflow-Benchmark format: the MapReduce jobs of
// P4INC-AOI §VII-C (its reference [61], the Facebook trace
// data/coflow/FB2010-1Hr-150-0.txt; data/coflow/README.md has its source).
//
//   line 1:  <ports> <coflows>
//   then one line per coflow:
//   <id> <arrival ms> <mappers> <mapper rack>... <reducers> <reducer rack>:<shuffle MB>...
//
// Racks are ports of the traced fabric, 0 .. ports-1. Parsing is strict: a
// line whose counts do not match its fields, a rack outside the fabric, a
// negative or non-finite size, an arrival before the previous coflow's, a
// duplicate id, or a coflow count different from the header's is an error
// naming the file, the line, the field and the value.
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

namespace ina::workload {

struct CoflowReducer {
  unsigned rack = 0;
  double shuffle_mb = 0;  // the data this reducer receives, over all mappers (MB)
};

struct Coflow {
  uint64_t id = 0;
  uint64_t arrival_ms = 0;
  std::vector<unsigned> mappers;  // racks, as in the trace (a rack may repeat)
  std::vector<CoflowReducer> reducers;
  double shuffle_mb() const;      // the coflow's total
};

struct CoflowTrace {
  std::string origin;  // the file it came from
  unsigned ports = 0;
  std::vector<Coflow> coflows;  // in arrival order
};

class CoflowTraceError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Parses a trace's text; `origin` names it in errors.
CoflowTrace parse_coflow_trace(const std::string& text, const std::string& origin);
// Reads and parses a trace file (an unreadable file is a CoflowTraceError naming it).
CoflowTrace load_coflow_trace(const std::string& path);

}  // namespace ina::workload
