// The PTD-P / PipeDream-2BW configuration sweep: tensor (t), pipeline (p) and data (d)
// parallel degrees, microbatch size, schedule and recomputation, with a memory model that
// filters what fits, the pipeline bubble and the communication each configuration costs.
//
// Sources: Narayanan et al., SC'21 ("Efficient Large-Scale Language Model Training on GPU
// Clusters Using Megatron-LM"): bubble (p-1)/(v*m), scatter/gather P2P of b*s*h/t, and the
// guidance it draws (tensor parallelism up to the GPUs of a node, pipeline parallelism across
// nodes; model parallelism t*p only as large as memory needs, data parallelism for the rest).
// Korthikanti et al., MLSys'23: activation memory per layer and under recomputation, and the
// interleaved schedule's (1 + (p-1)/(p*v)) factor. Megatron-LM's mixed-precision Adam keeps
// 18 bytes per parameter (FP16 weights, FP32 gradients, FP32 master weights and two moments).
// Ranks are laid out as Megatron does (tensor fastest, then data, then pipeline), so tensor
// groups stay inside a node when t <= GPUs per node, and pipeline stages span nodes once
// t*d fills a node.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "perseus/model/errors.hpp"
#include "perseus/planner/catalogue.hpp"
#include "perseus/planner/energy_model.hpp"
#include "perseus/planner/layers.hpp"
#include "perseus/planner/schedules.hpp"

