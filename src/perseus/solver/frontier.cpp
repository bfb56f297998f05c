#include "perseus/solver/frontier.hpp"

#include <algorithm>
#include <limits>

namespace perseus {
namespace {

// Slack comparisons tolerate float noise in summed measured times.
constexpr double kTimeEpsilon = 1e-9;

FrontierPoint make_point(const EnergyProblem& problem, const OptionChoice& choice) {
  FrontierPoint point;
  point.choice.assign(choice.begin(), choice.end());
  point.measured = evaluate_measured(problem, choice);
  point.effective_energy_j =
      point.measured.energy_j - problem.p_blocking * problem.num_gpus() * point.measured.time_s;
  return point;
}

}  // namespace

PlanRefiner::PlanRefiner(const EnergyProblem& problem) : problem_(problem), index_(problem.operations.size()) {
  for (std::size_t o = 0; o < problem.operations.size(); ++o) {
    const auto& options = problem.operations[o].options;
    OperationIndex& index = index_[o];
    index.by_time.resize(options.size());
    for (std::size_t k = 0; k < options.size(); ++k) index.by_time[k] = static_cast<std::int32_t>(k);
    std::stable_sort(index.by_time.begin(), index.by_time.end(), [&](std::int32_t a, std::int32_t b) {
      return options[a].measurement.time_s < options[b].measurement.time_s;
    });
    for (std::size_t j = 0; j < options.size(); ++j) {
      const Measurement& m = options[index.by_time[j]].measurement;
      index.times.push_back(m.time_s);
      const auto cost = [&](std::int32_t k) {
        return options[k].measurement.energy_j - problem.p_blocking * options[k].measurement.time_s;
      };
      const std::int32_t candidate = index.by_time[j];
      index.best.push_back(j == 0 || cost(candidate) < cost(index.best[j - 1]) ? candidate : index.best[j - 1]);
    }
  }
}

double PlanRefiner::time_of(Dag::NodeId n, std::int32_t option) const {
  return problem_.options_of(n).options[option].measurement.time_s;
}

double PlanRefiner::effective_of(Dag::NodeId n, std::int32_t option) const {
  const Measurement& m = problem_.options_of(n).options[option].measurement;
  return m.energy_j - problem_.p_blocking * m.time_s;
}

double PlanRefiner::effective_energy(const OptionChoice& choice) const {
  double total = 0.0;
  for (std::size_t i = 0; i < choice.size(); ++i) total += effective_of(static_cast<Dag::NodeId>(i), choice[i]);
  return total;
}

// The cheapest option of node n that takes at most `window` seconds; the current one
// unless another is strictly cheaper. A binary search over the options sorted by time.
std::int32_t PlanRefiner::cheapest_within(Dag::NodeId n, std::int32_t current, double window) const {
  const OperationIndex& index = index_[problem_.node_operation[n]];
  const auto fits = std::upper_bound(index.times.begin(), index.times.end(), window + kTimeEpsilon);
  if (fits == index.times.begin()) return current;
  const std::int32_t best = index.best[static_cast<std::size_t>(fits - index.times.begin()) - 1];
  return effective_of(n, best) < effective_of(n, current) - 1e-12 ? best : current;
}

OptionChoice PlanRefiner::reclaim_slack(OptionChoice choice, double deadline_s) const {
  const Dag& dag = problem_.dag;
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
      earliest_finish[v] = start + time_of(v, choice[v]);
    }
    for (auto it = order.rbegin(); it != order.rend(); ++it) {
      const Dag::NodeId v = *it;
      double finish = deadline_s;
      for (Dag::NodeId s : dag.successors(v)) finish = std::min(finish, latest_start[s]);
      const double start = earliest_finish[v] - time_of(v, choice[v]);
      const std::int32_t best = cheapest_within(v, choice[v], finish - start);
      improved |= best != choice[v];
      choice[v] = best;
      latest_start[v] = finish - time_of(v, best);
    }
    // Forward sweep: earlier operations take the slack behind them.
    for (auto it = order.rbegin(); it != order.rend(); ++it) {
      const Dag::NodeId v = *it;
      double finish = deadline_s;
      for (Dag::NodeId s : dag.successors(v)) finish = std::min(finish, latest_start[s]);
      latest_start[v] = finish - time_of(v, choice[v]);
    }
    for (Dag::NodeId v : order) {
      double start = 0.0;
      for (Dag::NodeId p : dag.predecessors(v)) start = std::max(start, earliest_finish[p]);
      const double finish = latest_start[v] + time_of(v, choice[v]);
      const std::int32_t best = cheapest_within(v, choice[v], finish - start);
      improved |= best != choice[v];
      choice[v] = best;
      earliest_finish[v] = start + time_of(v, best);
    }
    if (!improved) break;
  }
  return choice;
}

