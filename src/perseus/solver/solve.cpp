#include "perseus/solver/solve.hpp"

#include <chrono>

namespace perseus {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

// Crawl progress this often: a step costs 10-100 us, a callback next to nothing, and the
// server polls cancellation through it.
constexpr std::size_t kCrawlProgressEvery = 256;

}  // namespace

EnergyProblem make_problem(const Profile& profile, const SolveRequest& request, ScheduleSpec* resolved,
                           std::vector<Warning>* warnings) {
  *resolved = request.schedule;
  if (resolved->stages < 0) {
    throw InputError("stages must be 0 (the profile's) or a positive count, got " + std::to_string(resolved->stages));
  }
  if (resolved->stages == 0) resolved->stages = profile.num_stages();
  return make_problem(profile, *resolved, request.options, warnings);
}

Solution solve(const Profile& profile, const SolveRequest& request) {
  SolveRequest resolved = request;
  std::vector<Warning> warnings;
  const auto started = Clock::now();
  EnergyProblem problem = make_problem(profile, request, &resolved.schedule, &warnings);
  const double problem_seconds = seconds_since(started);
  Solution solution = solve(std::move(problem), resolved);
  solution.problem_seconds = problem_seconds;
  solution.warnings.insert(solution.warnings.begin(), warnings.begin(), warnings.end());
  return solution;
}

Solution solve(EnergyProblem problem, const SolveRequest& request) {
  Solution solution{request.schedule, std::move(problem), {}, {}, {}, 0.0, 0.0, 0.0};
  const EnergyProblem& p = solution.problem;

  CrawlOptions crawl_options;
  if (request.progress) {
    crawl_options.progress_every = kCrawlProgressEvery;
    crawl_options.progress = [&](std::size_t steps, std::int64_t time_q, std::int64_t t_min_q) {
      const auto remaining = static_cast<std::size_t>(std::max<std::int64_t>(0, time_q - t_min_q));
      request.progress({SolveProgress::Phase::kCrawl, steps, steps + remaining});
    };
  }
  FrontierOptions frontier_options = request.frontier;
  if (request.progress) {
    frontier_options.progress = [&](std::size_t done, std::size_t total) {
      request.progress({SolveProgress::Phase::kFrontier, done, total});
    };
  }
  // The frontier is built beside the crawl (on a second core): what is left after it is
  // frontier_seconds.
  FrontierBuilder builder(p, frontier_options, true);
  crawl_options.on_step = [&](std::size_t index, const CrawlStep& step, std::span<const DurationChange> changes) {
    builder.add_step(index, step, changes);
  };
  if (frontier_options.refine) {
    crawl_options.on_flow = [&](const CrawlFlow& flow) { builder.add_flow(flow); };
    crawl_options.flow_every = builder.flow_every();
  }
  auto started = Clock::now();
  solution.crawl = crawl_frontier(p, crawl_options);
  solution.crawl_seconds = seconds_since(started);
  started = Clock::now();
  // --certify's seconds count from here: the default effort's frontier below, the raised
  // effort's refinement and its certification all fall within them (counted from the
  // certification's own start, --certify 2 on gpt3-175b A40 8 x 48 once took 7.6 s more than
  // the defaults, its searches 3.7 s of it).
  if (frontier_options.certify_seconds > 0.0) builder.certify_from(started);
  // With more certification effort, the default effort's plans too, from the same crawl (after
  // it, not beside it, where they would slow the crawl and the certified frontier's own work
  // there): the cheaper of the two at every deadline (FrontierOptions::default_effort).
  if (frontier_options.default_effort && frontier_options.refine) {
    builder.offer(build_frontier(p, solution.crawl, *frontier_options.default_effort));
  }
  solution.frontier = builder.finish(solution.crawl);
  solution.frontier_seconds = seconds_since(started);
  if (solution.frontier.points.empty()) throw SolveError("the frontier has no points");
  return solution;
}

}  // namespace perseus
