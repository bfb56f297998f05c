#include "perseus/solver/frontier.hpp"

#include <algorithm>
#include <limits>

namespace perseus {
namespace {

// Slack comparisons tolerate float noise in summed measured times.
constexpr double kTimeEpsilon = 1e-9;

double option_time(const EnergyProblem& problem, Dag::NodeId n, std::int32_t option) {
  return problem.options_of(n).options[option].measurement.time_s;
}

// What an option costs once the GPU's blocking power is counted as the baseline.
double option_effective(const EnergyProblem& problem, Dag::NodeId n, std::int32_t option) {
  const Measurement& m = problem.options_of(n).options[option].measurement;
  return m.energy_j - problem.p_blocking * m.time_s;
}

// The cheapest option of node n that takes at most `window` seconds; the current one
// unless another is strictly cheaper.
std::int32_t cheapest_within(const EnergyProblem& problem, Dag::NodeId n, std::int32_t current,
                             double window) {
  const auto& options = problem.options_of(n).options;
  std::int32_t best = current;
  double best_cost = option_effective(problem, n, current);
  for (std::size_t k = 0; k < options.size(); ++k) {
    if (options[k].measurement.time_s > window + kTimeEpsilon) continue;
    const double cost = option_effective(problem, n, static_cast<std::int32_t>(k));
    if (cost < best_cost - 1e-12) {
      best = static_cast<std::int32_t>(k);
      best_cost = cost;
    }
  }
  return best;
}

FrontierPoint make_point(const EnergyProblem& problem, const OptionChoice& choice) {
  FrontierPoint point;
  point.choice.assign(choice.begin(), choice.end());
  point.measured = evaluate_measured(problem, choice);
  point.effective_energy_j =
      point.measured.energy_j - problem.p_blocking * problem.num_gpus() * point.measured.time_s;
  return point;
}

}  // namespace

OptionChoice reclaim_slack(const EnergyProblem& problem, OptionChoice choice, double deadline_s) {
  const Dag& dag = problem.dag;
  const auto& order = dag.topological_order();
  const std::size_t n = dag.num_nodes();
  std::vector<double> earliest_finish(n), latest_start(n);
  constexpr int kMaxSweeps = 8;
  for (int sweep = 0; sweep < kMaxSweeps; ++sweep) {
    bool improved = false;
    // Backward sweep: later operations take the slack in front of them first.
    for (Dag::NodeId v : order) {
      double start = 0.0;
      for (Dag::NodeId p : dag.predecessors(v)) start = std::max(start, earliest_finish[p]);
      earliest_finish[v] = start + option_time(problem, v, choice[v]);
    }
    for (auto it = order.rbegin(); it != order.rend(); ++it) {
      const Dag::NodeId v = *it;
      double finish = deadline_s;
      for (Dag::NodeId s : dag.successors(v)) finish = std::min(finish, latest_start[s]);
      const double start = earliest_finish[v] - option_time(problem, v, choice[v]);
      const std::int32_t best = cheapest_within(problem, v, choice[v], finish - start);
      improved |= best != choice[v];
      choice[v] = best;
      latest_start[v] = finish - option_time(problem, v, best);
    }
    // Forward sweep: earlier operations take the slack behind them.
    for (auto it = order.rbegin(); it != order.rend(); ++it) {
      const Dag::NodeId v = *it;
      double finish = deadline_s;
      for (Dag::NodeId s : dag.successors(v)) finish = std::min(finish, latest_start[s]);
      latest_start[v] = finish - option_time(problem, v, choice[v]);
    }
    for (Dag::NodeId v : order) {
      double start = 0.0;
      for (Dag::NodeId p : dag.predecessors(v)) start = std::max(start, earliest_finish[p]);
      const double finish = latest_start[v] + option_time(problem, v, choice[v]);
      const std::int32_t best = cheapest_within(problem, v, choice[v], finish - start);
      improved |= best != choice[v];
      choice[v] = best;
      earliest_finish[v] = start + option_time(problem, v, best);
    }
    if (!improved) break;
  }
  return choice;
}

Frontier build_frontier(const EnergyProblem& problem, const CrawlResult& crawl,
                        const FrontierOptions& options) {
  Frontier frontier;
  frontier.all_max = evaluate_measured(problem, fastest_choice(problem));
  std::vector<FrontierPoint> candidates;
  const std::size_t total = crawl.steps.size() + 2;
  candidates.reserve(total);

  auto add = [&](OptionChoice choice, std::int64_t step) {
    if (options.refine) {
      const double deadline = evaluate_measured(problem, choice).time_s;
      choice = reclaim_slack(problem, std::move(choice), deadline);
    }
    FrontierPoint point = make_point(problem, choice);
    point.crawl_step = step;
    if (step >= 0) {
      const CrawlStep& s = crawl.steps[static_cast<std::size_t>(step)];
      point.planned_time_q = s.time_q;
      point.fitted_energy_j = crawl.reference_energy(s, problem);
    }
    candidates.push_back(std::move(point));
    if (options.progress && candidates.size() % 1000 == 0) options.progress(candidates.size(), total);
  };

  add(slowest_choice(problem), -1);
  CrawlCursor cursor(crawl);
  for (std::size_t k = 0; k < crawl.steps.size(); ++k) {
    add(choice_for_durations(problem, cursor.advance_to(k)), static_cast<std::int64_t>(k));
  }
  add(fastest_choice(problem), -1);
  frontier.candidates = candidates.size();

  // Pareto filter on (measured time, measured energy): fastest first, keep a point only if
  // it uses strictly less energy than every faster one. Ties in time keep the cheaper.
  std::stable_sort(candidates.begin(), candidates.end(), [](const FrontierPoint& a, const FrontierPoint& b) {
    if (a.measured.time_s != b.measured.time_s) return a.measured.time_s < b.measured.time_s;
    return a.measured.energy_j < b.measured.energy_j;
  });
  double best_energy = std::numeric_limits<double>::infinity();
  for (FrontierPoint& point : candidates) {
    if (point.measured.energy_j < best_energy - 1e-9) {
      best_energy = point.measured.energy_j;
      frontier.points.push_back(std::move(point));
    }
  }
  return frontier;
}

std::optional<std::size_t> select_for_deadline(const std::vector<double>& times_fastest_first,
                                               double deadline_s) {
  if (times_fastest_first.empty()) return std::nullopt;
  const double target = std::min(times_fastest_first.back(), deadline_s) + kTimeEpsilon;
  const auto after = std::upper_bound(times_fastest_first.begin(), times_fastest_first.end(), target);
  if (after == times_fastest_first.begin()) return std::nullopt;
  return static_cast<std::size_t>(after - times_fastest_first.begin()) - 1;
}

const FrontierPoint* select_for_deadline(const Frontier& frontier, double deadline_s) {
  std::vector<double> times;
  times.reserve(frontier.points.size());
  for (const FrontierPoint& point : frontier.points) times.push_back(point.measured.time_s);
  const auto index = select_for_deadline(times, deadline_s);
  return index ? &frontier.points[*index] : nullptr;
}

double energy_at(const EnergyProblem& problem, const FrontierPoint& point, double iteration_s) {
  const double wait = std::max(0.0, iteration_s - point.measured.time_s);
  return point.measured.energy_j + problem.p_blocking * problem.num_gpus() * wait;
}

}  // namespace perseus
