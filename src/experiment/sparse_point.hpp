#pragma once
// Scenario points of sparse training (Zebra): a scenario whose
// workload.sparse_model is set runs exp::run_sparse on the star (one job of
// workload.workers_per_job workers, one PS, the switch and, for Zebra, its
// CPU) for each scheme the sparse simulator runs (zebra, ps-lite).
//
// Settings used (others are refused, naming the field):
//   workload.sparse_model   oa | se | deeplight | ncf | lstm (docs/zebra.md), or
//                           trace: replay workload.sparse_trace (an ina-sparse-trace file)
//   workload.sparse_scale   (0, 1]: the model's size and keys per batch x this
//   workload.sparse_draws   draws per batch of the synthetic model (0: its own)
//   workload.sparse_row_width  values per key of the synthetic model (an embedding row of
//                           that many scalars, each its own <key, value> pair): the model
//                           and every batch x this; zebra.hot_keys counts scalars
//   workload.workers_per_job, workload.iterations (measured iterations)
//   zebra.hot_keys          the hot set at full size; the run uses
//                           round(hot_keys x sparse_scale)
//   zebra.principle_p/_c    > 0: Principle 1 sizes the hot set instead
//   zebra.sample_rate       the hot set from this sample of the batches of
//   zebra.profile_iterations  this many iterations before the measured ones
//                           (0: the measured iterations themselves)
//   zebra.registers, zebra.placement (heat | random), zebra.layout_aware,
//   zebra.pairs             the switch layout, Algorithm 1, pairs per packet
//   zebra.ps_pairs, zebra.ps_ack_every  the streams to and from the PS: pairs per
//                           packet, a cumulative acknowledgement per this many
//                           (PS-lite over TCP: 120 and 2; host::SparseConfig)
//   topology.machines       the workers share this many machines' NICs (0: a NIC each)
//   switch.payload_bytes    a dense scheme's (switchml's) values per packet x 4
//   zebra.table_entries     the key -> register exact-match table (the prototype: 32,768)
//   zebra.hot_results       via-ps (the paper's: the switch's hot results to the PS,
//                           which sends every key's sum to the workers) | multicast
//                           (the switch's results to the workers, beside the PS's)
//   zebra.arith             fixed (int32 values, exact sums) | float16-table (float
//                           gradients; hot pairs float16, added by the switch's table
//                           adder; cold pairs float32 at the PS; zebra and ps-lite only)
//   transport.init_window_kb  the hosts' window (workers' initial, the PS's result window)
//   switch.memory_mb        the switch's aggregation memory (the paper: 1 MB)
//   topology.link_gbps, topology.rtt_us, topology.queue_kb, topology.ecn_kb,
//   faults.loss / dup / reorder on every host link
// Metrics: agg_throughput_gbps (pushed pairs x 12 B x 8 / sync time, the
// paper's aggregation throughput), sync_ms (mean per iteration), hot_share,
// hot_keys, recirc_per_packet, pairs, retransmits (the workers'),
// cpu_retransmits (Zebra's switch CPU's result copies), queue_drops (at full link
// queues, every link), ps_pairs, switch_pairs; the PS's phases per
// iteration, ps_push_ms, ps_close_ms, ps_results_ms, ps_in_link_ms,
// ps_out_link_ms, ps_in_ack_share (scenarios/zebra/diagnose/phases.toml),
// and with the hot results via the PS ps_wait_switch_ms, ps_send_ms (the
// results phase split where the switch's last result is in) and
// ps_in_hot_share (their share of the PS's inbound bytes);
// with zebra.arith = float16-table also fp16_max_rel_err, fp16_mean_rel_err
// (|sum - exact| / |exact|), fp16_max_scaled_err (/ sum |x|),
// fp16_max_err_over_bound and fp16_vec_rel_err (||sums - exact||_2 / ||exact||_2),
// against exact float64 sums (exp::ValueError).
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "experiment/runner.hpp"
#include "experiment/scenario.hpp"
#include "workload/sparse.hpp"

namespace ina::exp {

bool is_sparse(const Settings& s);  // workload.sparse_model is set
void validate_sparse(const Settings& s, const std::vector<std::string>& scheme_names, const std::string& origin);
RunOutput run_sparse_point(const Settings& s, const std::string& scheme, uint64_t seed);
// The run's workload before workload.sparse_row_width: the synthetic model
// for workers_per_job workers and profile_iterations + iterations
// iterations, or the trace (throws on an unknown model or a bad trace).
// The run takes each of its keys as a row of sparse_row_width keys.
std::unique_ptr<workload::SparseSource> sparse_rows(const Settings& s, uint64_t seed);

}  // namespace ina::exp
