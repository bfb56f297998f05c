// Searching a partition's knob space. Exhaustive search evaluates every configuration: the
// reference a sample-efficient search (the paper's MBO) is measured against, and affordable on
// the emulated GPU (15,785 configurations of a five-kernel partition in a few milliseconds).
#pragma once

#include <cstddef>
#include <functional>
#include <vector>

#include "perseus/kareus/evaluator.hpp"
#include "perseus/kareus/knob_space.hpp"
#include "perseus/kareus/pareto.hpp"

namespace perseus::kareus {

struct Sample {
  std::size_t index = 0;  // in the knob space
  Config config;
  Measurement measurement;
};

struct PartitionFrontier {
  std::vector<Sample> samples;          // every evaluated configuration, in evaluation order
  std::vector<TradeoffPoint> total;     // time vs total energy; ids index `samples`
  std::vector<TradeoffPoint> dynamic;   // time vs dynamic energy (what composition adds up)
  double hypervolume_total = 0.0;       // of `total` under reference(), the space's worst time and energy x 1.01
  double reference_time_s = 0.0, reference_energy_j = 0.0;
};

// The fronts of a set of samples (reference point: 1.01 x the worst time and total energy).
PartitionFrontier frontier_of(std::vector<Sample> samples);

// Evaluates every configuration of `space`; `progress(done, total)` every 1,024 and at the end.
PartitionFrontier exhaustive_search(const Partition& partition, const KnobSpace& space, Evaluator& evaluator,
                                    const std::function<void(std::size_t, std::size_t)>& progress = {});

// The same, resumable: configurations in `known` (earlier samples, e.g. read back from a
// samples file) are not evaluated again; each new sample goes to `on_sample` as soon as it is
// measured (to be written out), so an evaluator that fails part-way loses nothing measured.
// Its exception propagates. `progress(done, total)` counts known samples as done.
struct ResumableSearch {
  std::vector<Sample> known;
  std::function<void(const Sample&)> on_sample;
  std::function<void(std::size_t, std::size_t)> progress;
};
PartitionFrontier exhaustive_search(const Partition& partition, const KnobSpace& space, Evaluator& evaluator,
                                    ResumableSearch search);

}  // namespace perseus::kareus
