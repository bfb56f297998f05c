#include "perseus/solver/bound_crawl.hpp"

#include <algorithm>

#include "perseus/solver/crawl.hpp"

namespace perseus {

RelaxationCrawl crawl_relaxation(const EnergyProblem& problem, std::size_t steps) {
  const double t_min = evaluate_measured(problem, fastest_choice(problem)).time_s;
  const double t_slowest = evaluate_measured(problem, slowest_choice(problem)).time_s;
  RelaxationCrawl result;
  result.unit_s = std::max(1e-9, (t_slowest - t_min) / static_cast<double>(std::max<std::size_t>(1, steps)));
  const LagrangianBound bound(problem);
  CrawlOptions options;
  options.cost = CrawlCost::kMeasuredHull;
  options.hull_unit_s = result.unit_s;
  options.on_flow = [&](const CrawlFlow& flow) { result.lines.push_back(bound.line(flow.dependencies, flow.starts, flow.ends)); };
  result.steps = crawl_frontier(problem, options).steps.size();
  return result;
}

}  // namespace perseus
