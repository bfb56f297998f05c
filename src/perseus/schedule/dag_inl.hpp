#pragma once
// Template definitions for dag.hpp.
#include <algorithm>

namespace perseus {

template <typename T>
T critical_path_length(const Dag& dag, std::span<const T> durations, std::vector<T>* earliest_start) {
  std::vector<T> local;
  std::vector<T>& start = earliest_start ? *earliest_start : local;
  start.assign(dag.num_nodes(), T{});
  T length{};
  for (Dag::NodeId n : dag.topological_order()) {
    const T finish = start[n] + durations[n];
    length = std::max(length, finish);
    for (Dag::NodeId s : dag.successors(n)) start[s] = std::max(start[s], finish);
  }
  return length;
}

}  // namespace perseus
