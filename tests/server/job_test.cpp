#include "perseus/server/job.hpp"

#include <iostream>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "perseus/solver/exact_milp.hpp"
#include "synthetic.hpp"

namespace perseus::server {
namespace {

using json = nlohmann::json;

const PipelineLayout kLayout{ScheduleKind::k1F1B, 4, 1};
const std::vector<int> kClocks = {1410, 1350, 1290};  // synthetic_profile's first three

// A two-stage job whose ranks support kClocks.
struct TwoStageJob {
  JobInfo info{"job", 2, 1, 1, 2, std::nullopt, kLayout};
  std::map<int, RankInfo> ranks{{0, RankInfo{0, 0, 0, 0, kClocks}}, {1, RankInfo{1, 0, 1, 0, kClocks}}};

  // What the lifecycle's scheduler deploys next.
  std::string label(JobLifecycle& lifecycle) const {
    return lifecycle.scheduler().next_round(JobView{info, ranks}, 0.0).label;
  }
};

template <class Kind>
bool runs(const JobLifecycle& lifecycle) {
  return dynamic_cast<const Kind*>(&lifecycle.scheduler()) != nullptr;
}

std::shared_ptr<const FrontierTable> small_frontier() {
  const FrontierInputs inputs{profile_to_csv(perseus::testing::synthetic_profile(2, 3, 7)), "synthetic", kLayout, 2,
                              80.0, 0.001};
  return FrontierTable::compute(make_server_problem(inputs, nullptr), [] { return false; });
}

const auto kNoFrontier = [] { return std::shared_ptr<const FrontierTable>(); };

TEST(JobLifecycle, PhaseNamesRoundTrip) {
  const std::map<JobPhase, std::string> names = {
      {JobPhase::kPoint, "point"},         {JobPhase::kWaiting, "waiting"},   {JobPhase::kProfiling, "profiling"},
      {JobPhase::kComputing, "computing"}, {JobPhase::kFrontier, "frontier"}, {JobPhase::kFailed, "failed"}};
  for (const auto& [phase, name] : names) {
    EXPECT_EQ(to_string(phase), name);
    EXPECT_EQ(parse_job_phase(name), phase);
  }
  EXPECT_FALSE(parse_job_phase("Frontier").has_value());
  EXPECT_FALSE(parse_job_phase("").has_value());
}

TEST(JobLifecycle, ANewJobWaitsForAProfileAtTheHighestClock) {
  const TwoStageJob job;
  JobLifecycle lifecycle(kLayout);
  EXPECT_EQ(lifecycle.phase(), JobPhase::kWaiting);
  EXPECT_TRUE(runs<MaxFrequencyScheduler>(lifecycle));
  EXPECT_EQ(lifecycle.profiling(), nullptr);
  EXPECT_EQ(lifecycle.frontier(), nullptr);
  EXPECT_EQ(job.label(lifecycle), "highest clock, waiting for a profile (1410 MHz)");

  // Without a layout there is nothing to run yet: the round says how to give one.
  JobLifecycle unknown;
  try {
    job.label(unknown);
    ADD_FAILURE() << "a round without a layout was served";
  } catch (const ApiError& e) {
    EXPECT_EQ(e.status(), 409);
  }
}

TEST(JobLifecycle, ServePointSetsThePhaseAndThePlanTogether) {
  const TwoStageJob job;
  const PipelineFrequencies plan = {{{"forward", 1350}}, {{"forward", 1290}}};
  JobLifecycle lifecycle(kLayout);
  lifecycle.serve_point(plan);
  EXPECT_EQ(lifecycle.phase(), JobPhase::kPoint);
  EXPECT_TRUE(runs<PointSolutionScheduler>(lifecycle));
  EXPECT_EQ(job.label(lifecycle), "point solution");
  EXPECT_EQ(lifecycle.state_json().at("point_plan"), plan_json(plan));
  EXPECT_EQ(plan_from_json(plan_json(plan)), plan);
}

// zeus's PointSolution reads a plan with one list per rank: rank r runs list r whatever its
// stage, and a restart keeps reading it so.
TEST(JobLifecycle, APlanWithAListPerRankServesEachRankItsOwnAndIsRestoredSo) {
  TwoStageJob job;
  job.ranks = {{0, RankInfo{0, 0, 1, 0, kClocks}}, {1, RankInfo{1, 0, 0, 0, kClocks}}};  // rank 0 on stage 1
  const PipelineFrequencies plan = {{{"forward", 1350}}, {{"forward", 1290}}};
  const auto lists_served = [&](JobLifecycle& lifecycle) {
    const Deployment deployment = lifecycle.scheduler().next_round(JobView{job.info, job.ranks}, 0.0);
    return std::vector<StageFrequencies>{deployment.for_rank(job.ranks.at(0)), deployment.for_rank(job.ranks.at(1))};
  };
  JobLifecycle per_rank(kLayout);
  per_rank.serve_point(plan, PlanLists::kPerRank);
  EXPECT_EQ(lists_served(per_rank), (std::vector<StageFrequencies>{plan[0], plan[1]}));
  EXPECT_EQ(per_rank.state_json().at("point_plan_lists"), "rank");
  JobLifecycle per_stage(kLayout);
  per_stage.serve_point(plan, PlanLists::kPerStage);
  EXPECT_EQ(lists_served(per_stage), (std::vector<StageFrequencies>{plan[1], plan[0]}));

  JobLifecycle back;
  back.restore(per_rank.state_json(), ProfilingSettings{}, false, [] { return nullptr; });
  EXPECT_EQ(lists_served(back), lists_served(per_rank));
  json stored_before_lists = per_stage.state_json();
  stored_before_lists.erase("point_plan_lists");
  back = JobLifecycle();
  back.restore(stored_before_lists, ProfilingSettings{}, false, [] { return nullptr; });
  EXPECT_EQ(lists_served(back), lists_served(per_stage));
}

TEST(JobLifecycle, StartProfilingNeedsALayout) {
  JobLifecycle unknown;
  EXPECT_THROW(unknown.start_profiling(ProfilingSettings{}), InputError);
  EXPECT_EQ(unknown.phase(), JobPhase::kWaiting);

  const TwoStageJob job;
  JobLifecycle lifecycle(kLayout);
  lifecycle.start_profiling(ProfilingSettings{});
  EXPECT_EQ(lifecycle.phase(), JobPhase::kProfiling);
  ASSERT_NE(lifecycle.profiling(), nullptr);
  EXPECT_EQ(lifecycle.profiling(), &lifecycle.scheduler());
  EXPECT_EQ(lifecycle.frontier(), nullptr);
  EXPECT_EQ(job.label(lifecycle), "profiling 1410 MHz (1/3)");
}

TEST(JobLifecycle, StartComputingMovesTheProfileOnAndClearsAFailure) {
  const TwoStageJob job;
  JobLifecycle lifecycle;
  lifecycle.fail("in-vivo profile unusable: no stage measured", "profiling");
  EXPECT_EQ(lifecycle.phase(), JobPhase::kFailed);

  lifecycle.start_computing(kLayout, {"a warning"});
  EXPECT_EQ(lifecycle.phase(), JobPhase::kComputing);
  EXPECT_TRUE(runs<MaxFrequencyScheduler>(lifecycle));
  EXPECT_EQ(lifecycle.layout(), kLayout);
  EXPECT_EQ(lifecycle.error(), "");
  EXPECT_EQ(lifecycle.warnings(), std::vector<std::string>{"a warning"});
  EXPECT_EQ(lifecycle.profile_version(), 1u);
  EXPECT_EQ(job.label(lifecycle), "highest clock, computing the frontier (1410 MHz)");

  EXPECT_EQ(lifecycle.start_compute_attempt(), 1);
  EXPECT_EQ(lifecycle.start_compute_attempt(), 2);
  lifecycle.forget_compute_attempt();
  EXPECT_EQ(lifecycle.compute_attempts(), 1);

  // Another profile while computing: the older computation is outdated, attempts start over.
  lifecycle.start_computing(kLayout, {});
  EXPECT_EQ(lifecycle.profile_version(), 2u);
  EXPECT_EQ(lifecycle.compute_attempts(), 0);
  EXPECT_TRUE(lifecycle.warnings().empty());
}

TEST(JobLifecycle, FrontierReadyServesTheFrontier) {
  const TwoStageJob job;
  const auto table = small_frontier();
  JobLifecycle lifecycle(kLayout);
  lifecycle.start_computing(kLayout, {});
  lifecycle.start_compute_attempt();
  lifecycle.frontier_ready(table, 2.5);
  EXPECT_EQ(lifecycle.phase(), JobPhase::kFrontier);
  ASSERT_NE(lifecycle.frontier(), nullptr);
  EXPECT_EQ(lifecycle.frontier(), &lifecycle.scheduler());
  EXPECT_EQ(lifecycle.frontier()->table(), table);
  EXPECT_EQ(lifecycle.profiling(), nullptr);
  EXPECT_EQ(lifecycle.compute_attempts(), 0);
  EXPECT_EQ(lifecycle.frontier_seconds(), 2.5);
  const Deployment deployment = lifecycle.scheduler().next_round(JobView{job.info, job.ranks}, 0.0);
  EXPECT_EQ(deployment.frontier_index, std::optional<std::size_t>(0));  // T_min
}

TEST(JobLifecycle, FailuresServeTheHighestClockAndSayWhy) {
  const TwoStageJob job;
  JobLifecycle lifecycle(kLayout);
  lifecycle.start_computing(kLayout, {});
  lifecycle.start_compute_attempt();
  lifecycle.frontier_failed("no feasible plan");
  EXPECT_EQ(lifecycle.phase(), JobPhase::kFailed);
  EXPECT_TRUE(runs<MaxFrequencyScheduler>(lifecycle));
  EXPECT_EQ(lifecycle.error(), "frontier computation failed: no feasible plan");
  EXPECT_EQ(lifecycle.compute_attempts(), 0);
  EXPECT_EQ(job.label(lifecycle), "highest clock, frontier failed (1410 MHz)");

  lifecycle.fail("recovery failed: bad row", "recovery");
  EXPECT_EQ(lifecycle.error(), "recovery failed: bad row");
  EXPECT_EQ(job.label(lifecycle), "highest clock, recovery failed (1410 MHz)");
}

TEST(JobLifecycle, TheProfilingStopReasonOutlivesTheProfilingScheduler) {
  // One rank, one clock, one iteration per clock: a single result finishes profiling.
  const JobInfo info{"job", 1, 1, 1, 1, std::nullopt, kLayout};
  const std::map<int, RankInfo> ranks{{0, RankInfo{0, 0, 0, 0, {1410}}}};
  JobLifecycle lifecycle(kLayout);
  lifecycle.start_profiling(ProfilingSettings{5, 1});
  lifecycle.scheduler().next_round(JobView{info, ranks}, 0.0);
  ProfilingResult result;
  result.iter_time = {0.5};
  result.iter_energy = {100.0};
  result.time_breakdown = {{"forward", {{0.01, 0.01, 0.01, 0.01}}}, {"backward", {{0.02, 0.02, 0.02, 0.02}}}};
  result.energy_breakdown = {{"forward", {{1.0, 1.0, 1.0, 1.0}}}, {"backward", {{2.0, 2.0, 2.0, 2.0}}}};
  EXPECT_TRUE(lifecycle.scheduler().on_result(JobView{info, ranks}, result));
  ASSERT_TRUE(lifecycle.profiling()->done());
  EXPECT_EQ(lifecycle.profiling_stop_reason(), "");

  lifecycle.start_computing(kLayout, {});
  EXPECT_EQ(lifecycle.profiling(), nullptr);
  EXPECT_EQ(lifecycle.profiling_stop_reason(), "measured all 1 frequencies");
  EXPECT_EQ(lifecycle.state_json().at("profiling_stop_reason"), "measured all 1 frequencies");
}

TEST(JobLifecycle, TheStoredStateKeepsItsFormat) {
  JobLifecycle lifecycle(kLayout);
  lifecycle.start_computing(kLayout, {"w"});
  lifecycle.start_compute_attempt();
  const json expected = {{"phase", "computing"},
                         {"layout", {{"schedule", "1f1b"}, {"microbatches", 4}, {"chunks", 1}}},
                         {"error", ""},
                         {"warnings", {"w"}},
                         {"profiling_stop_reason", ""},
                         {"frontier_seconds", 0.0},
                         {"scheduler_state", json::object()},
                         {"compute_attempts", 1}};
  EXPECT_EQ(lifecycle.state_json().dump(), expected.dump());
}

// A job's frontier with the exact MILP at iso-time (the scheduler's exact_seconds): plans no
// dearer at any deadline than without it, and at iso-time the optimum where CBC proves it.
TEST(FrontierTable, TheExactMilpAtIsoTimeLeavesNoPlanDearer) {
  // 4 stages x 8 microbatches, where the frontier's iso-time plan is a little above the optimum
  // and CBC proves the optimum in about a second.
  const FrontierInputs inputs{profile_to_csv(perseus::testing::synthetic_profile(4, 10, 3)), "synthetic",
                              PipelineLayout{ScheduleKind::k1F1B, 8, 1}, 4, 80.0, 0.001};
  const auto plain = FrontierTable::compute(make_server_problem(inputs, nullptr), [] { return false; });
  const auto exact = FrontierTable::compute(make_server_problem(inputs, nullptr), [] { return false; }, 10.0);
  const EnergyProblem& problem = exact->problem();
  const double blocking_w = problem.p_blocking * problem.num_gpus();
  const auto energy_at = [&](const FrontierTable& table, double deadline) {
    const std::size_t i = *table.select(deadline);
    return table.energy(i) + blocking_w * (deadline - table.time(i));
  };
  const double t_min = plain->time(0), t_star = plain->time(plain->t_star_index());
  for (int k = 0; k <= 20; ++k) {
    const double deadline = t_min + (t_star - t_min) * k / 20.0;
    EXPECT_LE(energy_at(*exact, deadline), energy_at(*plain, deadline) + 1e-9) << deadline;
  }
  const double iso = evaluate_highest_clock(problem).time_s;
  const auto optimum = solve_exact(problem, iso, {.time_limit_s = 30.0, .start = {}});
  ASSERT_TRUE(optimum && optimum->proven_optimal);
  EXPECT_NEAR(energy_at(*exact, iso), optimum->energy_at_deadline_j, 1e-6 * optimum->energy_at_deadline_j);
  EXPECT_LT(energy_at(*exact, iso), energy_at(*plain, iso) - 1e-6 * optimum->energy_at_deadline_j);  // it did run
  std::cout << "iso-time: " << energy_at(*plain, iso) << " J without the MILP, " << energy_at(*exact, iso) << " J with it\n";
}

TEST(JobLifecycle, RestoresEveryPhaseFromItsStoredState) {
  const auto table = small_frontier();
  const auto restored = [&](const JobLifecycle& stored, bool has_profile, bool frontier_kept) {
    JobLifecycle lifecycle;
    lifecycle.restore(stored.state_json(), ProfilingSettings{}, has_profile,
                      [&] { return frontier_kept ? table : nullptr; });
    return lifecycle;
  };

  JobLifecycle point(kLayout);
  point.serve_point({{{"forward", 1350}}, {{"forward", 1290}}});
  JobLifecycle back = restored(point, false, false);
  EXPECT_EQ(back.phase(), JobPhase::kPoint);
  EXPECT_TRUE(runs<PointSolutionScheduler>(back));
  EXPECT_EQ(back.state_json(), point.state_json());

  JobLifecycle profiling(kLayout);
  profiling.start_profiling(ProfilingSettings{});
  back = restored(profiling, false, false);
  EXPECT_EQ(back.phase(), JobPhase::kProfiling);
  EXPECT_NE(back.profiling(), nullptr);
  EXPECT_EQ(back.state_json(), profiling.state_json());

  JobLifecycle frontier(kLayout);
  frontier.start_computing(kLayout, {"w"});
  frontier.frontier_ready(table, 1.25);
  back = restored(frontier, true, true);
  EXPECT_EQ(back.phase(), JobPhase::kFrontier);
  ASSERT_NE(back.frontier(), nullptr);
  EXPECT_EQ(back.frontier()->table(), table);
  EXPECT_EQ(back.state_json(), frontier.state_json());
  // The stored frontier is lost: computed again from the stored profile, or waited for.
  back = restored(frontier, true, false);
  EXPECT_EQ(back.phase(), JobPhase::kComputing);
  EXPECT_TRUE(runs<MaxFrequencyScheduler>(back));
  EXPECT_EQ(back.profile_version(), 1u);
  back = restored(frontier, false, false);
  EXPECT_EQ(back.phase(), JobPhase::kWaiting);

  JobLifecycle computing(kLayout);
  computing.start_computing(kLayout, {});
  computing.start_compute_attempt();
  back = restored(computing, true, false);
  EXPECT_EQ(back.phase(), JobPhase::kComputing);
  EXPECT_EQ(back.compute_attempts(), 1);  // counted on, so a crashing computation is given up
  EXPECT_EQ(restored(computing, false, false).phase(), JobPhase::kWaiting);

  JobLifecycle failed(kLayout);
  failed.fail("in-vivo profile unusable: x", "profiling");
  back = restored(failed, false, false);
  EXPECT_EQ(back.phase(), JobPhase::kFailed);
  EXPECT_EQ(back.error(), "in-vivo profile unusable: x");
  EXPECT_EQ(back.state_json(), failed.state_json());
}

TEST(JobLifecycle, RestoresAStateAsExistingDatabasesHoldIt) {
  const TwoStageJob job;
  const json stored = json::parse(R"({"compute_attempts":0,"error":"","frontier_seconds":0.0,
      "layout":{"chunks":1,"microbatches":4,"schedule":"1f1b"},"phase":"waiting","profiling_stop_reason":"",
      "round":12,"scheduler_state":{},"warnings":[]})");
  JobLifecycle lifecycle;
  lifecycle.restore(stored, ProfilingSettings{}, false, kNoFrontier);
  EXPECT_EQ(lifecycle.phase(), JobPhase::kWaiting);
  EXPECT_EQ(lifecycle.layout(), kLayout);
  EXPECT_EQ(job.label(lifecycle), "highest clock, waiting for a profile (1410 MHz)");
  json again = lifecycle.state_json();
  again["round"] = 12;  // the service's, not the lifecycle's
  EXPECT_EQ(again, stored);

  // A state with only a phase (the other fields default).
  JobLifecycle bare;
  bare.restore(json{{"phase", "failed"}}, ProfilingSettings{}, false, kNoFrontier);
  EXPECT_EQ(bare.phase(), JobPhase::kFailed);
}

TEST(JobLifecycle, RefusesAStateItCannotRestore) {
  JobLifecycle unknown_phase;
  EXPECT_THROW(unknown_phase.restore(json{{"phase", "paused"}}, ProfilingSettings{}, false, kNoFrontier), InputError);

  // The layout read before the failure stays, so that a failed job keeps it.
  JobLifecycle profiling;
  const json state = {{"phase", "profiling"}, {"layout", nullptr}};
  EXPECT_THROW(profiling.restore(state, ProfilingSettings{}, false, kNoFrontier), InputError);
  JobLifecycle with_layout;
  EXPECT_THROW(with_layout.restore(json{{"phase", "paused"}, {"layout", to_json(kLayout)}}, ProfilingSettings{}, false,
                                   kNoFrontier),
               InputError);
  EXPECT_EQ(with_layout.layout(), kLayout);
}

}  // namespace
}  // namespace perseus::server
