// Discrete-event emulation of one training iteration on a cluster of D data-parallel
// pipelines, each of S stages of T tensor-parallel GPUs.
//
// Per pipeline, every device runs its instruction list in order; an instruction starts when
// its device is free and every predecessor's output has arrived. Output crossing devices is
// a transfer on the link between them (latency + bytes / bandwidth, transfers on one link
// served first come first served; the sender does not wait for it). Every pipeline is
// emulated on its own, explicitly; at the end the D replicas of each stage all-reduce their
// gradients over a ring, and the iteration ends when the last all-reduce does.
//
// Energy of one GPU over the iteration [0, T_iteration]:
//   computation          measured energy of its instructions (as executed)
//   intrinsic blocking   p_blocking while idle inside its pipeline's own iteration [0, T_p]
//                        (data loading and blocking sends included: the GPU waits on them)
//   extrinsic blocking   p_blocking while waiting for the slowest pipeline [T_p, T_sync]
//   all-reduce           p_blocking while the gradient all-reduce runs on [T_sync, T_comm]
//   overhead             the optimizer step and the gap before the next iteration,
//                        [T_comm, T_iteration] (IterationOverheads; none by default)
// With zero-cost links and no switching latency, a pipeline's T_p is the DAG critical path
// over measured times and its energy is evaluate_measured's (docs/solver.md, "Iteration energy").
//
// Frequency switching: when an instruction finishes, the controller asks for the next
// instruction's clock (asynchronously, as Perseus's client does); the clock changes
// `switch_latency_s` later, one switch at a time. An instruction that starts before its clock
// took effect runs at the old clock until then (its progress and energy are prorated), and the
// switch counts as late; if it finishes before, the switch was missed. Each device starts the
// iteration at its first instruction's clock (set while the previous iteration synchronised).
// Constant-time operations keep the clock they find. When a switch was late, the plan is run
// again with instant switching to report what late switches cost, and a warning says so when
// that is more than EmulationConfig::switching_warning_fraction of the time or energy.
#pragma once

#include <algorithm>
#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "perseus/emulator/execution_plan.hpp"
#include "perseus/model/errors.hpp"
#include "perseus/solver/problem.hpp"

