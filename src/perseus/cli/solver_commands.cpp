// `perseus optimize` and `perseus select`: the frontier and its plans, and the plan for a deadline.
#include <chrono>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <iostream>
#include <optional>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "perseus/cli/commands.hpp"
#include "perseus/cli/progress.hpp"
#include "perseus/cost/operation_options.hpp"
#include "perseus/model/errors.hpp"
#include "perseus/model/limits.hpp"
#include "perseus/plan/frontier_io.hpp"
#include "perseus/plan/output_files.hpp"
#include "perseus/plan/plan_files.hpp"
#include "perseus/profile/profile.hpp"
#include "perseus/solver/exact_milp.hpp"
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
  bool no_hull_crawl = false;
  bool no_lp_sweep = false;
  bool no_certify = false;
  double certify = 0.0;
  double exact = 0.0;
  bool data_load = false;
  std::size_t max_plans = 0;
  std::string py = "some";
  bool timings = false;
  bool crawl_csv = false;
  bool json = false;
  bool quiet = false;
};

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

// CPU seconds this process has used so far: before a command's own timer starts, what its
// start cost (the dynamic loader, static initialisation, parsing the command line), which a
// timer started in main cannot see. The process's exit stays outside every figure.
double process_cpu_seconds() {
  timespec now{};
  if (::clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &now) != 0) return 0.0;
  return static_cast<double>(now.tv_sec) + 1e-9 * static_cast<double>(now.tv_nsec);
}

