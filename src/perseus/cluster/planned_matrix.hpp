// A throughput matrix for users without measurements (docs/cluster.md): every catalogue model at
// every scale factor on every catalogue GPU, planned by perseus's own planner (planner.hpp: the
// best PTD-P configuration of that many GPUs at the model's published batch, its synthetic
// profile and its Perseus frontier). A step is one iteration. Each cell carries its operating
// points from the frontier's fastest plan (T_min) to the plan of least energy in all, so that
// the energy stage of the policies (energy_stage.hpp) can run a job slower where that costs no
// objective. (T*, the frontier's end, is least in energy above blocking; a GPU that is not
// blocked in a pipeline but idle in the cluster is not counted, so the cluster's least-energy
// plan is the one of least energy in all, at or before T*.)
//
// Energy per step of a job on s GPUs = (frontier energy of one pipeline, one GPU per stage)
// x tensor x data degrees + the data-parallel all-reduce at the GPU's blocking power; time per
// step = the frontier point's time + the all-reduce. Cost: one plan_training per cell (0.1-0.5 s
// each for the default models with refinement off).
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "perseus/cluster/throughputs.hpp"

namespace perseus::cluster {

// The default job mix: small and mid-sized models of five families, each of which fits one
// 80 GB GPU at least (bert-large, t5-large, gpt3-1.3b, qwen3-1.7b, bloom-3b, llama3.2-3b,
// wide-resnet50-8), and three GPU generations (a40, a100-sxm, h100-sxm).
std::vector<std::string> default_planned_models();
std::vector<std::string> default_planned_gpus();

struct PlannedMatrixSpec {
  std::vector<std::string> models = default_planned_models();  // catalogue names (planner/catalogue.hpp)
  std::vector<std::string> gpus = default_planned_gpus();
  std::vector<int> scale_factors{1, 2, 4, 8};
  int global_batch = 0;                     // 0: each model's published batch
  int operating_points = 5;                 // per cell at most, T_min to least energy evenly in time (>= 1)
  bool refine = false;                      // the planner's refinement (slower, a little less energy)
  std::function<void(int done, int total, const std::string& cell)> progress;
};

// One (model, scale factor, GPU) cell as planned.
struct PlannedCell {
  std::string model, gpu;
  int scale_factor = 1;
  bool fits = false;
  std::string why_not;                      // the planner's reason when it does not fit
  std::string configuration;                // e.g. "t=1 p=2 d=2 b=1 (1f1b)"
  double t_min_s = 0.0, t_star_s = 0.0;     // time per step at the fastest plan and at T*
  double t_min_energy_j = 0.0, t_star_energy_j = 0.0;  // energy per step there (all GPUs)
  double least_energy_s = 0.0, least_energy_j = 0.0;   // the slowest operating point
  double all_max_energy_j = 0.0;            // every computation at the top clock (no Perseus)
  double plan_s = 0.0;                      // wall-clock time planning it
};

struct PlannedMatrix {
  ThroughputMatrix matrix;                  // with operating points; (model, scale) pairs that fit nowhere left out
  std::vector<PlannedCell> cells;           // every cell tried, in spec order
  std::vector<std::string> left_out;        // "gpt3-13b x1" ...
};

// Throws InputError for an unknown model or GPU, no models, GPUs or scale factors, a scale
// factor < 1, fewer than 1 operating point, or nothing that fits anywhere.
PlannedMatrix plan_matrix(const PlannedMatrixSpec& spec);

}  // namespace perseus::cluster
