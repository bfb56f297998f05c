// What one pipeline of geo-distributed training computes and sends (docs/geo.md, "Workload"):
// per stage, the forward, backward and recomputation times (and energies) from the planner's
// energy model at the GPU's top clock; the activation and gradient sent between stages,
// B * L * H * 2 bytes (fp16); each stage's parameters for the data-parallel all-reduce; and how
// many microbatches' activations a stage can hold in its memory.
#pragma once

#include <string>
#include <vector>

#include "perseus/geo/wan.hpp"
#include "perseus/model/errors.hpp"
#include "perseus/planner/catalogue.hpp"
#include "perseus/planner/energy_model.hpp"

namespace perseus::geo {

struct WorkloadSpec {
  std::string model = "gpt-a";
  std::string gpu = "a100-sxm";
  int stages = 4;             // pipeline-parallel degree
  int microbatches = 4;       // M per pipeline per iteration
  int microbatch_size = 1;    // B
  int layers = 0;             // Transformer layers; 0: the model's
  bool recompute = true;      // activation recomputation (Varuna, Atlas); GPipe and 1F1B ignore it
  // Overrides for simulations stated as ratios (Atlas's Fig. 10): every stage's forward takes
  // `forward_ms` (backward twice, recomputation once), and a WAN hop's transfer takes
  // `comm_ratio` times the forward at the WAN pair bandwidth (activation bytes set so). 0: the model's.
  double forward_ms = 0.0;
  double comm_ratio = 0.0;
  double memory_gb = 0.0;     // per GPU; 0: the GPU's
};

struct StageWork {
  int first_layer = 0, end_layer = 0;  // [first, end) of the model's layers
  double forward_s = 0.0, backward_s = 0.0, recompute_s = 0.0;
  double forward_j = 0.0, backward_j = 0.0, recompute_j = 0.0;  // at the top clock
  planner::OperationWork forward_work, backward_work;           // for other clocks
  double parameters = 0.0;          // held by one GPU of the stage
  double resident_bytes = 0.0;      // weights, gradients and Adam state: 16 bytes a parameter
  double stash_bytes = 0.0;         // per microbatch in flight (its checkpoint when recomputing)
  double working_bytes = 0.0;       // one microbatch's full activations (the one being recomputed)
  int max_in_flight = 0;            // microbatches whose activations fit beside the rest
};

struct Workload {
  WorkloadSpec spec;
  const planner::ModelSpec* model = nullptr;
  const planner::GpuSpec* gpu = nullptr;
  std::vector<StageWork> stages;
  double activation_bytes = 0.0;  // one microbatch's activation between two stages
  double gradient_bytes = 0.0;    // and its gradient back
  double memory_bytes = 0.0;      // per GPU
  double p_blocking_w = 0.0;      // the GPU's power while idle
  int num_stages() const { return static_cast<int>(stages.size()); }
};

// Builds the workload. `network` gives the WAN pair bandwidth for `comm_ratio`. Blocks are split
// evenly over the stages, one more on each of the last (blocks mod stages). Throws
// InputError for an unknown model or GPU, stages or microbatches below 1, more stages than
// Transformer layers, a non-Transformer model, or a stage whose weights and one microbatch's
// activations do not fit in the GPU's memory (naming the stage and the sizes).
Workload make_workload(const WorkloadSpec& spec, const NetworkSpec& network);

}  // namespace perseus::geo
