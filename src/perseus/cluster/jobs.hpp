// The jobs a policy allocates (docs/cluster.md): read from a CSV or drawn as Gavel's simulator
// draws them, and the cluster's GPU counts.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "perseus/cluster/policies.hpp"

namespace perseus::cluster {

// CSV with a header naming `job` (a job type of the matrix, "<model> xN" or its model when
// unique) and optionally `weight`, `steps`, `elapsed_s`; rows in arrival order. InputError naming
// the line for an unknown job type or a bad number.
std::vector<Job> read_jobs_csv(const std::string& path, const ThroughputMatrix& matrix);

// `count` jobs of types drawn uniformly among those of scale factor 1 (or every type with
// `multi_gpu`), each `10^x` minutes long on `reference_gpu` with x ~ U[1.5, 3] with probability
// 0.8, else U[3, 4] (the dissertation's §5.7.1, after Gandiva); steps = that time x its
// throughput there.
std::vector<Job> random_jobs(const ThroughputMatrix& matrix, int count, std::uint64_t seed,
                             const std::string& reference_gpu = "v100", bool multi_gpu = false);

// "k80:36,p100:36,v100:36" -> counts in the matrix's GPU order (types left out: 0). InputError
// for an unknown type or a bad count.
std::vector<int> parse_gpu_counts(const std::string& text, const ThroughputMatrix& matrix);

}  // namespace perseus::cluster
