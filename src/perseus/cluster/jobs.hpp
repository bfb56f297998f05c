// The jobs a policy allocates (docs/cluster.md): read from a CSV or drawn as Gavel's simulator
// draws them, and the cluster's GPU counts.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "perseus/cluster/policies.hpp"

namespace perseus::cluster {

// CSV with a header naming `job` (a job type of the matrix, "<model> xN" or its model when
// unique) and optionally `weight`, `steps`, `elapsed_s`, `slo_s` (time left to its deadline) and
// `entity` (the hierarchical policy's: a name in `entities`; when `entities` is empty, each new
// name is added with weight 1 and fairness; without `entities` the column is ignored) and
// `command` (what a live cluster runs, `perseus cluster run`: one per job into `commands`, empty
// where not given); rows in arrival order. InputError naming the line for an unknown job type or
// entity, or a bad number.
std::vector<Job> read_jobs_csv(const std::string& path, const ThroughputMatrix& matrix, std::vector<Entity>* entities = nullptr,
                               std::vector<std::string>* commands = nullptr);

// "product:1:fairness,research:2:fifo": each entity as NAME[:WEIGHT[:fairness|fifo]] (weight 1 and
// fairness when left out). InputError for a repeated or empty name, a weight not > 0 or an
// unknown policy.
std::vector<Entity> parse_entities(const std::string& text);

// The GPU type drawn jobs' durations are measured on: "v100" when the matrix has it (Gavel's),
// else the first type that runs every single-GPU job type (a planned matrix: a100-sxm), else the
// first type.
std::string default_reference_gpu(const ThroughputMatrix& matrix);

// `count` jobs of types drawn uniformly among those of scale factor 1 (or every type with
// `multi_gpu`), each `10^x` minutes long on `reference_gpu` (empty: default_reference_gpu)
// with x ~ U[1.5, 3] with probability 0.8, else U[3, 4] (the dissertation's §5.7.1, after
// Gandiva); steps = that time x its throughput there.
std::vector<Job> random_jobs(const ThroughputMatrix& matrix, int count, std::uint64_t seed,
                             const std::string& reference_gpu = "", bool multi_gpu = false);

// A job of a trace: it arrives, is allocated until its steps are done, and its completion time
// is measured from its arrival.
struct TraceJob {
  int type = 0;
  double arrival_s = 0.0;
  double steps = 0.0;
  double weight = 1.0;
  double slo_s = Job::kNoSlo;  // it should finish within this long of its arrival (cost policies)
  int entity = -1;             // the hierarchical policy's entity; -1: the simulator deals jobs round-robin
};

// Jobs in arrival order, one per call, std::nullopt when the trace ends (a continuous trace does
// not end).
using JobSource = std::function<std::optional<TraceJob>()>;
JobSource list_source(std::vector<TraceJob> jobs);

// Gavel's continuous traces: Poisson arrivals at `jobs_per_hour`, each job drawn as random_jobs
// draws it. `multi_gpu`: 70% of jobs use 1 GPU, 25% 2 or 4, 5% 8 (the dissertation's
// continuous-multiple trace, after Microsoft's published traces); the model is drawn among those
// the matrix has at that scale. InputError for a rate <= 0.
JobSource poisson_source(const ThroughputMatrix& matrix, double jobs_per_hour, std::uint64_t seed, bool multi_gpu = false,
                         const std::string& reference_gpu = "");
// A static trace: `count` such jobs, all arriving at 0.
std::vector<TraceJob> static_trace(const ThroughputMatrix& matrix, int count, std::uint64_t seed, bool multi_gpu = false,
                                   const std::string& reference_gpu = "");

// The dissertation's cost workload (§5.7.3): `count` jobs at 0, each ResNet-50 (batch size 64) or
// A3C with equal odds, lasting 0.5, 1, 2, 4 or 8 days on the reference GPU (a V100 on Gavel's
// matrix), with an SLO of 1.2, 2 or 10 times that. InputError when the matrix lacks either job.
std::vector<TraceJob> cost_trace(const ThroughputMatrix& matrix, int count, std::uint64_t seed, const std::string& reference_gpu = "");

// A trace CSV: `job` and `steps` required, `arrival_s`, `weight`, `slo_s` optional (0, 1, none) and
// `entity` as read_jobs_csv reads it; the columns `perseus cluster simulate` writes besides are
// ignored, so its jobs.csv replays (the first run's jobs, when it holds several). Rows may come
// in any order (sorted by arrival, stably). InputError naming the line otherwise.
std::vector<TraceJob> read_trace_csv(const std::string& path, const ThroughputMatrix& matrix,
                                     std::vector<Entity>* entities = nullptr);

// "k80:36,p100:36,v100:36" -> counts in the matrix's GPU order (types left out: 0). InputError
// for an unknown type or a bad count.
std::vector<int> parse_gpu_counts(const std::string& text, const ThroughputMatrix& matrix);

// "k80:0.9,v100:3.06" ($ per GPU-hour) over default_prices for the types it names. Empty text:
// the defaults, or none (an empty list) when the matrix has a type without one and !required.
// InputError for an unknown type, a price not > 0, or a type left without a price.
std::vector<double> parse_prices(const std::string& text, const ThroughputMatrix& matrix, bool required);

}  // namespace perseus::cluster
