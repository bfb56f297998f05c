// Perseus against the baselines, every plan emulated the same way: the method table (time,
// energy and savings versus AllMax at iso-time), the straggler table (savings of the
// non-straggler pipelines for T'/T in 1.05 .. 1.5) and the large-scale table (savings
// without stragglers as the microbatch count grows, the paper's strong-scaling shapes).
//
// Savings are always measured over the same window: a plan that finishes early blocks at
// p_blocking until the window ends, as it would in a synchronised cluster.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "perseus/emulator/baselines.hpp"
#include "perseus/emulator/emulator.hpp"
#include "perseus/model/errors.hpp"
#include "perseus/profile/profile.hpp"
#include "perseus/solver/frontier.hpp"

namespace perseus {

// Method names, in the order the tables list them.
inline constexpr const char* kPerseus = "Perseus";
inline constexpr const char* kAllMax = "AllMax";
inline constexpr const char* kZeusGlobal = "ZeusGlobal";
inline constexpr const char* kZeusPerStage = "ZeusPerStage";
inline constexpr const char* kEnvPipe = "EnvPipe";

// One plan of a method, emulated on one pipeline (its S x T GPUs).
struct MethodPoint {
  std::string setting;     // e.g. "1260 MHz", "frontier point 17 of 581"
  // The plan: Perseus's as solver options, a baseline's as one clock per DAG node.
  OptionChoice choice;
  std::vector<std::int32_t> clock_mhz;
  double time_s = 0.0;     // emulated iteration time
  double energy_j = 0.0;   // emulated energy of the pipeline's GPUs
  double planned_time_s = 0.0;  // what the method expected (measured figures, free links, instant switching)
  double planned_energy_j = 0.0;
  std::int64_t late_switches = 0;
  bool pareto = false;     // no other point of the method is as fast and as cheap, one strictly
  // Perseus: a proven lower bound on the energy of any plan as fast as planned_time_s, in
  // planned_energy_j's terms (the frontier point's, times tensor parallelism).
  std::optional<double> lower_bound_j;
};

// Every plan one method offers, fastest first.
struct MethodCurve {
  std::string method;
  std::vector<MethodPoint> points;
};

// A method's answer for a window: the plan it runs, and what the pipeline spends over it.
struct MethodRow {
  std::string method;
  bool available = false;      // false: none of its plans fits in the window
  std::string setting;
  double time_s = 0.0;         // the plan's own emulated time
  double energy_j = 0.0;       // over the window (the plan, then blocking until it ends)
  double savings_j = 0.0;      // AllMax's energy over the same window minus energy_j
  double savings_fraction = 0.0;
  double slowdown_fraction = 0.0;  // time_s / AllMax's time - 1
};

struct StragglerRow {
  double ratio = 1.0;         // T'/T, T the AllMax iteration time
  double t_prime_s = 0.0;     // the straggler's emulated iteration time
  std::vector<MethodRow> methods;  // energy_j: the non-straggler pipelines, over their iteration
};

struct ComparisonOptions {
  // What every clock costs: FrequencyTable::from_profile runs the baselines at the clocks
  // they ask for (all measured ones); null uses the problem's options only.
  std::shared_ptr<const FrequencyTable> clocks;
  // Links, switching latency, tensor parallelism. Straggler and data-parallel settings are
  // ignored except by the straggler table, which emulates max(2, data_parallel) pipelines,
  // the last one straggling.
  EmulationConfig emulation;
  std::vector<double> straggler_ratios = {1.05, 1.1, 1.2, 1.3, 1.4, 1.5};
  std::function<void(const std::string&)> progress;
};

struct Comparison {
  int gpus_per_pipeline = 0;        // S x T
  double p_blocking_w = 0.0;
  double all_max_time_s = 0.0;      // T: emulated
  double all_max_energy_j = 0.0;
  double t_min_s = 0.0;             // Perseus's fastest and least-energy points, emulated
  double t_star_s = 0.0;
  std::vector<MethodCurve> methods;  // Perseus, AllMax, ZeusGlobal, ZeusPerStage, EnvPipe
  std::vector<MethodRow> iso_time;   // per method: least energy within T, over [0, T]
  std::vector<MethodRow> min_energy; // per method: its least-energy plan, over its own time
  std::vector<StragglerRow> stragglers;

  const MethodCurve& method(const std::string& name) const;  // std::out_of_range if absent
};

// The plan of a point, ready to emulate.
ExecutionPlan execution_plan(const EnergyProblem& problem, const MethodPoint& point,
                             std::shared_ptr<const FrequencyTable> clocks);

// Emulates every frontier point and every baseline plan, then builds the tables. Throws
// InputError for a frontier of another problem, an empty frontier or a ratio below 1.
Comparison compare_methods(const EnergyProblem& problem, const Frontier& frontier, const ComparisonOptions& options = {});

// The energy of running a plan of `time_s` and `energy_j` (one pipeline of `gpus` GPUs) in a
// window of `window_s` >= time_s: it blocks for the rest.
double energy_over_window(double time_s, double energy_j, double window_s, double p_blocking_w, int gpus);

// Least energy over [0, window] among the points that fit in it (time <= window, up to float
// noise); nullptr when none does.
const MethodPoint* best_within(const MethodCurve& curve, double window_s, double p_blocking_w, int gpus);

// Perseus's own choice for a straggler: T_opt = min(T*, T') with T* the time of the point of
// least effective energy; the slowest point no slower than T_opt (nullptr when none is).
const MethodPoint* perseus_choice(const MethodCurve& curve, double t_prime_s, double p_blocking_w, int gpus);

// ---------------------------------------------------------------- the large-scale table

struct LargeScaleOptions {
  int stages = 8;
  int tensor_parallel = 8;
  int global_microbatches = 1536;  // D = global / M pipelines: 96 mb -> 16 pipelines -> 1,024 GPUs
  EmulationConfig emulation;       // links and switching latency; D, T and stragglers are set here
  FrontierOptions frontier;
  std::function<void(const std::string&)> progress;
};

struct LargeScaleRow {
  std::string workload;   // e.g. the profile's file stem
  int microbatches = 0;
  int pipelines = 0;
  int gpus = 0;
  std::size_t crawl_steps = 0;
  std::size_t frontier_points = 0;
  double solve_s = 0.0;              // crawl + frontier, wall clock
  double all_max_time_s = 0.0;       // the whole cluster's iteration, every pipeline emulated
  double all_max_energy_j = 0.0;
  double perseus_time_s = 0.0;       // Perseus at iso-time (its least energy within T)
  double perseus_energy_j = 0.0;     // over the same window
  double savings_fraction = 0.0;
  double t_star_time_s = 0.0;        // Perseus at T*, for reference: slower, least effective energy
  double t_star_energy_j = 0.0;
  double t_star_savings_fraction = 0.0;
};

// Solves the frontier of `profile` on a 1F1B schedule of `stages` x `microbatches`, then
// emulates the whole cluster (every pipeline, no straggler) at AllMax (the profile's highest
// clock) and with Perseus's iso-time plan. Throws InputError when global_microbatches is not a multiple of M.
LargeScaleRow large_scale_row(const Profile& profile, const std::string& workload, int microbatches,
                              const OptionsConfig& options_config, const LargeScaleOptions& options = {});

}  // namespace perseus
