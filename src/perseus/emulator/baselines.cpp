#include "perseus/emulator/baselines.hpp"

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <set>

#include <fmt/format.h>

#include "perseus/model/errors.hpp"

namespace perseus {
namespace {

// Relative slack for comparing sums of measured times.
constexpr double kTolerance = 1e-12;

bool fits(double time, double window) { return time <= window + kTolerance * std::max(1.0, std::abs(window)); }

void check_table(const EnergyProblem& problem, const FrequencyTable& clocks) {
  if (clocks.num_operations() != problem.operations.size()) {
    throw InputError(fmt::format("the frequency table has {} operations but the problem has {}", clocks.num_operations(),
                                 problem.operations.size()));
  }
}

std::size_t operation_of(const EnergyProblem& problem, Dag::NodeId node) {
  return static_cast<std::size_t>(problem.node_operation[node]);
}

// Every clock of the operations `use` accepts, descending; constant operations have none.
std::vector<int> descending_clocks(const EnergyProblem& problem, const FrequencyTable& clocks,
                                   const std::function<bool(const OperationOptions&)>& use) {
  std::set<int, std::greater<>> all;
  for (std::size_t o = 0; o < problem.operations.size(); ++o) {
    if (clocks.is_constant(o) || !use(problem.operations[o])) continue;
    for (const FrequencyTable::Point& p : clocks.points(o)) all.insert(p.frequency_mhz);
  }
  return {all.begin(), all.end()};
}

std::vector<std::int32_t> clocks_at_stage_clocks(const EnergyProblem& problem, const FrequencyTable& clocks,
                                                 const std::vector<int>& stage_clock) {
  std::vector<std::int32_t> clock(problem.dag.num_nodes());
  for (std::size_t i = 0; i < clock.size(); ++i) {
    const auto node = static_cast<Dag::NodeId>(i);
    clock[i] = clock_for(clocks, operation_of(problem, node), stage_clock[problem.dag.instruction(node).stage]);
  }
  return clock;
}

double time_at(const FrequencyTable& clocks, std::size_t operation, int clock) {
  return clocks.at(operation, clock, false)->time_s;
}

// Latest finish of every node that keeps the iteration within `deadline`.
std::vector<double> latest_finish(const Dag& dag, const std::vector<double>& durations, double deadline) {
  std::vector<double> finish(dag.num_nodes(), deadline);
  const auto& order = dag.topological_order();
  for (auto it = order.rbegin(); it != order.rend(); ++it) {
    for (Dag::NodeId s : dag.successors(*it)) finish[*it] = std::min(finish[*it], finish[s] - durations[s]);
  }
  return finish;
}

}  // namespace

int clock_for(const FrequencyTable& clocks, std::size_t operation, int frequency_mhz) {
  const auto points = clocks.points(operation);  // ascending clock
  if (points.empty()) throw InputError(fmt::format("operation {} has no measurements", operation));
  if (points.size() == 1) return points.front().frequency_mhz;
  const auto it = std::lower_bound(points.begin(), points.end(), frequency_mhz,
                                   [](const FrequencyTable::Point& p, int f) { return p.frequency_mhz < f; });
  return it == points.end() ? points.back().frequency_mhz : it->frequency_mhz;
}

BaselinePlan all_max(const EnergyProblem& problem, const FrequencyTable& clocks) {
  check_table(problem, clocks);
  std::vector<std::int32_t> clock(problem.dag.num_nodes());
  for (std::size_t i = 0; i < clock.size(); ++i) {
    clock[i] = clock_for(clocks, operation_of(problem, static_cast<Dag::NodeId>(i)), std::numeric_limits<int>::max());
  }
  return {"AllMax", "highest clock", std::move(clock), {}};
}

std::vector<BaselinePlan> zeus_global(const EnergyProblem& problem, const FrequencyTable& clocks) {
  check_table(problem, clocks);
  std::vector<BaselinePlan> plans;
  for (int f : descending_clocks(problem, clocks, [](const OperationOptions&) { return true; })) {
    std::vector<int> stage_clock(problem.dag.num_stages(), f);
    plans.push_back({"ZeusGlobal", fmt::format("{} MHz", f), clocks_at_stage_clocks(problem, clocks, stage_clock),
                     std::move(stage_clock)});
  }
  return plans;
}

ExecutionPlan zeus_global_plan(const EnergyProblem& problem, std::shared_ptr<const FrequencyTable> clocks,
                               int frequency_mhz, bool interpolate) {
  if (!clocks) throw InputError("zeus_global_plan needs a frequency table");
  check_table(problem, *clocks);
  const std::vector<int> measured = descending_clocks(problem, *clocks, [](const OperationOptions&) { return true; });
  const bool exact = std::find(measured.begin(), measured.end(), frequency_mhz) != measured.end();
  if (!measured.empty() && !exact) {
    const int highest = measured.front(), lowest = measured.back();
    if (frequency_mhz < lowest || frequency_mhz > highest) {
      throw InputError(fmt::format("ZeusGlobal at {} MHz: outside the measured clocks, {}..{} MHz", frequency_mhz, lowest,
                                   highest));
    }
    if (!interpolate) {
      // descending: the first below is the lower neighbour
      const auto below = std::find_if(measured.begin(), measured.end(), [&](int f) { return f < frequency_mhz; });
      throw InputError(fmt::format("ZeusGlobal at {} MHz: not a measured clock (measured {}..{} MHz; the nearest are "
                                   "{} and {} MHz); allow interpolation to use it",
                                   frequency_mhz, lowest, highest, *below, *(below - 1)));
    }
  }
  // Written as per-stage frequency lists, so interpolated clocks get plan_from_frequencies's
  // checks and figures; an operation whose own range misses the clock takes the usual rule.
  const Dag& dag = problem.dag;
  PipelineFrequencies frequencies(dag.num_stages());
  for (int stage = 0; stage < dag.num_stages(); ++stage) {
    for (Dag::NodeId node : dag.stage_nodes(stage)) {
      const std::size_t operation = operation_of(problem, node);
      const bool between = interpolate && !exact && clocks->at(operation, frequency_mhz, true).has_value();
      frequencies[stage].emplace_back(std::string(to_string(dag.instruction(node).kind)),
                                      between ? frequency_mhz : clock_for(*clocks, operation, frequency_mhz));
    }
  }
  return plan_from_frequencies(problem, frequencies, std::move(clocks), interpolate);
}

std::vector<BaselinePlan> zeus_per_stage(const EnergyProblem& problem, const FrequencyTable& clocks) {
  check_table(problem, clocks);
  const int stages = problem.dag.num_stages();
  std::vector<std::vector<int>> stage_clocks(stages);
  for (int d = 0; d < stages; ++d) {
    stage_clocks[d] = descending_clocks(problem, clocks, [&](const OperationOptions& op) { return op.stage % stages == d; });
  }
  // Forward time of device d with its clock at f: its chunks' forwards, one after another.
  auto forward_time = [&](int d, int f) {
    double time = 0.0;
    for (std::size_t o = 0; o < problem.operations.size(); ++o) {
      const OperationOptions& op = problem.operations[o];
      if (op.stage % stages != d || op.kind != InstructionKind::kForward) continue;
      time += time_at(clocks, o, clock_for(clocks, o, f));
    }
    return time;
  };
  int bottleneck = -1;
  double longest = -1.0;
  for (int d = 0; d < stages; ++d) {
    if (stage_clocks[d].empty()) continue;
    const double t = forward_time(d, stage_clocks[d].front());
    if (t > longest) {
      longest = t;
      bottleneck = d;
    }
  }
  std::vector<BaselinePlan> plans;
  if (bottleneck < 0) return plans;  // nothing can change clock
  for (int f : stage_clocks[bottleneck]) {
    const double target = forward_time(bottleneck, f);
    std::vector<int> stage_clock(stages, 0);
    for (int d = 0; d < stages; ++d) {
      if (stage_clocks[d].empty()) continue;
      stage_clock[d] = d == bottleneck ? f : stage_clocks[d].front();
      if (d == bottleneck) continue;
      for (int g : stage_clocks[d]) {  // descending: the last that fits is the lowest
        if (!fits(forward_time(d, g), target)) break;
        stage_clock[d] = g;
      }
    }
    std::string setting = "stage clocks";
    for (int d = 0; d < stages; ++d) setting += fmt::format("{}{}", d == 0 ? " " : "/", stage_clock[d]);
    plans.push_back({"ZeusPerStage", setting + " MHz", clocks_at_stage_clocks(problem, clocks, stage_clock),
                     std::move(stage_clock)});
  }
  return plans;
}

BaselinePlan envpipe(const EnergyProblem& problem, const FrequencyTable& clocks) {
  const Dag& dag = problem.dag;
  BaselinePlan plan = all_max(problem, clocks);
  plan.method = "EnvPipe";
  plan.setting = "last stage at the highest clock, others fill their slack";
  std::vector<double> durations(dag.num_nodes());
  for (std::size_t i = 0; i < durations.size(); ++i) {
    durations[i] = time_at(clocks, operation_of(problem, static_cast<Dag::NodeId>(i)), plan.clock_mhz[i]);
  }
  const double deadline = critical_path_length<double>(dag, durations);
  std::vector<double> earliest_start;
  for (int stage = dag.num_stages() - 2; stage >= 0; --stage) {
    for (Dag::NodeId node : dag.stage_nodes(stage)) {
      const std::size_t operation = operation_of(problem, node);
      if (clocks.is_constant(operation)) continue;
      critical_path_length<double>(dag, durations, &earliest_start);
      const std::vector<double> finish = latest_finish(dag, durations, deadline);
      const double window = finish[node] - earliest_start[node];
      for (const FrequencyTable::Point& p : clocks.points(operation)) {  // ascending: the first that fits is the lowest
        if (p.frequency_mhz >= plan.clock_mhz[node]) break;
        if (fits(p.time_s, window)) {
          plan.clock_mhz[node] = p.frequency_mhz;
          durations[node] = p.time_s;
          break;
        }
      }
    }
  }
  return plan;
}

std::vector<BaselinePoint> evaluate_baselines(const EnergyProblem& problem, std::vector<BaselinePlan> plans,
                                              std::shared_ptr<const FrequencyTable> clocks,
                                              const EmulationConfig& config) {
  std::vector<BaselinePoint> points;
  points.reserve(plans.size());
  for (BaselinePlan& plan : plans) {
    const EmulationResult result = emulate(problem, plan_from_clocks(problem, plan.clock_mhz, clocks), config);
    points.push_back({std::move(plan), result.iteration_time_s, result.energy.total_j(), false});
  }
  for (BaselinePoint& p : points) {
    p.pareto = std::none_of(points.begin(), points.end(), [&](const BaselinePoint& q) {
      return q.time_s <= p.time_s && q.energy_j <= p.energy_j && (q.time_s < p.time_s || q.energy_j < p.energy_j);
    });
  }
  return points;
}

}  // namespace perseus
