// Each job type's training throughput on each GPU type, alone and sharing a GPU with another
// (Gavel's throughput matrix T, docs/cluster.md): read from Gavel's own simulation file or from a
// CSV, the input every cluster policy takes.
#pragma once

#include <map>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "perseus/model/errors.hpp"

namespace perseus::cluster {

struct JobType {
  std::string model;      // e.g. "ResNet-50 (batch size 64)"
  int scale_factor = 1;   // GPUs the job uses at once
  std::string name() const;  // "ResNet-50 (batch size 64) x4"
};

struct ThroughputMatrix {
  std::vector<std::string> gpu_types;            // e.g. k80, p100, v100
  std::vector<JobType> job_types;
  std::vector<std::vector<double>> steps_per_s;  // [job type][gpu type]; 0: cannot run there
  // Space sharing: (job type a, job type b, gpu type) -> (a's, b's steps/s), a < b.
  std::map<std::tuple<int, int, int>, std::pair<double, double>> shared;

  int num_gpu_types() const { return static_cast<int>(gpu_types.size()); }
  int num_job_types() const { return static_cast<int>(job_types.size()); }
  double at(int job_type, int gpu_type) const {
    return steps_per_s[static_cast<std::size_t>(job_type)][static_cast<std::size_t>(gpu_type)];
  }
  // Index of a GPU type (case-insensitive) or job type name; InputError listing the known ones.
  int gpu_index(const std::string& name) const;
  int job_index(const std::string& name) const;
};

// Gavel's `simulation_throughputs.json`: {gpu: {"('<model>', scale)": {"null": alone,
// "('<other>', scale)": [mine, other's]}}}. GPU types whose name ends in `_unconsolidated`
// (a multi-GPU job spread over servers) are left out unless `unconsolidated` is set. Throws
// InputError naming the file and the entry for bad JSON, a malformed job key, a negative
// throughput, or a job type with no throughput on any GPU type.
ThroughputMatrix read_gavel_throughputs(const std::string& path, bool unconsolidated = false);

// A CSV with the columns `job,scale_factor,gpu,steps_per_s` (one row per job type and GPU type
// that can run it), read by the project's CSV reader (profile/profile.hpp). Same errors, naming
// the line and column.
ThroughputMatrix read_throughput_csv(const std::string& path);

// data/gavel/simulation_throughputs.json, shipped with perseus (model/bundled_data.hpp).
std::string bundled_gavel_throughputs();

// Checks the matrix: every job type runs somewhere, no negative or non-finite throughput.
void validate(const ThroughputMatrix& matrix);

}  // namespace perseus::cluster
