// Discrete-event emulation of one iteration of geo-distributed pipeline training, where the
// pipelines share links (docs/geo.md, "The emulator").
//
// Every GPU (pipeline, stage) runs forwards F(m), recomputations R(m) and backwards B(m) of its
// M microbatches, one at a time, in the order its scheduler picks. F(m) needs the activation of
// stage s-1, B(m) the gradient of stage s+1 (the last stage: its own F(m)) and, when
// recomputing, R(m). A finished F sends its activation on, a finished B its gradient back: a
// transfer on a channel, which arrives `latency` after its last byte is sent.
//
// Channels: each pipeline's node pair of a hop, one per direction (activations and gradients do
// not compete). Transfers on one channel queue and go one at a time, as PyTorch sends them
// (LinkSharing::kQueue, Atlas §3.2), or are all sent at once and split its bandwidth equally
// (kSplit, processor sharing). Atlas pools the WAN channels of the C pipelines of a DP-cell
// into one of C times the bandwidth and gives it to one transfer at a time, by reservation.
//
// Schedulers (the order each GPU runs, recorded in the result; replay() runs a recorded order):
//   gpipe   every forward, then every backward, no recomputation;
//   1f1b    Megatron-LM's one-forward-one-backward, no recomputation (both orders are the
//           schedule module's, make_schedule);
//   varuna  opportunistic: a ready backward first, then a ready forward, a recomputation when
//           the gradient arrived, or ahead when the GPU would idle with every forward run (one
//           at a time); no memory limit;
//   atlas   Varuna's priorities plus the rules of Atlas §4.4: a forward only while the stage's
//           stashed activations fit (the peak-memory filter); once R(m) ran, only B(m) may
//           follow; and a computation that sends across the WAN starts only when its transfer
//           can start right at its end without overlapping another transfer of its DP-cell
//           (else it is put off to the earliest such time).
// After a stage's last backward on every pipeline, its replicas all-reduce their gradients
// (ring, 4 P (N-1) / (N BW), over the WAN when they sit in several DCs); the iteration ends with
// the last all-reduce.
//
// Cost: O(E log E) for E = tasks + transfers, i.e. about 5 S M D events.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "perseus/geo/placement.hpp"
#include "perseus/geo/wan.hpp"
#include "perseus/geo/workload.hpp"
#include "perseus/model/instruction.hpp"

namespace perseus::geo {

enum class Scheduler : std::uint8_t { kGPipe, k1F1B, kVaruna, kAtlas };
std::string_view to_string(Scheduler scheduler);
// "gpipe", "1f1b" (or "megatron"), "varuna", "atlas", case-insensitive; InputError listing them.
Scheduler parse_scheduler(std::string_view name);
// Whether the scheduler recomputes activations (Varuna and Atlas, when the workload asks).
bool recomputes(Scheduler scheduler, const Workload& workload);

enum class LinkSharing : std::uint8_t { kQueue, kSplit };
std::string_view to_string(LinkSharing sharing);
LinkSharing parse_link_sharing(std::string_view name);  // "queue" or "split"; InputError otherwise

struct Interval {
  double start_s = 0.0, end_s = 0.0;
};

// One computation as run.
struct GeoTask {
  InstructionKind kind = InstructionKind::kForward;
  std::int32_t microbatch = 0;
  double start_s = 0.0, end_s = 0.0;
};

struct GeoTransfer {
  std::int32_t pipeline = 0;
  std::int32_t from_stage = 0, to_stage = 0;
  std::int32_t microbatch = 0;
  bool gradient = false;
  bool wan = false;
  std::int32_t channel = 0;  // the channel it went on (Atlas: its cell's pooled one), as replay() keys it
  double start_s = 0.0;    // the sender finished; the first byte leaves
  double sent_s = 0.0;     // the last byte left
  double arrival_s = 0.0;  // the receiver has it
  double bytes = 0.0;
};

struct StageAllReduce {
  double start_s = 0.0, end_s = 0.0;
  bool wan = false;  // its replicas sit in several DCs
};

struct GeoEmulation {
  Scheduler scheduler = Scheduler::kAtlas;
  LinkSharing sharing = LinkSharing::kQueue;
  Placement placement;
  std::vector<std::vector<GeoTask>> tasks;  // per GPU (pipeline * S + stage), in execution order
  std::vector<GeoTransfer> transfers;       // in the order they were sent
  std::vector<StageAllReduce> allreduces;   // per stage
  std::vector<int> peak_in_flight;          // per stage: most microbatches stashed at once
  std::vector<double> peak_memory_bytes;    // per stage
  double pipeline_time_s = 0.0;             // the last backward's end
  double iteration_time_s = 0.0;            // the last all-reduce's end
  double busy_s = 0.0;                      // computation, every GPU together
  double computation_j = 0.0;               // at the top clock, every GPU together
  std::vector<std::string> warnings;        // e.g. a stage over the GPU's memory