namespace perseus::planner {

struct ClusterSpec {
  const GpuSpec* gpu = nullptr;
  int num_gpus = 1;
  int gpus_per_node = 0;             // 0: the GPU's
  double inter_node_bandwidth = 0.0; // per GPU, B/s; 0: the GPU's
  int nodes_gpus_per_node() const { return gpus_per_node > 0 ? gpus_per_node : gpu->gpus_per_node; }
  double network_bandwidth() const { return inter_node_bandwidth > 0.0 ? inter_node_bandwidth : gpu->inter_node_bandwidth; }
};

struct ParallelConfig {
  int tensor = 1;
  int pipeline = 1;
  int data = 1;
  int microbatch_size = 1;
  int microbatches = 1;          // per pipeline per iteration (per weight update for 2BW)
  int chunks = 1;                // model chunks per device (interleaved 1F1B)
  bool recompute = false;        // full activation recomputation
  bool sequence_parallel = false;
  ScheduleKind schedule = ScheduleKind::k1F1B;
};
// "t=8 p=4 d=2 b=1 m=128 1f1b" (+ " v=2", " recompute", " sp").
std::string describe(const ParallelConfig& config);

struct MemoryModelOptions {
  double weight_bytes = 2.0;        // FP16/BF16 weights used in forward and backward
  double gradient_bytes = 4.0;      // FP32 gradient accumulation
  double optimizer_bytes = 12.0;    // FP32 master weights, Adam's two moments
  double workspace_bytes = 2.0 * (1ull << 30);  // CUDA context, NCCL and cuBLAS workspaces
  // Share of the GPU's memory kept free: the caching allocator's fragmentation and the peaks
  // the averages above miss. A configuration fits in (1 - headroom) x the GPU's memory.
  double headroom = 0.05;
  double usable_bytes(double gpu_bytes) const { return gpu_bytes * (1.0 - headroom); }
  // "76.0 GiB (80 GiB less 5% headroom)", for messages.
  std::string usable_text(double gpu_bytes) const;
};

struct MemoryEstimate {
  int stage = 0;                    // the stage that needs the most
  double weights_bytes = 0.0;       // all weight versions
  double gradients_bytes = 0.0;
  double optimizer_bytes = 0.0;
  double activations_bytes = 0.0;
  double workspace_bytes = 0.0;
  double total_bytes = 0.0;
  double capacity_bytes = 0.0;
  int activation_stashes = 0;
  int weight_versions = 1;
};

struct ConfigEstimate {
  ParallelConfig config;
  MemoryEstimate memory;
  bool fits = false;
  std::vector<int> boundaries;      // layer boundaries of the p*v (virtual) stages
  double imbalance_ratio = 1.0;     // of the stages' forward + backward time
  double stage_forward_s = 0.0;     // the slowest device, one microbatch (all its chunks)
  double stage_backward_s = 0.0;    // including recomputation
  double pipeline_s = 0.0;          // the pipeline's part of an iteration
  double data_parallel_s = 0.0;     // gradient all-reduce after the pipeline drains
  double iteration_time_s = 0.0;
  double bubble_fraction = 0.0;     // Megatron-LM's bubble/ideal (planner/schedules.hpp)
  double bubble_share() const { return planner::bubble_share(bubble_fraction); }  // of the iteration
  double p2p_s = 0.0;               // per microbatch per boundary, each way
  double tensor_bytes = 0.0;        // per GPU per iteration: tensor-parallel collectives
  double pipeline_bytes = 0.0;      // per GPU per iteration: activations and gradients sent
  double data_bytes = 0.0;          // per GPU per iteration: gradient all-reduce
  // Placement in Megatron-LM's rank order (tensor fastest, then data, then pipeline) on nodes
  // of the cluster's GPUs per node: a tensor group stays in a node when its size divides the
  // node's; a pipeline hop (stage to stage, and the interleaved wrap from the last device to the
  // first) crosses nodes when it does for some pipeline. Crossing hops are priced at the
  // network's bandwidth, the others at the GPU's point-to-point link.
  bool tensor_within_node = true;
  bool pipeline_across_nodes = false;  // some hop of the pipeline crosses nodes
  int pipeline_hops_across = 0;        // how many of its p - 1 stage-to-stage hops do
  double samples_per_second = 0.0;
  double model_flops_utilization = 0.0;  // model FLOPs (no recomputation) / (GPUs * peak * time)
  std::string rejected;             // why it does not fit (empty when it fits)
};
// Where the pipeline's hops run: "none" (p = 1), "in node", "across nodes", or "k of p-1 hops
// across nodes" when only some cross.
std::string pipeline_placement(const ConfigEstimate& estimate);

struct SweepOptions {
  int global_batch = 0;                   // sequences per iteration; 0: the model's default
  std::vector<int> microbatch_sizes = {1, 2, 4, 8};
  std::vector<ScheduleKind> schedules = {ScheduleKind::k1F1B};
  std::vector<int> interleave_chunks = {2, 4};  // tried for interleaved 1F1B
  std::vector<bool> recompute = {false, true};
  bool sequence_parallel = false;
  // Megatron-LM's split (as the published PTD-P runs ran): every virtual stage holds the same
  // number of Transformer layers, the embedding rides with the first and the head with the
  // last; a configuration whose p*v does not divide the layers is invalid. Off: the layers are
  // balanced by time (min_max_partition), embedding and head counted as layers.
  bool megatron_layer_split = false;
  int tensor = 0, pipeline = 0, data = 0;  // fixed degrees (0: swept)
  MemoryModelOptions memory;
  TimeModel time_model = TimeModel::kPublishedRuns;
  // Parameters to estimate with instead of planning_params(gpu, time_model) (the published
  // runs' fit tries candidates through this).
  std::optional<EnergyModelParams> params;
};

// One configuration. Throws InputError when its degrees do not multiply to the GPU count, the
// batch does not split into its microbatches, or the model cannot be split that way.
ConfigEstimate estimate_configuration(const ModelSpec& model, const ClusterSpec& cluster, const ParallelConfig& config,
                                      const SweepOptions& options);

// Every valid configuration, those that fit first, fastest first (ties: the smaller t*p, then
// the smaller t). Throws InputError when the GPU count admits no valid configuration at all.
std::vector<ConfigEstimate> sweep_configurations(const ModelSpec& model, const ClusterSpec& cluster,
                                                 const SweepOptions& options);

}  // namespace perseus::planner
