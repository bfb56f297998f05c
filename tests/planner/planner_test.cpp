// End to end: from a model and a cluster to a frontier and the energy Perseus saves.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "perseus/model/errors.hpp"
#include "perseus/model/instruction.hpp"
#include "perseus/planner/planner.hpp"
#include "perseus/solver/relaxation.hpp"

namespace perseus::planner {
namespace {

std::string error_of(const PlanRequest& request) {
  try {
    plan_training(request);
  } catch (const InputError& e) {
    return e.what();
  }
  return "(no error)";
}

// gpt3-1.3b on 8 A100s at fixed tensor and pipeline degrees, microbatch 1, no recomputation,
// no straggler rows.
PlanRequest gpt3_1_3b_on_8(int global_batch, int tensor, int pipeline) {
  PlanRequest request;
  request.model = "gpt3-1.3b";
  request.gpu = "a100-sxm";
  request.num_gpus = 8;
  request.global_batch = global_batch;
  request.tensor = tensor;
  request.pipeline = pipeline;
  request.microbatch_size = 1;
  request.allow_recompute = false;
  request.straggler_slowdowns = {};
  return request;
}

TEST(PlanTraining, Gpt3OnSixtyFourA100s) {
  // The example: perseus plan --model gpt3-13b --gpu a100-sxm --gpus 64 --global-batch 1024.
  PlanRequest request;
  request.model = "gpt3-13b";
  request.gpu = "a100-sxm";
  request.num_gpus = 64;
  request.global_batch = 1024;
  const PlanReport r = plan_training(request);
  const ParallelConfig& c = r.chosen.config;
  EXPECT_EQ(c.tensor * c.pipeline * c.data, 64);
  EXPECT_EQ(c.data * c.microbatch_size * c.microbatches, 1024);
  EXPECT_LE(c.tensor, 8);
  EXPECT_TRUE(r.chosen.fits);
  // The partition is the exact min-imbalance one over the chosen stages, no worse than equal layer counts.
  EXPECT_EQ(r.partition.num_stages(), c.pipeline);
  EXPECT_LE(r.partition.imbalance_ratio, r.uniform_partition.imbalance_ratio);
  r.profile.validate_for(c.pipeline);
  ASSERT_TRUE(r.solved);
  ASSERT_FALSE(r.frontier.points.empty());
  // Perseus never costs energy at T_min, and saves some when stages are imbalanced.
  EXPECT_GE(r.savings_at_t_min_j, 0.0);
  EXPECT_GT(r.savings_at_t_min_fraction, 0.0);
  EXPECT_LE(r.frontier.t_min_point().measured.time_s, r.frontier.all_max.time_s * (1 + 1e-9));
  // Stragglers: the plan runs at T_opt = min(T*, T'), and the Joules saved grow while T' < T*
  // (the fraction need not: the baseline's energy grows with T' too).
  ASSERT_EQ(r.stragglers.size(), 4u);
  const double t_star = r.frontier.t_star_point().measured.time_s;
  for (std::size_t i = 0; i < r.stragglers.size(); ++i) {
    const StragglerSaving& s = r.stragglers[i];
    EXPECT_LE(s.plan_time_s, std::min(t_star, s.straggler_time_s) + 1e-9);
    EXPECT_GT(s.savings_fraction, r.savings_at_t_min_fraction);
    if (i > 0 && s.straggler_time_s <= t_star) {
      const StragglerSaving& before = r.stragglers[i - 1];
      EXPECT_GT(s.baseline_energy_j - s.perseus_energy_j, before.baseline_energy_j - before.perseus_energy_j);
    }
  }
  // Every choice comes with its reason.
  ASSERT_GE(r.reasons.size(), 4u);
  EXPECT_NE(r.reasons.front().find(describe(c)), std::string::npos);
  bool mentions_partition = false;
  for (const std::string& reason : r.reasons) mentions_partition |= reason.find("min-imbalance") != std::string::npos;
  EXPECT_TRUE(mentions_partition);
}

TEST(PlanTraining, FixedDegreesAndAsynchronousSchedules) {
  PlanRequest request;
  request.model = "gpt3-1.3b";
  request.gpu = "a40";
  request.num_gpus = 8;
  request.global_batch = 32;
  request.tensor = 2;
  request.pipeline = 4;
  request.schedule = "pipedream-2bw";
  request.straggler_slowdowns = {1.1};
  const PlanReport r = plan_training(request);
  EXPECT_EQ(r.chosen.config.tensor, 2);
  EXPECT_EQ(r.chosen.config.pipeline, 4);
  EXPECT_EQ(r.chosen.config.schedule, ScheduleKind::kPipeDream2BW);
  EXPECT_EQ(r.chosen.memory.weight_versions, 2);
  EXPECT_EQ(r.schedule.kind, ScheduleKind::k1F1B);  // solved on the 1F1B-ordered window
  EXPECT_TRUE(r.solved);
  EXPECT_DOUBLE_EQ(r.p_blocking, 70.38);
}

// Interleaved 1F1B with recomputation: the frontier's DAG holds the recomputations, so T_min is
// the estimate's pipeline time (the estimate times the same stages), not one forward per
// microbatch short of it, and the plan says nothing is left out.
TEST(PlanTraining, InterleavedFrontierRecomputesAsTheConfigurationDoes) {
  PlanRequest request;
  request.model = "gpt3-13b";
  request.gpu = "a100-sxm";
  request.num_gpus = 64;
  request.global_batch = 128;
  request.tensor = 8;
  request.pipeline = 4;
  request.microbatch_size = 1;
  request.schedule = "interleaved-1f1b-recompute";
  request.straggler_slowdowns = {};
  const PlanReport r = plan_training(request);
  ASSERT_TRUE(r.solved);
  EXPECT_EQ(r.schedule.kind, ScheduleKind::kInterleaved1F1BRecompute);
  EXPECT_TRUE(r.warnings.empty()) << r.warnings.front();
  std::size_t recomputations = 0;
  for (std::size_t n = 0; n < r.problem->dag.num_nodes(); ++n) {
    recomputations += r.problem->dag.instruction(static_cast<Dag::NodeId>(n)).kind == InstructionKind::kRecompute;
  }
  EXPECT_EQ(recomputations, static_cast<std::size_t>(r.chosen.config.pipeline * r.chosen.config.chunks *
                                                     r.chosen.config.microbatches));
  // T_min against the estimate's pipeline part: within 10% (the estimate uses the min-max
  // partition and closed-form fill; the plan the min-imbalance partition and the DAG).
  const double t_min = r.frontier.t_min_point().measured.time_s;
  EXPECT_NEAR(t_min / r.chosen.pipeline_s, 1.0, 0.10) << t_min << " vs " << r.chosen.pipeline_s;
}

TEST(PlanTraining, AsynchronousWindowProblemIsTheSteadyState) {
  // Equal stages, two clocks each: at the highest clocks the window takes the closed form
  // W(t_f + t_b) + min((S-1)/2, W)|t_b - t_f|, and every node runs its stage's options.
  const int S = 4, W = 12;
  const double tf = 0.010, tb = 0.021;
  std::vector<OperationProfile> operations;
  for (int s = 0; s < S; ++s) {
    operations.push_back({s, InstructionKind::kForward, {{"", 1410, tf, 2.0}, {"", 1005, 1.3 * tf, 1.7}}});
    operations.push_back({s, InstructionKind::kBackward, {{"", 1410, tb, 4.0}, {"", 1005, 1.3 * tb, 3.4}}});
  }
  const Profile profile = Profile::from_operations("equal stages", std::move(operations));
  for (bool recompute : {false, true}) {
    std::vector<Warning> warnings;
    const EnergyProblem problem =
        make_async_window_problem(profile, S, W, recompute, OptionsConfig{0.001, 60.0, {}}, &warnings);
    EXPECT_EQ(problem.dag.num_nodes(), static_cast<std::size_t>((recompute ? 3 : 2) * S * W));
    const double all_max = evaluate_highest_clock(problem).time_s;
    if (recompute) {
      // Each stage runs W(2t_f + t_b); a recomputation waits for nothing but its stage, so it
      // may overlap the wait for the gradient: at most the closed form with t_b + t_f backwards.
      EXPECT_GE(all_max, W * (2 * tf + tb) - 1e-12);
      EXPECT_LE(all_max, async_window_time_closed_form(S, W, tf, tf + tb) + 1e-12);
    } else {
      EXPECT_NEAR(all_max, async_window_time_closed_form(S, W, tf, tb), 1e-12);
    }
    for (std::size_t n = 0; n < problem.dag.num_nodes(); ++n) {
      const Instruction& ins = problem.dag.instruction(static_cast<Dag::NodeId>(n));
      EXPECT_EQ(problem.options_of(static_cast<Dag::NodeId>(n)).stage, ins.stage);
      EXPECT_EQ(problem.options_of(static_cast<Dag::NodeId>(n)).kind, ins.kind);
    }
  }
}

TEST(PlanTraining, TwoBwIsFasterThanOneFOneBOnTheSameConfiguration) {
  // perseus plan --schedule pipedream-2bw against 1f1b: the same configuration, partition and
  // profile; no fill or drain, so a lower T_min, no lower than m times the bottleneck stage.
  PlanRequest request = gpt3_1_3b_on_8(32, 2, 4);
  const PlanReport flush = plan_training(request);
  request.schedule = "pipedream-2bw";
  const PlanReport two_bw = plan_training(request);
  ASSERT_TRUE(flush.solved && two_bw.solved);
  ParallelConfig same = flush.chosen.config;
  same.schedule = ScheduleKind::kPipeDream2BW;
  EXPECT_EQ(describe(two_bw.chosen.config), describe(same));
  EXPECT_EQ(two_bw.partition.boundaries, flush.partition.boundaries);
  const int m = two_bw.chosen.config.microbatches, p = two_bw.chosen.config.pipeline;
  double bottleneck = 0.0, slowest[2] = {0.0, 0.0};  // of the fastest options: F + B, F, B
  for (int s = 0; s < p; ++s) {
    double fastest[2] = {1e300, 1e300};
    for (int k = 0; k < 2; ++k) {
      for (const Measurement& row : two_bw.profile.find(s, k == 0 ? InstructionKind::kForward : InstructionKind::kBackward)
                                        ->measurements) {
        fastest[k] = std::min(fastest[k], row.time_s);
      }
    }
    bottleneck = std::max(bottleneck, fastest[0] + fastest[1]);
    for (int k = 0; k < 2; ++k) slowest[k] = std::max(slowest[k], fastest[k]);
  }
  const double t_min_2bw = two_bw.frontier.t_min_point().measured.time_s;
  const double t_min_1f1b = flush.frontier.t_min_point().measured.time_s;
  EXPECT_LT(t_min_2bw, t_min_1f1b);
  EXPECT_GE(t_min_2bw, m * bottleneck - 1e-9);
  // Critical paths grow with durations: at most the equal-stage closed form with the slowest
  // forward and the slowest backward of any stage.
  EXPECT_LE(t_min_2bw, async_window_time_closed_form(p, m, slowest[0], slowest[1]) + 1e-9);
}

TEST(PlanTraining, TMinsBoundHoldsWhereItsRelaxationIsSkippedAndCertifySolvesIt) {
  // 8 stages x 160 microbatches at 0.1 ms (2,560 nodes): T_min's LP costs more than two
  // refinement budgets and is skipped, its bound coming from the crawl's flows. The flow of
  // the cut that stops the crawl runs through its unbounded arcs, and its line, noise from
  // terms of 1e16 J cancelling, once stood 2.5% above the LP optimum (4,481 J against 4,370:
  // no longer a bound). --certify solves the LP: a T_min plan no dearer, the optimum its bound.
  PlanRequest request = gpt3_1_3b_on_8(160, 1, 8);
  request.time_model = TimeModel::kProfiles;  // the durations this case was built on
  const PlanReport skipped = plan_training(request);
  ASSERT_TRUE(skipped.solved);
  ASSERT_EQ(skipped.problem->dag.num_nodes(), 2560u);
  EXPECT_FALSE(skipped.frontier.t_min_relaxation_solved);
  const double t_min = skipped.frontier.t_min_point().measured.time_s;
  LpRelaxation relaxation(*skipped.problem);
  const auto optimum = relaxation.solve(t_min);
  ASSERT_TRUE(optimum);
  ASSERT_TRUE(skipped.frontier.t_min_lower_bound_j);
  EXPECT_LE(*skipped.frontier.t_min_lower_bound_j, optimum->lower_bound_j * (1 + 1e-9));
  EXPECT_GT(*skipped.frontier.t_min_lower_bound_j, 0.98 * optimum->lower_bound_j);

  request.certify_seconds = 0.1;
  const PlanReport certified = plan_training(request);
  ASSERT_TRUE(certified.solved);
  EXPECT_TRUE(certified.frontier.t_min_relaxation_solved);
  EXPECT_NEAR(certified.frontier.t_min_point().measured.time_s, t_min, 1e-9);
  EXPECT_LE(certified.frontier.t_min_point().measured.energy_j, skipped.frontier.t_min_point().measured.energy_j + 1e-9);
  ASSERT_TRUE(certified.frontier.t_min_lower_bound_j);
  EXPECT_NEAR(*certified.frontier.t_min_lower_bound_j, optimum->lower_bound_j, 1e-6 * optimum->lower_bound_j);
}

TEST(PlanTraining, ClearErrors) {
  PlanRequest request;
  request.model = "gpt3-13b";
  request.gpu = "a100-sxm";
  request.num_gpus = 64;
  request.global_batch = 1024;
  request.solve = false;

  PlanRequest unknown = request;
  unknown.model = "gpt5";
  EXPECT_NE(error_of(unknown).find("known models: gpt3-1.3b"), std::string::npos);
  unknown = request;
  unknown.gpu = "tpu-v4";
  EXPECT_NE(error_of(unknown).find("known GPUs: a100-sxm"), std::string::npos);

  PlanRequest indivisible = request;
  indivisible.num_gpus = 60;
  indivisible.tensor = 8;
  EXPECT_NE(error_of(indivisible).find("--tensor-parallel 8 does not divide the 60 GPUs"), std::string::npos)
      << error_of(indivisible);

  // Too big for the cluster: says what the smallest footprint is and where it would fit.
  PlanRequest big = request;
  big.model = "gpt3-175b";
  big.num_gpus = 8;
  big.global_batch = 1536;
  const std::string too_big = error_of(big);
  EXPECT_NE(too_big.find("does not fit on 8 a100-sxm GPUs"), std::string::npos) << too_big;
  EXPECT_NE(too_big.find("it would fit on"), std::string::npos) << too_big;

  // No valid configuration: the real cause (64 stages for 42 layers), not the last one tried.
  PlanRequest deep = request;
  deep.pipeline = 64;
  const std::string too_deep = error_of(deep);
  EXPECT_NE(too_deep.find("more pipeline stages than gpt3-13b's 42 layers"), std::string::npos) << too_deep;
  EXPECT_EQ(too_deep.find("heads"), std::string::npos) << too_deep;

  // Fixed degrees that do not fit: names a configuration of the same GPUs that does.
  PlanRequest no_split = request;
  no_split.tensor = 1;
  no_split.pipeline = 1;
  no_split.allow_recompute = false;
  const std::string fixed = error_of(no_split);
  EXPECT_NE(fixed.find("with the degrees given"), std::string::npos) << fixed;
  EXPECT_NE(fixed.find("on 64 GPUs, t="), std::string::npos) << fixed;
}

}  // namespace
}  // namespace perseus::planner