namespace perseus {

// A link: a transfer of b bytes occupies it for b / bandwidth and arrives `latency_s` after that.
struct LinkSpec {
  double latency_s = 0.0;
  double bandwidth_bytes_per_s = 0.0;  // 0: unlimited
  double occupancy_s(double bytes) const {
    return bandwidth_bytes_per_s > 0.0 ? bytes / bandwidth_bytes_per_s : 0.0;
  }
  bool is_free() const { return latency_s == 0.0 && bandwidth_bytes_per_s == 0.0; }
};

// A pipeline slower than the others: every instruction takes `slowdown` times longer (at the
// same power, so also `slowdown` times the energy), and it starts `delay_s` late (its GPUs
// block meanwhile).
struct Straggler {
  int pipeline = 0;
  double slowdown = 1.0;  // >= 1
  double delay_s = 0.0;   // >= 0
};

// What an iteration holds besides its instructions, the transfers between them and the
// gradient all-reduce: what makes a measured iteration 1.5-6.5% longer than its instructions'
// critical path (docs/emulator.md, "Around the instructions"). Every term is off by default and
// switchable on its own.
struct IterationOverheads {
  // Data loading, per microbatch, while the GPU idles (p_blocking): the first stage loads the
  // input before each forward of its first chunk, the last stage the labels before each forward
  // of its last chunk (DeepSpeed and Merak: after the activation arrived, right before the
  // forward; Merak's last stage loads twice, so give the two together). A one-stage pipeline
  // loads both. Cannot be combined with load instructions in the schedule (--data-load).
  double first_stage_load_s = 0.0;
  double last_stage_load_s = 0.0;
  // A send holds its sender until the receiver has it (blocking point-to-point, as NCCL
  // send/recv in DeepSpeed and Merak), instead of leaving in the background. With links of a
  // measured per-transfer time (latency), this is point-to-point as measured.
  bool blocking_sends = false;
  // The optimizer step: every GPU at once, after the last gradient all-reduce (clipping needs
  // the gradient norm of every stage), for this long at `optimizer_power_w` (negative:
  // p_blocking).
  double optimizer_step_s = 0.0;
  double optimizer_power_w = -1.0;
  // Idle (p_blocking) after the optimizer step until the next iteration starts: the training
  // loop's own work (logging, the scheduler, the next batch's bookkeeping).
  double between_iterations_s = 0.0;
  bool any() const {
    return first_stage_load_s > 0.0 || last_stage_load_s > 0.0 || blocking_sends || optimizer_step_s > 0.0 ||
           between_iterations_s > 0.0;
  }
};

// Default of EmulationConfig::switching_warning_fraction: 0.1%.
inline constexpr double kSwitchingWarningFraction = 1e-3;

// Which pipelines keep their per-instruction timeline and transfers in the result. Every
// pipeline is emulated and keeps its summary and exact per-device energies either way; at
// 2,048 pipelines the timelines of all of them are most of the memory and of what is written.
enum class TimelineDetail : std::uint8_t {
  kAll,      // every pipeline
  kNotable,  // the stragglers, the fastest pipeline, a typical one, and EmulationConfig::detail_pipelines
  kListed,   // only EmulationConfig::detail_pipelines (none: summaries only)
};

struct EmulationConfig {
  int data_parallel = 1;    // D pipelines
  int tensor_parallel = 1;  // GPUs per stage; they run in lockstep, so energy scales by it
  double switch_latency_s = 0.0;  // about 0.01 on NVIDIA GPUs
  // Point-to-point links between the stages of a pipeline: `p2p` for every pair, unless
  // `p2p_links` has the (from stage, to stage) pair (a WAN hop, a slow link).
  LinkSpec p2p;
  std::map<std::pair<int, int>, LinkSpec> p2p_links;
  double activation_bytes = 0.0;  // what a forward (or recompute, load) sends on
  double gradient_bytes = 0.0;    // what a backward sends on
  // The ring all-reduce of each stage's gradients across the D pipelines. Every
  // tensor-parallel rank reduces its 1/T share of `allreduce_bytes` on its own ring.
  LinkSpec allreduce;
  double allreduce_bytes = 0.0;
  std::vector<Straggler> stragglers;
  bool record_transfers = true;  // keep every transfer on a link that is not free (of detailed pipelines)
  TimelineDetail detail = TimelineDetail::kAll;
  std::vector<int> detail_pipelines;  // kept in detail besides what `detail` selects; each in [0, D)
  // The "switches more often than it can pay for" warning fires only when late switches cost
  // more than this fraction of the iteration time (the slowest pipeline's delay against
  // instant switching) or of the iteration energy (extra computation energy): a 47 us delay
  // in a 4 s iteration is no reason to distrust a plan. 0 warns on any cost.
  double switching_warning_fraction = kSwitchingWarningFraction;
  IterationOverheads overheads;
  // Per-instruction noise: every instruction of every pipeline takes (1 + sigma z) times its
  // time and energy (same power), z standard normal cut at +-3, the factor at least 0.05;
  // z is a function of (noise_seed, pipeline, node), so the same seed gives the same noise to
  // every plan run on it (a fair comparison). 0: none.
  double instruction_noise = 0.0;
  std::uint64_t noise_seed = 0;
  // The cluster's power sampled every `power_sample_s` s over the iteration (every GPU,
  // blocking included): EmulationResult::power_w. 0: none.
  double power_sample_s = 0.0;
};

// Energy of a set of GPUs, split by what they were doing.
struct EnergySplit {
  double computation_j = 0.0;
  double intrinsic_blocking_j = 0.0;
  double extrinsic_blocking_j = 0.0;
  double allreduce_j = 0.0;
  double overhead_j = 0.0;  // the optimizer step and the gap between iterations
  double total_j() const {
    return computation_j + intrinsic_blocking_j + extrinsic_blocking_j + allreduce_j + overhead_j;
  }
  EnergySplit& operator+=(const EnergySplit& other);
};

enum class SwitchOutcome : std::uint8_t {
  kNone,    // no switch, or it took effect before the instruction started
  kLate,    // the instruction started at the old clock
  kMissed,  // the instruction ended before its clock took effect
};

// One instruction as executed by one device (its T tensor-parallel GPUs alike).
struct ExecutedInstruction {
  Instruction instruction;          // instruction.stage is the device's stage
  std::int32_t pipeline = 0;
  Dag::NodeId node = 0;
  double start_s = 0.0;
  double end_s = 0.0;
  double energy_j = 0.0;            // per GPU
  double load_s = 0.0;              // data loading right before start_s (IterationOverheads)
  std::int32_t frequency_mhz = 0;   // the planned clock
  std::int32_t clock_at_start_mhz = 0;
  SwitchOutcome switch_outcome = SwitchOutcome::kNone;
  // What it waited for: the node (of the same pipeline) whose end on this device, or whose
  // output's arrival from another, was the last thing it needed; -1 when nothing held it
  // back (it started with its pipeline). Following it from the last instruction back traces
  // the critical path.
  Dag::NodeId waited_for = -1;
  double power_w() const { return end_s > start_s ? energy_j / (end_s - start_s) : 0.0; }
};

struct Transfer {
  std::int32_t pipeline = 0;
  std::int32_t from_stage = 0, to_stage = 0;
  Dag::NodeId from_node = 0, to_node = 0;
  double start_s = 0.0;    // when the link began sending
  double arrival_s = 0.0;  // when the receiver has it
  double bytes = 0.0;
};

struct AllReduce {
  std::int32_t stage = 0;
  double start_s = 0.0;  // when the last replica of the stage finished
  double end_s = 0.0;
  double bytes_per_gpu = 0.0;
};

// One device of one pipeline: the figures of each of its T GPUs.
struct DeviceSummary {
  std::int32_t pipeline = 0;
  std::int32_t stage = 0;
  double busy_s = 0.0;
  double finish_s = 0.0;  // end of its last instruction
  EnergySplit energy;     // per GPU
  std::int32_t switches = 0, late_switches = 0, missed_switches = 0;
};

struct PipelineSummary {
  std::int32_t pipeline = 0;
  bool straggler = false;
  double slowdown = 1.0;
  double delay_s = 0.0;
  double time_s = 0.0;  // T_p: its own iteration, from 0 to its last instruction's end
  EnergySplit energy;   // all its GPUs
};

struct EmulationResult {
  int stages = 0;
  int data_parallel = 1;
  int tensor_parallel = 1;
  double p_blocking_w = 0.0;
  double switch_latency_s = 0.0;
  TimelineDetail detail = TimelineDetail::kAll;  // what EmulationConfig::detail asked for
  double iteration_time_s = 0.0;  // T_iteration: until the next iteration can start
  double sync_time_s = 0.0;       // T_sync: the slowest pipeline's own iteration
  double communication_end_s = 0.0;  // T_comm: the last gradient all-reduce's end (T_sync if none)
  IterationOverheads overheads;      // as configured
  EnergySplit energy;             // all GPUs
  std::int64_t switches = 0, late_switches = 0, missed_switches = 0;
  std::vector<PipelineSummary> pipelines;
  std::vector<DeviceSummary> devices;         // pipeline-major: index pipeline * S + stage
  // The pipeline that finished first, and a typical one: among the non-stragglers (all
  // pipelines if every one straggles), the lowest-numbered whose time and energy are their
  // median's. With every non-straggler running alike, both are the first non-straggler.
  std::int32_t fastest_pipeline = 0;
  std::int32_t typical_pipeline = 0;
  // Pipelines with a timeline (EmulationConfig::detail), ascending; the others' devices
  // have empty ranges in `timeline`, and no transfers.
  std::vector<std::int32_t> detailed_pipelines;
  std::vector<ExecutedInstruction> timeline;  // of detailed pipelines: by pipeline, then stage, then execution order
  std::vector<std::size_t> device_begin;      // D * S + 1 offsets into `timeline`
  std::vector<Transfer> transfers;            // of detailed pipelines, by pipeline
  std::vector<AllReduce> allreduces;          // one per stage when D > 1
  // The cluster's average power (W, all GPUs) in each sample of EmulationConfig::power_sample_s
  // from 0; the last sample ends at iteration_time_s (power_sample_duration_s(i) tells its
  // width). Sum of power x duration = energy.total_j().
  std::vector<double> power_w;
  double power_sample_s = 0.0;
  double power_sample_duration_s(std::size_t i) const {
    return std::min(power_sample_s, iteration_time_s - static_cast<double>(i) * power_sample_s);
  }
  std::vector<std::string> warnings;          // e.g. a plan that switches more than it can pay for
                                              // (see EmulationConfig::switching_warning_fraction)
  // How much later the slowest pipeline finishes than with instant switching (0 when no
  // switch was late; negative when late switches left a faster clock running).
  double switching_delay_s = 0.0;
  // Computation energy (all GPUs) above what instant switching would take (0 when no switch
  // was late; negative when late switches left a slower clock running).
  double switching_energy_j = 0.0;

