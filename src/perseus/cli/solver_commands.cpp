// `perseus optimize` and `perseus select`: the frontier and its plans, and the plan for a deadline.
#include <cstdio>
#include <iostream>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "perseus/cli/commands.hpp"
#include "perseus/cli/progress.hpp"
#include "perseus/cost/operation_options.hpp"
#include "perseus/model/errors.hpp"
#include "perseus/plan/frontier_io.hpp"
#include "perseus/plan/plan_files.hpp"
#include "perseus/profile/profile.hpp"
#include "perseus/solver/solve.hpp"

namespace perseus::cli {
namespace {

struct OptimizeArgs {
  std::string profile;
  std::string schedule = "1f1b";
  int stages = 0;
  int microbatches = 0;
  int chunks = 1;
  double p_blocking = 0.0;
  double unit_time = kDefaultUnitTime;
  std::string out;
  std::string coefficients;
  bool force = false;
  bool no_refine = false;
  bool data_load = false;
  std::size_t max_plans = 0;
  bool json = false;
  bool quiet = false;
};

void run_optimize(const OptimizeArgs& args) {
  const Profile profile = Profile::read_csv(args.profile);
  SolveRequest request;
  request.schedule = {parse_schedule_kind(args.schedule), args.stages, args.microbatches, args.chunks, args.data_load};
  request.options = {args.unit_time, args.p_blocking, {}};
  if (!args.coefficients.empty()) request.options.overrides = read_cost_overrides(args.coefficients);
  request.frontier.refine = !args.no_refine;
  if (!args.quiet) request.progress = solve_progress_printer();
  const Solution solution = solve(profile, request);
  const EnergyProblem& problem = solution.problem;
  const CrawlResult& crawl = solution.crawl;
  const Frontier& frontier = solution.frontier;
  const ScheduleSpec& spec = solution.schedule;
  const double solve_seconds = solution.solve_seconds();
  const std::vector<Warning>& warnings = solution.warnings;
  for (const Warning& w : warnings) fmt::print(stderr, "perseus: warning: {}\n", w.message);

  RunInfo info{args.profile, spec, solve_seconds, {}};
  for (const Warning& w : warnings) info.warnings.push_back(w.message);
  OutputOptions output{args.force, args.max_plans, nullptr};
  if (!args.quiet) {
    output.progress = [](std::size_t done, std::size_t total) {
      fmt::print(stderr, "perseus: wrote {}/{} plans\n", done, total);
    };
  }
  write_frontier_directory(args.out, problem, crawl, frontier, info, output);

  const nlohmann::json summary = make_summary(problem, crawl, frontier, info);
  if (args.json) {
    std::cout << summary.dump(2) << "\n";
    return;
  }
  fmt::print("Frontier: {} Pareto-optimal plans from {} candidates ({} crawl steps, stopped: {})\n",
             frontier.points.size(), frontier.candidates, crawl.steps.size(), crawl.stop_reason);
  fmt::print("T_min  = {:.4f} s   energy {:.1f} J\n", frontier.t_min_point().measured.time_s,
             frontier.t_min_point().measured.energy_j);
  fmt::print("T*     = {:.4f} s   energy {:.1f} J  (least effective energy: the plan while waiting for a straggler)\n",
             frontier.t_star_point().measured.time_s, frontier.t_star_point().measured.energy_j);
  fmt::print("Least energy per iteration: {:.4f} s   energy {:.1f} J\n", frontier.least_energy_point().measured.time_s,
             frontier.least_energy_point().measured.energy_j);
  fmt::print("All-max: {:.4f} s   energy {:.1f} J  -> savings at T_min: {:.1f} J ({:.2f}%)\n",
             frontier.all_max.time_s, frontier.all_max.energy_j, summary["savings_at_t_min_j"].get<double>(),
             100.0 * summary["savings_at_t_min_fraction"].get<double>());
  if (frontier.t_min_lower_bound_j) {
    fmt::print("No plan as fast as T_min uses less than {:.1f} J (LP bound): the T_min plan is within {:.3f}% of it\n",
               *frontier.t_min_lower_bound_j,
               100.0 * (frontier.t_min_point().measured.energy_j / *frontier.t_min_lower_bound_j - 1.0));
  }
  fmt::print("Solved in {:.3f} s; wrote {}\n", solve_seconds, args.out);
}

struct SelectArgs {
  std::string frontier;
  double deadline = 0.0;
  double straggler_time = 0.0;
  bool json = false;
};

void run_select(const SelectArgs& args) {
  const FrontierIndex index = read_frontier_directory(args.frontier);
  const double requested = args.deadline > 0 ? args.deadline : args.straggler_time;
  const auto row = select_entry(index, requested);
  if (!row) {
    throw InputError(fmt::format("no plan finishes within {:.6f} s: the fastest takes {:.6f} s", requested,
                                 index.entries.front().time_s));
  }
  const FrontierEntry& entry = index.entries[*row];
  const double t_star = index.entries.back().time_s;
  const double t_opt = std::min(t_star, requested);
  const double iteration = std::max(requested, entry.time_s);
  const double energy = entry.energy_j + index.p_blocking * index.num_gpus * (iteration - entry.time_s);
  const auto plan_path = (index.directory / entry.plan_file).string();
  if (args.json) {
    nlohmann::json out = {{"requested_s", requested}, {"t_star_s", t_star},     {"t_opt_s", t_opt},
                          {"plan_time_s", entry.time_s}, {"plan_energy_j", entry.energy_j},
                          {"energy_at_requested_j", energy}, {"plan_file", plan_path},
                          {"json_file", (index.directory / entry.json_file).string()}};
    std::cout << out.dump(2) << "\n";
    return;
  }
  fmt::print("T_opt = min(T* = {:.4f} s, {:.4f} s) = {:.4f} s\n", t_star, requested, t_opt);
  fmt::print("plan: {} ({:.4f} s, {:.1f} J; {:.1f} J over a {:.4f} s iteration)\n", plan_path, entry.time_s,
             entry.energy_j, energy, iteration);
}

}  // namespace

void add_solver_commands(CLI::App& app) {
  static OptimizeArgs optimize;
  CLI::App* cmd = app.add_subcommand("optimize", "Compute the iteration time-energy frontier and its frequency plans");
  cmd->add_option("--profile", optimize.profile, "Profile CSV (stage,instruction,frequency,time,energy)")
      ->required()
      ->check(CLI::ExistingFile);
  cmd->add_option("--schedule", optimize.schedule, "1f1b, gpipe, interleaved-1f1b or 1f1b-recompute")
      ->capture_default_str();
  cmd->add_option("--stages", optimize.stages, "Pipeline stages S (default: the profile's)");
  cmd->add_option("--microbatches", optimize.microbatches, "Microbatches M per iteration")->required();
  cmd->add_option("--chunks", optimize.chunks, "Model chunks per device v (interleaved-1f1b)")->capture_default_str();
  cmd->add_option("--p-blocking", optimize.p_blocking, "GPU power while blocked, W (A100 83.64, A40 70.38)")
      ->required();
  cmd->add_option("--unit-time", optimize.unit_time,
                  "Time quantum tau, s (the reference ran A100 profiles at 1e-3, A40 at 1e-4)")
      ->capture_default_str();
  cmd->add_option("--out", optimize.out, "Output directory (must not exist unless --force)")->required();
  cmd->add_flag("--force", optimize.force, "Replace an existing output directory");
  cmd->add_option("--coefficients", optimize.coefficients,
                  "CSV of fit coefficients (instruction,stage,...,a,b,c) that replace the fits")
      ->check(CLI::ExistingFile);
  cmd->add_option("--max-plans", optimize.max_plans, "Write at most N plan files, evenly spread (0: all)");
  cmd->add_flag("--no-refine", optimize.no_refine, "Keep the crawl's plans as they are (no slack reclaiming)");
  cmd->add_flag("--data-load", optimize.data_load, "Add a data-loading operation (profile 'load' rows) per microbatch");
  cmd->add_flag("--json", optimize.json, "Print the summary as JSON");
  cmd->add_flag("-q,--quiet", optimize.quiet, "No progress messages");
  cmd->callback([] { run_optimize(optimize); });

  static SelectArgs select;
  CLI::App* sel = app.add_subcommand("select", "Pick the plan for a deadline or a straggler: T_opt = min(T*, T')");
  sel->add_option("--frontier", select.frontier, "A directory written by perseus optimize")->required();
  auto* deadline = sel->add_option("--deadline", select.deadline, "Iteration time allowed, s")->check(CLI::PositiveNumber);
  auto* straggler = sel->add_option("--straggler-time", select.straggler_time, "The straggler's iteration time T', s")
                        ->check(CLI::PositiveNumber);
  deadline->excludes(straggler);
  sel->add_flag("--json", select.json, "Print the choice as JSON");
  sel->callback([=] {
    if (!deadline->count() && !straggler->count()) throw CLI::ValidationError("give --deadline or --straggler-time");
    run_select(select);
  });
}

}  // namespace perseus::cli
