// Kareus's multi-pass multi-objective Bayesian optimisation of one partition (the paper's
// Algorithm 1 with its Appendix C settings): random initial samples, then batches chosen by
// four passes over the unevaluated configurations, each ranking them with XGBoost surrogates
// of time and dynamic energy:
//   - total, dynamic and static energy: the hypervolume the predicted point would add to the
//     measured front of that energy (static = the measured static power x the predicted time);
//   - uncertainty: the spread (standard deviation, time's plus energy's, normalised) of a
//     bootstrap ensemble's predictions.
// It stops after max_batches batches, or earlier once the measured front's hypervolume grows
// by less than stop_epsilon (relative, averaged over the last stop_window batches).
//
// Deterministic for a seed (the draws are ours; XGBoost's seeded). Every sample goes to
// `on_sample` as it is measured, and a search given `known` samples counts them among its
// initial ones (resume).
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "perseus/kareus/search.hpp"
#include "perseus/kareus/surrogate.hpp"

namespace perseus::kareus {

enum class SamplePass : std::uint8_t { kInitial, kTotalEnergy, kDynamicEnergy, kStaticEnergy, kUncertainty };
const char* to_string(SamplePass pass);

struct MboOptions {
  // 0: by the partition's compute kernels (Appendix C): 1 kernel 36 / 3 batches of 16;
  // 2-3 kernels 48 / 4 of 16; more 96 / 4 of 32.
  std::size_t initial = 0;
  int max_batches = 0;
  std::size_t batch = 0;
  double total_share = 0.4, dynamic_share = 0.2, static_share = 0.2;  // uncertainty: the rest
  int ensemble = 5;
  double bootstrap_fraction = 0.8;
  TreeParams trees;
  int stop_window = 2;
  double stop_epsilon = 1e-3;
  std::uint64_t seed = 1;
};

struct MboResult {
  PartitionFrontier frontier;
  std::vector<SamplePass> pass;  // per sample of frontier.samples
  int batches = 0;
  bool converged = false;        // stopped by the hypervolume rule, not the batch limit
};

MboResult mbo_search(const Partition& partition, const KnobSpace& space, Evaluator& evaluator, const MboOptions& options,
                     ResumableSearch io = {});

// The features the surrogates see for a configuration: clock, SMs, window start and end, sequential,
// and the window's compute time and HBM bytes at the top clock (from the partition's kernels).
std::vector<float> features(const Partition& partition, const Config& config, const planner::GpuSpec* gpu = nullptr);
inline constexpr std::size_t kFeatureColumns = 7;

}  // namespace perseus::kareus
