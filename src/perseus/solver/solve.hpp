// The one way from a profile to its frontier, for every caller (the CLI, the Python module,
// the server, the emulator's comparisons, the planner): bind the schedule to the profile
// (make_problem), crawl (crawl_frontier) and turn the crawl into the measured frontier
// (build_frontier). Defaults live here, once: callers pass only what a user chose.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <vector>

#include "perseus/model/errors.hpp"
#include "perseus/profile/profile.hpp"
#include "perseus/solver/crawl.hpp"
#include "perseus/solver/frontier.hpp"
#include "perseus/solver/problem.hpp"

namespace perseus {

// Where a solve is, for progress messages. A callback may throw to abandon the solve (the
// server cancels a job that way); the exception reaches solve()'s caller.
struct SolveProgress {
  enum class Phase { kCrawl, kFrontier };
  Phase phase = Phase::kCrawl;
  std::size_t done = 0;   // crawl steps, or frontier candidates handled
  std::size_t total = 0;  // at most this many crawl steps (T* - T_min in units), or candidates
};

struct SolveRequest {
  // The schedule; stages 0 takes the profile's.
  ScheduleSpec schedule{ScheduleKind::k1F1B, 0, 1, 1, false};
  // Unit time (default kDefaultUnitTime), p_blocking (W, required: > 0) and fit overrides.
  OptionsConfig options;
  // How the crawl becomes the frontier: refine (default on), the refinement's bounds.
  FrontierOptions frontier;
  // Called every few hundred crawl steps and every thousand frontier candidates.
  std::function<void(const SolveProgress&)> progress;
};

struct Solution {
  ScheduleSpec schedule;  // as solved: stages resolved
  EnergyProblem problem;
  CrawlResult crawl;
  Frontier frontier;
  std::vector<Warning> warnings;  // suspicious but usable input (make_problem's)
  double problem_seconds = 0.0;   // binding the schedule to the profile: options and fits
  double crawl_seconds = 0.0;
  double frontier_seconds = 0.0;  // refinement and Pareto filter, LP bound included

  double solve_seconds() const { return crawl_seconds + frontier_seconds; }
};

// The problem solve() would solve, without solving it (to emulate a given plan on it): the
// schedule's stages resolved, bound to the profile. make_problem's errors.
EnergyProblem make_problem(const Profile& profile, const SolveRequest& request, ScheduleSpec* resolved,
                           std::vector<Warning>* warnings);

// Throws InputError for input that cannot make a problem (make_problem's errors, a
// p_blocking or unit time that is not positive) and SolveError when no frontier results.
Solution solve(const Profile& profile, const SolveRequest& request);
// For a problem built by other means (the planner's steady-state window, the server's
// stored problem); `request.schedule` and `request.options` are not used.
Solution solve(EnergyProblem problem, const SolveRequest& request);

}  // namespace perseus
