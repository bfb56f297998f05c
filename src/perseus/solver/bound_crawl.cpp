#include "perseus/solver/bound_crawl.hpp"

#include <algorithm>
#include <cmath>

#include "perseus/solver/crawl.hpp"

namespace perseus {

namespace {

RoundedState round_state(const EnergyProblem& problem, const std::vector<std::int64_t>& durations, double unit_s,
                         std::int64_t time_q) {
  std::vector<double> seconds(durations.size());
  for (std::size_t i = 0; i < durations.size(); ++i) seconds[i] = static_cast<double>(durations[i]) * unit_s;
  RoundedChoice rounded = round_to_options(problem, seconds);
  return RoundedState{static_cast<double>(time_q) * unit_s, std::move(rounded.down), std::move(rounded.up)};
}

}  // namespace

RelaxationCrawl crawl_relaxation(const EnergyProblem& problem, std::size_t steps, std::size_t rounded_states,
                                 double fast_end_power) {
  const double t_min = evaluate_measured(problem, fastest_choice(problem)).time_s;
  const double t_slowest = evaluate_measured(problem, slowest_choice(problem)).time_s;
  RelaxationCrawl result;
  result.unit_s = std::max(1e-9, (t_slowest - t_min) / static_cast<double>(std::max<std::size_t>(1, steps)));
  const LagrangianBound bound(problem);
  CrawlOptions options;
  options.cost = CrawlCost::kMeasuredHull;
  options.hull_unit_s = result.unit_s;
  options.on_flow = [&](const CrawlFlow& flow) {
    if (!flow.through_unbounded_arcs()) result.lines.push_back(bound.line(flow.dependencies, flow.starts, flow.ends));
  };
  const CrawlResult crawl = crawl_frontier(problem, options);
  result.steps = crawl.steps.size();
  if (rounded_states > 0 && !crawl.steps.empty()) {
    // Neither end: the frontier has its own plans there.
    CrawlCursor cursor(crawl);
    const std::size_t total = crawl.steps.size();
    const std::size_t count = std::min(rounded_states, total);
    std::size_t last = 0;
    for (std::size_t j = 1; j <= count; ++j) {
      const double share = 1.0 - std::pow(1.0 - static_cast<double>(j) / static_cast<double>(count + 1), fast_end_power);
      const auto step = std::max<std::size_t>(1, static_cast<std::size_t>(static_cast<double>(total) * share));
      if (step >= total || step <= last) continue;
      last = step;
      result.rounded.push_back(round_state(problem, cursor.advance_to(step), result.unit_s, crawl.steps[step].time_q));
    }
  }
  return result;
}

}  // namespace perseus