OptionChoice PlanRefiner::local_search(OptionChoice choice, double deadline_s, int max_rounds) const {
  const Dag& dag = problem_.dag;
  choice = reclaim_slack(std::move(choice), deadline_s);
  double cost = effective_energy(choice);
  std::vector<double> start;
  for (int round = 0; round < max_rounds; ++round) {
    bool improved = false;
    std::vector<double> durations(dag.num_nodes());
    for (std::size_t i = 0; i < durations.size(); ++i) durations[i] = time_of(static_cast<Dag::NodeId>(i), choice[i]);
    critical_path_length<double>(dag, durations, &start);
    for (Dag::NodeId v : dag.topological_order()) {
      const OperationIndex& index = index_[problem_.node_operation[v]];
      // Positions of the next two faster options than the current one.
      const auto current = std::find(index.by_time.begin(), index.by_time.end(), choice[v]);
      const auto position = current - index.by_time.begin();
      for (std::ptrdiff_t faster = position - 1; faster >= 0 && faster >= position - 2; --faster) {
        OptionChoice trial = choice;
        trial[v] = index.by_time[static_cast<std::size_t>(faster)];
        trial = reclaim_slack(std::move(trial), deadline_s);
        const double trial_cost = effective_energy(trial);
        if (trial_cost < cost - 1e-9) {
          choice = std::move(trial);
          cost = trial_cost;
          improved = true;
          break;
        }
      }
    }
    if (!improved) break;
  }
  return choice;
}

OptionChoice reclaim_slack(const EnergyProblem& problem, OptionChoice choice, double deadline_s) {
  return PlanRefiner(problem).reclaim_slack(std::move(choice), deadline_s);
}

Frontier build_frontier(const EnergyProblem& problem, const CrawlResult& crawl,
                        const FrontierOptions& options) {
  Frontier frontier;
  frontier.all_max = evaluate_measured(problem, fastest_choice(problem));
  std::vector<FrontierPoint> candidates;
  const std::size_t total = crawl.steps.size() + 2;
  candidates.reserve(total);

  const PlanRefiner refiner(problem);
  const bool search = options.refine && problem.dag.num_nodes() <= options.local_search_max_nodes;
  auto add = [&](OptionChoice choice, std::int64_t step) {
    if (options.refine) {
      const double deadline = evaluate_measured(problem, choice).time_s;
      choice = search ? refiner.local_search(std::move(choice), deadline)
                      : refiner.reclaim_slack(std::move(choice), deadline);
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

  // Pareto filter on (measured time, effective energy). At a deadline D a plan of time T
  // costs energy + p_blocking * S * (D - T) = effective energy + p_blocking * S * D (its
  // GPUs block until D), so a plan is worth keeping only if it uses strictly less
  // effective energy than every faster one. Ties in time keep the cheaper.
  std::stable_sort(candidates.begin(), candidates.end(), [](const FrontierPoint& a, const FrontierPoint& b) {
    if (a.measured.time_s != b.measured.time_s) return a.measured.time_s < b.measured.time_s;
    return a.effective_energy_j < b.effective_energy_j;
  });
  double best = std::numeric_limits<double>::infinity();
  for (FrontierPoint& point : candidates) {
    if (point.effective_energy_j < best - 1e-9) {
      best = point.effective_energy_j;
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
