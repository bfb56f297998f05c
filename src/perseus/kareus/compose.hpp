// From partition fronts to what perseus's solver takes (Kareus §4.4): each stage's forward and
// backward microbatch options, composed by the paper's Algorithm 2, as a profile whose knob
// column names every partition's schedule; then the iteration frontier of each method the
// paper compares, on one evaluator.
#pragma once

#include <cstddef>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "perseus/kareus/evaluator.hpp"
#include "perseus/kareus/search.hpp"
#include "perseus/kareus/workload.hpp"
#include "perseus/profile/profile.hpp"
#include "perseus/solver/solve.hpp"

namespace perseus::kareus {

// What a method may run, per partition and clock (the paper's baselines, §6.1):
enum class Method : std::uint8_t {
  kMegatron,          // sequential, the top clock only
  kMegatronPerseus,   // sequential, any clock (Perseus chooses per microbatch)
  kNanobatchPerseus,  // one fixed overlap: launched with the first kernel beside all of them, NCCL's SMs; any clock
  kKareus,            // every schedule, any clock
};
std::string_view to_string(Method method);  // "Megatron-LM", "Megatron-LM + Perseus", ...
inline constexpr Method kMethods[] = {Method::kMegatron, Method::kMegatronPerseus, Method::kNanobatchPerseus,
                                      Method::kKareus};

// One option of a stage's forward (or backward) microbatch: one clock for all its partitions
// (a switch costs milliseconds), one schedule per partition type (`samples[k]` indexes
// partition k's samples; SIZE_MAX for partitions of the other direction).
struct MicrobatchOption {
  int clock_mhz = 0;
  std::vector<std::size_t> samples;
  double time_s = 0.0;
  double energy_j = 0.0;  // one GPU's, static included
};

// Microbatch options closer in time than this are one to the solver (its finest unit time is
// 1 us): the cheaper stands for both.
inline constexpr double kSameOptionTime_s = 2e-6;

// Algorithm 2 for one stage and direction: at each clock, the Minkowski sum of the partitions'
// fronts at that clock (each scaled by how often a microbatch runs it), plus the stage's work
// outside partitions (the first stage's embedding, the last stage's LM head, run sequentially
// on `evaluator`), pruned to its Pareto front; then the front of all clocks. `frontiers[k]` are
// partition k's samples (exhaustive or searched). O(clocks x product of front sizes), pruned
// after each partition.
std::vector<MicrobatchOption> microbatch_options(const Workload& workload, std::span<const Partition> partitions,
                                                 std::span<const PartitionFrontier> frontiers, int stage, bool forward,
                                                 Method method, Evaluator& evaluator);

// "10s0-4+12s1-1": each partition's schedule in order (SMs, "s", window; "seq" when sequential).
std::string schedule_label(const MicrobatchOption& option, std::span<const PartitionFrontier> frontiers, bool forward,
                           std::span<const Partition> partitions);

// Every stage's forward and backward options as a profile (frequency = the clock; the knob
// column `schedule` = schedule_label), for perseus's solver and `perseus optimize`.
Profile method_profile(const Workload& workload, std::span<const Partition> partitions,
                       std::span<const PartitionFrontier> frontiers, Method method, Evaluator& evaluator);
// How perseus's solver takes a method's profile: 1F1B over the workload's PP stages and
// microbatches, the GPU's p_blocking, and a unit time that resolves every operation's options
// (a twentieth of the narrowest spread between an operation's fastest and slowest option,
// within 1 us..1 ms).
SolveRequest iteration_request(const Workload& workload, const Profile& profile);

// The same as CSV (docs/formats.md, with the extra knob column).
std::string profile_csv(const Profile& profile);

struct MethodResult {
  Method method;
  Solution solution;                // the iteration frontier (1F1B, the workload's PP x microbatches)
  double fastest_time_s = 0.0;      // the leftmost point
  double fastest_energy_j = 0.0;
  double least_energy_j = 0.0;      // over the frontier
};

// The paper's comparison (its Tables 4 and 5) on one evaluator: each method's iteration
// frontier, and the reductions below. p_blocking is the GPU's (catalogue).
struct Comparison {
  std::vector<MethodResult> methods;  // in kMethods order
  // Against Megatron-LM (max-throughput: each method's fastest point), per method.
  std::vector<double> time_reduction, energy_reduction;
  // Against Megatron-LM + Perseus: the least energy within its fastest time, and the least time
  // within its least energy (NaN when the method has no point within).
  std::vector<double> iso_time_energy_reduction, iso_energy_time_reduction;
};
Comparison compare(const Workload& workload, std::span<const Partition> partitions,
                   std::span<const PartitionFrontier> frontiers, Evaluator& evaluator,
                   const std::function<void(const std::string&)>& progress = {});

}  // namespace perseus::kareus
