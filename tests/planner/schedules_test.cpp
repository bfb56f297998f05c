// Schedules: closed forms (bubble, iteration time, in-flight microbatches, weight versions)
// against schedules built instruction by instruction and their DAGs.
#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "perseus/model/instruction.hpp"
#include "perseus/planner/schedules.hpp"
#include "perseus/schedule/dag.hpp"

namespace perseus::planner {
namespace {

// Critical path with per-stage forward/backward durations (recompute costs a forward; an
// interleaved chunk costs 1/v of its device's time).
double critical_path(const Schedule& schedule, const std::vector<double>& tf, const std::vector<double>& tb) {
  const Dag dag(schedule);
  std::vector<double> durations(dag.num_nodes());
  const double v = schedule.spec.chunks;
  for (std::size_t n = 0; n < dag.num_nodes(); ++n) {
    const Instruction& ins = dag.instruction(static_cast<Dag::NodeId>(n));
    const double f = tf[ins.stage] / v, b = tb[ins.stage] / v;
    durations[n] = ins.kind == InstructionKind::kBackward ? b : f;
  }
  return critical_path_length<double>(dag, durations);
}

TEST(Schedules, IterationTimeAndBubbleMatchTheClosedForms) {
  const double tf = 1.0, tb = 2.0;
  for (int S : {1, 2, 4, 6}) {
    for (int M : {1, 3, 8, 12}) {
      for (PipelineSchedule kind : {PipelineSchedule::kGPipe, PipelineSchedule::k1F1B, PipelineSchedule::k1F1BRecompute}) {
        const Schedule schedule = make_schedule(ScheduleSpec{core_schedule_kind(kind), S, M, 1, false});
        const std::vector<double> f(S, tf), b(S, tb);
        const double expected = iteration_time_closed_form(kind, S, M, 1, tf, tb);
        if (kind == PipelineSchedule::k1F1BRecompute) {
          // Recomputation overlaps the wait for the gradient on all but the critical stage:
          // the closed form (M + S - 1)(2t_f + t_b) is an upper bound, met without a bubble.
          EXPECT_LE(critical_path(schedule, f, b), expected + 1e-9);
          EXPECT_GE(critical_path(schedule, f, b), iteration_time_closed_form(PipelineSchedule::k1F1B, S, M, 1, tf, tb));
        } else {
          EXPECT_DOUBLE_EQ(critical_path(schedule, f, b), expected) << to_string(kind) << " S=" << S << " M=" << M;
        }
        // Bubble: idle share of the iteration, (S-1)/M relative to the useful work.
        EXPECT_DOUBLE_EQ(bubble_fraction(kind, S, M), (S - 1.0) / M);
      }
    }
  }
  for (int S : {2, 4}) {
    for (int v : {2, 3}) {
      for (int M : {S, 2 * S, 3 * S}) {
        const Schedule schedule = make_schedule(ScheduleSpec{ScheduleKind::kInterleaved1F1B, S, M, v, false});
        const std::vector<double> f(S, tf), b(S, tb);
        EXPECT_NEAR(critical_path(schedule, f, b),
                    iteration_time_closed_form(PipelineSchedule::kInterleaved1F1B, S, M, v, tf, tb), 1e-9)
            << "S=" << S << " v=" << v << " M=" << M;
        EXPECT_DOUBLE_EQ(bubble_fraction(PipelineSchedule::kInterleaved1F1B, S, M, v), (S - 1.0) / (v * M));
      }
    }
  }
}

TEST(Schedules, InFlightMicrobatchesMatchTheClosedForms) {
  for (int S : {1, 2, 4, 7}) {
    for (int M : {1, 2, 5, 16}) {
      for (PipelineSchedule kind : {PipelineSchedule::kGPipe, PipelineSchedule::k1F1B, PipelineSchedule::k1F1BRecompute}) {
        const auto counted = peak_in_flight(make_schedule(ScheduleSpec{core_schedule_kind(kind), S, M, 1, false}));
        const auto closed = memory_footprint(kind, S, M);
        for (int s = 0; s < S; ++s) {
          EXPECT_EQ(counted[s], closed[s].activation_stashes) << to_string(kind) << " S=" << S << " M=" << M;
          EXPECT_EQ(closed[s].activation_stashes, kind == PipelineSchedule::kGPipe ? M : std::min(S - s, M));
        }
      }
    }
    for (int v : {2, 3}) {
      for (int M : {S, 4 * S}) {
        if (S < 2) continue;
        const auto counted = peak_in_flight(make_schedule(ScheduleSpec{ScheduleKind::kInterleaved1F1B, S, M, v, false}));
        const auto closed = memory_footprint(PipelineSchedule::kInterleaved1F1B, S, M, v);
        for (int s = 0; s < S; ++s) EXPECT_EQ(counted[s], closed[s].activation_stashes) << "S=" << S << " v=" << v;
        // Korthikanti et al.: device 0 holds (1 + (S-1)/(S*v)) times the 1F1B activations.
        if (M * v >= S * v + S - 1) {
          EXPECT_DOUBLE_EQ(closed[0].activation_stashes / (static_cast<double>(v) * S), 1.0 + (S - 1.0) / (S * v));
        }
      }
    }
  }
}

TEST(Schedules, AsyncWindowRunsAtTheBottleneckStage) {
  // Equal stages: a window of K microbatches takes (K + S - 1)(t_f + t_b); the steady state adds
  // the bottleneck stage's t_f + t_b per microbatch: no bubble.
  const int S = 4;
  EXPECT_DOUBLE_EQ(critical_path(async_window_schedule(S, 10), std::vector<double>(S, 1.0), std::vector<double>(S, 2.0)),
                   (10 + S - 1) * 3.0);
  const std::vector<double> tf{1.0, 1.4, 0.8, 1.1}, tb{2.0, 2.5, 1.9, 2.2};
  double bottleneck = 0.0;
  for (int s = 0; s < S; ++s) bottleneck = std::max(bottleneck, tf[s] + tb[s]);
  const double t40 = critical_path(async_window_schedule(S, 40), tf, tb);
  const double t80 = critical_path(async_window_schedule(S, 80), tf, tb);
  EXPECT_NEAR((t80 - t40) / 40.0, bottleneck, 1e-9);
  EXPECT_DOUBLE_EQ(iteration_time_closed_form(PipelineSchedule::kPipeDream2BW, S, 40, 1, 1.4, 2.5), 40 * bottleneck);
  EXPECT_DOUBLE_EQ(bubble_fraction(PipelineSchedule::kPipeDream, S, 40), 0.0);
}

TEST(Schedules, WeightVersionsFollowTheUpdateRules) {
  for (int S : {2, 4, 6}) {
    const Schedule window = async_window_schedule(S, 6 * S);
    // PipeDream: one version per in-flight microbatch, S - s on stage s.
    const auto pipedream = simulated_weight_versions(PipelineSchedule::kPipeDream, window);
    const auto pipedream_closed = memory_footprint(PipelineSchedule::kPipeDream, S, 6 * S);
    // 2BW with m >= S: never more than two versions.
    const auto two_bw = simulated_weight_versions(PipelineSchedule::kPipeDream2BW, window, S);
    const auto two_bw_closed = memory_footprint(PipelineSchedule::kPipeDream2BW, S, S);
    const auto flushing = simulated_weight_versions(PipelineSchedule::k1F1B, window);
    for (int s = 0; s < S; ++s) {
      EXPECT_EQ(pipedream[s], S - s) << "S=" << S << " stage " << s;
      EXPECT_EQ(pipedream[s], pipedream_closed[s].weight_versions);
      EXPECT_LE(two_bw[s], 2);
      EXPECT_EQ(two_bw_closed[s].weight_versions, 2);
      EXPECT_EQ(flushing[s], 1);
    }
    EXPECT_EQ(two_bw[0], S > 1 ? 2 : 1);
    // Updating more often than every S microbatches needs more than two buffers: why 2BW
    // requires m >= S.
    if (S >= 4) {
      EXPECT_GT(simulated_weight_versions(PipelineSchedule::kPipeDream2BW, window, 1)[0], 2);
    }
  }
}

TEST(Schedules, NamesAndSemantics) {
  EXPECT_EQ(parse_pipeline_schedule("PipeDream-Flush"), PipelineSchedule::k1F1B);
  EXPECT_EQ(parse_pipeline_schedule("2bw"), PipelineSchedule::kPipeDream2BW);
  EXPECT_EQ(parse_pipeline_schedule(to_string(PipelineSchedule::kInterleaved1F1B)), PipelineSchedule::kInterleaved1F1B);
  EXPECT_THROW(parse_pipeline_schedule("zero-bubble"), InputError);
  EXPECT_FALSE(flushes(PipelineSchedule::kPipeDream));
  EXPECT_TRUE(flushes(PipelineSchedule::kGPipe));
  EXPECT_NE(std::string(update_semantics(PipelineSchedule::kPipeDream2BW)).find("W(t-1)"), std::string::npos);
  EXPECT_THROW(memory_footprint(PipelineSchedule::k1F1B, 0, 4), InputError);
}

}  // namespace
}  // namespace perseus::planner
