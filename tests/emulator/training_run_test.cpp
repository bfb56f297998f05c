// Several iterations with drawn stragglers and per-instruction noise (training_run.hpp), and the
// two emulator features they rest on: the noise itself and the sampled power curve.
#include <gtest/gtest.h>

#include <cmath>
#include <set>
#include <string>
#include <vector>

#include "fixtures.hpp"
#include "perseus/emulator/training_run.hpp"
#include "perseus/model/errors.hpp"
#include "perseus/solver/crawl.hpp"
#include "perseus/solver/frontier.hpp"
#include "synthetic.hpp"

namespace perseus {
namespace {

using testing::balanced_problem;
using testing::random_choice;
using testing::random_problem;

double energy_of_curve(const EmulationResult& r) {
  double sum = 0.0;
  for (std::size_t i = 0; i < r.power_w.size(); ++i) sum += r.power_w[i] * r.power_sample_duration_s(i);
  return sum;
}

// ---------------------------------------------------------------- the power curve

TEST(PowerCurve, OneStageByHand) {
  // One GPU: F (1 s at 200 W) then B (2 s at 300 W); sampled every 0.5 s.
  const EnergyProblem problem = testing::make_test_problem(
      {ScheduleKind::k1F1B, 1, 1, 1, false}, 80.0, [](int, InstructionKind kind) -> std::vector<testing::Point> {
        return kind == InstructionKind::kForward ? std::vector<testing::Point>{{1000, 1.0, 200.0}}
                                                 : std::vector<testing::Point>{{1000, 2.0, 600.0}};
      });
  const ExecutionPlan plan = plan_from_choice(problem, fastest_choice(problem));
  EmulationConfig config;
  config.power_sample_s = 0.5;
  config.overheads.optimizer_step_s = 0.25;
  config.overheads.optimizer_power_w = 120.0;
  const EmulationResult r = emulate(problem, plan, config);
  const std::vector<double> expected = {200, 200, 300, 300, 300, 300, 120 * 0.5};  // the last sample: 0.25 s of 120 W
  ASSERT_EQ(r.power_w.size(), expected.size());
  for (std::size_t i = 0; i + 1 < expected.size(); ++i) EXPECT_NEAR(r.power_w[i], expected[i], 1e-9) << i;
  EXPECT_NEAR(r.power_sample_duration_s(6), 0.25, 1e-12);
  EXPECT_NEAR(r.power_w[6], 120.0, 1e-9);

  // A second pipeline starting 1 s late blocks at 80 W meanwhile.
  config.data_parallel = 2;
  config.stragglers = {{1, 1.0, 1.0}};
  const EmulationResult late = emulate(problem, plan, config);
  EXPECT_NEAR(late.power_w[0], 200 + 80, 1e-9);
  EXPECT_NEAR(late.power_w[2], 300 + 200, 1e-9);
  EXPECT_NEAR(late.power_w[6], 300 + 80, 1e-9);  // pipeline 0 waits (extrinsic) while 1 finishes
}

TEST(PowerCurve, ItsEnergyIsTheIterationsEnergy) {
  const EnergyProblem problem = random_problem({ScheduleKind::k1F1B, 4, 8, 1, false}, 5);
  const ExecutionPlan plan = plan_from_choice(problem, random_choice(problem, 2));
  EmulationConfig config;
  config.data_parallel = 3;
  config.tensor_parallel = 4;
  config.stragglers = {{2, 1.3, 0.01}};
  config.p2p = {0.001, 0.0};
  config.allreduce = {0.001, 1e9};
  config.allreduce_bytes = 1e8;
  config.switch_latency_s = 0.002;
  config.overheads.first_stage_load_s = 0.003;
  config.overheads.optimizer_step_s = 0.02;
  config.overheads.between_iterations_s = 0.01;
  config.instruction_noise = 0.05;
  for (double sample : {0.001, 0.0137, 1.0}) {
    config.power_sample_s = sample;
    const EmulationResult r = emulate(problem, plan, config);
    EXPECT_NEAR(energy_of_curve(r), r.energy.total_j(), 1e-9 * r.energy.total_j()) << sample;
    // Never below every GPU blocked... unless an instruction draws less; never above every GPU
    // at the highest instruction power.
    double highest = problem.p_blocking;
    for (const ExecutedInstruction& e : r.timeline) highest = std::max(highest, e.power_w());
    for (double w : r.power_w) EXPECT_LE(w, highest * r.num_gpus() * (1 + 1e-9));
  }
}

// ---------------------------------------------------------------- noise

TEST(InstructionNoise, SameSeedSameNoiseWhateverThePlan) {
  const EnergyProblem problem = balanced_problem({ScheduleKind::k1F1B, 8, 48, 1, false}, 0.03, 0.05);
  const ExecutionPlan fast = plan_from_choice(problem, fastest_choice(problem));
  const ExecutionPlan other = plan_from_choice(problem, random_choice(problem, 4));
  EmulationConfig config;
  config.data_parallel = 4;
  config.instruction_noise = 0.05;
  config.noise_seed = 99;
  const EmulationResult a = emulate(problem, fast, config), b = emulate(problem, other, config);
  EXPECT_EQ(a.iteration_time_s, emulate(problem, fast, config).iteration_time_s);  // deterministic
  std::vector<double> factors;
  for (std::size_t i = 0; i < a.timeline.size(); ++i) {
    const ExecutedInstruction& x = a.timeline[i];
    const ExecutedInstruction& y = b.timeline[i];
    const double fx = (x.end_s - x.start_s) / fast.time_s[x.node];
    const double fy = (y.end_s - y.start_s) / other.time_s[y.node];
    EXPECT_NEAR(fx, fy, 1e-9);
    EXPECT_NEAR(x.energy_j / fast.energy_j[x.node], fx, 1e-9);  // same power
    factors.push_back(fx);
  }
  double mean = 0.0, var = 0.0;
  for (double f : factors) mean += f;
  mean /= static_cast<double>(factors.size());
  for (double f : factors) var += (f - mean) * (f - mean);
  const double sd = std::sqrt(var / static_cast<double>(factors.size()));
  EXPECT_NEAR(mean, 1.0, 0.005);  // 3,072 draws
  EXPECT_NEAR(sd, 0.05, 0.005);
  for (double f : factors) EXPECT_LE(std::abs(f - 1.0), 3 * 0.05 + 1e-12);
  // A noisy iteration is slower than the noise-free one: the critical path takes the maxima.
  config.instruction_noise = 0.0;
  EXPECT_GT(a.iteration_time_s, emulate(problem, fast, config).iteration_time_s);
  config.noise_seed = 100;
  config.instruction_noise = 0.05;
  EXPECT_NE(emulate(problem, fast, config).iteration_time_s, a.iteration_time_s);
}

// ---------------------------------------------------------------- several iterations

struct Frontier4x6 {
  EnergyProblem problem;
  std::vector<ExecutionPlan> plans;
};

const Frontier4x6& frontier_plans() {
  static const Frontier4x6 solved = [] {
    EnergyProblem problem = testing::synthetic_problem({ScheduleKind::k1F1B, 4, 6, 1, false}, 8, 5);
    FrontierOptions quick;
    quick.local_search_max_nodes = 0;
    const Frontier frontier = build_frontier(problem, crawl_frontier(problem), quick);
    std::vector<ExecutionPlan> plans;
    for (const FrontierPoint& p : frontier.points) plans.push_back(plan_from_choice(problem, p.option_choice()));
    return Frontier4x6{std::move(problem), std::move(plans)};
  }();
  return solved;
}

TEST(TrainingRun, AFixedStragglerEveryIterationIsTheSingleIterationAnswer) {
  const auto& [problem, plans] = frontier_plans();
  EmulationConfig cluster;
  cluster.data_parallel = 4;
  TrainingRunConfig run;
  run.iterations = 3;
  run.stragglers = {1.0, 1.25, 1.25, StragglerPlacement::kFixed, 2, 1};
  const TrainingRunResult r = emulate_training_run(problem, plans, plans.front(), cluster, run);
  EmulationConfig once = cluster;
  once.stragglers = {{2, 1.25, 0.0}};
  const StragglerResponse single = emulate_straggler_response(problem, plans, once);
  ASSERT_EQ(r.iterations.size(), 3u);
  for (const IterationOutcome& k : r.iterations) {
    EXPECT_EQ(k.straggler, 2);
    EXPECT_EQ(k.chosen_plan, single.chosen_plan);
    EXPECT_NEAR(k.perseus.time_s, single.result.iteration_time_s, 1e-12);
    EXPECT_NEAR(k.perseus.energy_j, single.result.energy.total_j(), 1e-9);
    // Everyone at the fastest plan: the same time, more energy (the others race to wait).
    EXPECT_NEAR(k.fastest_everywhere.time_s, k.perseus.time_s, 1e-12);
    EXPECT_GT(k.fastest_everywhere.energy_j, k.perseus.energy_j);
  }
  EXPECT_NEAR(r.perseus.energy_j, 3 * single.result.energy.total_j(), 1e-6);
  EXPECT_GT(r.straggler_savings(), 0.0);
}

TEST(TrainingRun, WithoutStragglersPerseusRunsItsFastestPlan) {
  const auto& [problem, plans] = frontier_plans();
  EmulationConfig cluster;
  cluster.data_parallel = 3;
  cluster.instruction_noise = 0.03;
  TrainingRunConfig run;
  run.iterations = 4;
  run.stragglers.probability = 0.0;
  const TrainingRunResult r = emulate_training_run(problem, plans, plans.front(), cluster, run);
  const StragglerResponder responder(problem, plans, cluster);
  std::set<double> times;
  for (const IterationOutcome& k : r.iterations) {
    EXPECT_EQ(k.straggler, -1);
    EXPECT_EQ(responder.times_s()[k.chosen_plan], responder.times_s()[r.fastest_plan]);
    EXPECT_NEAR(k.perseus.energy_j, k.fastest_everywhere.energy_j, 1e-9);
    times.insert(k.perseus.time_s);
  }
  EXPECT_EQ(times.size(), 4u);  // fresh noise every iteration
}

TEST(TrainingRun, StragglersMoveAndAreDrawnAsConfigured) {
  const auto& [problem, plans] = frontier_plans();
  EmulationConfig cluster;
  cluster.data_parallel = 5;
  TrainingRunConfig run;
  run.iterations = 12;
  run.stragglers = {1.0, 1.1, 1.5, StragglerPlacement::kMoving, 3, 2};
  const TrainingRunResult moving = emulate_training_run(problem, plans, plans.front(), cluster, run);
  const StragglerResponder responder(problem, plans, cluster);
  for (const IterationOutcome& k : moving.iterations) {
    EXPECT_EQ(k.straggler, (3 + k.iteration / 2) % 5) << k.iteration;
    EXPECT_GE(k.slowdown, 1.1);
    EXPECT_LE(k.slowdown, 1.5);
    // The slower the straggler, the slower (never faster) the plan Perseus picks.
    EXPECT_LE(responder.times_s()[k.chosen_plan], k.straggler_time_s + 1e-12);
  }
  run.stragglers.placement = StragglerPlacement::kRandom;
  run.stragglers.probability = 0.5;
  run.iterations = 40;
  const TrainingRunResult random = emulate_training_run(problem, plans, plans.front(), cluster, run);
  std::set<int> pipelines;
  int without = 0;
  for (const IterationOutcome& k : random.iterations) {
    if (k.straggler < 0) ++without;
    else pipelines.insert(k.straggler);
  }
  EXPECT_EQ(pipelines.size(), 5u);
  EXPECT_GT(without, 10);
  EXPECT_LT(without, 30);
  // The same seed, the same run.
  const TrainingRunResult again = emulate_training_run(problem, plans, plans.front(), cluster, run);
  EXPECT_EQ(again.perseus.energy_j, random.perseus.energy_j);
}

TEST(TrainingRun, PowerCurvesFollowTheIterationsOneAfterTheOther) {
  const auto& [problem, plans] = frontier_plans();
  EmulationConfig cluster;
  cluster.data_parallel = 2;
  cluster.power_sample_s = 0.01;
  TrainingRunConfig run;
  run.iterations = 3;
  const TrainingRunResult r = emulate_training_run(problem, plans, plans.front(), cluster, run);
  double energy = 0.0, end = 0.0;
  for (const PowerSample& s : r.perseus_power) {
    EXPECT_NEAR(s.start_s, end, 1e-9);
    energy += s.power_w * s.duration_s;
    end = s.start_s + s.duration_s;
  }
  EXPECT_NEAR(end, r.perseus.time_s, 1e-9);
  EXPECT_NEAR(energy, r.perseus.energy_j, 1e-9 * energy);
  EXPECT_FALSE(r.baseline_power.empty());
}

TEST(TrainingRun, BadConfigurationsAreClearErrors) {
  const auto& [problem, plans] = frontier_plans();
  const auto error_of = [&](auto change) -> std::string {
    EmulationConfig cluster;
    cluster.data_parallel = 2;
    TrainingRunConfig run;
    run.iterations = 1;
    change(cluster, run);
    try {
      emulate_training_run(problem, plans, plans.front(), cluster, run);
    } catch (const InputError& e) {
      return e.what();
    }
    return "(no InputError)";
  };
  EXPECT_NE(error_of([](EmulationConfig&, TrainingRunConfig& r) { r.iterations = 0; }).find("iterations"), std::string::npos);
  EXPECT_NE(error_of([](EmulationConfig&, TrainingRunConfig& r) { r.stragglers.probability = 1.5; }).find("probability"),
            std::string::npos);
  EXPECT_NE(error_of([](EmulationConfig&, TrainingRunConfig& r) { r.stragglers.slowdown_min = 2.0; }).find("slowdown"),
            std::string::npos);
  EXPECT_NE(error_of([](EmulationConfig&, TrainingRunConfig& r) {
              r.stragglers.placement = StragglerPlacement::kFixed;
              r.stragglers.pipeline = 2;
            }).find("does not exist"),
            std::string::npos);
  EXPECT_NE(error_of([](EmulationConfig& c, TrainingRunConfig&) { c.stragglers = {{0, 1.5, 0.0}}; }).find("drawn per iteration"),
            std::string::npos);
  EXPECT_NE(error_of([](EmulationConfig& c, TrainingRunConfig&) { c.instruction_noise = 0.5; }).find("noise"),
            std::string::npos);
}

}  // namespace
}  // namespace perseus
