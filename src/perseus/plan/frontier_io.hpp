// The output directory of `perseus optimize`, and reading it back for `perseus select`.
//
// DIR/frontier.csv        time,energy,effective_energy,plan_file,json_file,planned_time,fitted_energy,
//                         crawl_step,lower_bound
// DIR/crawl.csv           every crawl step in the reference's terms: time,energy,cost_change
// DIR/summary.json        T_min, T*, energies, savings, inputs, timings
// DIR/freqs_pipeline_%05d.py and DIR/plans/plan_%05d.json, one per frontier point;
//                         a larger number is a faster plan.
#pragma once

#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "perseus/model/errors.hpp"
#include "perseus/solver/crawl.hpp"
#include "perseus/solver/frontier.hpp"

namespace perseus {

// What the run was given, recorded in summary.json.
struct RunInfo {
  std::string profile;
  ScheduleSpec schedule;
  double solve_seconds = 0.0;
  std::vector<std::string> warnings;
};

struct OutputOptions {
  bool force = false;          // replace an existing directory
  std::size_t max_plans = 0;   // write at most this many plan files, evenly spread (0: all)
  std::function<void(std::size_t done, std::size_t total)> progress;
};

nlohmann::json make_summary(const EnergyProblem& problem, const CrawlResult& crawl,
                            const Frontier& frontier, const RunInfo& info);

// Writes everything into a fresh sibling directory, then renames it into place: a failure
// leaves no half-written output. Throws InputError if `dir` exists and !force.
void write_frontier_directory(const std::filesystem::path& dir, const EnergyProblem& problem,
                              const CrawlResult& crawl, const Frontier& frontier,
                              const RunInfo& info, const OutputOptions& options);

// One row of frontier.csv.
struct FrontierEntry {
  double time_s = 0.0;
  double energy_j = 0.0;
  double effective_energy_j = 0.0;
  std::string plan_file;  // relative to the directory; empty when thinned out
  std::string json_file;
};

struct FrontierIndex {
  std::filesystem::path directory;
  std::vector<FrontierEntry> entries;  // fastest first
  nlohmann::json summary;
  double p_blocking = 0.0;
  int num_gpus = 0;
};

// Throws InputError naming the file and line of anything malformed.
FrontierIndex read_frontier_directory(const std::filesystem::path& dir);

// The plan for T_opt = min(T*, deadline); nullopt when T_min is slower than the deadline.
std::optional<std::size_t> select_entry(const FrontierIndex& index, double deadline_s);

}  // namespace perseus
