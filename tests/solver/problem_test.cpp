#include <gtest/gtest.h>

#include <algorithm>
#include <random>

#include "perseus/model/errors.hpp"
#include "perseus/solver/problem.hpp"
#include "synthetic.hpp"

namespace perseus {
namespace {

TEST(Problem, BindsEveryNodeToItsStageAndInstruction) {
  const EnergyProblem problem = testing::synthetic_problem({ScheduleKind::k1F1B, 3, 4, 1, false}, 6, 1);
  ASSERT_EQ(problem.node_operation.size(), problem.dag.num_nodes());
  for (std::size_t i = 0; i < problem.dag.num_nodes(); ++i) {
    const auto n = static_cast<Dag::NodeId>(i);
    EXPECT_EQ(problem.options_of(n).stage, problem.dag.instruction(n).stage);
    EXPECT_EQ(problem.options_of(n).kind, problem.dag.instruction(n).kind);
  }
}

TEST(Problem, MeasuredEnergyFollowsTheIterationEnergyFormula) {
  // Energy = sum e_i + p_blocking * (S * T - sum t_i) (docs/solver.md, "Iteration energy").
  const EnergyProblem problem = testing::synthetic_problem({ScheduleKind::kGPipe, 2, 3, 1, false}, 6, 2);
  const OptionChoice choice = fastest_choice(problem);
  double energy = 0.0, busy = 0.0;
  for (std::size_t i = 0; i < choice.size(); ++i) {
    const Measurement& m = problem.chosen(static_cast<Dag::NodeId>(i), choice).measurement;
    energy += m.energy_j;
    busy += m.time_s;
  }
  const MeasuredFigures f = evaluate_measured(problem, choice);
  EXPECT_NEAR(f.energy_j, energy + problem.p_blocking * (2 * f.time_s - busy), 1e-9);
  EXPECT_NEAR(f.computation_energy_j, energy, 1e-9);
}

// Rounding down to hull corners, against its definition node by node: the chosen option is a
// corner of its operation's hull, no slower than the duration (within the tolerance), and no
// slower corner is; below every corner, the fastest. Durations at, between, below and above
// the corners' times; a plan of durations that meet a deadline meets it rounded.
TEST(Problem, RoundsDownToTheSlowestHullCornerThatFits) {
  const EnergyProblem problem = testing::synthetic_problem({ScheduleKind::k1F1B, 3, 4, 1, false}, 9, 5);
  const HullCorners corners = hull_corners(problem);
  ASSERT_EQ(corners.size(), problem.operations.size());
  std::mt19937 random(3);
  const std::size_t n = problem.dag.num_nodes();
  for (int trial = 0; trial < 50; ++trial) {
    std::vector<double> durations(n);
    for (std::size_t i = 0; i < n; ++i) {
      const auto& options = problem.options_of(static_cast<Dag::NodeId>(i)).options;
      const double fastest = options.back().measurement.time_s, slowest = options.front().measurement.time_s;
      const double span = slowest - fastest;
      switch (random() % 4) {
        case 0:  // an option's own time
          durations[i] = options[random() % options.size()].measurement.time_s;
          break;
        case 1:  // just below it: within the tolerance where there is one
          durations[i] = options[random() % options.size()].measurement.time_s - 5e-10;
          break;
        default:  // anywhere from below the fastest to beyond the slowest
          durations[i] = fastest - 0.1 * span + 1.2 * span * std::uniform_real_distribution<double>(0, 1)(random);
      }
    }
    const double tolerance = trial % 2 ? 1e-9 : 0.0;
    const OptionChoice rounded = round_down_to_corners(problem, corners, durations, tolerance);
    // Rounding down to every option: round_to_options' down, node by node.
    ASSERT_EQ(round_down_to_options(problem, durations, tolerance), round_to_options(problem, durations, tolerance).down);
    ASSERT_EQ(rounded.size(), n);
    for (std::size_t i = 0; i < n; ++i) {
      const auto operation = static_cast<std::size_t>(problem.node_operation[i]);
      const auto& of = corners[operation];
      const auto& options = problem.operations[operation].options;
      ASSERT_NE(std::find(of.begin(), of.end(), rounded[i]), of.end()) << "node " << i << " not at a corner";
      const double t = options[rounded[i]].measurement.time_s;
      const bool any_fits = std::any_of(of.begin(), of.end(), [&](std::int32_t k) {
        return options[k].measurement.time_s <= durations[i] + tolerance;
      });
      if (!any_fits) {
        EXPECT_EQ(rounded[i], of.front()) << "node " << i;
        continue;
      }
      EXPECT_LE(t, durations[i] + tolerance) << "node " << i;
      for (const std::int32_t k : of) {
        const double other = options[k].measurement.time_s;
        EXPECT_FALSE(other > t && other <= durations[i] + tolerance) << "node " << i << ": a slower corner fits";
      }
    }
  }
  // The slowest option's durations round to the slowest corner, the fastest's to the fastest.
  std::vector<double> slowest(n), fastest(n);
  for (std::size_t i = 0; i < n; ++i) {
    slowest[i] = problem.options_of(static_cast<Dag::NodeId>(i)).options.front().measurement.time_s;
    fastest[i] = problem.options_of(static_cast<Dag::NodeId>(i)).options.back().measurement.time_s;
  }
  const OptionChoice at_slowest = round_down_to_corners(problem, corners, slowest);
  const OptionChoice at_fastest = round_down_to_corners(problem, corners, fastest);
  for (std::size_t i = 0; i < n; ++i) {
    const auto& of = corners[static_cast<std::size_t>(problem.node_operation[i])];
    EXPECT_EQ(at_slowest[i], of.back());
    EXPECT_EQ(at_fastest[i], of.front());
  }
  EXPECT_LE(evaluate_measured(problem, at_fastest).time_s, evaluate_measured(problem, fastest_choice(problem)).time_s + 1e-12);
}

TEST(Problem, InterleavedChunksTakeTheirShareOfTheDevice) {
  const Profile profile = testing::synthetic_profile(2, 6, 3);
  std::vector<Warning> warnings;
  const EnergyProblem whole = make_problem(profile, {ScheduleKind::k1F1B, 2, 4, 1, false}, {0.0005, 80.0, {}}, &warnings);
  const EnergyProblem split = make_problem(profile, {ScheduleKind::kInterleaved1F1B, 2, 4, 2, false}, {0.0005, 80.0, {}}, &warnings);
  const double full = whole.options_of(0).options.front().measurement.time_s;
  const double half = split.options_of(0).options.front().measurement.time_s;
  EXPECT_NEAR(half, full / 2, 1e-12);
}

TEST(Problem, MissingInstructionIsAClearError) {
  std::vector<OperationProfile> ops = testing::synthetic_profile(2, 6, 3).operations();
  ops.pop_back();  // stage 1 backward
  const Profile profile = Profile::from_operations("partial.csv", std::move(ops));
  std::vector<Warning> warnings;
  try {
    make_problem(profile, {ScheduleKind::k1F1B, 2, 2, 1, false}, {0.001, 80.0, {}}, &warnings);
    FAIL() << "expected InputError";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("backward"), std::string::npos) << e.what();
  }
}

TEST(Problem, StageCountMismatchIsAClearError) {
  std::vector<Warning> warnings;
  EXPECT_THROW(make_problem(testing::synthetic_profile(3, 6, 3), {ScheduleKind::k1F1B, 2, 2, 1, false},
                            {0.001, 80.0, {}}, &warnings),
               InputError);
}

}  // namespace
}  // namespace perseus
