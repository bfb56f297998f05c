// From "GPT-3 13B on 64 A100s" to a frontier: choose a parallel configuration, partition the
// layers into stages, synthesise the profile, compute the iteration time-energy frontier, and
// say what energy Perseus saves at T_min and when another pipeline straggles.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "perseus/model/errors.hpp"
#include "perseus/planner/catalogue.hpp"
#include "perseus/planner/energy_model.hpp"
#include "perseus/planner/parallel_config.hpp"
#include "perseus/planner/partition.hpp"
#include "perseus/profile/profile.hpp"
#include "perseus/solver/crawl.hpp"
#include "perseus/solver/frontier.hpp"
#include "perseus/solver/problem.hpp"

namespace perseus::planner {

enum class PartitionMethod { kMinImbalance, kMinMax, kUniform };
std::string_view to_string(PartitionMethod method);
PartitionMethod parse_partition_method(std::string_view name);  // InputError listing the names

// Stages of `layers` by their forward time at the top clock (Perseus partitions by forward time).
Partition partition_layers(const EnergyModel& model, std::span<const LayerCost> layers, int tensor_parallel,
                           int stages, PartitionMethod method);
// Forward time of every layer at the top clock.
std::vector<double> layer_forward_times(const EnergyModel& model, std::span<const LayerCost> layers,
                                        int tensor_parallel);

// Why nothing of `estimates` (a sweep's result, the leanest first) fits, and what would: with
// `constrained` (degrees, microbatch size or recomputation fixed by the user) a configuration of
// the same GPUs without those constraints, else the same model on 2x, 4x, ... as many GPUs.
std::string explain_no_fit(const ModelSpec& model, const ClusterSpec& cluster, const SweepOptions& sweep,
                           const std::vector<ConfigEstimate>& estimates, bool constrained);

// The frontier problem of PipeDream and 2BW: the steady-state window of `window` microbatches
// (async_window_schedule, with early recomputation if asked) bound to the profile's options.
// InputError as make_problem's.
EnergyProblem make_async_window_problem(const Profile& profile, int stages, int window, bool recompute,
                                        const OptionsConfig& config, std::vector<Warning>* warnings);

struct PlanRequest {
  std::string model;               // the catalogue's; empty with a shape of a GPT (resolve_model)
  ModelShape shape;                // --layers --hidden --heads --seq-len --vocab
  std::string gpu;
  int num_gpus = 0;
  int global_batch = 0;            // 0: the model's published batch
  int tensor = 0, pipeline = 0, data = 0, microbatch_size = 0;  // 0: chosen by the sweep
  std::string schedule = "1f1b";   // see parse_schedule_kind; interleaved sweeps v in {2, 4}
  bool allow_recompute = true;
  TimeModel time_model = TimeModel::kPublishedRuns;  // catalogue.hpp
  double memory_headroom = -1.0;  // share of GPU memory kept free; < 0: MemoryModelOptions's default
  PartitionMethod partition = PartitionMethod::kMinImbalance;
  double unit_time = 0.0;          // tau, s; 0: chosen from the profile
  double p_blocking = 0.0;         // W; 0: the GPU's
  std::vector<double> straggler_slowdowns = {1.05, 1.1, 1.2, 1.5};
  bool solve = true;               // compute the frontier (false: configuration and profile only)
  bool refine = true;              // FrontierOptions::refine (false: the crawl's plans, faster)
  // FrontierOptions::certify_for: seconds beyond the default on bounds, and T_min's relaxation
  // solved whatever it costs (large DAGs skip it by default). 0: the default.
  double certify_seconds = 0.0;
  std::function<void(const std::string&)> progress;
};

struct StragglerSaving {
  double slowdown = 1.0;           // T' / T_min
  double straggler_time_s = 0.0;   // T'
  double plan_time_s = 0.0;        // the chosen plan's time, T_opt = min(T*, T') or just below
  double baseline_energy_j = 0.0;  // all-max plan, then blocking until T'
  double perseus_energy_j = 0.0;
  double savings_fraction = 0.0;
};

struct PlanReport {
  std::shared_ptr<const ModelSpec> model;  // as resolved (a shape given makes a model of its own)
  const GpuSpec* gpu = nullptr;
  ClusterSpec cluster;
  int global_batch = 0;
  TimeModel time_model = TimeModel::kPublishedRuns;  // what the estimates were made with
  ConfigEstimate chosen;
  std::vector<ConfigEstimate> runners_up;   // the next best that fit, up to 4
  std::size_t configurations_valid = 0;
  std::size_t configurations_fit = 0;
  std::vector<LayerCost> layers;            // at the chosen microbatch size and t
  Partition partition;
  Partition uniform_partition;              // for comparison
  PartitionMethod partition_method = PartitionMethod::kMinImbalance;
  Profile profile;
  ScheduleSpec schedule;
  double unit_time = 0.0;
  double p_blocking = 0.0;
  // The frontier (when solved).
  bool solved = false;
  std::optional<EnergyProblem> problem;  // no default state: a Dag needs a schedule
  CrawlResult crawl;
  Frontier frontier;
  double savings_at_t_min_j = 0.0;          // one GPU per stage (one tensor-parallel rank)
  double savings_at_t_min_fraction = 0.0;
  std::vector<StragglerSaving> stragglers;
  std::vector<std::string> reasons;         // why each choice was made
  std::vector<std::string> warnings;
};

// Throws InputError for unknown models or GPUs, degrees that do not divide the GPU count or the
// batch, and configurations that do not fit (saying what would).
PlanReport plan_training(const PlanRequest& request);

}  // namespace perseus::planner