  int num_gpus() const { return data_parallel * stages * tensor_parallel; }
  double average_power_w() const { return iteration_time_s > 0.0 ? energy.total_j() / iteration_time_s : 0.0; }
  double average_power_per_gpu_w() const { return average_power_w() / num_gpus(); }
  // Instructions of one device in execution order (none for a pipeline without detail).
  std::span<const ExecutedInstruction> device_timeline(int pipeline, int stage) const;
  bool has_detail(int pipeline) const;  // whether `pipeline` kept its timeline
};

// The critical path of one pipeline as emulated: indices into result.timeline, first to
// last, following `waited_for` back from the instruction that ends last. Every instruction
// on it starts when the previous one ends (on its device) or its output arrives. Empty for a
// pipeline without detail.
std::vector<std::size_t> critical_path(const EmulationResult& result, int pipeline);

// Emulates one iteration. Non-straggler pipelines run `plan`; stragglers run
// `straggler_plan` (default: `plan`). Every pipeline is emulated; those `config.detail`
// selects keep their timelines (the fastest and the typical one, known only at the end,
// are emulated once more for it: the engine is deterministic, so that is the same run).
// Throws InputError for a plan of the wrong size and a bad configuration (D or T below 1,
// negative or non-finite latencies, bandwidths or sizes, a straggler outside [0, D), listed
// twice, with a slowdown below 1 or a negative delay, a detail pipeline outside [0, D)).
EmulationResult emulate(const EnergyProblem& problem, const ExecutionPlan& plan, const EmulationConfig& config,
                        const ExecutionPlan* straggler_plan = nullptr);

// Perseus's answer to a straggler. The stragglers run the fastest candidate, which sets the
// time T' the others must wait for anyway. The others run the candidate for
// T_opt = min(T*, T'): the slowest candidate no slower than T_opt (the least energy among
// equally slow ones), or the fastest if none is; T* is the time of the candidate with the
// least effective energy (iteration energy - p_blocking x GPUs x time: what it costs above
// idling, which is what a wait for T' >= T* leaves to compare). Candidates are typically a frontier's plans; times here are
// emulated (one pipeline, with the configured links and switching latency).
struct StragglerResponse {
  std::size_t straggler_plan = 0;  // index of the fastest candidate
  std::size_t chosen_plan = 0;     // what the non-straggler pipelines run
  double straggler_time_s = 0.0;   // T'
  double t_star_s = 0.0;
  double t_opt_s = 0.0;
  std::vector<double> candidate_times_s;  // emulated, per candidate
  EmulationResult result;
};

// The choice above, for any T': each candidate emulated once alone (one pipeline, `config`'s
// links, switching and overheads; no stragglers, no noise), then choose() is O(candidates).
class StragglerResponder {
 public:
  // Throws InputError for no candidates and emulate's errors.
  StragglerResponder(const EnergyProblem& problem, std::span<const ExecutionPlan> candidates,
                     const EmulationConfig& config);
  std::size_t fastest() const { return fastest_; }
  double t_star_s() const { return t_star_s_; }
  const std::vector<double>& times_s() const { return times_s_; }
  // T': the slowest of `stragglers` running the fastest candidate at its own pace.
  double straggler_time_s(std::span<const Straggler> stragglers) const;
  // The candidate the non-stragglers run when the stragglers take T' (T_opt = min(T*, T')).
  std::size_t choose(double straggler_time_s) const;

 private:
  const EnergyProblem& problem_;
  std::span<const ExecutionPlan> candidates_;
  EmulationConfig single_;
  std::vector<double> times_s_, effective_energy_j_;
  std::size_t fastest_ = 0;
  double t_star_s_ = 0.0;
};

// Throws InputError for no candidates, or no stragglers in `config`.
StragglerResponse emulate_straggler_response(const EnergyProblem& problem, std::span<const ExecutionPlan> candidates,
                                             const EmulationConfig& config);

}  // namespace perseus
