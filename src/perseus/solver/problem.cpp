#include "perseus/solver/problem.hpp"

#include <cmath>
#include <limits>
#include <map>
#include <string>

namespace perseus {
namespace {

// With v chunks and a profile of S stages, every chunk runs 1/v of its device's layers:
// scale the measurements before quantising and fitting, so q and the fit are the chunk's.
Profile scaled_for_chunks(const Profile& profile, int chunks) {
  std::vector<OperationProfile> operations = profile.operations();
  for (OperationProfile& op : operations) {
    for (Measurement& m : op.measurements) {
      m.time_s /= chunks;
      m.energy_j /= chunks;
    }
  }
  return Profile::from_operations(profile.source() + " (1/" + std::to_string(chunks) + " per chunk)",
                                  std::move(operations));
}

}  // namespace

EnergyProblem make_problem(const Profile& profile, const ScheduleSpec& spec,
                           const OptionsConfig& config, std::vector<Warning>* warnings) {
  const Schedule schedule = make_schedule(spec);
  EnergyProblem problem{Dag(schedule), {}, {}, config.unit_time, config.p_blocking};

  const int virtual_stages = spec.stages * spec.chunks;
  const bool per_virtual_stage = spec.chunks > 1 && profile.num_stages() == virtual_stages;
  const int profile_stages = per_virtual_stage ? virtual_stages : spec.stages;
  if (profile.num_stages() != profile_stages) {
    throw InputError(profile.source() + ": profile has " + std::to_string(profile.num_stages()) +
                     " stages but the schedule has " + std::to_string(spec.stages) +
                     (spec.chunks > 1 ? " (or " + std::to_string(virtual_stages) + " virtual)" : "") +
                     " stages");
  }
  profile.validate_for(profile_stages);

  const bool scale = spec.chunks > 1 && !per_virtual_stage;
  std::vector<OperationOptions> built = build_operation_options(
      scale ? scaled_for_chunks(profile, spec.chunks) : profile, config, warnings);
  std::map<std::pair<int, InstructionKind>, std::int32_t> index;  // (virtual stage, kind) -> operation

  auto operation_for = [&](int vstage, InstructionKind kind) -> std::int32_t {
    if (auto it = index.find({vstage, kind}); it != index.end()) return it->second;
    const int profile_stage = per_virtual_stage ? vstage : vstage % spec.stages;
    const OperationOptions* found = nullptr;
    auto find_built = [&](InstructionKind k) -> const OperationOptions* {
      for (const OperationOptions& op : built) {
        if (op.stage == profile_stage && op.kind == k) return &op;
      }
      return nullptr;
    };
    found = find_built(kind);
    if (!found && kind == InstructionKind::kRecompute) found = find_built(InstructionKind::kForward);
    if (!found) {
      throw InputError(profile.source() + ": the " + std::string(to_string(spec.kind)) +
                       " schedule needs '" + std::string(to_string(kind)) + "' on stage " +
                       std::to_string(profile_stage) + ", which the profile does not have");
    }
    OperationOptions op = *found;
    op.stage = vstage;
    op.kind = kind;
    problem.operations.push_back(std::move(op));
    const auto id = static_cast<std::int32_t>(problem.operations.size() - 1);
    index[{vstage, kind}] = id;
    return id;
  };

  problem.node_operation.resize(problem.dag.num_nodes());
  for (std::size_t n = 0; n < problem.dag.num_nodes(); ++n) {
    const auto id = static_cast<Dag::NodeId>(n);
    problem.node_operation[n] = operation_for(problem.dag.virtual_stage(id), problem.dag.instruction(id).kind);
  }
  return problem;
}

namespace {

// Critical path and energies of a plan given each node's measurement.
// critical_path_s: the plan's critical path if the caller has it (NaN: computed here).
template <typename MeasurementOf>
MeasuredFigures evaluate(const EnergyProblem& problem, MeasurementOf measurement_of,
                         double critical_path_s = std::numeric_limits<double>::quiet_NaN()) {
  const std::size_t n = problem.dag.num_nodes();
  const bool known = !std::isnan(critical_path_s);
  std::vector<double> durations(known ? 0 : n);
  MeasuredFigures figures;
  double busy = 0.0;
  for (std::size_t i = 0; i < n; ++i) {
    const Measurement& m = measurement_of(static_cast<Dag::NodeId>(i));
    if (!known) durations[i] = m.time_s;
    busy += m.time_s;
    figures.computation_energy_j += m.energy_j;
  }
  figures.time_s = known ? critical_path_s : critical_path_length<double>(problem.dag, durations);
  figures.blocking_energy_j = problem.p_blocking * (problem.num_gpus() * figures.time_s - busy);
  figures.energy_j = figures.computation_energy_j + figures.blocking_energy_j;
  return figures;
}

}  // namespace

MeasuredFigures evaluate_measured(const EnergyProblem& problem, const OptionChoice& choice) {
  return evaluate(problem, [&](Dag::NodeId n) -> const Measurement& { return problem.chosen(n, choice).measurement; });
}

MeasuredFigures evaluate_measured(const EnergyProblem& problem, const OptionChoice& choice, double critical_path_s) {
  return evaluate(
      problem, [&](Dag::NodeId n) -> const Measurement& { return problem.chosen(n, choice).measurement; },
      critical_path_s);
}

MeasuredFigures evaluate_highest_clock(const EnergyProblem& problem) {
  return evaluate(problem, [&](Dag::NodeId n) -> const Measurement& { return problem.options_of(n).highest_clock; });
}

OptionChoice fastest_choice(const EnergyProblem& problem) {
  OptionChoice choice(problem.dag.num_nodes());
  for (std::size_t i = 0; i < choice.size(); ++i) {
    choice[i] = static_cast<std::int32_t>(problem.options_of(static_cast<Dag::NodeId>(i)).options.size()) - 1;
  }
  return choice;
}

OptionChoice slowest_choice(const EnergyProblem& problem) {
  return OptionChoice(problem.dag.num_nodes(), 0);
}

RoundedChoice round_to_options(const EnergyProblem& problem, std::span<const double> durations_s, double tolerance_s) {
  const std::size_t n = durations_s.size();
  RoundedChoice rounded{OptionChoice(n), OptionChoice(n)};
  for (std::size_t i = 0; i < n; ++i) {
    const OperationOptions::Bracket bracket = problem.options_of(static_cast<Dag::NodeId>(i)).bracket(durations_s[i], tolerance_s);
    rounded.down[i] = bracket.down;
    rounded.up[i] = bracket.up;
  }
  return rounded;
}

OptionChoice round_down_to_options(const EnergyProblem& problem, std::span<const double> durations_s, double tolerance_s) {
  OptionChoice down(durations_s.size());
  for (std::size_t i = 0; i < durations_s.size(); ++i) {
    down[i] = problem.options_of(static_cast<Dag::NodeId>(i)).round_down(durations_s[i], tolerance_s);
  }
  return down;
}

HullCorners hull_corners(const EnergyProblem& problem) {
  HullCorners corners;
  corners.reserve(problem.operations.size());
  for (const OperationOptions& operation : problem.operations) corners.push_back(hull_corner_options(operation, problem.p_blocking));
  return corners;
}

OptionChoice round_down_to_corners(const EnergyProblem& problem, const HullCorners& corners,
                                   std::span<const double> durations_s, double tolerance_s) {
  OptionChoice rounded(durations_s.size());
  for (std::size_t i = 0; i < durations_s.size(); ++i) {
    const std::int32_t operation = problem.node_operation[i];
    const std::vector<std::int32_t>& of = corners[static_cast<std::size_t>(operation)];
    const std::vector<Option>& options = problem.operations[static_cast<std::size_t>(operation)].options;
    std::int32_t chosen = of.empty() ? 0 : of.front();  // no options: as round_to_options
    for (const std::int32_t k : of) {  // fastest first: the last that fits
      if (options[static_cast<std::size_t>(k)].measurement.time_s <= durations_s[i] + tolerance_s) chosen = k;
      else break;
    }
    rounded[i] = chosen;
  }
  return rounded;
}

}  // namespace perseus
