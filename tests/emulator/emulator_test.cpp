#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <string>

#include "fixtures.hpp"
#include "perseus/emulator/emulator.hpp"
#include "perseus/emulator/frequency_table.hpp"
#include "perseus/model/errors.hpp"

namespace perseus {
namespace {

using testing::balanced_problem;
using testing::chosen_times;
using testing::random_choice;
using testing::random_problem;
using testing::sum_of;

double relative(double expected) { return 1e-9 * std::max(1.0, std::abs(expected)); }

template <typename F>
std::string input_error_of(F&& f) {
  try {
    f();
  } catch (const InputError& e) {
    return e.what();
  }
  return "(no InputError)";
}

// ---------------------------------------------------------------- closed forms and the DAG

TEST(Emulator, AllMaxOfABalanced1F1BTakesTheClosedFormTime) {
  for (auto [stages, microbatches] : {std::pair{1, 1}, {2, 3}, {4, 6}, {8, 12}, {4, 2}}) {
    const EnergyProblem problem = balanced_problem({ScheduleKind::k1F1B, stages, microbatches, 1, false}, 0.03, 0.05);
    const EmulationResult r = emulate(problem, plan_from_choice(problem, fastest_choice(problem)), {});
    const OptionChoice fastest = fastest_choice(problem);
    double tf = 0.0, tb = 0.0;  // the all-max times, the same on every stage
    for (Dag::NodeId n : problem.dag.stage_nodes(0)) {
      const double t = problem.chosen(n, fastest).measurement.time_s;
      (problem.dag.instruction(n).kind == InstructionKind::kForward ? tf : tb) = t;
    }
    ASSERT_NEAR(tf, 0.03, 1e-15);
    const double expected = (microbatches + stages - 1) * (tf + tb);
    EXPECT_NEAR(r.iteration_time_s, expected, relative(expected)) << stages << "x" << microbatches;
  }
}

TEST(Emulator, AllMaxOfABalancedGPipeAndInterleavedTakeTheClosedFormTimes) {
  const double tf = 0.02, tb = 0.04;
  const EnergyProblem gpipe = balanced_problem({ScheduleKind::kGPipe, 4, 5, 1, false}, tf, tb);
  const EmulationResult g = emulate(gpipe, plan_from_choice(gpipe, fastest_choice(gpipe)), {});
  EXPECT_NEAR(g.iteration_time_s, (5 + 4 - 1) * (tf + tb), 1e-12);

  // Two chunks of half the device's work each: (M + (S-1)/v)(tf + tb).
  const EnergyProblem interleaved = balanced_problem({ScheduleKind::kInterleaved1F1B, 4, 8, 2, false}, tf / 2, tb / 2);
  const EmulationResult i = emulate(interleaved, plan_from_choice(interleaved, fastest_choice(interleaved)), {});
  EXPECT_NEAR(i.iteration_time_s, (8 + 3.0 / 2) * (tf + tb), 1e-12);
}

TEST(Emulator, EveryPlanTakesTheCriticalPathAndTheMeasuredEnergy) {
  const ScheduleSpec specs[] = {{ScheduleKind::k1F1B, 4, 6, 1, false},
                                {ScheduleKind::kGPipe, 3, 4, 1, false},
                                {ScheduleKind::kInterleaved1F1B, 2, 4, 2, false},
                                {ScheduleKind::k1F1BEarlyRecompute, 3, 5, 1, false},
                                {ScheduleKind::k1F1B, 3, 4, 1, true}};
  std::uint32_t seed = 1;
  for (const ScheduleSpec& spec : specs) {
    const EnergyProblem problem = random_problem(spec, seed);
    for (int trial = 0; trial < 5; ++trial, ++seed) {
      const OptionChoice choice = random_choice(problem, seed * 7);
      const EmulationResult r = emulate(problem, plan_from_choice(problem, choice), {});
      const std::vector<double> times = chosen_times(problem, choice);
      const double critical = critical_path_length<double>(problem.dag, times);
      double computation = 0.0;
      for (std::size_t i = 0; i < choice.size(); ++i) computation += problem.chosen(static_cast<Dag::NodeId>(i), choice).measurement.energy_j;
      const double blocking = problem.p_blocking * (spec.stages * critical - sum_of(times));
      const MeasuredFigures measured = evaluate_measured(problem, choice);

      EXPECT_NEAR(r.iteration_time_s, critical, relative(critical)) << to_string(spec.kind);
      EXPECT_NEAR(r.energy.computation_j, computation, relative(computation));
      EXPECT_NEAR(r.energy.intrinsic_blocking_j, blocking, relative(computation));
      EXPECT_EQ(r.energy.extrinsic_blocking_j, 0.0);
      EXPECT_EQ(r.energy.allreduce_j, 0.0);
      EXPECT_NEAR(r.energy.total_j(), measured.energy_j, relative(measured.energy_j));
      EXPECT_NEAR(r.iteration_time_s, measured.time_s, relative(critical));
      EXPECT_EQ(r.timeline.size(), problem.dag.num_nodes());
    }
  }
}

TEST(Emulator, TimelineKeepsProgramOrderAndDependencies) {
  const EnergyProblem problem = random_problem({ScheduleKind::k1F1B, 4, 8, 1, true}, 5);
  EmulationConfig config;
  config.p2p = {0.003, 2e9};
  config.activation_bytes = 4e6;
  config.gradient_bytes = 8e6;
  config.switch_latency_s = 0.01;
  const OptionChoice choice = random_choice(problem, 11);
  const ExecutionPlan plan = plan_from_choice(problem, choice);
  const EmulationResult r = emulate(problem, plan, config);
  std::vector<double> start(problem.dag.num_nodes()), end(problem.dag.num_nodes());
  for (const ExecutedInstruction& e : r.timeline) {
    start[e.node] = e.start_s;
    end[e.node] = e.end_s;
    EXPECT_EQ(e.instruction, problem.dag.instruction(e.node));
  }
  for (int s = 0; s < 4; ++s) {
    const auto nodes = problem.dag.stage_nodes(s);
    const auto executed = r.device_timeline(0, s);
    ASSERT_EQ(executed.size(), nodes.size());
    for (std::size_t i = 0; i < nodes.size(); ++i) {
      EXPECT_EQ(executed[i].node, nodes[i]);
      if (i > 0) {
        EXPECT_GE(executed[i].start_s, executed[i - 1].end_s);
      }
    }
  }
  for (std::size_t n = 0; n < problem.dag.num_nodes(); ++n) {
    for (Dag::NodeId p : problem.dag.predecessors(static_cast<Dag::NodeId>(n))) {
      const bool crosses = problem.dag.instruction(p).stage != problem.dag.instruction(static_cast<Dag::NodeId>(n)).stage;
      EXPECT_GE(start[n], end[p] + (crosses ? 0.003 : 0.0) - 1e-12);
    }
  }
}

// ---------------------------------------------------------------- the critical path

// Slack of every node by the critical path method over `times` (independent of the emulator).
std::vector<double> slack_of(const EnergyProblem& problem, const std::vector<double>& times) {
  const Dag& dag = problem.dag;
  std::vector<double> earliest;
  const double length = critical_path_length<double>(dag, times, &earliest);
  std::vector<double> latest_finish(dag.num_nodes(), length);
  const auto& order = dag.topological_order();
  for (auto it = order.rbegin(); it != order.rend(); ++it) {
    for (Dag::NodeId s : dag.successors(*it)) latest_finish[*it] = std::min(latest_finish[*it], latest_finish[s] - times[s]);
  }
  std::vector<double> slack(dag.num_nodes());
  for (std::size_t n = 0; n < slack.size(); ++n) slack[n] = latest_finish[n] - times[n] - earliest[n];
  return slack;
}

TEST(Emulator, TheCriticalPathIsAChainOfZeroSlackInstructionsFromStartToEnd) {
  const ScheduleSpec specs[] = {{ScheduleKind::k1F1B, 4, 8, 1, false},
                                {ScheduleKind::kGPipe, 3, 5, 1, false},
                                {ScheduleKind::kInterleaved1F1B, 2, 4, 2, false},
                                {ScheduleKind::k1F1B, 3, 4, 1, true}};
  std::uint32_t seed = 100;
  for (const ScheduleSpec& spec : specs) {
    const EnergyProblem problem = random_problem(spec, seed++);
    const OptionChoice choice = random_choice(problem, seed++);
    const EmulationResult r = emulate(problem, plan_from_choice(problem, choice), {});
    const std::vector<std::size_t> path = critical_path(r, 0);
    ASSERT_FALSE(path.empty());
    EXPECT_NEAR(r.timeline[path.front()].start_s, 0.0, 1e-12) << to_string(spec.kind);
    EXPECT_NEAR(r.timeline[path.back()].end_s, r.iteration_time_s, 1e-12);
    const std::vector<double> slack = slack_of(problem, chosen_times(problem, choice));
    for (std::size_t k = 0; k < path.size(); ++k) {
      const ExecutedInstruction& e = r.timeline[path[k]];
      EXPECT_NEAR(slack[e.node], 0.0, 1e-9) << label(e.instruction) << " is on the path but has slack";
      if (k == 0) continue;
      const ExecutedInstruction& before = r.timeline[path[k - 1]];
      EXPECT_NEAR(e.start_s, before.end_s, 1e-12);
      // It waited for its predecessor in program order or for a dependency of the DAG.
      const auto preds = problem.dag.predecessors(e.node);
      EXPECT_NE(std::find(preds.begin(), preds.end(), before.node), preds.end());
    }
  }
}

TEST(Emulator, TheCriticalPathCrossesSlowLinksAndFollowsTheStraggler) {
  const EnergyProblem problem = balanced_problem({ScheduleKind::k1F1B, 4, 6, 1, false}, 0.03, 0.05);
  EmulationConfig config;
  config.p2p.latency_s = 0.004;
  config.data_parallel = 2;
  config.stragglers = {{1, 1.5, 0.2}};
  const EmulationResult r = emulate(problem, plan_from_choice(problem, fastest_choice(problem)), config);
  for (int p = 0; p < 2; ++p) {
    const auto path = critical_path(r, p);
    ASSERT_GE(path.size(), 2u);
    const double start = p == 1 ? 0.2 : 0.0;  // the straggler starts late
    EXPECT_NEAR(r.timeline[path.front()].start_s, start, 1e-12);
    EXPECT_NEAR(r.timeline[path.back()].end_s, r.pipelines[p].time_s, 1e-12);
    int crossings = 0;
    for (std::size_t k = 1; k < path.size(); ++k) {
      const ExecutedInstruction& a = r.timeline[path[k - 1]];
      const ExecutedInstruction& b = r.timeline[path[k]];
      EXPECT_EQ(a.pipeline, p);
      const bool crosses = a.instruction.stage != b.instruction.stage;
      crossings += crosses;
      EXPECT_NEAR(b.start_s, a.end_s + (crosses ? 0.004 : 0.0), 1e-12);
    }
    // 1F1B on a balanced pipeline: the path runs down to the last stage and back up.
    EXPECT_GE(crossings, 2 * 3);
  }
  EXPECT_THROW(critical_path(r, 2), InputError);
}

// ---------------------------------------------------------------- communication

// Longest path where a dependency between devices adds `latency` (independent reference).
double longest_path_with_latency(const EnergyProblem& problem, const std::vector<double>& times, double latency) {
  std::vector<double> start(problem.dag.num_nodes(), 0.0);
  double length = 0.0;
  for (Dag::NodeId n : problem.dag.topological_order()) {
    const double finish = start[n] + times[n];
    length = std::max(length, finish);
    for (Dag::NodeId s : problem.dag.successors(n)) {
      const bool crosses = problem.dag.instruction(s).stage != problem.dag.instruction(n).stage;
      start[s] = std::max(start[s], finish + (crosses ? latency : 0.0));
    }
  }
  return length;
}

TEST(Emulator, LinkLatencyDelaysEveryDependencyBetweenStages) {
  const EnergyProblem problem = random_problem({ScheduleKind::k1F1B, 4, 6, 1, false}, 21);
  const OptionChoice choice = random_choice(problem, 3);
  EmulationConfig config;
  config.p2p.latency_s = 0.004;
  const EmulationResult r = emulate(problem, plan_from_choice(problem, choice), config);
  const double expected = longest_path_with_latency(problem, chosen_times(problem, choice), 0.004);
  EXPECT_NEAR(r.iteration_time_s, expected, 1e-12);
  EXPECT_GT(r.iteration_time_s, evaluate_measured(problem, choice).time_s);
  // Forward sends activations, backward sends gradients: 2 (S-1) M transfers.
  EXPECT_EQ(r.transfers.size(), 2u * 3 * 6);
}

TEST(Emulator, TransfersOnOneLinkQueue) {
  // GPipe, 2 stages, forwards of 1 s; each activation occupies the link for 1.5 s.
  const EnergyProblem problem = testing::make_test_problem(
      {ScheduleKind::kGPipe, 2, 3, 1, false}, 80.0, [](int, InstructionKind kind) -> std::vector<testing::Point> {
        return {{1000, kind == InstructionKind::kForward ? 1.0 : 2.0, 100.0}};
      });
  EmulationConfig config;
  config.p2p.bandwidth_bytes_per_s = 1e9;
  config.activation_bytes = 1.5e9;
  const EmulationResult r = emulate(problem, plan_from_choice(problem, fastest_choice(problem)), config);
  // Stage 0 finishes forwards at 1, 2, 3; the link sends 1-2.5, 2.5-4, 4-5.5.
  const double expected_start[] = {2.5, 4.0, 5.5};
  for (const ExecutedInstruction& e : r.device_timeline(0, 1)) {
    if (e.instruction.kind == InstructionKind::kForward) {
      EXPECT_DOUBLE_EQ(e.start_s, expected_start[e.instruction.microbatch]) << label(e.instruction);
    }
  }
  int activations = 0;
  for (const Transfer& t : r.transfers) {
    if (t.from_stage != 0) continue;
    EXPECT_DOUBLE_EQ(t.start_s, 1.0 + 1.5 * activations);
    EXPECT_DOUBLE_EQ(t.arrival_s, t.start_s + 1.5);
    ++activations;
  }
  EXPECT_EQ(activations, 3);
}

TEST(Emulator, AWanHopSlowsOnlyItsLink) {
  const EnergyProblem problem = random_problem({ScheduleKind::k1F1B, 4, 4, 1, false}, 8);
  const OptionChoice choice = fastest_choice(problem);
  EmulationConfig config;
  config.p2p_links[{1, 2}] = {0.05, 0.0};
  const EmulationResult r = emulate(problem, plan_from_choice(problem, choice), config);
  for (const Transfer& t : r.transfers) {
    EXPECT_EQ(t.from_stage, 1);
    EXPECT_EQ(t.to_stage, 2);
    EXPECT_DOUBLE_EQ(t.arrival_s - t.start_s, 0.05);
  }
  EXPECT_EQ(r.transfers.size(), 4u);  // only the forward activations cross 1 -> 2
}

// ---------------------------------------------------------------- data parallelism

TEST(Emulator, NonStragglersWaitForTheStragglerAsExtrinsicBlocking) {
  const ScheduleSpec spec{ScheduleKind::k1F1B, 4, 6, 1, false};
  const EnergyProblem problem = random_problem(spec, 31);
  const OptionChoice choice = random_choice(problem, 5);
  const MeasuredFigures plan = evaluate_measured(problem, choice);
  const double sum_e = plan.computation_energy_j;
  const double sum_t = sum_of(chosen_times(problem, choice));
  const double pb = problem.p_blocking;

  for (const Straggler straggler : {Straggler{2, 1.5, 0.0}, Straggler{0, 1.0, 0.25}, Straggler{3, 1.25, 0.1}}) {
    EmulationConfig config;
    config.data_parallel = 4;
    config.tensor_parallel = 2;
    config.stragglers = {straggler};
    const EmulationResult r = emulate(problem, plan_from_choice(problem, choice), config);
    const double t_prime = straggler.slowdown * plan.time_s + straggler.delay_s;
    EXPECT_NEAR(r.sync_time_s, t_prime, 1e-12);
    EXPECT_NEAR(r.iteration_time_s, t_prime, 1e-12);
    for (const PipelineSummary& p : r.pipelines) {
      EXPECT_EQ(p.straggler, p.pipeline == straggler.pipeline);
      if (p.straggler) {
        // Its own iteration, slowed at the same power: energy and time scale together.
        const double own = straggler.slowdown * sum_e + pb * (4 * t_prime - straggler.slowdown * sum_t);
        EXPECT_NEAR(p.energy.total_j(), 2 * own, relative(own));
        EXPECT_EQ(p.energy.extrinsic_blocking_j, 0.0);
      } else {
        // docs/solver.md, "Iteration energy": sum e + p_b (S T - sum t) + p_b S (T' - T), per tensor-parallel GPU.
        EXPECT_NEAR(p.time_s, plan.time_s, 1e-12);
        EXPECT_NEAR(p.energy.extrinsic_blocking_j, 2 * pb * 4 * (t_prime - plan.time_s), relative(plan.energy_j));
        EXPECT_NEAR(p.energy.total_j(), 2 * (plan.energy_j + pb * 4 * (t_prime - plan.time_s)), relative(plan.energy_j));
      }
    }
    EXPECT_EQ(r.num_gpus(), 32);
    EXPECT_EQ(r.timeline.size(), 4 * problem.dag.num_nodes());
  }
}

TEST(Emulator, TensorParallelismMultipliesEnergyNotTime) {
  const EnergyProblem problem = random_problem({ScheduleKind::k1F1B, 3, 4, 1, false}, 2);
  const ExecutionPlan plan = plan_from_choice(problem, random_choice(problem, 9));
  EmulationConfig one, eight;
  eight.tensor_parallel = 8;
  const EmulationResult a = emulate(problem, plan, one), b = emulate(problem, plan, eight);
  EXPECT_EQ(a.iteration_time_s, b.iteration_time_s);
  EXPECT_NEAR(b.energy.total_j(), 8 * a.energy.total_j(), relative(b.energy.total_j()));
  EXPECT_NEAR(b.average_power_per_gpu_w(), a.average_power_per_gpu_w(), 1e-9);
  EXPECT_EQ(b.num_gpus(), 24);
}

TEST(Emulator, GradientAllReduceRunsARingAfterTheLastReplica) {
  const double tf = 0.03, tb = 0.06;
  const EnergyProblem problem = balanced_problem({ScheduleKind::k1F1B, 4, 4, 1, false}, tf, tb);
  EmulationConfig config;
  config.data_parallel = 4;
  config.tensor_parallel = 2;
  config.allreduce = {0.001, 1e9};
  config.allreduce_bytes = 8e9;  // 4e9 per tensor-parallel rank
  const EmulationResult r = emulate(problem, plan_from_choice(problem, fastest_choice(problem)), config);
  const double ring = 2.0 * 3 / 4 * 4.0 + 2 * 3 * 0.001;
  const double t = (4 + 4 - 1) * (tf + tb);
  ASSERT_EQ(r.allreduces.size(), 4u);
  EXPECT_NEAR(r.allreduces[0].start_s, t, 1e-12);  // stage 0 finishes last in 1F1B
  for (const AllReduce& a : r.allreduces) EXPECT_NEAR(a.end_s - a.start_s, ring, 1e-12);
  EXPECT_NEAR(r.sync_time_s, t, 1e-12);
  EXPECT_NEAR(r.iteration_time_s, t + ring, 1e-12);
  EXPECT_NEAR(r.energy.allreduce_j, problem.p_blocking * ring * r.num_gpus(), 1e-6);
  EXPECT_EQ(r.energy.extrinsic_blocking_j, 0.0);
}

TEST(Emulator, PerseusAnswersAStragglerWithThePlanForTopt) {
  const EnergyProblem problem = random_problem({ScheduleKind::k1F1B, 4, 6, 1, false}, 41);
  // Candidates: each uniform choice of option rank, a frontier-like spread of plans.
  std::vector<OptionChoice> choices;
  for (int rank = 0; rank < 8; ++rank) {
    OptionChoice c(problem.dag.num_nodes());
    for (std::size_t i = 0; i < c.size(); ++i) {
      const int count = static_cast<int>(problem.options_of(static_cast<Dag::NodeId>(i)).options.size());
      c[i] = std::min(rank, count - 1);
    }
    choices.push_back(c);
  }
  std::vector<ExecutionPlan> candidates;
  std::vector<MeasuredFigures> figures;
  for (const OptionChoice& c : choices) {
    candidates.push_back(plan_from_choice(problem, c));
    figures.push_back(evaluate_measured(problem, c));
  }
  std::size_t fastest = 0, cheapest = 0;
  for (std::size_t i = 0; i < figures.size(); ++i) {
    if (figures[i].time_s < figures[fastest].time_s) fastest = i;
    const auto effective = [&](std::size_t k) { return figures[k].energy_j - problem.p_blocking * 4 * figures[k].time_s; };
    if (effective(i) < effective(cheapest)) cheapest = i;
  }
  const double t_star = figures[cheapest].time_s;
  for (double slowdown : {1.05, 1.3, 3.0}) {
    EmulationConfig config;
    config.data_parallel = 3;
    config.stragglers = {{1, slowdown, 0.0}};
    const StragglerResponse response = emulate_straggler_response(problem, candidates, config);
    const double t_prime = slowdown * figures[fastest].time_s;
    const double t_opt = std::min(t_star, t_prime);
    std::size_t expected = fastest;  // brute force: the slowest candidate within T_opt
    for (std::size_t i = 0; i < figures.size(); ++i) {
      if (figures[i].time_s <= t_opt + 1e-12 && figures[i].time_s > figures[expected].time_s) expected = i;
    }
    EXPECT_EQ(response.straggler_plan, fastest);
    EXPECT_NEAR(response.straggler_time_s, t_prime, 1e-12);
    EXPECT_NEAR(response.t_star_s, t_star, 1e-12);
    EXPECT_NEAR(response.t_opt_s, t_opt, 1e-12);
    EXPECT_EQ(response.chosen_plan, expected) << "slowdown " << slowdown;
    const double chosen_time = figures[expected].time_s;
    const double sync = std::max(t_prime, chosen_time);
    EXPECT_NEAR(response.result.sync_time_s, sync, 1e-12);
    for (const PipelineSummary& p : response.result.pipelines) {
      if (p.straggler) continue;
      EXPECT_NEAR(p.energy.total_j(), figures[expected].energy_j + problem.p_blocking * 4 * (sync - chosen_time), 1e-6);
    }
  }
}

// The paper's strong-scaling shapes (8 stages x TP 8), every pipeline emulated, one straggler.
TEST(Emulator, StrongScalingConfigurationsEmulateEveryPipeline) {
  for (auto [pipelines, microbatches] : {std::pair{16, 96}, {32, 48}, {64, 24}, {128, 12}}) {
    const EnergyProblem problem = random_problem({ScheduleKind::k1F1B, 8, microbatches, 1, false}, 3);
    const OptionChoice choice = random_choice(problem, 4);
    const MeasuredFigures plan = evaluate_measured(problem, choice);
    EmulationConfig config;
    config.data_parallel = pipelines;
    config.tensor_parallel = 8;
    config.stragglers = {{pipelines - 1, 1.2, 0.0}};
    const EmulationResult r = emulate(problem, plan_from_choice(problem, choice), config, nullptr);
    EXPECT_EQ(r.num_gpus(), pipelines * 64);
    EXPECT_EQ(r.timeline.size(), static_cast<std::size_t>(pipelines) * 8 * 2 * microbatches);
    const double t_prime = 1.2 * plan.time_s;
    EXPECT_NEAR(r.iteration_time_s, t_prime, 1e-9);
    const double others = (pipelines - 1) * 8 * (plan.energy_j + problem.p_blocking * 8 * (t_prime - plan.time_s));
    EXPECT_NEAR(r.energy.total_j() - r.pipelines.back().energy.total_j(), others, 1e-9 * others);
  }
}

// ---------------------------------------------------------------- frequency switching

// One stage, 1F1B with 2 microbatches: F0 B0 F1 B1. F: 1000 MHz 1 s 10 J, 2000 MHz 0.5 s 15 J;
// B: 1000 MHz 2 s 20 J, 2000 MHz 1 s 30 J. The plan runs F at 2000 and B at 1000.
EnergyProblem switching_problem() {
  return testing::make_test_problem({ScheduleKind::k1F1B, 1, 2, 1, false}, 50.0,
                                    [](int, InstructionKind kind) -> std::vector<testing::Point> {
                                      if (kind == InstructionKind::kForward) return {{1000, 1.0, 10.0}, {2000, 0.5, 15.0}};
                                      return {{1000, 2.0, 20.0}, {2000, 1.0, 30.0}};
                                    });
}

ExecutionPlan alternating_plan(const EnergyProblem& problem) {
  return plan_from_frequencies(problem, {{{"forward", 2000}, {"backward", 1000}, {"forward", 2000}, {"backward", 1000}}},
                               std::make_shared<const FrequencyTable>(FrequencyTable::from_problem(problem)));
}

TEST(Emulator, ALateSwitchRunsTheStartAtTheOldClock) {
  const EnergyProblem problem = switching_problem();
  EmulationConfig config;
  config.switch_latency_s = 0.2;
  const EmulationResult r = emulate(problem, alternating_plan(problem), config);
  // F0 0-0.5. B0 runs 0.2 s at 2000 MHz (a fifth of it, 6 J), the rest at 1000 MHz: 1.6 s, 16 J.
  // F1 runs 0.2 s at 1000 (2 J), the rest 0.4 s at 2000 (12 J). B1 like B0.
  const double ends[] = {0.5, 2.3, 2.9, 4.7};
  const double energies[] = {15.0, 22.0, 14.0, 22.0};
  const SwitchOutcome outcomes[] = {SwitchOutcome::kNone, SwitchOutcome::kLate, SwitchOutcome::kLate, SwitchOutcome::kLate};
  const auto timeline = r.device_timeline(0, 0);
  ASSERT_EQ(timeline.size(), 4u);
  for (int i = 0; i < 4; ++i) {
    EXPECT_NEAR(timeline[i].end_s, ends[i], 1e-12) << i;
    EXPECT_NEAR(timeline[i].energy_j, energies[i], 1e-12) << i;
    EXPECT_EQ(timeline[i].switch_outcome, outcomes[i]) << i;
  }
  EXPECT_EQ(timeline[1].clock_at_start_mhz, 2000);
  EXPECT_EQ(r.switches, 3);
  EXPECT_EQ(r.late_switches, 3);
  EXPECT_EQ(r.missed_switches, 0);
  ASSERT_EQ(r.warnings.size(), 1u);
  EXPECT_NE(r.warnings[0].find("more often than it can pay for"), std::string::npos);
  // The late switches left the faster clock running for a while: faster than planned.
  EXPECT_NEAR(r.switching_delay_s, 4.7 - 5.0, 1e-12);
  EXPECT_NEAR(r.switching_energy_j, 73.0 - 70.0, 1e-12);
}

TEST(Emulator, ALateSwitchCostingLittleIsNoWarning) {
  const EnergyProblem problem = switching_problem();
  EmulationConfig config;
  config.switch_latency_s = 1e-4;
  const EmulationResult r = emulate(problem, alternating_plan(problem), config);
  // B0 and B1 run 0.1 ms at 2000 MHz (+1 mJ and -0.1 ms each), F1 0.1 ms at 1000 MHz (-0.5 mJ,
  // +0.05 ms): 1.5 mJ of 70 J. Late, but far below the 0.1% threshold.
  EXPECT_EQ(r.late_switches, 3);
  EXPECT_NEAR(r.switching_energy_j, 1.5e-3, 1e-12);
  EXPECT_NEAR(r.switching_delay_s, -1.5e-4, 1e-12);
  EXPECT_TRUE(r.warnings.empty()) << r.warnings.front();
  // The threshold is the config's: 0 warns on any cost, 2e-5 (1.4 mJ) just below this one.
  for (const double fraction : {0.0, 2e-5}) {
    config.switching_warning_fraction = fraction;
    const EmulationResult strict = emulate(problem, alternating_plan(problem), config);
    ASSERT_EQ(strict.warnings.size(), 1u) << fraction;
    EXPECT_NE(strict.warnings[0].find("more often than it can pay for"), std::string::npos);
  }
  config.switching_warning_fraction = 3e-5;  // 2.1 mJ
  EXPECT_TRUE(emulate(problem, alternating_plan(problem), config).warnings.empty());
  config.switching_warning_fraction = -1.0;
  EXPECT_THROW(emulate(problem, alternating_plan(problem), config), InputError);
}

TEST(Emulator, ASwitchSlowerThanTheInstructionIsMissed) {
  const EnergyProblem problem = switching_problem();
  EmulationConfig config;
  config.switch_latency_s = 5.0;
  const EmulationResult r = emulate(problem, alternating_plan(problem), config);
  // Nothing ever switches in time: everything runs at the starting 2000 MHz.
  const auto timeline = r.device_timeline(0, 0);
  EXPECT_NEAR(r.iteration_time_s, 3.0, 1e-12);
  EXPECT_EQ(timeline[1].switch_outcome, SwitchOutcome::kMissed);
  EXPECT_EQ(timeline[2].switch_outcome, SwitchOutcome::kNone);  // back to 2000 before the switch took effect
  EXPECT_EQ(timeline[3].switch_outcome, SwitchOutcome::kMissed);
  EXPECT_EQ(r.missed_switches, 2);
  EXPECT_NEAR(r.energy.computation_j, 15 + 30 + 15 + 30, 1e-12);
}

TEST(Emulator, SwitchingLatencyCostsNothingWithoutSwitchesOrLatency) {
  const EnergyProblem problem = random_problem({ScheduleKind::k1F1B, 4, 6, 1, false}, 12);
  EmulationConfig latency;
  latency.switch_latency_s = 0.01;
  const OptionChoice varied = random_choice(problem, 1);
  const EmulationResult instant = emulate(problem, plan_from_choice(problem, varied), {});
  EXPECT_EQ(instant.late_switches, 0);
  EXPECT_TRUE(instant.warnings.empty());
  EXPECT_NEAR(instant.iteration_time_s, evaluate_measured(problem, varied).time_s, 1e-12);

  // Constant clock per device: no switch at all, whatever the latency.
  const EnergyProblem balanced = balanced_problem({ScheduleKind::k1F1B, 4, 6, 1, false}, 0.03, 0.05);
  const OptionChoice same(balanced.dag.num_nodes(), 1);
  const EmulationResult a = emulate(balanced, plan_from_choice(balanced, same), latency);
  EXPECT_EQ(a.switches, 0);
  EXPECT_NEAR(a.iteration_time_s, evaluate_measured(balanced, same).time_s, 1e-12);
}

TEST(Emulator, IdleTimeHidesASwitch) {
  // Two stages, one microbatch. Stage 0 runs F0 at 2000 MHz, then idles from 0.5 s until
  // stage 1's B0 ends at 2 s: time enough for its 0.3 s switch to 1000 MHz for B0.
  const EnergyProblem problem = testing::make_test_problem(
      {ScheduleKind::k1F1B, 2, 1, 1, false}, 50.0, [](int, InstructionKind kind) -> std::vector<testing::Point> {
        if (kind == InstructionKind::kForward) return {{1000, 1.0, 10.0}, {2000, 0.5, 15.0}};
        return {{1000, 2.0, 20.0}, {2000, 1.0, 30.0}};
      });
  const auto clocks = std::make_shared<const FrequencyTable>(FrequencyTable::from_problem(problem));
  const ExecutionPlan plan =
      plan_from_frequencies(problem, {{{"forward", 2000}, {"backward", 1000}}, {{"forward", 2000}, {"backward", 2000}}}, clocks);
  EmulationConfig config;
  config.switch_latency_s = 0.3;
  const EmulationResult r = emulate(problem, plan, config);
  EXPECT_EQ(r.switches, 1);
  EXPECT_EQ(r.late_switches, 0);
  EXPECT_TRUE(r.warnings.empty());
  const auto stage0 = r.device_timeline(0, 0);
  EXPECT_DOUBLE_EQ(stage0[1].start_s, 2.0);
  EXPECT_EQ(stage0[1].clock_at_start_mhz, 1000);
  EXPECT_DOUBLE_EQ(r.iteration_time_s, 4.0);
}

// ---------------------------------------------------------------- plans written as frequencies

TEST(Emulator, PlansByFrequencyUseTheProfilesMeasurements) {
  const EnergyProblem problem = switching_problem();
  const auto clocks = std::make_shared<const FrequencyTable>(FrequencyTable::from_problem(problem));
  const PipelineFrequencies listed = {{{"forward", 1000}, {"backward", 2000}, {"forward", 1000}, {"backward", 2000}}};
  const ExecutionPlan plan = plan_from_frequencies(problem, listed, clocks);
  EXPECT_EQ(plan.time_s, (std::vector<double>{1.0, 1.0, 1.0, 1.0}));
  EXPECT_EQ(plan.energy_j, (std::vector<double>{10.0, 30.0, 10.0, 30.0}));

  // 1500 MHz is not measured: an error unless interpolation is asked for.
  const PipelineFrequencies between = {{{"forward", 1500}, {"backward", 2000}, {"forward", 1000}, {"backward", 2000}}};
  const std::string error = input_error_of([&] { plan_from_frequencies(problem, between, clocks); });
  EXPECT_NE(error.find("1500 MHz is not in the profile"), std::string::npos) << error;
  EXPECT_NE(error.find("stage 0"), std::string::npos) << error;
  const ExecutionPlan interpolated = plan_from_frequencies(problem, between, clocks, true);
  EXPECT_DOUBLE_EQ(interpolated.time_s[problem.dag.stage_nodes(0)[0]], 0.75);
  EXPECT_DOUBLE_EQ(interpolated.energy_j[problem.dag.stage_nodes(0)[0]], 12.5);
  // Never extrapolated.
  const PipelineFrequencies above = {{{"forward", 2100}, {"backward", 2000}, {"forward", 1000}, {"backward", 2000}}};
  EXPECT_THROW(plan_from_frequencies(problem, above, clocks, true), InputError);
}

TEST(Emulator, FrequencyTableFromAProfileBindsOperationsLikeMakeProblem) {
  // A 2-stage profile under interleaving (2 chunks): each chunk takes half; recompute uses forward.
  std::vector<OperationProfile> rows;
  for (int s = 0; s < 2; ++s) {
    rows.push_back({s, InstructionKind::kForward, {{"1000", 1000, 1.0 + s, 100.0, 0}, {"1400", 1400, 0.8 + s, 120.0, 0}, {"1200", 1200, 0.9 + s, 110.0, 0}}});
    rows.push_back({s, InstructionKind::kBackward, {{"1000", 1000, 2.0, 200.0, 0}, {"1400", 1400, 1.6, 240.0, 0}}});
  }
  const Profile profile = Profile::from_operations("test.csv", rows);
  const EnergyProblem problem = balanced_problem({ScheduleKind::kInterleaved1F1B, 2, 2, 2, false}, 0.01, 0.02);
  const FrequencyTable table = FrequencyTable::from_profile(problem, profile);
  ASSERT_EQ(table.num_operations(), problem.operations.size());
  for (std::size_t op = 0; op < problem.operations.size(); ++op) {
    const OperationOptions& operation = problem.operations[op];
    const int stage = operation.stage % 2;
    const auto points = table.points(op);
    ASSERT_EQ(points.size(), operation.kind == InstructionKind::kForward ? 3u : 2u);
    EXPECT_EQ(points.front().frequency_mhz, 1000);  // ascending
    const double full = operation.kind == InstructionKind::kForward ? 1.0 + stage : 2.0;
    EXPECT_DOUBLE_EQ(points.front().time_s, full / 2) << op;
    EXPECT_DOUBLE_EQ(table.at(op, 1100, true)->time_s, (full + (operation.kind == InstructionKind::kForward ? 0.9 + stage : 1.8)) / 4);
  }
  // An operation the profile lacks is named.
  rows.pop_back();
  const std::string error =
      input_error_of([&] { FrequencyTable::from_profile(problem, Profile::from_operations("partial.csv", rows)); });
  EXPECT_NE(error.find("backward"), std::string::npos) << error;
}

TEST(Emulator, ConstantTimeOperationsKeepTheirTimeAtAnyClock) {
  const EnergyProblem problem = balanced_problem({ScheduleKind::k1F1B, 2, 3, 1, true}, 0.03, 0.05, 80.0, 0.02);
  const auto clocks = std::make_shared<const FrequencyTable>(FrequencyTable::from_problem(problem));
  PipelineFrequencies listed(2);
  for (int s = 0; s < 2; ++s) {
    for (Dag::NodeId n : problem.dag.stage_nodes(s)) {
      const InstructionKind kind = problem.dag.instruction(n).kind;
      listed[s].push_back({std::string(to_string(kind)), kind == InstructionKind::kLoad ? 12345 : 1200});
    }
  }
  const ExecutionPlan plan = plan_from_frequencies(problem, listed, clocks);
  EmulationConfig config;
  config.switch_latency_s = 0.01;
  const EmulationResult r = emulate(problem, plan, config);
  for (const ExecutedInstruction& e : r.timeline) {
    if (e.instruction.kind == InstructionKind::kLoad) {
      EXPECT_NEAR(e.end_s - e.start_s, 0.02, 1e-15);
    }
  }
  EXPECT_EQ(r.switches, 0);  // loads do not ask for a clock
}

// ---------------------------------------------------------------- bad input

TEST(Emulator, BadInputIsAClearError) {
  const EnergyProblem problem = random_problem({ScheduleKind::k1F1B, 3, 4, 1, false}, 1);
  const EnergyProblem other = random_problem({ScheduleKind::k1F1B, 3, 5, 1, false}, 1);
  const OptionChoice choice = fastest_choice(problem);
  const ExecutionPlan plan = plan_from_choice(problem, choice);

  EXPECT_NE(input_error_of([&] { plan_from_choice(other, choice); }).find("different schedule"), std::string::npos);
  EXPECT_NE(input_error_of([&] { emulate(other, plan, {}); }).find("different schedule"), std::string::npos);
  OptionChoice bad = choice;
  bad[5] = 99;
  const std::string index_error = input_error_of([&] { plan_from_choice(problem, bad); });
  EXPECT_NE(index_error.find("option 99 does not exist"), std::string::npos) << index_error;

  const auto clocks = std::make_shared<const FrequencyTable>(FrequencyTable::from_problem(problem));
  PipelineFrequencies listed(3);
  for (int s = 0; s < 3; ++s) {
    for (Dag::NodeId n : problem.dag.stage_nodes(s)) listed[s].push_back({std::string(to_string(problem.dag.instruction(n).kind)), 1410});
  }
  EXPECT_NO_THROW(plan_from_frequencies(problem, listed, clocks));
  PipelineFrequencies fewer_stages(listed.begin(), listed.end() - 1);
  EXPECT_NE(input_error_of([&] { plan_from_frequencies(problem, fewer_stages, clocks); }).find("has 2 stages"),
            std::string::npos);
  PipelineFrequencies shorter = listed;
  shorter[1].pop_back();
  EXPECT_NE(input_error_of([&] { plan_from_frequencies(problem, shorter, clocks); }).find("stage 1"), std::string::npos);
  PipelineFrequencies swapped = listed;
  std::swap(swapped[2][0], swapped[2][1]);  // stage 2 (last) runs F0 B0: now B0 F0
  const std::string order_error = input_error_of([&] { plan_from_frequencies(problem, swapped, clocks); });
  EXPECT_NE(order_error.find("'backward' where the schedule runs 'forward'"), std::string::npos) << order_error;
  PipelineFrequencies missing = listed;
  missing[0][0].second = 1411;
  EXPECT_NE(input_error_of([&] { plan_from_frequencies(problem, missing, clocks); }).find("1411 MHz"), std::string::npos);

  auto config_error = [&](auto change) {
    EmulationConfig config;
    config.data_parallel = 2;
    change(config);
    return input_error_of([&] { emulate(problem, plan, config); });
  };
  EXPECT_NE(config_error([](EmulationConfig& c) { c.stragglers = {{1, 0.9, 0.0}}; }).find("slowdown factor must be 1..1000"),
            std::string::npos);
  EXPECT_NE(config_error([](EmulationConfig& c) { c.stragglers = {{2, 1.5, 0.0}}; }).find("does not exist"), std::string::npos);
  EXPECT_NE(config_error([](EmulationConfig& c) { c.stragglers = {{1, 1.5, 0.0}, {1, 2.0, 0.0}}; }).find("twice"),
            std::string::npos);
  EXPECT_NE(config_error([](EmulationConfig& c) { c.stragglers = {{0, 1.5, -1.0}}; }).find("delay"), std::string::npos);
  EXPECT_NE(config_error([](EmulationConfig& c) { c.data_parallel = 0; }).find("data parallelism"), std::string::npos);
  EXPECT_NE(config_error([](EmulationConfig& c) { c.tensor_parallel = 0; }).find("tensor parallelism"), std::string::npos);
  EXPECT_NE(config_error([](EmulationConfig& c) { c.switch_latency_s = -0.01; }).find("switching latency"), std::string::npos);
  EXPECT_NE(config_error([](EmulationConfig& c) { c.p2p.bandwidth_bytes_per_s = std::nan(""); }).find("bandwidth"),
            std::string::npos);
  EXPECT_NE(config_error([](EmulationConfig& c) { c.p2p_links[{0, 3}] = {}; }).find("stage 3"), std::string::npos);
  EXPECT_NE(input_error_of([&] { emulate_straggler_response(problem, std::span<const ExecutionPlan>(&plan, 1), {}); })
                .find("no straggler"),
            std::string::npos);
}

}  // namespace
}  // namespace perseus
