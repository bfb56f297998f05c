// What an iteration holds besides its instructions (IterationOverheads): data loading, blocking
// sends, the optimizer step and the gap between iterations, each against a closed form or the
// longest path of a DAG with the term folded into the instruction times.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "fixtures.hpp"
#include "perseus/emulator/emulator.hpp"
#include "perseus/model/errors.hpp"

namespace perseus {
namespace {

using testing::balanced_problem;
using testing::chosen_times;
using testing::random_choice;
using testing::random_problem;

bool sends_to_another_stage(const Dag& dag, Dag::NodeId node) {
  for (Dag::NodeId to : dag.successors(node)) {
    if (dag.instruction(to).stage != dag.instruction(node).stage) return true;
  }
  return false;
}

TEST(EmulatorOverheads, DataLoadingRunsAsIfEachForwardOnTheEdgeStagesTookThatMuchLonger) {
  const ScheduleSpec specs[] = {{ScheduleKind::k1F1B, 4, 6, 1, false},
                                {ScheduleKind::kGPipe, 3, 4, 1, false},
                                {ScheduleKind::kInterleaved1F1B, 2, 4, 2, false},
                                {ScheduleKind::k1F1BEarlyRecompute, 3, 5, 1, false},
                                {ScheduleKind::k1F1B, 1, 3, 1, false}};
  std::uint32_t seed = 40;
  for (const ScheduleSpec& spec : specs) {
    const EnergyProblem problem = random_problem(spec, seed++);
    const OptionChoice choice = random_choice(problem, seed++);
    EmulationConfig config;
    config.overheads.first_stage_load_s = 0.004;
    config.overheads.last_stage_load_s = 0.007;
    const EmulationResult r = emulate(problem, plan_from_choice(problem, choice), config);

    std::vector<double> times = chosen_times(problem, choice);
    double loads = 0.0;
    const int last = spec.chunks * spec.stages - 1;
    for (std::size_t n = 0; n < times.size(); ++n) {
      const auto node = static_cast<Dag::NodeId>(n);
      if (problem.dag.instruction(node).kind != InstructionKind::kForward) continue;
      const int vs = problem.dag.virtual_stage(node);
      const double load = (vs == 0 ? 0.004 : 0.0) + (vs == last ? 0.007 : 0.0);
      times[n] += load;
      loads += load;
    }
    const double expected = critical_path_length<double>(problem.dag, times);
    EXPECT_NEAR(r.iteration_time_s, expected, 1e-12) << to_string(spec.kind);
    // The GPU idles while it loads: blocking energy, and the instructions' own energy unchanged.
    const MeasuredFigures without = evaluate_measured(problem, choice);
    EXPECT_NEAR(r.energy.computation_j, without.computation_energy_j, 1e-9 * without.computation_energy_j);
    double busy = 0.0;
    for (const DeviceSummary& d : r.devices) busy += d.busy_s;
    EXPECT_NEAR(r.energy.intrinsic_blocking_j, problem.p_blocking * (spec.stages * r.iteration_time_s - busy), 1e-9);
    // Every load sits right before its forward, and none elsewhere.
    double seen = 0.0;
    for (const ExecutedInstruction& e : r.timeline) {
      if (e.instruction.kind != InstructionKind::kForward) {
        EXPECT_EQ(e.load_s, 0.0);
      }
      seen += e.load_s;
    }
    EXPECT_NEAR(seen, loads, 1e-12);
    EXPECT_EQ(r.energy.overhead_j, 0.0);
  }
}

TEST(EmulatorOverheads, LoadsOfTwoStagesByHand) {
  // 1F1B, 2 stages, 2 microbatches, forward 1 s, backward 2 s: stage 0 runs F0 F1 B0 B1, stage 1
  // F0 B0 F1 B1.
  const EnergyProblem problem = testing::make_test_problem(
      {ScheduleKind::k1F1B, 2, 2, 1, false}, 80.0, [](int, InstructionKind kind) -> std::vector<testing::Point> {
        return {{1000, kind == InstructionKind::kForward ? 1.0 : 2.0, 100.0}};
      });
  const ExecutionPlan plan = plan_from_choice(problem, fastest_choice(problem));
  EmulationConfig config;
  // Stage 1: F0 [1,2] B0 [2,4] F1 [4,5] B1 [5,7]; stage 0: F0 [0,1] F1 [1,2] B0 [4,6] B1 [7,9].
  EXPECT_DOUBLE_EQ(emulate(problem, plan, config).iteration_time_s, 9.0);
  // Stage 0 loads 0.5 s before each forward: F0 [0.5, 1.5], F1 [2, 3]; stage 1 shifts by 0.5.
  config.overheads.first_stage_load_s = 0.5;
  EXPECT_DOUBLE_EQ(emulate(problem, plan, config).iteration_time_s, 9.5);
  // Stage 1 loads 0.25 s once F0 arrived (1.5): F0 [1.75, 2.75] B0 [2.75, 4.75], load, F1 [5, 6]
  // B1 [6, 8]; stage 0: B0 [4.75, 6.75] B1 [8, 10].
  config.overheads.last_stage_load_s = 0.25;
  const EmulationResult r = emulate(problem, plan, config);
  EXPECT_DOUBLE_EQ(r.iteration_time_s, 10.0);
  EXPECT_DOUBLE_EQ(r.device_timeline(0, 1)[0].start_s, 1.75);
  EXPECT_DOUBLE_EQ(r.device_timeline(0, 1)[0].load_s, 0.25);
}

TEST(EmulatorOverheads, LoadingPerMicrobatchRunsLikeProfiledLoadInstructions) {
  // A load instruction on stage 0 starts as soon as the device is free, as the loading time does.
  const double load = 0.01;  // balanced_problem's load rows
  const EnergyProblem with_loads = balanced_problem({ScheduleKind::k1F1B, 4, 8, 1, true}, 0.03, 0.05, 80.0, load);
  const EnergyProblem without = balanced_problem({ScheduleKind::k1F1B, 4, 8, 1, false}, 0.03, 0.05);
  const EmulationResult a = emulate(with_loads, plan_from_choice(with_loads, fastest_choice(with_loads)), {});
  EmulationConfig config;
  config.overheads.first_stage_load_s = load;
  const EmulationResult b = emulate(without, plan_from_choice(without, fastest_choice(without)), config);
  EXPECT_NEAR(a.iteration_time_s, b.iteration_time_s, 1e-12);
  EXPECT_GT(b.iteration_time_s, emulate(without, plan_from_choice(without, fastest_choice(without)), {}).iteration_time_s);
}

TEST(EmulatorOverheads, ABlockingSendHoldsItsStageUntilTheReceiverHasIt) {
  const double latency = 0.003;
  for (const ScheduleSpec& spec : {ScheduleSpec{ScheduleKind::k1F1B, 4, 6, 1, false},
                                   ScheduleSpec{ScheduleKind::kGPipe, 3, 4, 1, false},
                                   ScheduleSpec{ScheduleKind::kInterleaved1F1B, 2, 4, 2, false}}) {
    const EnergyProblem problem = random_problem(spec, 7);
    const OptionChoice choice = random_choice(problem, 11);
    EmulationConfig config;
    config.p2p.latency_s = latency;
    config.overheads.blocking_sends = true;
    const EmulationResult r = emulate(problem, plan_from_choice(problem, choice), config);
    // With latency only (no queueing), a send is the sender's time plus the latency, on its
    // own device: the longest path with that added to every instruction that sends.
    std::vector<double> times = chosen_times(problem, choice);
    for (std::size_t n = 0; n < times.size(); ++n) {
      if (sends_to_another_stage(problem.dag, static_cast<Dag::NodeId>(n))) times[n] += latency;
    }
    EXPECT_NEAR(r.iteration_time_s, critical_path_length<double>(problem.dag, times), 1e-12) << to_string(spec.kind);
    // And nothing on a device starts before what it sent last has arrived.
    for (const Transfer& t : r.transfers) {
      for (const ExecutedInstruction& e : r.device_timeline(t.pipeline, t.from_stage)) {
        if (e.start_s >= t.start_s) {
          EXPECT_GE(e.start_s, t.arrival_s - 1e-12) << label(e.instruction);
        }
      }
    }
    config.overheads.blocking_sends = false;
    EXPECT_LT(emulate(problem, plan_from_choice(problem, choice), config).iteration_time_s, r.iteration_time_s);
  }
}

TEST(EmulatorOverheads, TheOptimizerStepAndTheGapFollowTheLastAllReduceOnEveryGpu) {
  const double tf = 0.03, tb = 0.06;
  const EnergyProblem problem = balanced_problem({ScheduleKind::k1F1B, 4, 4, 1, false}, tf, tb);
  const ExecutionPlan plan = plan_from_choice(problem, fastest_choice(problem));
  EmulationConfig config;
  config.data_parallel = 3;
  config.tensor_parallel = 2;
  config.allreduce = {0.001, 1e9};
  config.allreduce_bytes = 4e9;
  const EmulationResult before = emulate(problem, plan, config);
  config.overheads.optimizer_step_s = 0.05;
  config.overheads.between_iterations_s = 0.02;
  const EmulationResult r = emulate(problem, plan, config);
  const int gpus = r.num_gpus();
  EXPECT_NEAR(r.communication_end_s, before.iteration_time_s, 1e-12);
  EXPECT_NEAR(r.iteration_time_s, before.iteration_time_s + 0.07, 1e-12);
  EXPECT_NEAR(r.energy.allreduce_j, before.energy.allreduce_j, 1e-9);
  // At p_blocking unless told otherwise.
  EXPECT_NEAR(r.energy.overhead_j, problem.p_blocking * 0.07 * gpus, 1e-9);
  EXPECT_NEAR(r.energy.total_j(), before.energy.total_j() + r.energy.overhead_j, 1e-9);
  config.overheads.optimizer_power_w = 250.0;
  const EmulationResult powered = emulate(problem, plan, config);
  EXPECT_NEAR(powered.energy.overhead_j, (250.0 * 0.05 + problem.p_blocking * 0.02) * gpus, 1e-9);
  double pipelines = 0.0;
  for (const PipelineSummary& p : powered.pipelines) pipelines += p.energy.overhead_j;
  EXPECT_NEAR(pipelines, powered.energy.overhead_j, 1e-9);
}

TEST(EmulatorOverheads, BadOverheadsAreClearErrors) {
  const EnergyProblem problem = random_problem({ScheduleKind::k1F1B, 3, 4, 1, false}, 1);
  const EnergyProblem loaded = random_problem({ScheduleKind::k1F1B, 3, 4, 1, true}, 1);
  const auto error_of = [](const EnergyProblem& p, auto change) -> std::string {
    EmulationConfig config;
    change(config.overheads);
    try {
      emulate(p, plan_from_choice(p, fastest_choice(p)), config);
    } catch (const InputError& e) {
      return e.what();
    }
    return "(no InputError)";
  };
  EXPECT_NE(error_of(problem, [](IterationOverheads& o) { o.first_stage_load_s = -1; }).find("first stage's data loading"),
            std::string::npos);
  EXPECT_NE(error_of(problem, [](IterationOverheads& o) { o.optimizer_step_s = std::nan(""); }).find("optimizer step"),
            std::string::npos);
  EXPECT_NE(error_of(problem, [](IterationOverheads& o) { o.between_iterations_s = -0.1; }).find("between iterations"),
            std::string::npos);
  EXPECT_NE(error_of(loaded, [](IterationOverheads& o) { o.first_stage_load_s = 0.01; }).find("load instructions"),
            std::string::npos);
  EXPECT_EQ(error_of(loaded, [](IterationOverheads& o) { o.optimizer_step_s = 0.01; }), "(no InputError)");
}

}  // namespace
}  // namespace perseus
