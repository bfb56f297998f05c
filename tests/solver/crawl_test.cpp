// Properties of the Phillips–Dessouky crawl on random pipelines.
#include <gtest/gtest.h>

#include <cmath>

#include "perseus/solver/crawl.hpp"
#include "synthetic.hpp"

namespace perseus {
namespace {

std::int64_t planned_length(const EnergyProblem& problem, const std::vector<std::int64_t>& durations) {
  return critical_path_length<std::int64_t>(problem.dag, durations);
}

struct Case {
  ScheduleKind kind;
  int stages;
  int microbatches;
  int chunks;
};

class CrawlProperties : public ::testing::TestWithParam<std::tuple<Case, std::uint32_t>> {};

TEST_P(CrawlProperties, EveryStepIsOneUnitFasterAndConsistent) {
  const auto& [c, seed] = GetParam();
  const EnergyProblem problem =
      testing::synthetic_problem({c.kind, c.stages, c.microbatches, c.chunks, false}, 12, seed);
  const CrawlResult crawl = crawl_frontier(problem);
  ASSERT_FALSE(crawl.steps.empty());
  EXPECT_EQ(planned_length(problem, crawl.initial_durations), crawl.t_star_q);
  EXPECT_GE(crawl.t_star_q, crawl.t_min_q);

  CrawlCursor cursor(crawl);
  std::int64_t previous = crawl.t_star_q;
  double previous_cost = crawl.initial_fitted_cost;
  for (std::size_t k = 0; k < crawl.steps.size(); ++k) {
    const CrawlStep& step = crawl.steps[k];
    EXPECT_EQ(step.time_q, previous - 1) << "step " << k;
    const auto& durations = cursor.advance_to(k);
    // The reported time is the plan's critical path.
    EXPECT_EQ(planned_length(problem, durations), step.time_q) << "step " << k;
    // Durations stay within each operation's range.
    for (std::size_t i = 0; i < durations.size(); ++i) {
      const OperationOptions& op = problem.options_of(static_cast<Dag::NodeId>(i));
      ASSERT_GE(durations[i], op.min_q());
      ASSERT_LE(durations[i], op.max_q());
    }
    // The fitted cost is the sum over the plan, and the step's change is what was added.
    double cost = 0.0;
    for (std::size_t i = 0; i < durations.size(); ++i) {
      cost += problem.options_of(static_cast<Dag::NodeId>(i)).fitted_cost(durations[i]);
    }
    EXPECT_NEAR(step.fitted_cost, cost, 1e-6 * std::abs(cost));
    EXPECT_NEAR(step.fitted_cost - previous_cost, step.cost_change, 1e-6 * std::abs(cost));
    EXPECT_TRUE(std::isfinite(step.fitted_cost));
    previous = step.time_q;
    previous_cost = step.fitted_cost;
  }
  // The crawl gets all the way to T_min on convex costs.
  EXPECT_EQ(crawl.steps.back().time_q, crawl.t_min_q) << crawl.stop_reason;
}

INSTANTIATE_TEST_SUITE_P(
    RandomPipelines, CrawlProperties,
    ::testing::Combine(::testing::Values(Case{ScheduleKind::k1F1B, 4, 6, 1}, Case{ScheduleKind::k1F1B, 3, 5, 1},
                                         Case{ScheduleKind::kGPipe, 3, 4, 1},
                                         Case{ScheduleKind::kInterleaved1F1B, 2, 4, 2},
                                         Case{ScheduleKind::k1F1BEarlyRecompute, 3, 3, 1}),
                       ::testing::Values(1u, 2u, 3u)));

TEST(Crawl, IsDeterministic) {
  const EnergyProblem problem = testing::synthetic_problem({ScheduleKind::k1F1B, 4, 8, 1, false}, 12, 7);
  const CrawlResult a = crawl_frontier(problem);
  const CrawlResult b = crawl_frontier(problem);
  ASSERT_EQ(a.steps.size(), b.steps.size());
  for (std::size_t k = 0; k < a.steps.size(); ++k) {
    EXPECT_EQ(a.steps[k].time_q, b.steps[k].time_q);
    EXPECT_EQ(a.steps[k].fitted_cost, b.steps[k].fitted_cost);
  }
  EXPECT_EQ(a.changes.size(), b.changes.size());
}

TEST(Crawl, CursorReplaysTheLog) {
  const EnergyProblem problem = testing::synthetic_problem({ScheduleKind::k1F1B, 2, 3, 1, false}, 8, 5);
  const CrawlResult crawl = crawl_frontier(problem);
  ASSERT_GT(crawl.steps.size(), 2u);
  CrawlCursor all(crawl);
  all.advance_to(crawl.steps.size() - 1);
  // Every operation at the last step runs no slower than at the start.
  for (std::size_t i = 0; i < crawl.initial_durations.size(); ++i) {
    EXPECT_LE(all.durations()[i], crawl.initial_durations[i]);
  }
}

TEST(Crawl, MaxStepsStopsEarly) {
  const EnergyProblem problem = testing::synthetic_problem({ScheduleKind::k1F1B, 3, 4, 1, false}, 12, 9);
  CrawlOptions options;
  options.max_steps = 3;
  EXPECT_EQ(crawl_frontier(problem, options).steps.size(), 3u);
}


TEST(Crawl, TellsEveryStepAsItIsTaken) {
  const EnergyProblem problem = testing::synthetic_problem({ScheduleKind::k1F1B, 3, 4, 1, false}, 12, 9);
  CrawlOptions options;
  std::vector<std::size_t> indices;
  std::vector<CrawlStep> steps;
  std::vector<std::vector<DurationChange>> changes;
  options.on_step = [&](std::size_t index, const CrawlStep& step, std::span<const DurationChange> c) {
    indices.push_back(index);
    steps.push_back(step);
    changes.emplace_back(c.begin(), c.end());
  };
  const CrawlResult crawl = crawl_frontier(problem, options);
  ASSERT_EQ(indices.size(), crawl.steps.size());
  for (std::size_t k = 0; k < crawl.steps.size(); ++k) {
    EXPECT_EQ(indices[k], k);
    EXPECT_EQ(steps[k].time_q, crawl.steps[k].time_q);
    EXPECT_EQ(steps[k].fitted_cost, crawl.steps[k].fitted_cost);
    ASSERT_EQ(changes[k].size(), crawl.change_begin[k + 1] - crawl.change_begin[k]);
    for (std::size_t i = 0; i < changes[k].size(); ++i) {
      EXPECT_EQ(changes[k][i].node, crawl.changes[crawl.change_begin[k] + i].node);
      EXPECT_EQ(changes[k][i].duration_q, crawl.changes[crawl.change_begin[k] + i].duration_q);
    }
  }
}

TEST(Crawl, ReportsFlowsAtEveryKthStepAndEachOfTheLastBeforeTMin) {
  const EnergyProblem problem = testing::synthetic_problem({ScheduleKind::k1F1B, 3, 4, 1, false}, 12, 9);
  const auto reported = [&](std::size_t every) {
    CrawlOptions options;
    options.flow_every = every;
    std::vector<std::int64_t> times;
    options.on_flow = [&](const CrawlFlow& flow) { times.push_back(flow.time_q); };
    const CrawlResult crawl = crawl_frontier(problem, options);
    return std::pair{crawl, times};
  };
  const auto [crawl, every_step] = reported(1);
  ASSERT_GT(crawl.steps.size(), 12u);
  // Every step's (each before it applies, at the time it shortens), and the cut that stops it.
  ASSERT_EQ(every_step.size(), crawl.steps.size() + 1);
  for (std::size_t k = 0; k < crawl.steps.size(); ++k) EXPECT_EQ(every_step[k], crawl.steps[k].time_q + 1);
  const std::int64_t every = 4;
  std::vector<std::int64_t> expected;
  for (const std::int64_t t : every_step) {
    if ((crawl.t_star_q - t) % every == 0 || t - crawl.t_min_q <= every) expected.push_back(t);
  }
  EXPECT_EQ(reported(every).second, expected);
  EXPECT_LT(expected.size(), every_step.size() / 2);
}

TEST(Crawl, LemonPreflowFindsTheSameCuts) {
  // The max flow is ours for speed (max_flow.hpp); LEMON's Preflow must give the same crawl:
  // the same time and fitted cost at every step.
  for (const ScheduleKind kind : {ScheduleKind::k1F1B, ScheduleKind::kGPipe}) {
    const EnergyProblem problem = testing::synthetic_problem({kind, 3, 4, 1, false}, 12, 5);
    CrawlOptions lemon;
    lemon.max_flow = MaxFlowAlgorithm::kLemonPreflow;
    const CrawlResult ours = crawl_frontier(problem);
    const CrawlResult theirs = crawl_frontier(problem, lemon);
    ASSERT_EQ(ours.steps.size(), theirs.steps.size());
    EXPECT_EQ(ours.stop_reason, theirs.stop_reason);
    for (std::size_t k = 0; k < ours.steps.size(); ++k) {
      EXPECT_EQ(ours.steps[k].time_q, theirs.steps[k].time_q);
      EXPECT_NEAR(ours.steps[k].fitted_cost, theirs.steps[k].fitted_cost, 1e-9 * std::abs(ours.steps[k].fitted_cost));
    }
    // The operations each step changes may differ: this pipeline's stages are alike, so
    // several cuts cost the same to within the flow tolerance (1e-6), and which one the
    // residual graph yields depends on the flow found. Their plans cost the same (above).
  }
}

TEST(Crawl, AbsorbedCutsGiveTheCrawlOfRestoredFlows) {
  // By default the crawl's network absorbs cuts below the flow through each node's arcs from
  // s and to t (max_flow.hpp, set_terminal_arcs); a crawl that reports its flows at every step
  // restores them instead. Both find minimum cuts of the same capacities: the same time and
  // fitted cost at every step (the operations may differ where cuts tie, as with LEMON above).
  for (const Case c : {Case{ScheduleKind::k1F1B, 4, 8, 1}, Case{ScheduleKind::kGPipe, 3, 6, 1},
                       Case{ScheduleKind::kInterleaved1F1B, 2, 4, 2}}) {
    for (std::uint32_t seed = 1; seed <= 3; ++seed) {
      const EnergyProblem problem = testing::synthetic_problem({c.kind, c.stages, c.microbatches, c.chunks, false}, 12, seed);
      CrawlOptions restoring;
      restoring.on_flow = [](const CrawlFlow&) {};
      const CrawlResult absorbed = crawl_frontier(problem);
      const CrawlResult restored = crawl_frontier(problem, restoring);
      ASSERT_GT(absorbed.steps.size(), 20u);
      ASSERT_EQ(absorbed.steps.size(), restored.steps.size()) << "seed " << seed;
      EXPECT_EQ(absorbed.stop_reason, restored.stop_reason);
      for (std::size_t k = 0; k < absorbed.steps.size(); ++k) {
        EXPECT_EQ(absorbed.steps[k].time_q, restored.steps[k].time_q);
        EXPECT_NEAR(absorbed.steps[k].fitted_cost, restored.steps[k].fitted_cost,
                    1e-9 * std::abs(restored.steps[k].fitted_cost)) << "seed " << seed << " step " << k;
      }
    }
  }
}

}  // namespace
}  // namespace perseus
