// Fill or slow (docs/geo.md, "Fill or slow"): beyond both papers, what to do with each bubble of
// a geo-distributed training iteration. BubbleTea fills bubbles with inference prefills (more
// useful work per GPU); Perseus slows the computation before a bubble to a lower clock so that
// it ends when the bubble would have (less energy for the same iteration). A bubble cannot have
// both: the policy picks per bubble by a stated objective.
//
//   none   training alone at the top clock (the reference);
//   fill   every bubble open to prefills, every computation at the top clock (BubbleTea);
//   slow   no prefills, every computation slowed into its slack (stretch_into_slack: the
//          lowest energy, idle power counted, that keeps every other computation, transfer and
//          all-reduce where it was);
//   mixed  per bubble, whichever is worth more by the objective, estimated from the two pure
//          runs: the prefill tokens and energy each bubble took under `fill` against the energy
//          its computation saved under `slow`. The mixed run is then emulated as it is (its
//          computations slowed, BubbleTea on what stays free), not taken from the estimates.
//
// Objectives: energy per useful FLOP (training's forwards and backwards plus the prefills'
// 2 N FLOPs a token; minimised exactly over the per-bubble choices by Dinkelbach's iteration on
// the ratio), or a price: the value of the prefill tokens served less the price of the energy.
//
// Energy per iteration: every computation at its clock (the planner's energy model), prefills
// at the training forward's top-clock power (both are dense matrix multiplies), and every other
// GPU-second at the GPU's blocking power (all-reduces included: the same in every policy).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "perseus/geo/bubbletea.hpp"
#include "perseus/geo/pipeline_emulator.hpp"
#include "perseus/geo/workload.hpp"

namespace perseus::geo {

enum class BubbleObjective : std::uint8_t { kEnergyPerFlop, kPrice };
std::string_view to_string(BubbleObjective objective);
// "energy-per-flop" or "price"; InputError otherwise.
BubbleObjective parse_bubble_objective(std::string_view name);

struct FillOrSlowSpec {
  BubbleTeaSpec prefills;
  BubbleObjective objective = BubbleObjective::kEnergyPerFlop;
  double price_per_kwh = 0.10;        // $ per kWh of GPU energy
  double value_per_mtokens = 0.05;    // $ per million prefill tokens served
};

// One policy's iteration, averaged over the request stream's iterations.
struct PolicyOutcome {
  std::string policy;                 // "none", "fill", "slow" or "mixed"
  double iteration_time_s = 0.0;      // replayed with the prefills held and the clocks lowered
  bool training_unchanged = false;    // iteration_time_s is the top-clock run's
  int bubbles_filled = 0;             // bubbles left to prefills (whether or not one came)
  int bubbles_slowed = 0;             // bubbles whose computation runs below the top clock
  double computation_j = 0.0;         // training's computations, per iteration
  double prefill_j = 0.0;             // per iteration
  double idle_j = 0.0;                // blocking power over the rest of the GPU time
  double training_flops = 0.0;        // forwards and backwards, per iteration
  double prefill_flops = 0.0;         // per iteration
  double prefill_tokens_per_s = 0.0;
  int served = 0, declined = 0;       // over the stream
  double utilization = 0.0;           // computation and prefills over GPU time
  double median_ttft_s = 0.0;
  double total_j() const { return computation_j + prefill_j + idle_j; }
  double joules_per_tflop() const { return total_j() / ((training_flops + prefill_flops) * 1e-12); }
  double net_value_per_hour(const FillOrSlowSpec& spec) const;  // $: tokens' value less energy's price
};

// One bubble: the idle time after computation `after` of `gpu` (-1: before its first).
struct BubbleChoice {
  int gpu = 0;
  int after = -1;
  double start_s = 0.0, length_s = 0.0;
  double slow_saving_j = 0.0;   // per iteration, under `slow`
  double fill_extra_j = 0.0;    // prefills' energy over idling, per iteration, under `fill`
  double fill_tokens = 0.0;     // prefill tokens it held, per iteration, under `fill`
  double fill_flops = 0.0;
  bool fill = true;             // the mixed policy's choice
};

struct FillOrSlowResult {
  FillOrSlowSpec spec;
  double prefill_power_w = 0.0;
  double blocking_power_w = 0.0;
  std::vector<PolicyOutcome> outcomes;  // none, fill, slow, mixed
  std::vector<BubbleChoice> bubbles;    // the top-clock run's, GPU by GPU
  int objective_rounds = 0;             // Dinkelbach's rounds (energy per FLOP)
  GeoEmulation mixed_training;          // the mixed policy's training, its clocks lowered
  BubbleTeaResult mixed_prefills;
};

// `training`: a top-clock emulation of `workload` on `network` (emulate()). Throws InputError
// for a bad BubbleTea spec, a negative price or value, or an unknown objective.
FillOrSlowResult fill_or_slow(const Workload& workload, const NetworkSpec& network, const GeoEmulation& training,
                              const FillOrSlowSpec& spec);

}  // namespace perseus::geo
