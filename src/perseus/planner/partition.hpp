// Splitting a model's layers into pipeline stages.
//
// - min_imbalance_partition: contiguous stages minimising max/min stage weight (the Perseus
//   paper's Appendix B objective: the ratio of the longest to the shortest stage's forward
//   time), exact. Every candidate (shortest, longest) pair is a pair of contiguous-segment sums;
//   a pair is feasible when some split into exactly S stages keeps every stage inside it, which a
//   bitset dynamic program over prefixes decides in O(n * S/64). Candidates are visited from the
//   largest shortest-stage down with pruning, so balanced models settle after a few checks.
// - min_max_partition: contiguous stages minimising the longest stage (the usual "balanced"
//   partition), exact, by binary search over segment sums with the same feasibility test.
// - pipedream_partition: PipeDream's dynamic program (Narayanan et al., SOSP'19, Section 3.1)
//   over a hierarchical topology: stages with data-parallel replicas, the slowest stage
//   bounding throughput, weight synchronisation 2(m-1)|w|/B and activation transfers 2a/B.
#pragma once

#include <span>
#include <string>
#include <vector>

#include "perseus/model/errors.hpp"

namespace perseus::planner {

struct Partition {
  std::vector<int> boundaries;       // S + 1 layer offsets: stage s holds [boundaries[s], boundaries[s+1])
  std::vector<double> stage_weights;
  double max_weight = 0.0;
  double min_weight = 0.0;
  double imbalance_ratio = 1.0;      // max_weight / min_weight
  std::size_t feasibility_checks = 0;  // work done by the exact search

  int num_stages() const { return static_cast<int>(boundaries.size()) - 1; }
};

// Throws InputError for S < 1, S > number of layers, or weights that are negative, not finite or
// all zero. Zero-weight layers are allowed (an embedding lookup may cost next to nothing).
Partition min_imbalance_partition(std::span<const double> weights, int stages);
Partition min_max_partition(std::span<const double> weights, int stages);
// Equal layer counts, the remainder spread over the first stages.
Partition uniform_partition(std::span<const double> weights, int stages);
// Figures of a given split; InputError when the boundaries are not 0 < ... < n.
Partition evaluate_partition(std::span<const double> weights, std::vector<int> boundaries);

// ---- PipeDream ----

struct PipeDreamLayer {
  double compute_s = 0.0;         // forward + backward of one microbatch on one worker
  double activation_bytes = 0.0;  // output sent to the next layer (and its gradient back)
  double parameter_bytes = 0.0;   // weights synchronised among the layer's replicas
};

// One level of the hierarchy, innermost first: `count` components of the level below (GPUs
// for the first level) joined by links of `bandwidth` B/s.
struct TopologyLevel {
  int count = 1;
  double bandwidth = 0.0;
  std::string name;
};

struct PipeDreamStage {
  int first_layer = 0;
  int end_layer = 0;      // exclusive
  int replicas = 1;       // workers running the stage data-parallel
  double compute_s = 0.0; // the stage's compute for one microbatch on one worker
};

struct PipeDreamPlan {
  std::vector<PipeDreamStage> stages;
  double slowest_stage_s = 0.0;  // the DP's objective: time per microbatch of the bottleneck
  int workers = 0;
  int in_flight = 0;             // NOAM = ceil(workers / replicas of the input stage)
};

// Throws InputError for an empty topology or model, a level with count < 1 or bandwidth <= 0.
PipeDreamPlan pipedream_partition(std::span<const PipeDreamLayer> layers, std::span<const TopologyLevel> topology);

// Time per microbatch of a flat configuration under PipeDream's model on one level of
// bandwidth `bandwidth` (used by tests and reports): max over stages of
// max(compute, 2(r-1)|w|/B)/r and over boundaries of 2a/B.
double pipedream_config_time(std::span<const PipeDreamLayer> layers, std::span<const PipeDreamStage> stages,
                             double bandwidth);

}  // namespace perseus::planner
