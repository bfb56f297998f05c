// Schedules: closed forms (bubble, iteration time, in-flight microbatches, weight versions)
// against schedules built instruction by instruction and their DAGs.
#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "perseus/model/errors.hpp"
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
      for (ScheduleKind kind : {ScheduleKind::kGPipe, ScheduleKind::k1F1B, ScheduleKind::k1F1BEarlyRecompute}) {
        const Schedule schedule = make_schedule(ScheduleSpec{core_schedule_kind(kind), S, M, 1, false});
        const std::vector<double> f(S, tf), b(S, tb);
        const double expected = iteration_time_closed_form(kind, S, M, 1, tf, tb);
        if (kind == ScheduleKind::k1F1BEarlyRecompute) {
          // Recomputation overlaps the wait for the gradient on all but the critical stage:
          // the closed form (M + S - 1)(2t_f + t_b) is an upper bound, met without a bubble.
          EXPECT_LE(critical_path(schedule, f, b), expected + 1e-9);
          EXPECT_GE(critical_path(schedule, f, b), iteration_time_closed_form(ScheduleKind::k1F1B, S, M, 1, tf, tb));
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
                    iteration_time_closed_form(ScheduleKind::kInterleaved1F1B, S, M, v, tf, tb), 1e-9)
            << "S=" << S << " v=" << v << " M=" << M;
        EXPECT_DOUBLE_EQ(bubble_fraction(ScheduleKind::kInterleaved1F1B, S, M, v), (S - 1.0) / (v * M));
      }
    }
  }
}

TEST(Schedules, InFlightMicrobatchesMatchTheClosedForms) {
  for (int S : {1, 2, 4, 7}) {
    for (int M : {1, 2, 5, 16}) {
      for (ScheduleKind kind : {ScheduleKind::kGPipe, ScheduleKind::k1F1B, ScheduleKind::k1F1BEarlyRecompute}) {
        const auto counted = peak_in_flight(make_schedule(ScheduleSpec{core_schedule_kind(kind), S, M, 1, false}));
        const auto closed = memory_footprint(kind, S, M);
        for (int s = 0; s < S; ++s) {
          EXPECT_EQ(counted[s], closed[s].activation_stashes) << to_string(kind) << " S=" << S << " M=" << M;
          EXPECT_EQ(closed[s].activation_stashes, kind == ScheduleKind::kGPipe ? M : std::min(S - s, M));
        }
      }
    }
    for (int v : {2, 3}) {
      for (int M : {S, 4 * S}) {
        if (S < 2) continue;
        const auto counted = peak_in_flight(make_schedule(ScheduleSpec{ScheduleKind::kInterleaved1F1B, S, M, v, false}));
        const auto closed = memory_footprint(ScheduleKind::kInterleaved1F1B, S, M, v);
        for (int s = 0; s < S; ++s) EXPECT_EQ(counted[s], closed[s].activation_stashes) << "S=" << S << " v=" << v;
        // Korthikanti et al.: device 0 holds (1 + (S-1)/(S*v)) times the 1F1B activations.
        if (M * v >= S * v + S - 1) {
          EXPECT_DOUBLE_EQ(closed[0].activation_stashes / (static_cast<double>(v) * S), 1.0 + (S - 1.0) / (S * v));
        }
      }
    }
  }
}

// Critical path of a steady-state window (its DAG leaves out the other windows).
double window_path(const Schedule& window, const std::vector<double>& tf, const std::vector<double>& tb) {
  const Dag dag = Dag::steady_state_window(window);
  std::vector<double> durations(dag.num_nodes());
  for (std::size_t n = 0; n < dag.num_nodes(); ++n) {
    const Instruction& ins = dag.instruction(static_cast<Dag::NodeId>(n));
    durations[n] = ins.kind == InstructionKind::kBackward ? tb[ins.stage] : tf[ins.stage];
  }
  return critical_path_length<double>(dag, durations);
}

