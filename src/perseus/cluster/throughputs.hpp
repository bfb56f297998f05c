// Each job type's training throughput on each GPU type, alone and sharing a GPU with another
// (Gavel's throughput matrix T, docs/cluster.md): read from Gavel's own simulation file or from a
// CSV, the input every cluster policy takes.
#pragma once

#include <map>
#include <optional>
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

// One way to run a job type on a GPU type: a point of its time-energy frontier (Perseus: the
// clocks of every computation), as the cluster sees it.
struct OperatingPoint {
  double steps_per_s = 0.0;
  double joules_per_step = 0.0;  // every GPU of the job together
};

struct ThroughputMatrix {
  std::vector<std::string> gpu_types;            // e.g. k80, p100, v100
  std::vector<JobType> job_types;
  std::vector<std::vector<double>> steps_per_s;  // [job type][gpu type]; 0: cannot run there
  // Space sharing: (job type a, job type b, gpu type) -> (a's, b's steps/s), a < b.
  std::map<std::tuple<int, int, int>, std::pair<double, double>> shared;
  // Energy, when known: [job type][gpu type] the operating points from the fastest (whose
  // steps/s is steps_per_s's) to the least energy per step (T*), fastest first; empty where
  // the job cannot run. The whole vector is empty for a matrix without energy figures.
  std::vector<std::vector<std::vector<OperatingPoint>>> operating_points;

  int num_gpu_types() const { return static_cast<int>(gpu_types.size()); }
  int num_job_types() const { return static_cast<int>(job_types.size()); }
  double at(int job_type, int gpu_type) const {
    return steps_per_s[static_cast<std::size_t>(job_type)][static_cast<std::size_t>(gpu_type)];
  }
  bool has_energy() const { return !operating_points.empty(); }
  bool has_space_sharing() const { return !shared.empty(); }
  // Job types a's and b's steps/s while they share a GPU of type `gpu` (a may equal b), in that
  // order; nullopt where the pair was not measured there.
  std::optional<std::pair<double, double>> shared_speeds(int a, int b, int gpu) const;
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
// that can run it), read by the project's CSV reader (profile/profile.hpp). With a
// `joules_per_step` column (every row then has it), a job type may have several rows on one GPU
// type: its operating points (the fastest gives steps_per_s). Same errors, naming the line and
// column; a row repeated without energy figures is an error.
ThroughputMatrix read_throughput_csv(const std::string& path);
// The matrix in that format (with joules_per_step when it has energy figures); space sharing is
// not written. read_throughput_csv(throughput_csv(m)) gives m back.
std::string throughput_csv(const ThroughputMatrix& matrix);

// data/gavel/simulation_throughputs.json, shipped with perseus (model/bundled_data.hpp).
std::string bundled_gavel_throughputs();
// data/cluster/planned_throughputs.csv: `perseus cluster throughputs` with its defaults
// (planned_matrix.hpp), shipped so that the energy stage works without planning first.
std::string bundled_planned_throughputs();

// Checks the matrix: every job type runs somewhere, no negative or non-finite throughput; energy
// figures, when present, on exactly the cells that run, > 0, fastest first with the first at
// steps_per_s.
void validate(const ThroughputMatrix& matrix);

}  // namespace perseus::cluster