  int num_gpus() const { return placement.num_gpus(); }
  // Computation time over GPU time in [0, iteration_time_s].
  double utilization() const { return iteration_time_s > 0.0 ? busy_s / (iteration_time_s * num_gpus()) : 0.0; }
  // Microbatches trained per second (every pipeline).
  double throughput(int microbatches) const {
    return iteration_time_s > 0.0 ? placement.pipelines * microbatches / iteration_time_s : 0.0;
  }
};

struct EmulationOptions {
  Scheduler scheduler = Scheduler::kAtlas;
  LinkSharing sharing = LinkSharing::kQueue;
  // Per GPU, intervals it is held by other work (BubbleTea's prefills): a computation does not
  // start while one overlaps it. Empty: none.
  std::vector<std::vector<Interval>> held;
};

// Emulates one iteration. Throws InputError when the placement's stage count differs from the
// workload's.
GeoEmulation emulate(const Workload& workload, const NetworkSpec& network, const Placement& placement,
                     const EmulationOptions& options);

// Runs `recorded`'s per-GPU order again, each computation no earlier than it started there,
// holding the GPUs over `held` (per GPU, may be empty). With nothing held it reproduces
// `recorded` exactly; a held interval in a bubble changes nothing, one that overlaps a
// computation delays it and what depends on it.
GeoEmulation replay(const Workload& workload, const NetworkSpec& network, const GeoEmulation& recorded,
                    const std::vector<std::vector<Interval>>& held);

// A computation's time and energy, e.g. at a lower clock than the top one.
struct TaskCost {
  double time_s = 0.0, energy_j = 0.0;
};
using TaskCosts = std::vector<std::vector<TaskCost>>;  // per GPU, per computation in its recorded order

// replay() with every computation taking `costs` instead of its stage's top-clock cost. Throws
// InputError when `costs` does not have one entry per recorded computation.
GeoEmulation replay(const Workload& workload, const NetworkSpec& network, const GeoEmulation& recorded,
                    const std::vector<std::vector<Interval>>& held, const TaskCosts& costs);

// Slowing computations into their slack without moving anything else (docs/geo.md, "Fill or
// slow"). A backward pass over `recorded` as replay() runs it (every GPU's order, every
// channel's order of transfers, the all-reduces) gives each computation the latest it may end
// such that no other computation, transfer or all-reduce starts later than it did. Visiting the
// computations latest first, `stretch(gpu, index, window_s)` picks the cost of computation
// `index` of `gpu` given that it may take up to `window_s` (never less than its recorded time);
// what it takes is no longer there for the computations before it (greedy, not Perseus's
// optimal spread of slack over a chain). Transfers on a link that splits its bandwidth
// (LinkSharing::kSplit) give their sender no slack. Precondition: `recorded` came from
// emulate() (or replay()) with this workload and network. O(E log E) for E computations and
// transfers.
//
// The costs returned, replayed, keep the iteration time and every all-reduce as recorded.
using StretchChooser = std::function<TaskCost(int gpu, int index, double window_s)>;
TaskCosts stretch_into_slack(const GeoEmulation& recorded, const StretchChooser& stretch);

// The idle intervals of each GPU within [0, iteration_time_s] (before its first computation,
// between two, after its last), longer than `min_s`. A stage's all-reduce inside one DC keeps
// its GPUs (NCCL); one across the WAN (TCP from host memory) does not.
std::vector<std::vector<Interval>> bubbles(const GeoEmulation& emulation, double min_s = 0.0);

}  // namespace perseus::geo
