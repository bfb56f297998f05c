#include "perseus/emulator/execution_plan.hpp"

#include <fmt/format.h>

#include "perseus/model/errors.hpp"

namespace perseus {
namespace {

// "stage 2, instruction 5 (B1)": where in the schedule a node sits, for error messages.
std::string where(const Dag& dag, Dag::NodeId node, std::size_t position) {
  const Instruction& instruction = dag.instruction(node);
  return fmt::format("stage {}, instruction {} ({})", instruction.stage, position, label(instruction));
}

void check_clocks(const EnergyProblem& problem, const FrequencyTable& clocks) {
  if (clocks.num_operations() != problem.operations.size()) {
    throw InputError(fmt::format("the frequency table has {} operations but the problem has {}",
                                 clocks.num_operations(), problem.operations.size()));
  }
}

}  // namespace

ExecutionPlan plan_from_choice(const EnergyProblem& problem, const OptionChoice& choice,
                               std::shared_ptr<const FrequencyTable> clocks) {
  const std::size_t n = problem.dag.num_nodes();
  if (choice.size() != n) {
    throw InputError(fmt::format("the plan has {} entries but the schedule has {} instructions "
                                 "(a plan for a different schedule?)",
                                 choice.size(), n));
  }
  if (!clocks) clocks = std::make_shared<const FrequencyTable>(FrequencyTable::from_problem(problem));
  check_clocks(problem, *clocks);
  ExecutionPlan plan;
  plan.frequency_mhz.resize(n);
  plan.time_s.resize(n);
  plan.energy_j.resize(n);
  for (int stage = 0; stage < problem.dag.num_stages(); ++stage) {
    const auto nodes = problem.dag.stage_nodes(stage);
    for (std::size_t position = 0; position < nodes.size(); ++position) {
      const Dag::NodeId node = nodes[position];
      const auto& options = problem.options_of(node).options;
      const std::int32_t index = choice[node];
      if (index < 0 || static_cast<std::size_t>(index) >= options.size()) {
        throw InputError(fmt::format("{}: option {} does not exist (it has {} options)",
                                     where(problem.dag, node, position), index, options.size()));
      }
      const Measurement& m = options[index].measurement;
      plan.frequency_mhz[node] = m.frequency_mhz;
      plan.time_s[node] = m.time_s;
      plan.energy_j[node] = m.energy_j;
    }
  }
  plan.clocks = std::move(clocks);
  return plan;
}

ExecutionPlan plan_from_clocks(const EnergyProblem& problem, const std::vector<std::int32_t>& clock_mhz,
                               std::shared_ptr<const FrequencyTable> clocks) {
  if (!clocks) throw InputError("plan_from_clocks needs a frequency table");
  check_clocks(problem, *clocks);
  const std::size_t n = problem.dag.num_nodes();
  if (clock_mhz.size() != n) {
    throw InputError(fmt::format("the plan has {} entries but the schedule has {} instructions "
                                 "(a plan for a different schedule?)",
                                 clock_mhz.size(), n));
  }
  ExecutionPlan plan;
  plan.frequency_mhz = clock_mhz;
  plan.time_s.resize(n);
  plan.energy_j.resize(n);
  for (int stage = 0; stage < problem.dag.num_stages(); ++stage) {
    const auto nodes = problem.dag.stage_nodes(stage);
    for (std::size_t position = 0; position < nodes.size(); ++position) {
      const Dag::NodeId node = nodes[position];
      const auto operation = static_cast<std::size_t>(problem.node_operation[node]);
      const std::optional<ClockFigures> figures = clocks->at(operation, clock_mhz[node], false);
      if (!figures) {
        throw InputError(fmt::format("{}: {} MHz is not in the profile", where(problem.dag, node, position), clock_mhz[node]));
      }
      plan.time_s[node] = figures->time_s;
      plan.energy_j[node] = figures->energy_j;
    }
  }
  plan.clocks = std::move(clocks);
  return plan;
}

ExecutionPlan plan_from_frequencies(const EnergyProblem& problem, const PipelineFrequencies& frequencies,
                                    std::shared_ptr<const FrequencyTable> clocks, bool interpolate) {
  if (!clocks) throw InputError("plan_from_frequencies needs a frequency table (the profile's measurements)");
  check_clocks(problem, *clocks);
  const Dag& dag = problem.dag;
  if (frequencies.size() != static_cast<std::size_t>(dag.num_stages())) {
    throw InputError(fmt::format("the plan has {} stages but the schedule has {}", frequencies.size(),
                                 dag.num_stages()));
  }
  const std::size_t n = dag.num_nodes();
  ExecutionPlan plan;
  plan.frequency_mhz.resize(n);
  plan.time_s.resize(n);
  plan.energy_j.resize(n);
  for (int stage = 0; stage < dag.num_stages(); ++stage) {
    const auto nodes = dag.stage_nodes(stage);
    const auto& list = frequencies[stage];
    if (list.size() != nodes.size()) {
      throw InputError(fmt::format("stage {} of the plan has {} instructions but the schedule runs {} there "
                                   "(a plan for a different schedule?)",
                                   stage, list.size(), nodes.size()));
    }
    for (std::size_t position = 0; position < nodes.size(); ++position) {
      const Dag::NodeId node = nodes[position];
      const auto& [name, frequency] = list[position];
      const InstructionKind kind = dag.instruction(node).kind;
      if (name != to_string(kind)) {
        throw InputError(fmt::format("{}: the plan says '{}' where the schedule runs '{}' "
                                     "(a plan for a different schedule?)",
                                     where(dag, node, position), name, to_string(kind)));
      }
      const std::size_t operation = static_cast<std::size_t>(problem.node_operation[node]);
      const std::optional<ClockFigures> figures = clocks->at(operation, frequency, interpolate);
      if (!figures) {
        const auto points = clocks->points(operation);
        throw InputError(fmt::format("{}: {} MHz is not in the profile (measured {}..{} MHz{})",
                                     where(dag, node, position), frequency, points.front().frequency_mhz,
                                     points.back().frequency_mhz,
                                     interpolate ? "; interpolation never extrapolates" : "; allow interpolation to use it"));
      }
      plan.frequency_mhz[node] = frequency;
      plan.time_s[node] = figures->time_s;
      plan.energy_j[node] = figures->energy_j;
    }
  }
  plan.clocks = std::move(clocks);
  return plan;
}

}  // namespace perseus