TEST(Schedules, AsyncWindowIsCutOutOfTheSteadyState) {
  for (int S = 1; S <= 7; ++S) {
    for (int W : {1, 2, S, 2 * S + 1}) {
      const Schedule window = async_window_schedule(S, W);
      // Windows 0, 1, 2 back to back are, on every stage, the 1F1B order of a long run from its
      // (S+1)-th instruction on: no fill, no drain, nothing left out or repeated.
      const int N = 3 * W + 2 * S;
      const Schedule run = make_schedule(ScheduleSpec{ScheduleKind::k1F1B, S, N, 1, false});
      for (int s = 0; s < S; ++s) {
        ASSERT_EQ(window.per_stage[s].size(), 2u * W);
        for (int w = 0; w < 3; ++w) {
          for (int i = 0; i < 2 * W; ++i) {
            Instruction shifted = window.per_stage[s][i];
            ASSERT_LT(shifted.microbatch, window.spec.microbatches);
            shifted.microbatch += w * W;
            ASSERT_EQ(shifted, run.per_stage[s][S + 2 * w * W + i]) << "S=" << S << " W=" << W << " stage " << s;
          }
        }
      }
      // Every dependency between windows points forwards: along each microbatch's chain
      // F(0..S-1), B(S-1..0) of the long run, the window index never decreases.
      auto window_of = [&](InstructionKind kind, int s, int m) {
        const auto& order = run.per_stage[s];
        const auto at = std::find(order.begin(), order.end(), Instruction{kind, s, m, 0}) - order.begin();
        return at < S ? -1 : static_cast<int>((at - S) / (2 * W));
      };
      for (int m = 0; m < N - S; ++m) {
        std::vector<int> chain;
        for (int s = 0; s < S; ++s) chain.push_back(window_of(InstructionKind::kForward, s, m));
        for (int s = S - 1; s >= 0; --s) chain.push_back(window_of(InstructionKind::kBackward, s, m));
        EXPECT_TRUE(std::is_sorted(chain.begin(), chain.end())) << "S=" << S << " W=" << W << " microbatch " << m;
      }
      // A window is no full iteration: the strict DAG refuses it, the window DAG takes it.
      EXPECT_THROW(Dag{window}, InputError);
      EXPECT_EQ(Dag::steady_state_window(window).num_nodes(), 2u * S * W);
    }
  }
  // A microbatch with a gap in its chain (F on stages 0 and 2, not 1) is no window of anything.
  Schedule gap{ScheduleSpec{ScheduleKind::k1F1B, 3, 1, 1, false}, {}};
  gap.per_stage = {{{InstructionKind::kForward, 0, 0, 0}}, {}, {{InstructionKind::kForward, 2, 0, 0}}};
  EXPECT_THROW(Dag::steady_state_window(gap), InputError);
}

TEST(Schedules, AsyncWindowRunsAtTheBottleneckStage) {
  // Equal stages: the window takes W(t_f + t_b), no bubble, when forwards and backwards take
  // equally long, and the closed form's min((S-1)/2, W)|t_b - t_f| more otherwise, against
  // (W + S - 1)(t_f + t_b) for a flushed iteration.
  for (int S = 1; S <= 8; ++S) {
    for (int W = 1; W <= 3 * S + 2; ++W) {
      for (auto [tf, tb] : {std::pair{1.0, 1.0}, std::pair{1.0, 2.0}, std::pair{2.0, 1.0}, std::pair{1.3, 2.9}}) {
        const std::vector<double> f(S, tf), b(S, tb);
        const double window = window_path(async_window_schedule(S, W), f, b);
        EXPECT_NEAR(window, async_window_time_closed_form(S, W, tf, tb), 1e-9) << "S=" << S << " W=" << W;
        if (tf == tb) {
          EXPECT_NEAR(window, W * (tf + tb), 1e-9);
        }
        if (S > 1) {
          EXPECT_LT(window, iteration_time_closed_form(ScheduleKind::k1F1B, S, W, 1, tf, tb));
        }
        // The steady state's time per microbatch: the bottleneck stage's t_f + t_b, bubble 0
        // (once the window is longer than what its cut costs).
        if (W >= (S - 1) / 2) {
          const double doubled = window_path(async_window_schedule(S, 2 * W), f, b);
          EXPECT_NEAR((doubled - window) / W, tf + tb, 1e-9) << "S=" << S << " W=" << W;
        }
      }
    }
  }
  EXPECT_EQ(async_window_time_closed_form(4, 10, 1.0, 2.0), 10 * 3.0 + 1.0);
  // Unequal stages: each extra microbatch costs the bottleneck stage's t_f + t_b.
  const int S = 4;
  const std::vector<double> tf{1.0, 1.4, 0.8, 1.1}, tb{2.0, 2.5, 1.9, 2.2};
  double bottleneck = 0.0;
  for (int s = 0; s < S; ++s) bottleneck = std::max(bottleneck, tf[s] + tb[s]);
  const double t40 = window_path(async_window_schedule(S, 40), tf, tb);
  const double t80 = window_path(async_window_schedule(S, 80), tf, tb);
  EXPECT_NEAR((t80 - t40) / 40.0, bottleneck, 1e-9);
  EXPECT_GE(t40, 40 * bottleneck - 1e-9);
  EXPECT_LT(t40, critical_path(make_schedule(ScheduleSpec{ScheduleKind::k1F1B, S, 40, 1, false}), tf, tb));
  EXPECT_DOUBLE_EQ(iteration_time_closed_form(ScheduleKind::kPipeDream2BW, S, 40, 1, 1.4, 2.5), 40 * bottleneck);
  EXPECT_DOUBLE_EQ(bubble_fraction(ScheduleKind::kPipeDream, S, 40), 0.0);
  // In flight on the window: S - s microbatches on stage s, PipeDream's stash.
  const auto in_flight = peak_in_flight(async_window_schedule(S, 2 * S));
  const auto stash = memory_footprint(ScheduleKind::kPipeDream, S, 2 * S);
  for (int s = 0; s < S; ++s) EXPECT_EQ(in_flight[s], stash[s].activation_stashes);
}

