// Small throughput matrices, and emulated clusters on them, for the cluster tests.
#pragma once

#include <string>
#include <vector>

#include "perseus/cluster/emulated_backend.hpp"
#include "perseus/cluster/throughputs.hpp"

namespace perseus::cluster::testing {

// A matrix from rows of steps/s, one column per GPU type, job type m named "job<m>" at scale
// `scales[m]` (1 when not given).
inline ThroughputMatrix matrix_of(const std::vector<std::string>& gpus, const std::vector<std::vector<double>>& rows,
                                  const std::vector<int>& scales = {}) {
  ThroughputMatrix t;
  t.gpu_types = gpus;
  for (std::size_t m = 0; m < rows.size(); ++m)
    t.job_types.push_back({"job" + std::to_string(m), scales.empty() ? 1 : scales[m]});
  t.steps_per_s = rows;
  return t;
}

// The same with energy figures: points[m][j] is job type m's operating points on GPU type j,
// fastest first (empty where it cannot run); steps_per_s is each cell's first.
inline ThroughputMatrix matrix_with_energy(const std::vector<std::string>& gpus,
                                           const std::vector<std::vector<std::vector<OperatingPoint>>>& points,
                                           const std::vector<int>& scales = {}) {
  std::vector<std::vector<double>> rows;
  for (const auto& row : points) {
    rows.emplace_back();
    for (const auto& cell : row) rows.back().push_back(cell.empty() ? 0.0 : cell.front().steps_per_s);
  }
  ThroughputMatrix t = matrix_of(gpus, rows, scales);
  t.operating_points = points;
  return t;
}

// An emulated cluster whose truth is `truth`: `workers[j]` GPUs of type j, `per_server` to a server.
inline EmulatedCluster cluster_of(ThroughputMatrix truth, std::vector<int> workers, int per_server) {
  EmulatedCluster c;
  c.truth = std::move(truth);
  c.workers = std::move(workers);
  c.gpus_per_server = per_server;
  return c;
}

}  // namespace perseus::cluster::testing