void run_optimize(const OptimizeArgs& args) {
  const double process_start_seconds = process_cpu_seconds();
  const auto started = Clock::now();
  const PyFiles py = parse_py_files(args.py, "--py");
  check_output_directory(args.out, args.force, {args.profile, args.coefficients});  // before the solve, not after
  const Profile profile = Profile::read_csv(args.profile);
  const double read_seconds = seconds_since(started);
  SolveRequest request;
  request.schedule = {parse_schedule_kind(args.schedule), args.stages, args.microbatches, args.chunks, args.data_load};
  request.options = {args.unit_time, args.p_blocking, {}};
  if (!args.coefficients.empty()) request.options.overrides = read_cost_overrides(args.coefficients);
  request.frontier.refine = !args.no_refine;
  request.frontier.certify_for(args.certify);
  request.frontier.exact_iso_seconds = args.exact;
  if (args.no_hull_crawl) request.frontier.bound_crawl_node_steps = 0.0;
  if (args.no_lp_sweep) request.frontier.certify_sweep_share = 0.0;
  if (args.no_certify) request.frontier.certify = false;
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
  OutputOptions output;
  output.force = args.force;
  output.max_plans = args.max_plans;
  output.py = py;
  output.crawl_csv = args.crawl_csv;
  output.inputs = {args.profile, args.coefficients};
  if (!args.quiet) {
    output.progress = [](std::size_t done, std::size_t total) {
      fmt::print(stderr, "perseus: wrote {}/{} plans\n", done, total);
    };
  }
  const auto output_started = Clock::now();
  write_frontier_directory(args.out, problem, crawl, frontier, info, output);
  const double output_seconds = seconds_since(output_started);

  // Where the command's time went: "process_start" is the CPU time spent before the command
  // began (process_cpu_seconds), the rest wall time from there on; the process's exit is
  // outside them all. The frontier is mostly built beside the crawl, on a second thread:
  // "frontier" is what is left after the crawl. "total" is from the command's start; not part
  // of the sum: "certification" (the bounds and the plans that close the gap to them, the last
  // part of "frontier") and "lp_solves" (LP relaxation solves on either thread, within the
  // crawl's and the frontier's time).
  const std::vector<std::pair<std::string, double>> timings = {
      {"process_start", process_start_seconds},
      {"profile_read", read_seconds},
      {"problem", solution.problem_seconds},
      {"crawl", solution.crawl_seconds},
      {"frontier", solution.frontier_seconds},
      {"output", output_seconds},
      {"total", seconds_since(started)},
      {"certification", frontier.certify_seconds},
      {"lp_solves", frontier.lp_seconds}};
  nlohmann::json summary = make_summary(problem, crawl, frontier, info);
  if (args.json) {
    if (args.timings) {
      for (const auto& [name, seconds] : timings) summary["timings"][name + "_s"] = seconds;
    }
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
  if (const nlohmann::json& iso = summary["iso_time"]; !iso.is_null()) {
    fmt::print("At AllMax's time (iso-time): the plan of {:.4f} s, {:.1f} J blocking until {:.4f} s -> savings {:.1f} J ({:.2f}%)\n",
               iso["plan_time_s"].get<double>(), iso["energy_j"].get<double>(), iso["deadline_s"].get<double>(),
               iso["savings_j"].get<double>(), 100.0 * iso["savings_fraction"].get<double>());
  }
  if (frontier.t_min_lower_bound_j) {
    fmt::print("No plan as fast as T_min uses less than {:.1f} J ({} bound): the T_min plan is within {:.3f}% of it\n",
               *frontier.t_min_lower_bound_j, frontier.exact_lower_bound_j || frontier.certify_exact_raised > 0 ? "LP or exact MILP" : "LP",
               100.0 * (frontier.t_min_point().measured.energy_j / *frontier.t_min_lower_bound_j - 1.0));
  }
  if (const Certificate c = certificate(frontier); c.bounded_points > 0 && !frontier.certified) {
    fmt::print("Not certified (--no-certify): {} of {} plans have a lower bound from the LP solves made anyway; median gap "
               "{:.3f}%, worst {:.3f}%\n",
               c.bounded_points, frontier.points.size(), 100.0 * c.median_gap, 100.0 * c.worst_gap);
  } else if (c.bounded_points > 0) {
    fmt::print("Certified: {} of {} plans have a proven lower bound; median gap {:.3f}%, worst {:.3f}% ({} LP solves, "
               "{} swept, {:.3f} s; --certify SECONDS for more)\n",
               c.bounded_points, frontier.points.size(), 100.0 * c.median_gap, 100.0 * c.worst_gap,
               frontier.certify_solves, frontier.certify_sweep_solves + frontier.crawl_sweep_solves,
               frontier.certify_seconds);
  }
  if (frontier.default_effort_points > 0) {
    fmt::print("With --certify: {} plans are the default effort's, cheaper at their deadlines than what the extra effort found\n",
               frontier.default_effort_points);
  }
  if (frontier.certify_exact_solves > 0) {
    fmt::print("Exact MILP where the gaps stayed widest (--certify): {} solves in {:.1f} s; {} cheaper plans; bounds raised at {} "
               "points\n",
               frontier.certify_exact_solves, frontier.certify_exact_seconds, frontier.certify_exact_improved,
               frontier.certify_exact_raised);
  }
  if (frontier.exact_seconds > 0.0) {
    fmt::print("Exact MILP at iso-time ({:.1f} s): {}{}\n", frontier.exact_seconds,
               frontier.exact_improved ? "a cheaper plan, now the frontier's there" : "no cheaper plan found",
               frontier.exact_lower_bound_j ? fmt::format("; no plan uses less than {:.1f} J there", *frontier.exact_lower_bound_j)
                                            : std::string());
  }
  fmt::print("Solved in {:.3f} s; wrote {}\n", solve_seconds, args.out);
  if (args.timings) {
    fmt::print("Timings (s):");
    for (const auto& [name, seconds] : timings) fmt::print(" {} {:.4f}", name, seconds);
    fmt::print("\n");
  }
}

struct SelectArgs {
  std::string frontier;
  double deadline = 0.0;
  double straggler_time = 0.0;
  std::string py;
  bool force = false;
  bool json = false;
  double exact = 0.0;   // seconds of the exact MILP at the deadline; 0: none
  std::string profile;  // the profile for it, where not the summary's
};

// Writes `content` to `path` (or stdout for "-"), refusing to replace a file without `force`.
void write_output_file(const std::string& path, const std::string& content, bool force,
                       const std::vector<std::filesystem::path>& inputs) {
  if (path == "-") {
    std::cout << content;
    return;
  }
  check_replaceable_file(path, force, inputs);
  prepare_output_parent(path);
  write_file_atomically(path, content);
}

void run_select(const SelectArgs& args) {
  const FrontierIndex index = read_frontier_directory(args.frontier);
  const double requested = args.deadline != 0.0 ? args.deadline : args.straggler_time;  // NaN reaches the check
  const std::size_t row = require_entry(index, requested);
  // The plan is read, not only named: a missing or damaged one is an error here, not at deployment.
  const PipelineFrequencies plan = index.frequencies(row);
  if (static_cast<int>(plan.size()) != index.num_gpus) {
    throw InputError(fmt::format("{}: has {} stages, the frontier {}", index.plan_name(row), plan.size(), index.num_gpus));
  }
  const FrontierEntry& entry = index.entries[row];
  const double t_star = index.entries.back().time_s;
  const double t_opt = std::min(t_star, requested);
  const double iteration = std::max(requested, entry.time_s);
  const double energy = entry.energy_j + index.p_blocking * index.num_gpus * (iteration - entry.time_s);
  std::optional<StoredExactSolution> exact;
  if (args.exact > 0.0) {
    if (!args.json && args.py != "-") {
      fmt::print(stderr, "perseus: the exact MILP at {:.4f} s, from point {}, at most {:g} s\n", iteration, row, args.exact);
    }
    exact = solve_exact_from(index, row, iteration, args.exact, args.profile);
  }
  const bool improved = exact && exact->solution.improved;
  if (!args.py.empty()) {
    std::string text;
    if (improved) {
      const ExactSolution& e = exact->solution;
      text = export_freqs_pipeline(exact->problem, e.choice,
                                   fmt::format("Improved by the exact MILP (CBC, {:.1f} s) at a {:.6f} s deadline, from {}",
                                               e.seconds, iteration, index.plan_name(row)));
    } else {
      text = export_freqs_pipeline(index, row);
    }
    write_output_file(args.py, text, args.force, {args.frontier});
  }
  if (args.json) {
    nlohmann::json out = {{"requested_s", requested},    {"t_star_s", t_star},
                          {"t_opt_s", t_opt},            {"point", row},
                          {"plan_time_s", entry.time_s}, {"plan_energy_j", entry.energy_j},
                          {"energy_at_requested_j", energy}, {"plan", index.plan_name(row)}};
    if (!entry.plan_file.empty()) out["plan_file"] = (index.directory / entry.plan_file).string();
    if (!args.py.empty()) out["py"] = args.py;
    if (exact) {
      const ExactSolution& e = exact->solution;
      out["exact"] = {{"deadline_s", iteration},
                      {"time_limit_s", args.exact},
                      {"seconds", e.seconds},
                      {"improved", e.improved},
                      {"plan_time_s", e.measured.time_s},
                      {"energy_at_requested_j", e.energy_at_deadline_j},
                      {"lower_bound_j", std::isfinite(e.lower_bound_j) ? nlohmann::json(e.lower_bound_j) : nlohmann::json()},
                      {"gap_fraction", std::isfinite(e.lower_bound_j)
                                           ? nlohmann::json(e.energy_at_deadline_j / e.lower_bound_j - 1.0)
                                           : nlohmann::json()},
                      {"proven_optimal", e.proven_optimal}};
    }
    if (args.py != "-") std::cout << out.dump(2) << "\n";
    return;
  }
  if (args.py == "-") return;
  fmt::print("T_opt = min(T* = {:.4f} s, {:.4f} s) = {:.4f} s\n", t_star, requested, t_opt);
  fmt::print("plan: point {}, {} ({:.4f} s, {:.1f} J; {:.1f} J over a {:.4f} s iteration)\n", row,
             entry.plan_file.empty() ? index.plan_name(row) : (index.directory / entry.plan_file).string(),
             entry.time_s, entry.energy_j, energy, iteration);
  if (exact) {
    const ExactSolution& e = exact->solution;
    if (improved) {
      fmt::print("exact MILP ({:.1f} s): a plan of {:.4f} s, {:.1f} J over the iteration ({:+.3f}%)\n", e.seconds,
                 e.measured.time_s, e.energy_at_deadline_j, 100.0 * (e.energy_at_deadline_j / energy - 1.0));
    } else {
      fmt::print("exact MILP ({:.1f} s): no cheaper plan found\n", e.seconds);
    }
    if (e.proven_optimal) {
      fmt::print("proven optimal: no plan uses less at {:.4f} s\n", iteration);
    } else if (std::isfinite(e.lower_bound_j)) {
      fmt::print("no plan uses less than {:.1f} J at {:.4f} s (CBC's bound): the plan is within {:.3f}% of it\n",
                 e.lower_bound_j, iteration, 100.0 * (e.energy_at_deadline_j / e.lower_bound_j - 1.0));
    }
  }
  if (!args.py.empty()) fmt::print("wrote {}{}\n", args.py, improved ? " (the exact MILP's plan)" : "");
}

struct ExportArgs {
  std::string frontier;
  std::vector<std::size_t> points;
  double deadline = 0.0;
  bool all = false;
  std::string format = "py";
  std::string out;
  bool force = false;
  bool quiet = false;
};

void run_export(const ExportArgs& args) {
  if (args.format != "py" && args.format != "json") throw InputError("--format: expected py or json, not '" + args.format + "'");
  const FrontierIndex index = read_frontier_directory(args.frontier);
  const auto text_of = [&](std::size_t row) {
    return args.format == "py" ? export_freqs_pipeline(index, row) : export_plan_json(index, row).dump(1) + "\n";
  };
  std::vector<std::size_t> rows = args.points;
  if (args.deadline != 0.0) rows.push_back(require_entry(index, args.deadline));
  for (std::size_t row : rows) {
    if (row >= index.entries.size()) {
      throw InputError(fmt::format("--point {}: the frontier has {} points (0 is the fastest)", row, index.entries.size()));
    }
  }
  if (args.all) {
    // A directory of files named as optimize names them: a larger number is a faster plan.
    std::vector<std::pair<std::string, std::string>> files;
    const std::size_t count = index.entries.size();
    for (std::size_t row = 0; row < count; ++row) {
      if (!index.has_plan(row)) continue;
      const std::string stem = args.format == "py" ? "freqs_pipeline" : "plan";
      files.emplace_back(fmt::format("{}_{:05d}.{}", stem, count - 1 - row, args.format), text_of(row));
      if (!args.quiet && (row + 1) % 2000 == 0) fmt::print(stderr, "perseus: exported {}/{} plans\n", row + 1, count);
    }
    write_directory_atomically(args.out, args.force, files, {args.frontier});
    if (!args.quiet) fmt::print("wrote {} plans into {}\n", files.size(), args.out);
    return;
  }
  if (rows.size() != 1) throw InputError("give one of --point, --deadline and --all");
  write_output_file(args.out, text_of(rows.front()), args.force, {args.frontier});
  if (!args.quiet && args.out != "-") fmt::print("wrote {} ({})\n", args.out, index.plan_name(rows.front()));
}

struct InfoArgs {
  std::string frontier;
  bool json = false;
};

void run_info(const InfoArgs& args) {
  const FrontierIndex index = read_frontier_directory(args.frontier);
  nlohmann::json out = {{"directory", args.frontier},
                        {"points", index.entries.size()},
                        {"plans", index.plans()},
                        {"t_min_s", index.entries.front().time_s},
                        {"t_star_s", index.entries.back().time_s}};
  if (index.store) {
    const PlanStoreLayout& layout = index.store->layout();
    out["store"] = {{"file", index.store->path().string()},
                    {"bytes", std::filesystem::file_size(index.store->path())},
                    {"stages", layout.stages.size()},
                    {"instructions", layout.instructions()},
                    {"clocks_mhz", layout.clocks_mhz},
                    {"record_bytes", layout.record_bytes()},
                    {"problem_digest", layout.problem_digest}};
  } else {
    out["store"] = nullptr;  // written before the store: one file per plan
  }
  if (args.json) {
    std::cout << out.dump(2) << "\n";
    return;
  }
  fmt::print("{}: {} frontier points, {} with a plan; T_min {:.4f} s, T* {:.4f} s\n", args.frontier,
             index.entries.size(), index.plans(), index.entries.front().time_s, index.entries.back().time_s);
  if (index.store) {
    const PlanStoreLayout& layout = index.store->layout();
    fmt::print("plans.bin: {} bytes; {} stages, {} instructions per plan, {} clocks ({}..{} MHz), {} bytes per plan\n",
               out["store"]["bytes"].get<std::size_t>(), layout.stages.size(), layout.instructions(),
               layout.clocks_mhz.size(), layout.clocks_mhz.front(), layout.clocks_mhz.back(), layout.record_bytes());
  } else {
    fmt::print("written before the plan store: one plan file per point\n");
  }
}

}  // namespace

