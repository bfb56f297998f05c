#include "perseus/solver/bound_crawl.hpp"

#include <algorithm>

#include "perseus/solver/crawl.hpp"

namespace perseus {

namespace {

RoundedState round_state(const EnergyProblem& problem, const std::vector<std::int64_t>& durations, double unit_s,
                         std::int64_t time_q) {
  const std::size_t n = durations.size();
  RoundedState state{static_cast<double>(time_q) * unit_s, OptionChoice(n), OptionChoice(n)};
  for (std::size_t i = 0; i < n; ++i) {
    const double duration = static_cast<double>(durations[i]) * unit_s;
    const auto& options = problem.options_of(static_cast<Dag::NodeId>(i)).options;
    std::int32_t down = -1, up = -1, fastest = 0, slowest = 0;
    for (std::size_t k = 0; k < options.size(); ++k) {
      const double t = options[k].measurement.time_s;
      const auto index = static_cast<std::int32_t>(k);
      if (t <= duration && (down < 0 || t > options[down].measurement.time_s)) down = index;
      if (t >= duration && (up < 0 || t < options[up].measurement.time_s)) up = index;
      if (t < options[fastest].measurement.time_s) fastest = index;
      if (t > options[slowest].measurement.time_s) slowest = index;
    }
    state.down[i] = down >= 0 ? down : fastest;
    state.up[i] = up >= 0 ? up : slowest;
  }
  return state;
}

}  // namespace

RelaxationCrawl crawl_relaxation(const EnergyProblem& problem, std::size_t steps, std::size_t rounded_states) {
  const double t_min = evaluate_measured(problem, fastest_choice(problem)).time_s;
  const double t_slowest = evaluate_measured(problem, slowest_choice(problem)).time_s;
  RelaxationCrawl result;
  result.unit_s = std::max(1e-9, (t_slowest - t_min) / static_cast<double>(std::max<std::size_t>(1, steps)));
  const LagrangianBound bound(problem);
  CrawlOptions options;
  options.cost = CrawlCost::kMeasuredHull;
  options.hull_unit_s = result.unit_s;
  options.on_flow = [&](const CrawlFlow& flow) { result.lines.push_back(bound.line(flow.dependencies, flow.starts, flow.ends)); };
  const CrawlResult crawl = crawl_frontier(problem, options);
  result.steps = crawl.steps.size();
  if (rounded_states > 0 && !crawl.steps.empty()) {
    // States 1..count of count + 1 equal parts of the steps (neither end: the frontier has
    // its own plans there).
    CrawlCursor cursor(crawl);
    const std::size_t count = std::min(rounded_states, crawl.steps.size());
    for (std::size_t j = 1; j <= count; ++j) {
      const std::size_t step = j * crawl.steps.size() / (count + 1);
      result.rounded.push_back(round_state(problem, cursor.advance_to(step), result.unit_s, crawl.steps[step].time_q));
    }
  }
  return result;
}

}  // namespace perseus
