// Small throughput matrices for the cluster tests.
#pragma once

#include <string>
#include <vector>

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

}  // namespace perseus::cluster::testing