void add_solver_commands(CLI::App& app) {
  static OptimizeArgs optimize;
  CLI::App* cmd = app.add_subcommand("optimize", "Compute the iteration time-energy frontier and its frequency plans");
  cmd->footer(
      std::string("Writes into --out: frontier.csv (one row per Pareto-optimal plan, fastest first), plans.bin (every plan, "
      "compactly: 'perseus plans export' writes any of them as a file), summary.json, "
      "freqs_pipeline_%05d.py files for the plans deployments load most (--py) and, with --crawl-csv, crawl.csv.\n") +
      fmt::format("Limits: at most {} stages, {} chunks, {} microbatches and {} instructions per iteration; "
                  "profile rows: stage 0..{}, clocks up to {} MHz, times from {:g} to {:g} s, energies up to {:g} J.\n",
                  limits::kMaxStages, limits::kMaxChunks, limits::kMaxMicrobatches, limits::kMaxInstructions,
                  limits::kMaxStages - 1, limits::kMaxFrequencyMhz, limits::kMinTimeS, limits::kMaxTimeS,
                  limits::kMaxEnergyJ) +
      "Example: perseus optimize --profile data/profiles/bloom-176b+a100-sxm.csv --microbatches 12 "
      "--p-blocking 83.64 --out out/bloom");
  cmd->add_option("--profile", optimize.profile, "Profile CSV (stage,instruction,frequency,time,energy)")
      ->required()
      ->check(CLI::ExistingFile);
  cmd->add_option("--schedule", optimize.schedule, "1f1b, gpipe, interleaved-1f1b, 1f1b-recompute or interleaved-1f1b-recompute")
      ->capture_default_str();
  cmd->add_option("--stages", optimize.stages, "Pipeline stages S (default: the profile's)")
      ->check(CLI::Range(1, limits::kMaxStages));
  cmd->add_option("--microbatches", optimize.microbatches, "Microbatches M per iteration")
      ->required()
      ->check(CLI::Range(1, limits::kMaxMicrobatches));
  cmd->add_option("--chunks", optimize.chunks, "Model chunks per device v (interleaved-1f1b)")
      ->capture_default_str()
      ->check(CLI::Range(1, limits::kMaxChunks));
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
  cmd->add_option("--max-plans", optimize.max_plans, "Keep at most N plans in plans.bin, evenly spread (0: all)")
      ->check(kNonNegative);
  cmd->add_option("--py", optimize.py,
                  "Which plans also get a freqs_pipeline_%05d.py file: some (T_min, T*, least energy and 5 more, "
                  "evenly spread), all, none")
      ->capture_default_str();
  cmd->add_flag("--crawl-csv", optimize.crawl_csv,
                "Also write crawl.csv: every crawl step in the reference solver's terms (time,energy,cost_change)");
  cmd->add_flag("--timings", optimize.timings,
                "Print where the time went: the process's start (CPU time before the command began: loading, "
                "static initialisation, parsing), profile read, problem (fits), crawl, the frontier after the crawl "
                "(most of it is built beside the crawl), output; and, inside those, the certification's time and the "
                "LP solves' share, on either thread");
  cmd->add_flag("--no-refine", optimize.no_refine, "Keep the crawl's plans as they are (no slack reclaiming)");
  CLI::Option* certify_option = cmd->add_option("--certify", optimize.certify,
                  "Seconds the frontier may take after the crawl, beyond the default, for tighter bounds and cheaper "
                  "plans (the default effort's frontier is built first, from the same crawl, and its plans and bounds "
                  "kept where better, so never a dearer plan or a looser bound than the default's at any deadline; "
                  "then, timed: LP solves where plans are furthest above their bounds, for up to a quarter of the "
                  "seconds, each also offering a better plan there; until half are gone, plans interpolated between "
                  "solves, the LP sweep with 8 times its budget, local search at up to 32 of the widest gaps, slower "
                  "plans carried down to faster points within 10 times their budget, all also on 1,536-node DAGs; "
                  "the rest to the exact MILP on COIN-OR CBC where the gaps stay widest, its plans kept where cheaper "
                  "and its bounds carried to every point as fast). On the 1,536-node published cases the default "
                  "effort's frontier alone takes 1.5-3 s, so there --certify 2 takes up to 4 s after the crawl")
      ->check(CLI::Range(0.0, 86400.0));
  cmd->add_option("--exact", optimize.exact,
                  "Also spend up to this many seconds on the exact MILP (COIN-OR CBC) at iso-time, the all-max plan's "
                  "time, started from the frontier's plan there: a cheaper plan where it finds one, and a proven bound "
                  "for every point as fast (perseus select --exact does the same at any deadline)")
      ->check(CLI::Range(0.0, 86400.0));
  cmd->add_flag("--no-hull-crawl", optimize.no_hull_crawl,
                "Skip the second crawl, of the LP relaxation on the measured options' hull, that bounds every plan "
                "and offers plans of its own: faster, with looser bounds (docs/solver.md, \"Certified frontier\")");
  cmd->add_flag("--no-lp-sweep", optimize.no_lp_sweep,
                "Skip the last step, the LP relaxation solved at the points still furthest above their "
                "bounds, whose rounded plans close most of the gap near T_min on DAGs of up to 1,536 nodes: faster, "
                "with wider gaps (docs/solver.md, \"Certified frontier\")");
  cmd->add_flag("--no-certify", optimize.no_certify,
                "Skip the certification (the hull crawl, the LP sweeps, and the solves, searches and repairs where "
                "plans lie furthest above their bounds): 1.3x faster on the 16 published cases' solves together "
                "(1.5x as whole commands), 3-4x on the small A100 ones, with the refinement's plans and the bounds "
                "of the LP solves it makes anyway (docs/solver.md, \"Certified frontier\")")
      ->excludes(certify_option);
  cmd->add_flag("--data-load", optimize.data_load, "Add a data-loading operation (profile 'load' rows) per microbatch");
  cmd->add_flag("--json", optimize.json, "Print the summary as JSON");
  cmd->add_flag("-q,--quiet", optimize.quiet, "No progress messages");
  cmd->callback([] { run_optimize(optimize); });

  static SelectArgs select;
  CLI::App* sel = app.add_subcommand("select", "Pick the plan for a deadline or a straggler: T_opt = min(T*, T')");
  sel->add_option("--frontier", select.frontier, "A directory written by perseus optimize")->required();
  auto* deadline = sel->add_option("--deadline", select.deadline, "Iteration time allowed, s")->check(kPositive);
  auto* straggler = sel->add_option("--straggler-time", select.straggler_time, "The straggler's iteration time T', s")
                        ->check(kPositive);
  deadline->excludes(straggler);
  sel->add_option("--py", select.py, "Also write the chosen plan as a freqs_pipeline file ('-': standard output)");
  sel->add_flag("--force", select.force, "Replace an existing --py file");
  sel->add_flag("--json", select.json, "Print the choice as JSON");
  auto* exact = sel->add_option("--exact", select.exact,
                  "Also spend up to this many seconds on the exact MILP at the deadline (COIN-OR CBC, started from the "
                  "frontier's plan): a cheaper plan where it finds one (what --py then writes), and a proven bound "
                  "there, often tighter than the frontier's")
      ->check(CLI::Range(0.0, 86400.0));
  sel->add_option("--profile", select.profile,
                  "The profile the frontier was solved on, for --exact (default: the path in its summary.json)")
      ->needs(exact);
  sel->callback([=] {
    if (!deadline->count() && !straggler->count()) throw CLI::ValidationError("give --deadline or --straggler-time");
    run_select(select);
  });

  CLI::App* plans = app.add_subcommand("plans", "The plans of a frontier directory: export them as files, describe the store");
  plans->require_subcommand(1);
  static ExportArgs export_args;
  CLI::App* ex = plans->add_subcommand("export", "Write plans of plans.bin as freqs_pipeline (.py) or perseus.plan/1 (.json) files");
  ex->footer(
      "Example: perseus plans export --frontier out/bloom --point 0 --out fastest.py\n"
      "         perseus plans export --frontier out/bloom --all --format py --out out/bloom-py");
  ex->add_option("--frontier", export_args.frontier, "A directory written by perseus optimize")->required();
  auto* point = ex->add_option("--point", export_args.points, "The frontier point (row of frontier.csv, 0: fastest)");
  auto* by_deadline = ex->add_option("--deadline", export_args.deadline, "The plan for this iteration time, s")
                          ->check(kPositive);
  auto* all = ex->add_flag("--all", export_args.all, "Every plan, as files in the --out directory");
  point->excludes(by_deadline)->excludes(all);
  by_deadline->excludes(all);
  point->expected(1);
  ex->add_option("--format", export_args.format, "py (freqs_pipeline) or json (perseus.plan/1)")->capture_default_str();
  ex->add_option("--out", export_args.out, "The file to write ('-': standard output), or a directory with --all")
      ->required();
  ex->add_flag("--force", export_args.force, "Replace an existing --out");
  ex->add_flag("-q,--quiet", export_args.quiet, "No messages");
  ex->callback([] { run_export(export_args); });

  static InfoArgs info_args;
  CLI::App* info = plans->add_subcommand("info", "Describe a frontier directory and its plan store");
  info->add_option("--frontier", info_args.frontier, "A directory written by perseus optimize")->required();
  info->add_flag("--json", info_args.json, "Print as JSON");
  info->callback([] { run_info(info_args); });
}

}  // namespace perseus::cli
