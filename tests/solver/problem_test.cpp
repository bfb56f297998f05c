#include <gtest/gtest.h>

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
