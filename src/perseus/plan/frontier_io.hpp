// The output directory of `perseus optimize`, and reading it back for `perseus select`.
//
// DIR/frontier.csv        time,energy,effective_energy,plan,plan_file,planned_time,fitted_energy,
//                         crawl_step,lower_bound: one row per frontier point, fastest first;
//                         `plan` is the point's record in plans.bin, `plan_file` its
//                         freqs_pipeline file where one was written
// DIR/plans.bin           every plan, compactly (plan_store.hpp)
// DIR/crawl.csv           with OutputOptions::crawl_csv: every crawl step in the reference's
//                         terms, time,energy,cost_change (ten times the frontier's rows at 0.1 ms)
// DIR/summary.json        T_min, T*, energies, savings, inputs, timings, the store's identity
// DIR/freqs_pipeline_%05d.py  the plans existing deployments load, for the points a user
//                         needs (OutputOptions::py); a larger number is a faster plan.
//
// Directories written before the store (plan_file,json_file columns, one freqs_pipeline file
// and one plans/plan_%05d.json per point) still read.
#pragma once

#include <filesystem>
#include <functional>
#include <memory>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "perseus/model/errors.hpp"
#include "perseus/plan/plan_store.hpp"
#include "perseus/solver/crawl.hpp"
#include "perseus/solver/exact_milp.hpp"
#include "perseus/solver/frontier.hpp"
#include "perseus/model/frequencies.hpp"

namespace perseus {

// What the run was given, recorded in summary.json.
struct RunInfo {
  std::string profile;
  ScheduleSpec schedule;
  double solve_seconds = 0.0;
  std::vector<std::string> warnings;
};

// Which frontier points get a freqs_pipeline_%05d.py file besides their record in plans.bin.
enum class PyFiles {
  kNone,
  kSome,  // T_min, T*, the least-energy point and OutputOptions::py_spread more, evenly spread
  kAll,
};
// "none", "some", "all"; InputError naming `what` (the flag or argument) otherwise.
PyFiles parse_py_files(const std::string& text, const std::string& what);

struct OutputOptions {
  bool force = false;          // replace an existing directory
  std::size_t max_plans = 0;   // keep at most this many plans in plans.bin, evenly spread (0: all)
  PyFiles py = PyFiles::kSome;
  std::size_t py_spread = 5;
  bool crawl_csv = false;      // also write crawl.csv
  // Files the run read, which the output must never replace (RunInfo::profile is one too).
  std::vector<std::filesystem::path> inputs;
  std::function<void(std::size_t done, std::size_t total)> progress;
  // More files (name, content) that go into the directory with the rest, in the same rename:
  // a caller's own (`perseus plan`'s profile.csv and plan.json).
  std::vector<std::pair<std::string, std::string>> extra_files;
};

// What plans.bin records for `problem`: its instructions per stage, every clock its options
// use, and a digest of the problem (layout, measurements, p_blocking, unit time) that ties a
// store to the directory it was written with.
PlanStoreLayout plan_store_layout(const EnergyProblem& problem);
// The comment lines of a point's freqs_pipeline file: its measured figures and crawl step.
std::vector<std::string> freqs_pipeline_comments(const EnergyProblem& problem, const FrontierPoint& point);
// A point's plan in record order (stage-major, execution order).
std::vector<int> plan_clocks(const EnergyProblem& problem, const FrontierPoint& point);

// The summary's "certification": points with a proven bound, median and worst gap (energy /
// bound - 1), and the LP solves and seconds the certification took.
nlohmann::json certification_json(const Frontier& frontier);
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
  std::optional<std::size_t> plan;  // record in plans.bin; none when thinned out (--max-plans)
  std::string plan_file;            // freqs_pipeline file relative to the directory, if written
  std::string json_file;            // directories written before the store: the JSON plan
  // A proven lower bound on any plan's energy at time_s (frontier.csv's lower_bound); NaN
  // where the row has none.
  double lower_bound_j = std::numeric_limits<double>::quiet_NaN();
};

// A frontier directory, read: frontier.csv and summary.json at once, plans on demand.
struct FrontierIndex {
  std::filesystem::path directory;
  std::vector<FrontierEntry> entries;  // fastest first
  nlohmann::json summary;
  double p_blocking = 0.0;
  int num_gpus = 0;
  std::shared_ptr<const PlanStore> store;  // null for directories written before the store

  // Whether row `row` has a plan to run (not thinned out).
  bool has_plan(std::size_t row) const;
  std::size_t plans() const;  // rows with a plan
  // Row `row`'s plan: one record of plans.bin (or, in an older directory, its plan file).
  // Throws InputError when the row has none or the plan cannot be read.
  PipelineFrequencies frequencies(std::size_t row) const;
  // How to name row `row`'s plan in messages: "DIR/plans.bin, plan 42" or the file's path.
  std::string plan_name(std::size_t row) const;
};

// Throws InputError naming the file and line of anything malformed, and when plans.bin does
// not belong to frontier.csv (plan count, problem digest) or is truncated.
FrontierIndex read_frontier_directory(const std::filesystem::path& dir);

// Row `row`'s plan as a freqs_pipeline file (with its measured figures as comments), and as
// perseus.plan/1 JSON (instruction, microbatch, chunk and clock per instruction; the
// per-instruction time and energy are the profile's). InputError when the row has no plan.
std::string export_freqs_pipeline(const FrontierIndex& index, std::size_t row);
// A plan that is not in the store (select --exact's) as a freqs_pipeline file: its measured
// figures and `note` as comments.
std::string export_freqs_pipeline(const EnergyProblem& problem, const OptionChoice& choice, const std::string& note);
nlohmann::json export_plan_json(const FrontierIndex& index, std::size_t row);

// The plan for T_opt = min(T*, deadline); nullopt when T_min is slower than the deadline.
std::optional<std::size_t> select_entry(const FrontierIndex& index, double deadline_s);
// The same, where no plan is an error: InputError "DIR: no plan finishes within D s: the
// fastest takes T s".
std::size_t require_entry(const FrontierIndex& index, double deadline_s);

// The problem a frontier directory's plans are for, rebuilt from its summary (profile,
// schedule, unit time, p_blocking) with the measured options alone, no fits; `profile`
// replaces the summary's path where not empty (it is as the solve was given it, relative to
// where it ran). InputError when the settings or the profile cannot be read, or the problem is
// not the one plans.bin's digest names (another profile, or the profile changed since).
EnergyProblem frontier_problem(const FrontierIndex& index, const std::filesystem::path& profile = {});
// Row `row`'s plan improved by the exact MILP (solver/exact_milp.hpp) at `deadline_s`, within
// `seconds`, on frontier_problem(index, profile): `perseus select --exact`. frontier_problem's
// errors; SolveError when the MILP finds no plan (the row's misses the deadline).
struct StoredExactSolution {
  EnergyProblem problem;
  ExactSolution solution;
};
StoredExactSolution solve_exact_from(const FrontierIndex& index, std::size_t row, double deadline_s, double seconds,
                                     const std::filesystem::path& profile = {});
// A plan's clocks as an option per DAG node. InputError naming the stage and instruction
// where the plan and the problem disagree (shape, or a clock the profile did not measure).
OptionChoice choice_for_frequencies(const EnergyProblem& problem, const PipelineFrequencies& frequencies);

}  // namespace perseus