TEST(Schedules, WeightVersionsFollowTheUpdateRules) {
  for (int S : {2, 4, 6}) {
    const Schedule window = async_window_schedule(S, 6 * S);
    // PipeDream: one version per in-flight microbatch, S - s on stage s.
    const auto pipedream = simulated_weight_versions(ScheduleKind::kPipeDream, window);
    const auto pipedream_closed = memory_footprint(ScheduleKind::kPipeDream, S, 6 * S);
    // 2BW with m >= S: never more than two versions.
    const auto two_bw = simulated_weight_versions(ScheduleKind::kPipeDream2BW, window, S);
    const auto two_bw_closed = memory_footprint(ScheduleKind::kPipeDream2BW, S, S);
    const auto flushing = simulated_weight_versions(ScheduleKind::k1F1B, window);
    for (int s = 0; s < S; ++s) {
      EXPECT_EQ(pipedream[s], S - s) << "S=" << S << " stage " << s;
      EXPECT_EQ(pipedream[s], pipedream_closed[s].weight_versions);
      EXPECT_LE(two_bw[s], 2);
      EXPECT_EQ(two_bw_closed[s].weight_versions, 2);
      EXPECT_EQ(flushing[s], 1);
    }
    EXPECT_EQ(two_bw[0], S > 1 ? 2 : 1);
    // Updating more often than every S - 1 microbatches needs more than two buffers (2BW is
    // defined for m >= S). The closed form charges what the simulation needs.
    if (S >= 4) {
      EXPECT_GT(simulated_weight_versions(ScheduleKind::kPipeDream2BW, window, 1)[0], 2);
    }
    for (int M = 1; M <= S + 1; ++M) {
      const auto simulated = simulated_weight_versions(ScheduleKind::kPipeDream2BW,
                                                       async_window_schedule(S, 4 * S + 2 * M), M);
      const auto closed = memory_footprint(ScheduleKind::kPipeDream2BW, S, M);
      for (int s = 0; s < S; ++s) {
        EXPECT_EQ(closed[s].weight_versions, std::max(2, simulated[s])) << "S=" << S << " M=" << M << " stage " << s;
        if (M >= S) {
          EXPECT_EQ(closed[s].weight_versions, 2);
        }
      }
    }
  }
}

TEST(Schedules, NamesAndSemantics) {
  EXPECT_EQ(parse_schedule_kind("PipeDream-Flush"), ScheduleKind::k1F1B);
  EXPECT_EQ(parse_schedule_kind("2bw"), ScheduleKind::kPipeDream2BW);
  EXPECT_EQ(parse_schedule_kind(to_string(ScheduleKind::kInterleaved1F1B)), ScheduleKind::kInterleaved1F1B);
  EXPECT_THROW(parse_schedule_kind("zero-bubble"), InputError);
  EXPECT_FALSE(flushes(ScheduleKind::kPipeDream));
  EXPECT_TRUE(flushes(ScheduleKind::kGPipe));
  EXPECT_EQ(core_schedule_kind(ScheduleKind::kPipeDream2BW), ScheduleKind::k1F1B);
  EXPECT_EQ(core_schedule_kind(ScheduleKind::k1F1BEarlyRecompute), ScheduleKind::k1F1BEarlyRecompute);
  EXPECT_NE(std::string(update_semantics(ScheduleKind::kPipeDream2BW)).find("W(t-1)"), std::string::npos);
  EXPECT_THROW(memory_footprint(ScheduleKind::k1F1B, 0, 4), InputError);
}

}  // namespace
}  // namespace perseus::planner
