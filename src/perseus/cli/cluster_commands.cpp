// `perseus cluster allocate`: Gavel's heterogeneity-aware policies (docs/cluster.md). The work is
// in the cluster module; here flags are parsed and allocations printed.
#include <chrono>
#include <iostream>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "perseus/cli/commands.hpp"
#include "perseus/cluster/jobs.hpp"
#include "perseus/cluster/policies.hpp"
#include "perseus/cluster/throughputs.hpp"

namespace perseus::cli {
namespace {

using namespace perseus::cluster;

struct AllocateArgs {
  std::string throughputs;  // empty: Gavel's, bundled
  std::string gpus;         // empty: 36 of each type
  std::string jobs;
  int random = 0;
  std::uint64_t seed = 1;
  std::string policy = "max-min-fairness";
  bool agnostic = false;
  bool json = false;
  bool csv = false;
};

ThroughputMatrix load_matrix(const std::string& path) {
  if (path.empty()) return read_gavel_throughputs(bundled_gavel_throughputs());
  return path.size() > 4 && path.substr(path.size() - 4) == ".csv" ? read_throughput_csv(path) : read_gavel_throughputs(path);
}

void run_allocate(const AllocateArgs& a) {
  const ThroughputMatrix matrix = load_matrix(a.throughputs);
  const std::vector<int> workers =
      a.gpus.empty() ? std::vector<int>(static_cast<std::size_t>(matrix.num_gpu_types()), 36) : parse_gpu_counts(a.gpus, matrix);
  if (a.jobs.empty() == (a.random == 0)) throw InputError("give the jobs: --jobs FILE or --random N");
  const std::vector<Job> jobs = a.jobs.empty() ? random_jobs(matrix, a.random, a.seed) : read_jobs_csv(a.jobs, matrix);
  const PolicySpec spec{parse_policy(a.policy), !a.agnostic};
  const auto start = std::chrono::steady_clock::now();
  const Allocation r = allocate(jobs, matrix, workers, spec);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (a.json) {
    nlohmann::json rows = nlohmann::json::array();
    for (std::size_t m = 0; m < jobs.size(); ++m)
      rows.push_back({{"job", m}, {"type", matrix.job_types[jobs[m].type].name()}, {"share", r.share[m]},
                      {"steps_per_s", r.throughput[m]}});
    std::cout << nlohmann::json{{"policy", to_string(spec.policy)}, {"heterogeneity_aware", spec.heterogeneity_aware},
                                {"gpu_types", matrix.gpu_types}, {"workers", workers}, {"objective", r.objective},
                                {"lp_solves", r.lp_solves}, {"solve_s", seconds}, {"jobs", rows}}
                     .dump(1)
              << "\n";
    return;
  }
  if (a.csv) {
    fmt::print("job,type");
    for (const std::string& g : matrix.gpu_types) fmt::print(",{}", g);
    fmt::print(",steps_per_s\n");
    for (std::size_t m = 0; m < jobs.size(); ++m) {
      fmt::print("{},\"{}\"", m, matrix.job_types[jobs[m].type].name());
      for (double x : r.share[m]) fmt::print(",{:.6f}", x);
      fmt::print(",{:.6g}\n", r.throughput[m]);
    }
    return;
  }
  std::string cluster;
  for (int j = 0; j < matrix.num_gpu_types(); ++j) cluster += fmt::format("{}{} {}", j ? ", " : "", workers[j], matrix.gpu_types[j]);
  fmt::print("{} ({}) for {} jobs on {}: objective {:.6g}, {} LP solve(s) in {:.3f} s\n", to_string(spec.policy),
             spec.heterogeneity_aware ? "heterogeneity-aware" : "heterogeneity-agnostic", jobs.size(), cluster, r.objective,
             r.lp_solves, seconds);
  fmt::print("  {:>4}  {:<36}", "job", "type");
  for (const std::string& g : matrix.gpu_types) fmt::print(" {:>7}", g);
  fmt::print(" {:>10}\n", "steps/s");
  const std::size_t shown = std::min<std::size_t>(jobs.size(), 40);
  for (std::size_t m = 0; m < shown; ++m) {
    fmt::print("  {:>4}  {:<36}", m, matrix.job_types[jobs[m].type].name());
    for (double x : r.share[m]) fmt::print(" {:>7.3f}", x);
    fmt::print(" {:>10.3f}\n", r.throughput[m]);
  }
  if (shown < jobs.size()) fmt::print("  ... {} more (--csv or --json for all)\n", jobs.size() - shown);
}

}  // namespace

void add_cluster_commands(CLI::App& app) {
  CLI::App* cluster = app.add_subcommand("cluster", "Gavel: heterogeneity-aware cluster scheduling");
  cluster->require_subcommand(1);
  static AllocateArgs alloc;
  CLI::App* allocate_cmd = cluster->add_subcommand("allocate", "One allocation: each job's share of time on each GPU type under a policy");
  allocate_cmd->footer(
      "Example: perseus cluster allocate --random 100 --gpus k80:36,p100:36,v100:36 --policy max-min-fairness\n"
      "         perseus cluster allocate --jobs jobs.csv --policy makespan --agnostic --json\n"
      "jobs.csv: a header with job (a type of the matrix, e.g. 'ResNet-50 (batch size 64) x1') and any of weight, "
      "steps, elapsed_s.");
  allocate_cmd->add_option("--throughputs", alloc.throughputs,
                           "Throughput matrix: Gavel's JSON or a CSV job,scale_factor,gpu,steps_per_s (default: Gavel's, bundled)");
  allocate_cmd->add_option("--gpus", alloc.gpus, "GPUs per type, e.g. k80:36,p100:36,v100:36 (default: 36 of each)");
  allocate_cmd->add_option("--jobs", alloc.jobs, "The jobs, a CSV in arrival order")->check(CLI::ExistingFile);
  allocate_cmd->add_option("--random", alloc.random, "Or N jobs drawn as Gavel's simulator draws them")->check(CLI::Range(1, 1000000));
  allocate_cmd->add_option("--seed", alloc.seed, "Seed for --random")->capture_default_str();
  allocate_cmd->add_option("--policy", alloc.policy, "max-min-fairness (las), fifo, makespan, finish-time-fairness (ftf)")
      ->capture_default_str();
  allocate_cmd->add_flag("--agnostic", alloc.agnostic, "Heterogeneity-agnostic: every GPU type alike (the baseline)");
  allocate_cmd->add_flag("--json", alloc.json, "Print JSON");
  allocate_cmd->add_flag("--csv", alloc.csv, "Print one CSV row per job");
  allocate_cmd->callback([] { run_allocate(alloc); });
}

}  // namespace perseus::cli
