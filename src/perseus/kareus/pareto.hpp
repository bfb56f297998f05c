// Time-energy Pareto fronts and their 2-D hypervolume, for Kareus's partition searches.
#pragma once

#include <cstddef>
#include <span>
#include <vector>

namespace perseus::kareus {

struct TradeoffPoint {
  double time_s = 0.0;
  double energy_j = 0.0;
  std::size_t id = 0;  // the caller's (a configuration's index)
};

// The points no other point beats in both time and energy (one of equal figures kept, the
// lowest id), by time ascending (energy then descending). O(n log n).
std::vector<TradeoffPoint> pareto_front(std::vector<TradeoffPoint> points);

// The area dominated by `points` inside the box below the reference (ref_time, ref_energy):
// exact, O(n log n). Points at or beyond the reference add nothing.
double hypervolume(std::span<const TradeoffPoint> points, double ref_time, double ref_energy);

}  // namespace perseus::kareus
