#include "perseus/emulator/baselines.hpp"

#include <algorithm>
#include <functional>
#include <limits>
#include <memory>
#include <set>

#include <fmt/format.h>

namespace perseus {
namespace {

// Relative slack for comparing sums of measured times.
constexpr double kTolerance = 1e-12;

bool fits(double time, double window) { return time <= window + kTolerance * std::max(1.0, std::abs(window)); }

std::vector<int> clocks_of(const OperationOptions& operation) {
  std::vector<int> clocks;
  for (const Option& option : operation.options) clocks.push_back(option.measurement.frequency_mhz);
  return clocks;
}

// Every clock of the given operations, descending.
std::vector<int> descending_clocks(const EnergyProblem& problem, const std::function<bool(const OperationOptions&)>& use) {
  std::set<int, std::greater<>> clocks;
  for (const OperationOptions& operation : problem.operations) {
    if (operation.is_constant() || !use(operation)) continue;
    for (int f : clocks_of(operation)) clocks.insert(f);
  }
  return {clocks.begin(), clocks.end()};
}

OptionChoice choice_at_stage_clocks(const EnergyProblem& problem, const std::vector<int>& stage_clock) {
  OptionChoice choice(problem.dag.num_nodes());
  for (std::size_t i = 0; i < choice.size(); ++i) {
    const auto node = static_cast<Dag::NodeId>(i);
    choice[i] = option_at_frequency(problem.options_of(node), stage_clock[problem.dag.instruction(node).stage]);
  }
  return choice;
}

std::vector<double> option_times(const EnergyProblem& problem, const OptionChoice& choice) {
  std::vector<double> times(choice.size());
  for (std::size_t i = 0; i < choice.size(); ++i) {
    times[i] = problem.chosen(static_cast<Dag::NodeId>(i), choice).measurement.time_s;
  }
  return times;
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

std::int32_t option_at_frequency(const OperationOptions& operation, int frequency_mhz) {
  if (operation.options.empty()) {
    throw InputError(fmt::format("operation '{}' of stage {} has no options", to_string(operation.kind), operation.stage));
  }
  std::int32_t best = -1, highest = 0;
  for (std::size_t i = 0; i < operation.options.size(); ++i) {
    const Measurement& m = operation.options[i].measurement;
    const Measurement& h = operation.options[highest].measurement;
    if (m.frequency_mhz > h.frequency_mhz || (m.frequency_mhz == h.frequency_mhz && m.time_s < h.time_s)) {
      highest = static_cast<std::int32_t>(i);
    }
    if (m.frequency_mhz < frequency_mhz) continue;
    if (best < 0) {
      best = static_cast<std::int32_t>(i);
      continue;
    }
    const Measurement& b = operation.options[best].measurement;
    if (m.frequency_mhz < b.frequency_mhz || (m.frequency_mhz == b.frequency_mhz && m.time_s < b.time_s)) {
      best = static_cast<std::int32_t>(i);
    }
  }
  return best >= 0 ? best : highest;
}

BaselinePlan all_max(const EnergyProblem& problem) {
  OptionChoice choice(problem.dag.num_nodes());
  for (std::size_t i = 0; i < choice.size(); ++i) {
    choice[i] = option_at_frequency(problem.options_of(static_cast<Dag::NodeId>(i)), std::numeric_limits<int>::max());
  }
  return {"AllMax", "highest clock", std::move(choice), {}};
}

std::vector<BaselinePlan> zeus_global(const EnergyProblem& problem) {
  std::vector<BaselinePlan> plans;
  for (int f : descending_clocks(problem, [](const OperationOptions&) { return true; })) {
    std::vector<int> clock(problem.dag.num_stages(), f);
    OptionChoice choice = choice_at_stage_clocks(problem, clock);
    plans.push_back({"ZeusGlobal", fmt::format("{} MHz", f), std::move(choice), std::move(clock)});
  }
  return plans;
}

std::vector<BaselinePlan> zeus_per_stage(const EnergyProblem& problem) {
  const int stages = problem.dag.num_stages();
  std::vector<std::vector<int>> stage_clocks(stages);
  for (int d = 0; d < stages; ++d) {
    stage_clocks[d] = descending_clocks(problem, [&](const OperationOptions& op) { return op.stage % stages == d; });
  }
  // Forward time of device d with its clock at f: its chunks' forwards, one after another.
  auto forward_time = [&](int d, int f) {
    double time = 0.0;
    for (const OperationOptions& op : problem.operations) {
      if (op.stage % stages != d || op.kind != InstructionKind::kForward) continue;
      time += op.options[option_at_frequency(op, f)].measurement.time_s;
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
    std::vector<int> clock(stages, 0);
    for (int d = 0; d < stages; ++d) {
      if (stage_clocks[d].empty()) continue;
      clock[d] = d == bottleneck ? f : stage_clocks[d].front();
      for (int g : stage_clocks[d]) {  // descending: the last that fits is the lowest
        if (!fits(forward_time(d, g), target)) break;
        clock[d] = g;
      }
    }
    std::string setting = "stage clocks";
    for (int d = 0; d < stages; ++d) setting += fmt::format("{}{}", d == 0 ? " " : "/", clock[d]);
    OptionChoice choice = choice_at_stage_clocks(problem, clock);
    plans.push_back({"ZeusPerStage", setting + " MHz", std::move(choice), std::move(clock)});
  }
  return plans;
}

BaselinePlan envpipe(const EnergyProblem& problem) {
  const Dag& dag = problem.dag;
  BaselinePlan plan = all_max(problem);
  plan.method = "EnvPipe";
  plan.setting = "last stage at the highest clock, others fill their slack";
  std::vector<double> durations = option_times(problem, plan.choice);
  const double deadline = critical_path_length<double>(dag, durations);
  std::vector<double> earliest_start;
  for (int stage = dag.num_stages() - 2; stage >= 0; --stage) {
    for (Dag::NodeId node : dag.stage_nodes(stage)) {
      const OperationOptions& operation = problem.options_of(node);
      if (operation.is_constant()) continue;
      critical_path_length<double>(dag, durations, &earliest_start);
      const std::vector<double> finish = latest_finish(dag, durations, deadline);
      const double window = finish[node] - earliest_start[node];
      std::int32_t& chosen = plan.choice[node];
      for (std::size_t i = 0; i < operation.options.size(); ++i) {
        const Measurement& m = operation.options[i].measurement;
        if (m.frequency_mhz < operation.options[chosen].measurement.frequency_mhz && fits(m.time_s, window)) {
          chosen = static_cast<std::int32_t>(i);
        }
      }
      durations[node] = operation.options[chosen].measurement.time_s;
    }
  }
  return plan;
}

std::vector<BaselinePoint> evaluate_baselines(const EnergyProblem& problem, std::vector<BaselinePlan> plans,
                                              const EmulationConfig& config) {
  const auto clocks = std::make_shared<const FrequencyTable>(FrequencyTable::from_problem(problem));
  std::vector<BaselinePoint> points;
  points.reserve(plans.size());
  for (BaselinePlan& plan : plans) {
    const EmulationResult result = emulate(problem, plan_from_choice(problem, plan.choice, clocks), config);
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
