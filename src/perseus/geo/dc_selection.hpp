// Atlas's DC selection (Algorithm 1, docs/geo.md, "Choosing the DCs"): for every number D of
// DP-cells of C pipelines, give each DC (in order) as many of the P stages as floor(GPUs / (D C))
// allows until all are placed; the iteration then takes one DP-cell's pipeline time under Atlas
// (emulated: cells run alike and apart) plus the all-reduce among the D C replicas of a stage.
// The what-if table has every D, its stages per DC, the GPUs it leaves unused and its
// throughput D C M / time; the best is the highest throughput, the fewest GPUs among equals.
//
// With `partial_cells`, every pipeline count N is tried, not only multiples of C: the last cell
// has N mod C pipelines (its own, emulated, pipeline time counts when it is slower). The paper
// reports that its algorithm used every GPU of DCs whose counts C does not divide, which only
// this allows; the multiples of C are the paper's rows.
//
// Cost: one emulation of at most C pipelines per distinct (stage split, cell size), each
// O(C S M log(C S M)).
#pragma once

#include <functional>
#include <vector>

#include "perseus/geo/pipeline_emulator.hpp"

namespace perseus::geo {

struct DcSelectionOptions {
  int cell_size = 2;          // C
  int max_cells = 0;          // D_max; 0: total GPUs / (C P)
  bool keep_order = false;    // false: DCs by decreasing GPU count (the paper's default order)
  bool partial_cells = true;  // also pipeline counts that are not multiples of C
  LinkSharing sharing = LinkSharing::kQueue;
  std::function<void(int done, int total)> progress;  // after each D
};

struct DcChoice {
  int pipelines = 0;                   // N: D C, or less with a partial last cell
  int cells = 0;                       // D
  bool feasible = false;               // every stage placed
  std::vector<int> stages_per_dc;      // in the network's DC order
  std::vector<int> gpus_used_per_dc;
  int gpus_used = 0;
  double pipeline_time_s = 0.0;        // one DP-cell under Atlas
  double allreduce_s = 0.0;            // the slowest stage's all-reduce over D C replicas
  double total_s = 0.0;
  double throughput = 0.0;             // microbatches per second, every pipeline
};

struct DcSelection {
  std::vector<DcChoice> choices;       // N = C, 2C, .. D_max C (partial cells: N = 1, 2, ..)
  int best = -1;                       // index into choices; -1 when none is feasible
  int distinct_emulations = 0;
};

// Throws InputError for C < 1, a negative D_max, and the network's and workload's errors.
DcSelection select_dcs(const Workload& workload, const NetworkSpec& network, const DcSelectionOptions& options);

}  // namespace perseus::geo
