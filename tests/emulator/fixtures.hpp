// EnergyProblems built by hand for the emulator's tests: a schedule's Dag plus, for every
// (virtual stage, instruction kind), hand-made options, without fitting anything.
#pragma once

#include <algorithm>
#include <cmath>
#include <map>
#include <random>
#include <tuple>
#include <utility>
#include <vector>

#include "perseus/schedule/dag.hpp"
#include "perseus/solver/problem.hpp"

namespace perseus::testing {

struct Point {
  int frequency_mhz;
  double time_s;
  double energy_j;
};

// Options as the solver keeps them: slowest first.
inline OperationOptions make_operation(int stage, InstructionKind kind, std::vector<Point> points,
                                       double unit_time = 0.001, double p_blocking = 0.0) {
  std::sort(points.begin(), points.end(), [](const Point& a, const Point& b) { return a.time_s > b.time_s; });
  OperationOptions op;
  op.stage = stage;
  op.kind = kind;
  for (const Point& p : points) {
    Option option;
    option.measurement = {std::to_string(p.frequency_mhz), p.frequency_mhz, p.time_s, p.energy_j, 0};
    option.q = static_cast<std::int64_t>(std::floor(p.time_s / unit_time));
    option.effective_energy = p.energy_j - p_blocking * option.q * unit_time;
    op.options.push_back(option);
  }
  return op;
}

// `points_for(virtual stage, kind)` gives the options of every operation the schedule needs.
template <typename PointsFor>
EnergyProblem make_test_problem(const ScheduleSpec& spec, double p_blocking, PointsFor points_for) {
  EnergyProblem problem{Dag(make_schedule(spec)), {}, {}, 0.001, p_blocking};
  std::map<std::pair<int, InstructionKind>, std::int32_t> index;
  problem.node_operation.resize(problem.dag.num_nodes());
  for (std::size_t i = 0; i < problem.dag.num_nodes(); ++i) {
    const auto node = static_cast<Dag::NodeId>(i);
    const int vstage = problem.dag.virtual_stage(node);
    const InstructionKind kind = problem.dag.instruction(node).kind;
    auto [it, added] = index.try_emplace({vstage, kind}, static_cast<std::int32_t>(problem.operations.size()));
    if (added) problem.operations.push_back(make_operation(vstage, kind, points_for(vstage, kind), 0.001, p_blocking));
    problem.node_operation[i] = it->second;
  }
  return problem;
}

// Every stage alike: forward tf, backward tb at the highest of a few clocks (slower and
// cheaper below it); loads take `load_s` at one fixed point.
inline EnergyProblem balanced_problem(const ScheduleSpec& spec, double tf, double tb, double p_blocking = 80.0,
                                      double load_s = 0.01) {
  return make_test_problem(spec, p_blocking, [&](int, InstructionKind kind) -> std::vector<Point> {
    if (kind == InstructionKind::kLoad) return {{0, load_s, load_s * 50.0}};
    const double base = kind == InstructionKind::kBackward ? tb : tf;
    std::vector<Point> points;
    for (int f : {1410, 1200, 1000, 800}) {
      const double time = base * (0.4 + 0.6 * 1410.0 / f);
      points.push_back({f, time, time * (80.0 + 220.0 * std::pow(f / 1410.0, 2.0))});
    }
    return points;
  });
}

// Stages of different speeds, each operation measured at its own subset of clocks (as after
// Pareto filtering), loads as constant-time operations.
inline EnergyProblem random_problem(const ScheduleSpec& spec, std::uint32_t seed, double p_blocking = 75.0) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  return make_test_problem(spec, p_blocking, [&](int, InstructionKind kind) -> std::vector<Point> {
    if (kind == InstructionKind::kLoad) return {{0, 0.005 + 0.01 * unit(rng), 0.5}};
    const double base = (kind == InstructionKind::kBackward ? 0.08 : 0.04) * (0.6 + 0.8 * unit(rng));
    const double share = 0.4 + 0.6 * unit(rng);
    std::vector<Point> points;
    for (int f = 1410; f >= 810; f -= 60) {
      if (f != 1410 && unit(rng) < 0.25) continue;  // a clock the filter dropped
      const double time = base * (share * 1410.0 / f + 1.0 - share);
      points.push_back({f, time, time * (70.0 + 250.0 * std::pow(f / 1410.0, 2.5))});
    }
    return points;
  });
}

inline OptionChoice random_choice(const EnergyProblem& problem, std::uint32_t seed) {
  std::mt19937 rng(seed);
  OptionChoice choice(problem.dag.num_nodes());
  for (std::size_t i = 0; i < choice.size(); ++i) {
    const auto count = problem.options_of(static_cast<Dag::NodeId>(i)).options.size();
    choice[i] = static_cast<std::int32_t>(std::uniform_int_distribution<std::size_t>(0, count - 1)(rng));
  }
  return choice;
}

inline std::vector<double> chosen_times(const EnergyProblem& problem, const OptionChoice& choice) {
  std::vector<double> times(choice.size());
  for (std::size_t i = 0; i < choice.size(); ++i) times[i] = problem.chosen(static_cast<Dag::NodeId>(i), choice).measurement.time_s;
  return times;
}

inline double sum_of(const std::vector<double>& values) {
  double total = 0.0;
  for (double v : values) total += v;
  return total;
}

}  // namespace perseus::testing
