// The schedules of the PipeDream / PipeDream-2BW / Megatron-LM line of work beyond what the
// core builds, and the memory footprint of every schedule: how many microbatches' activations
// and how many weight versions a stage keeps.
//
// Update semantics (W(t): weights after t updates, nu: learning rate):
// - GPipe, 1F1B (PipeDream-Flush), interleaved 1F1B, 1F1B with recomputation: synchronous.
//   The pipeline flushes each iteration; W(t+1) = W(t) - nu * grad f(W(t)). One weight version.
// - PipeDream (Narayanan et al., SOSP'19): asynchronous 1F1B, no flush; every backward updates
//   the stage's weights. Weight stashing keeps, for each in-flight microbatch, the version its
//   forward used so its backward uses the same one: stage s keeps S - s versions. Stages see
//   different versions (no vertical sync): stage s computes with W(t - S + s + 1).
// - PipeDream-2BW (Narayanan et al., ICML'21): 1F1B without flush; gradients accumulate over
//   m >= S microbatches and a new version is made every m microbatches; double buffering keeps 2
//   versions: W(t+1) = W(t) - nu * grad f(W(t-1)) (1-stale), the same delay on every stage. With
//   m < S stage s would need 1 + ceil((S-s-1)/m) versions (memory_footprint charges them; the
//   configuration sweep rejects such configurations).
// - Early recomputation (Merak; Korthikanti et al. for the memory): only each layer's input
//   is stashed per in-flight microbatch, plus one microbatch's full activations while recomputing.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "perseus/model/errors.hpp"
#include "perseus/schedule/schedule.hpp"

namespace perseus::planner {

// The kinds, their names and parse_schedule_kind are the schedule module's (ScheduleKind).
std::string_view update_semantics(ScheduleKind kind);
bool flushes(ScheduleKind kind);  // synchronous schedules drain the pipeline every iteration
// The kind make_schedule builds that orders the same instructions: `kind` itself when it
// flushes; 1F1B for the asynchronous schedules, which run the 1F1B order without a flush.
ScheduleKind core_schedule_kind(ScheduleKind kind);

// Closed forms, S stages, M microbatches per iteration (per weight update for 2BW), v chunks.
struct StageFootprint {
  int activation_stashes = 0;   // microbatches (chunk-microbatches when interleaved) stashed at peak
  int full_activations = 0;     // of those, how many hold every activation (the rest only inputs)
  int weight_versions = 1;
};
std::vector<StageFootprint> memory_footprint(ScheduleKind kind, int stages, int microbatches, int chunks = 1);
// The bubble as Megatron-LM counts it, idle time over ideal compute time: (S-1)/M, (S-1)/(v*M)
// interleaved; 0 for no flush (steady state). Above 1 when M < S - 1.
double bubble_fraction(ScheduleKind kind, int stages, int microbatches, int chunks = 1);
// The idle share of a flushing iteration, bubble / (ideal + bubble): always below 1. What tables
// print as "bubble".
double bubble_share(ScheduleKind kind, int stages, int microbatches, int chunks = 1);
constexpr double bubble_share(double bubble_fraction) { return bubble_fraction / (1.0 + bubble_fraction); }
// Iteration time with equal per-stage forward/backward times and no communication:
// (M + (S-1)/v)(t_f + t_b) flushing (GPipe, 1F1B, interleaved; + t_f recomputation),
// M(t_f + t_b) per iteration in the steady state of PipeDream and 2BW.
double iteration_time_closed_form(ScheduleKind kind, int stages, int microbatches, int chunks, double t_forward,
                                  double t_backward);

// PipeDream and 2BW as a steady-state window: W = `window` microbatches' worth of 1F1B without
// flush, cut out of the steady state. Stage s repeats F(k + S-1-s), B(k), k = 0, 1, ...; its
// window is the 2W instructions from the (s+1)-th of that sequence on, so stage 0 begins with a
// backward, having forwarded S microbatches in the previous window, and each later stage begins
// one instruction further on. With equal instruction times those 2W instructions per stage are
// exactly the ones that start in one interval of W periods of the steady state: the window runs
// no fill and no drain. Instructions of other windows are taken as done (before) or not needed
// (after): build its DAG with Dag::steady_state_window. Microbatch labels are window-relative,
// 0 .. W+S-1 (spec.microbatches = W + S counts the labels, not the window); every stage runs W
// forwards and W backwards (each right after its recomputation with `recompute`).
Schedule async_window_schedule(int stages, int window, bool recompute = false);
// Critical path of that window with equal stages, windows run back to back (each begins when the
// previous has ended): W(t_f + t_b) + min(floor((S-1)/2), W) * |t_b - t_f|, the steady state's
// W(t_f + t_b) plus what the cut between windows costs when forwards and backwards differ.
double async_window_time_closed_form(int stages, int window, double t_forward, double t_backward);

// Counted on a schedule: per stage, the most microbatches forwarded and not yet backwarded
// (a backward whose forward is not in the schedule, e.g. in a window, does not count).
std::vector<int> peak_in_flight(const Schedule& schedule);
// Weight versions a stage must keep, simulated on a schedule under the update rule of `kind`:
// PipeDream updates after every backward, 2BW after every `accumulation` backwards; a version
// lives while it is the latest or a stashed microbatch still needs it.
std::vector<int> simulated_weight_versions(ScheduleKind kind, const Schedule& schedule, int accumulation = 1);

}  // namespace perseus::planner
