// The simulator against closed forms on tiny clusters, its invariants on Gavel's matrix, and the
// dissertation's shapes on a scaled-down cluster: the heterogeneity-aware LAS policy holds more
// load than the agnostic one, and the makespan policy finishes a static trace before FIFO.
#include <algorithm>
#include <cmath>
#include <numeric>

#include <gtest/gtest.h>

#include "matrices.hpp"

#include "perseus/cluster/experiment.hpp"
#include "perseus/cluster/simulator.hpp"

namespace perseus::cluster {
namespace {

using testing::matrix_of;

SimulationSpec spec_of(std::vector<int> workers, PolicyKind policy = PolicyKind::kMaxMinFairness, bool aware = true) {
  SimulationSpec s;
  s.workers = std::move(workers);
  s.policy = {policy, aware, {}, {}};
  return s;
}

TEST(Simulator, OneJobFinishesAtItsStepsOverItsRate) {
  // 1000 steps at 0.5 steps/s: 2000 s, mid-round, whatever the round length.
  const ThroughputMatrix t = matrix_of({"v100"}, {{0.5}});
  for (double round : {360.0, 700.0, 5000.0}) {
    SimulationSpec s = spec_of({1});
    s.round_s = round;
    const auto r = simulate(list_source({{0, 100.0, 1000.0, 1.0}}), t, s);
    ASSERT_EQ(r.jobs.size(), 1u);
    EXPECT_DOUBLE_EQ(r.jobs[0].start_s, 100.0);  // an idle cluster starts the arrival's round at once
    EXPECT_NEAR(r.jobs[0].jct_s(), 2000.0, 1e-6) << round;
    EXPECT_NEAR(r.average_jct_s, 2000.0, 1e-6);
    EXPECT_EQ(r.jobs[0].preemptions, 0);
  }
}

TEST(Simulator, JobsSharingAGpuRunAtThePairsSpeedsAndAloneOnceThePartnerIsDone) {
  // One GPU, two jobs at 1 step/s alone and 0.8 each together (1.6 > 1: worth sharing).
  ThroughputMatrix t = matrix_of({"v100"}, {{1.0}, {1.0}});
  t.shared[{0, 1, 0}] = {0.8, 0.8};
  SimulationSpec s = spec_of({1});
  s.policy.space_sharing = true;
  // 2880 steps each: together at 0.8 both finish after 3600 s (taking turns: 5760 s of work).
  const auto together = simulate(list_source({{0, 0.0, 2880.0, 1.0}, {1, 0.0, 2880.0, 1.0}}), t, s);
  EXPECT_NEAR(together.jobs[0].completion_s, 3600.0, 1e-6);
  EXPECT_NEAR(together.jobs[1].completion_s, 3600.0, 1e-6);
  EXPECT_NEAR(together.utilisation[0], 1.0, 1e-9);
  EXPECT_NEAR(together.jobs[0].gpu_s[0], 1800.0, 1e-6);  // half the GPU's time each
  s.policy.space_sharing = false;
  const auto turns = simulate(list_source({{0, 0.0, 2880.0, 1.0}, {1, 0.0, 2880.0, 1.0}}), t, s);
  EXPECT_NEAR(turns.makespan_s, 5760.0, 1e-6);
  // Job 0 has 400 steps: 500 s together, done 140 s into round 2. Job 1 then runs alone at 1 step/s
  // for the round's last 220 s: 400 + 220 steps by 720 s, the other 2260 alone by 2980 s.
  s.policy.space_sharing = true;
  const auto early = simulate(list_source({{0, 0.0, 400.0, 1.0}, {1, 0.0, 2880.0, 1.0}}), t, s);
  EXPECT_NEAR(early.jobs[0].completion_s, 500.0, 1e-6);
  EXPECT_NEAR(early.jobs[1].completion_s, 2980.0, 1e-6);
}

TEST(Simulator, EnergyIsTheStepsTimesTheEnergyPerStepOfThePointsRun) {
  // 1000 steps; fastest 2 steps/s at 1 J/step, slow 1 step/s at 0.5 J/step. Alone the job runs
  // fast: 500 s, 1000 J. Keeping 75% (energy_stage_test: half its time at each point, 1.5 steps/s
  // at 1.25 W): 666.7 s and 833.3 J.
  const ThroughputMatrix t = testing::matrix_with_energy({"g"}, {{{{2.0, 1.0}, {1.0, 0.5}}}});
  SimulationSpec s = spec_of({1});
  const auto plain = simulate(list_source({{0, 0.0, 1000.0, 1.0}}), t, s);
  EXPECT_NEAR(plain.jobs[0].jct_s(), 500.0, 1e-6);
  EXPECT_NEAR(plain.energy_j, 1000.0, 1e-6);
  s.policy.energy_slack = 0.25;
  const auto saving = simulate(list_source({{0, 0.0, 1000.0, 1.0}}), t, s);
  EXPECT_NEAR(saving.jobs[0].jct_s(), 1000.0 / 1.5, 1e-3);
  EXPECT_NEAR(saving.energy_j, 1000.0 / 1.5 * 1.25, 1e-3);
  EXPECT_NEAR(saving.jobs[0].energy_j, saving.energy_j, 1e-9);
  // The rounds' average power over their length adds up to the same energy.
  double rounds_j = 0.0;
  for (const RoundRecord& r : saving.rounds) rounds_j += r.power_w * s.round_s;
  EXPECT_NEAR(rounds_j, saving.energy_j, 1e-6);
  // A matrix without energy figures reports none.
  EXPECT_EQ(simulate(list_source({{0, 0.0, 1000.0, 1.0}}), matrix_of({"g"}, {{2.0}}), spec_of({1})).energy_j, 0.0);
}

TEST(Simulator, TheEnergyStageSavesEnergyOnAStaticTrace) {
  // Three types, four job types, each step 100 J at full speed or 80 J at 85% of it.
  std::vector<std::vector<std::vector<OperatingPoint>>> points;
  const double speeds[4][3] = {{1.0, 2.0, 4.0}, {0.5, 1.5, 2.0}, {2.0, 0.0, 5.0}, {1.0, 1.0, 1.5}};
  for (const auto& row : speeds) {
    points.emplace_back();
    for (double v : row)
      points.back().push_back(v > 0.0 ? std::vector<OperatingPoint>{{v, 100.0}, {0.85 * v, 80.0}}
                                      : std::vector<OperatingPoint>{});
  }
  const ThroughputMatrix t = testing::matrix_with_energy({"a", "b", "c"}, points);
  std::vector<TraceJob> trace;
  for (int k = 0; k < 24; ++k) trace.push_back({k % 4, 0.0, 2000.0 + 500.0 * k, 1.0});
  SimulationSpec s = spec_of({2, 2, 2});
  const auto plain = simulate(list_source(trace), t, s);
  s.policy.energy_slack = 0.1;
  const auto saving = simulate(list_source(trace), t, s);
  for (const auto* r : {&plain, &saving}) {
    ASSERT_EQ(r->window_unfinished, 0);
    EXPECT_GT(r->energy_j, 0.0);
  }
  EXPECT_LT(saving.energy_j, 0.97 * plain.energy_j);
  // Every step at 80-100 J: the totals lie between.
  const double steps = std::accumulate(trace.begin(), trace.end(), 0.0, [](double a, const TraceJob& j) { return a + j.steps; });
  for (const auto* r : {&plain, &saving}) {
    EXPECT_GE(r->energy_j, 80.0 * steps * (1.0 - 1e-9));
    EXPECT_LE(r->energy_j, 100.0 * steps * (1.0 + 1e-9));
  }
}

TEST(Simulator, RestartOverheadIsPaidOnceByAJobThatKeepsItsGpus) {
  const ThroughputMatrix t = matrix_of({"v100"}, {{1.0}});
  SimulationSpec s = spec_of({1});
  s.restart_overhead_s = 30.0;
  const auto r = simulate(list_source({{0, 0.0, 3000.0, 1.0}}), t, s);
  EXPECT_NEAR(r.jobs[0].jct_s(), 3030.0, 1e-6);
  EXPECT_EQ(r.renewals, r.leases - 1);
}

TEST(Simulator, TwoJobsShareOneGpuWithoutIdling) {
  // Equal jobs on one GPU take turns; the GPU never idles, so the last finishes at the total
  // work, and the first a round earlier or so.
  const ThroughputMatrix t = matrix_of({"v100"}, {{1.0}});
  const auto r = simulate(list_source({{0, 0.0, 3600.0, 1.0}, {0, 0.0, 3600.0, 1.0}}), t, spec_of({1}));
  EXPECT_NEAR(r.makespan_s, 7200.0, 1e-6);
  const double first = std::min(r.jobs[0].completion_s, r.jobs[1].completion_s);
  EXPECT_NEAR(first, 7200.0 - 360.0, 1e-6);
  EXPECT_NEAR(r.utilisation[0], 1.0, 1e-9);
  EXPECT_GT(r.jobs[0].preemptions + r.jobs[1].preemptions, 0);
}

TEST(Simulator, MakespanPolicyMeetsTheClosedFormOnOneType) {
  // W identical GPUs, jobs of lengths L_m: the makespan is at least max(max L, sum L / W), and
  // rounds cost at most a round per job beyond it.
  const ThroughputMatrix t = matrix_of({"v100"}, {{1.0}});
  std::vector<TraceJob> jobs;
  double total = 0.0, longest = 0.0;
  for (int m = 0; m < 7; ++m) {
    const double steps = 3600.0 * (1 + m % 4);
    jobs.push_back({0, 0.0, steps, 1.0});
    total += steps, longest = std::max(longest, steps);
  }
  const auto r = simulate(list_source(jobs), t, spec_of({3}, PolicyKind::kMakespan));
  const double bound = std::max(longest, total / 3.0);
  EXPECT_GE(r.makespan_s, bound - 1e-6);
  EXPECT_LE(r.makespan_s, bound + 7 * 360.0);
}

TEST(Simulator, EveryJobDoesItsStepsAndNoTypeIsOverbooked) {
  const ThroughputMatrix t = read_gavel_throughputs(bundled_gavel_throughputs());
  for (const bool multi : {false, true}) {
    SimulationSpec s = spec_of({8, 8, 8});  // 8: the largest scale factor of the multi-GPU trace
    s.window_begin = 0, s.window_end = 40;
    const auto r = simulate(poisson_source(t, 1.0, 5, multi), t, s);
    EXPECT_EQ(r.window_unfinished, 0);
    for (const RoundRecord& round : r.rounds)
      for (std::size_t j = 0; j < 3; ++j) EXPECT_LE(round.busy_gpus[j], s.workers[j]);
    for (const JobOutcome& o : r.jobs) {
      if (!o.finished()) continue;
      const int scale = t.job_types[static_cast<std::size_t>(o.type)].scale_factor;
      double steps = 0.0;
      for (int j = 0; j < 3; ++j) steps += o.gpu_s[static_cast<std::size_t>(j)] / scale * t.at(o.type, j);
      EXPECT_NEAR(steps, o.steps, 1e-6 * o.steps) << "job " << o.id;
      EXPECT_GE(o.start_s, o.arrival_s);
      EXPECT_GE(o.jct_s(), o.steps / (*std::max_element(t.steps_per_s[o.type].begin(), t.steps_per_s[o.type].end())) - 1e-6);
    }
    for (double u : r.utilisation) EXPECT_LE(u, 1.0 + 1e-9);
  }
}

TEST(Simulator, FinishTimeFairnessIsTheJctOverTheTimeOnOneNthOfTheCluster) {
  // One job alone on a K80 (1 step/s) and a V100 (4 steps/s): LAS gives it the V100, 1000 s for
  // 4000 steps. Alone, 1/n of the cluster is all of it, half its time on each type (at most 1 in
  // all): 2.5 steps/s, 1600 s. rho = 1000 / 1600.
  const ThroughputMatrix two = matrix_of({"k80", "v100"}, {{1.0, 4.0}});
  const auto alone = simulate(list_source({{0, 0.0, 4000.0, 1.0}}), two, spec_of({1, 1}));
  EXPECT_NEAR(alone.jobs[0].isolated_s, 1600.0, 1e-6);
  EXPECT_NEAR(alone.jobs[0].finish_time_fairness(), 0.625, 1e-9);
  EXPECT_NEAR(alone.average_finish_time_fairness, 0.625, 1e-9);
  // Two equal jobs taking turns on one GPU (1 step/s, 3600 steps each, 360 s rounds): the first
  // runs 10 rounds of the first 19 and finishes at 6840 s; its steps took 7200 s at half a GPU.
  // The second did 3240 steps at half a GPU (6480 s) and its last 360 alone (n = 1: 360 s).
  const ThroughputMatrix one = matrix_of({"v100"}, {{1.0}});
  const auto turns = simulate(list_source({{0, 0.0, 3600.0, 1.0}, {0, 0.0, 3600.0, 1.0}}), one, spec_of({1}));
  const JobOutcome& first = turns.jobs[0].completion_s < turns.jobs[1].completion_s ? turns.jobs[0] : turns.jobs[1];
  const JobOutcome& second = &first == &turns.jobs[0] ? turns.jobs[1] : turns.jobs[0];
  EXPECT_NEAR(first.isolated_s, 7200.0, 1e-6);
  EXPECT_NEAR(first.finish_time_fairness(), 6840.0 / 7200.0, 1e-9);
  EXPECT_NEAR(second.isolated_s, 6840.0, 1e-6);
  EXPECT_NEAR(second.finish_time_fairness(), 7200.0 / 6840.0, 1e-9);
  EXPECT_NEAR(turns.average_finish_time_fairness, (6840.0 / 7200.0 + 7200.0 / 6840.0) / 2.0, 1e-9);
}

TEST(Simulator, AwareLasHoldsMoreLoadThanAgnostic) {
  // Figs. 5.9: on a third of the dissertation's cluster (12 of each type) at 2 jobs/hour (its 6
  // on 36 of each), the heterogeneity-aware policy's average JCT is well below the agnostic one's.
  const ThroughputMatrix t = read_gavel_throughputs(bundled_gavel_throughputs());
  ExperimentSpec e;
  e.variants = {{PolicyKind::kMaxMinFairness, true, {}, {}}, {PolicyKind::kMaxMinFairness, false, {}, {}}};
  e.jobs_per_hour = {2.0};
  e.seeds = 2;
  e.window_begin = 250, e.window_end = 400;
  e.simulation.workers = {12, 12, 12};
  const auto runs = run_experiment(e, t);
  ASSERT_EQ(runs.size(), 4u);
  double aware = 0.0, agnostic = 0.0;
  for (const ExperimentRun& r : runs) {
    EXPECT_EQ(r.result.window_unfinished, 0);
    (r.variant.heterogeneity_aware ? aware : agnostic) += r.result.average_jct_s;
  }
  EXPECT_LT(aware * 1.4, agnostic) << aware / 7200 << " h vs " << agnostic / 7200 << " h";
}

TEST(Simulator, AwareFinishTimeFairnessGivesJobsALowerRhoThanAgnostic) {
  // Fig. 5.11: on the continuous-multiple trace the aware finish-time-fairness policy improves the
  // average rho (2.8x there, at 2.6 jobs/hour on 36 of each type) and the JCT; here a third of the
  // cluster at 0.9 jobs/hour.
  const ThroughputMatrix t = read_gavel_throughputs(bundled_gavel_throughputs());
  ExperimentSpec e;
  e.variants = {{PolicyKind::kFinishTimeFairness, true, {}, {}}, {PolicyKind::kFinishTimeFairness, false, {}, {}}};
  e.trace = TraceKind::kContinuousMultiple;
  e.jobs_per_hour = {0.9};
  e.window_begin = 240, e.window_end = 300;
  e.simulation.workers = {12, 12, 12};
  const auto runs = run_experiment(e, t);
  ASSERT_EQ(runs.size(), 2u);
  const SimulationResult& aware = runs[0].result;
  const SimulationResult& agnostic = runs[1].result;
  EXPECT_EQ(aware.window_unfinished + agnostic.window_unfinished, 0);
  EXPECT_LT(aware.average_finish_time_fairness * 1.15, agnostic.average_finish_time_fairness)
      << aware.average_finish_time_fairness << " vs " << agnostic.average_finish_time_fairness;
  EXPECT_LT(aware.average_jct_s, agnostic.average_jct_s);
}

TEST(Simulator, TheCostWorkloadSavesMoneyAndMinCostSloMeetsEverySlo) {
  // §5.7.3's cost workload (ResNet-50 and A3C, 0.5 to 8 days, SLOs of 1.2, 2 and 10 times that)
  // on a cluster with room for every job: min-cost is about 1.4x cheaper than max-throughput and
  // misses about 35 % of the SLOs there; min-cost-slo misses none, still cheaper.
  const ThroughputMatrix t = read_gavel_throughputs(bundled_gavel_throughputs());
  const std::vector<TraceJob> trace = cost_trace(t, 100, 1);
  ASSERT_EQ(trace.size(), 100u);
  for (const TraceJob& j : trace) {
    const std::string& model = t.job_types[static_cast<std::size_t>(j.type)].model;
    EXPECT_TRUE(model == "A3C" || model == "ResNet-50 (batch size 64)") << model;
    const double days = j.steps / t.at(j.type, t.gpu_index("v100")) / 86400.0;
    EXPECT_TRUE(std::abs(days - 0.5) < 1e-9 || std::abs(days - 1) < 1e-9 || std::abs(days - 2) < 1e-9 ||
                std::abs(days - 4) < 1e-9 || std::abs(days - 8) < 1e-9) << days;
    const double factor = j.slo_s / (days * 86400.0);
    EXPECT_TRUE(std::abs(factor - 1.2) < 1e-9 || std::abs(factor - 2) < 1e-9 || std::abs(factor - 10) < 1e-9) << factor;
  }
  const auto run = [&](PolicyKind policy) {
    SimulationSpec s = spec_of({100, 100, 100}, policy);
    s.policy.prices_per_hour = default_prices(t);
    return simulate(list_source(trace), t, s);
  };
  const SimulationResult cheapest = run(PolicyKind::kMinCost), within_slo = run(PolicyKind::kMinCostSlo),
                         fastest = run(PolicyKind::kMaxThroughput);
  EXPECT_EQ(fastest.slo_violations, 0);
  EXPECT_EQ(within_slo.slo_violations, 0);
  EXPECT_GT(cheapest.slo_violations, 20);
  EXPECT_LT(cheapest.cost * 1.3, fastest.cost);
  EXPECT_LT(within_slo.cost * 1.2, fastest.cost);
  EXPECT_LT(cheapest.cost, within_slo.cost);
  // Without either job type the workload cannot be drawn.
  EXPECT_THROW(cost_trace(matrix_of({"v100"}, {{1.0}}), 10, 1), InputError);
}

TEST(Simulator, MakespanPolicyBeatsFifoOnAStaticTrace) {
  // §5.7.3: the aware makespan policy finishes a batch well before agnostic FIFO (2.5x there).
  const ThroughputMatrix t = read_gavel_throughputs(bundled_gavel_throughputs());
  ExperimentSpec e;
  e.variants = {{PolicyKind::kMakespan, true, {}, {}}, {PolicyKind::kFifo, false, {}, {}}};
  e.trace = TraceKind::kStatic;
  e.window_begin = 0, e.window_end = 120;
  e.simulation.workers = {4, 4, 4};
  const auto runs = run_experiment(e, t);
  ASSERT_EQ(runs.size(), 2u);
  EXPECT_LT(runs[0].result.makespan_s * 1.3, runs[1].result.makespan_s)
      << runs[0].result.makespan_s / 3600 << " h vs " << runs[1].result.makespan_s / 3600 << " h";
}

TEST(Simulator, BadSpecsAreNamed) {
  const ThroughputMatrix t = matrix_of({"v100"}, {{1.0}});
  SimulationSpec s = spec_of({1, 1});
  EXPECT_THROW(simulate(list_source({}), t, s), InputError);
  s = spec_of({1});
  s.round_s = 0.0;
  EXPECT_THROW(simulate(list_source({}), t, s), InputError);
  s = spec_of({1});
  s.restart_overhead_s = 400.0;
  EXPECT_THROW(simulate(list_source({}), t, s), InputError);
  s = spec_of({1});
  EXPECT_THROW(simulate(list_source({{3, 0.0, 10.0, 1.0}}), t, s), InputError);
  EXPECT_THROW(poisson_source(t, 0.0, 1), InputError);
  // A 4-GPU job on a cluster of 2: it would wait for ever.
  const ThroughputMatrix wide = matrix_of({"v100"}, {{1.0}}, {4});
  try {
    simulate(list_source({{0, 0.0, 10.0, 1.0}}), wide, spec_of({2}));
    ADD_FAILURE() << "no error";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("job0 x4) can run on no GPU type"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace perseus::cluster
