// The launch-timing dynamic program of the Kareus paper's appendix: the time-energy front of
// every way to run two independent sequences, a partition's compute kernels O_0..O_{n-1} and its
// collectives C_0..C_{m-1}, where each operation either runs alone or one of them overlaps a
// contiguous run of the other sequence:
//
//   P(i, j) = front of { O_i alone + P(i+1, j),  C_j alone + P(i, j+1),
//                        C_j beside O_i..O_{i+k} + P(i+k+1, j+1),
//                        O_i beside C_j..C_{j+k} (k >= 1, the collectives fused) + P(i+1, j+k+1) }
//
// at one clock and SM allocation, each segment's time and energy from an evaluator (the segment
// run as a partition of its own). With one (fused) collective, which is what layer_partitions
// produces, its overlap patterns are exactly the launch windows of KnobSpace plus the collective
// alone at any place; a segment sum equals the whole partition's evaluation when the evaluator
// is additive over segments, as the emulated GPU is (a test checks both).
//
// Complexity: O(n m (n + m)) segment evaluations, each front pruned to its Pareto points.
#pragma once

#include <span>
#include <string>
#include <vector>

#include "perseus/kareus/evaluator.hpp"
#include "perseus/kareus/pareto.hpp"

namespace perseus::kareus {

// One step of a schedule: compute kernels [first_kernel, last_kernel] (or none: -1) beside
// collectives [first_collective, last_collective] (or none).
struct Segment {
  int first_kernel = -1, last_kernel = -1;
  int first_collective = -1, last_collective = -1;
  bool operator==(const Segment&) const = default;
};

struct TimingSchedule {
  double time_s = 0.0;
  double energy_j = 0.0;  // total (dynamic + static)
  std::vector<Segment> segments;  // in execution order
};

// The front at `clock_mhz` with `comm_sms` SMs for the collectives. InputError for no
// collectives and the evaluator's errors.
std::vector<TimingSchedule> launch_timing_front(const Partition& partition, std::span<const Collective> collectives,
                                                int clock_mhz, int comm_sms, Evaluator& evaluator);

// Every schedule of the recurrence (unpruned), for counting patterns and for tests. Exponential
// in the sequences' lengths: small inputs only.
std::vector<std::vector<Segment>> launch_timing_patterns(int kernels, int collectives);

}  // namespace perseus::kareus
