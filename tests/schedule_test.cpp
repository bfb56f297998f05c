// Schedules: the per-stage orders of docs/solver.md ("Schedules"), checked against the step
// formula, the hand-derived orders of small cases, and structural invariants over a grid of
// sizes.
#include "perseus/model/errors.hpp"
#include "perseus/schedule/schedule.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <string>
#include <tuple>
#include <vector>

namespace perseus {
namespace {

std::string order_string(const std::vector<Instruction>& order) {
  std::string out;
  for (const Instruction& ins : order) {
    if (!out.empty()) out += ' ';
    out += label(ins);
  }
  return out;
}

Schedule build(ScheduleKind kind, int S, int M, int v = 1, bool data_load = false) {
  return make_schedule(ScheduleSpec{kind, S, M, v, data_load});
}

TEST(ScheduleTest, OneFOneBMatchesTheFormatsExample) {
  const Schedule schedule = build(ScheduleKind::k1F1B, 4, 6);
  ASSERT_EQ(schedule.per_stage.size(), 4u);
  EXPECT_EQ(order_string(schedule.per_stage[0]), "F0 F1 F2 F3 B0 F4 B1 F5 B2 B3 B4 B5");
  EXPECT_EQ(order_string(schedule.per_stage[1]), "F0 F1 F2 B0 F3 B1 F4 B2 F5 B3 B4 B5");
  EXPECT_EQ(order_string(schedule.per_stage[2]), "F0 F1 B0 F2 B1 F3 B2 F4 B3 F5 B4 B5");
  EXPECT_EQ(order_string(schedule.per_stage[3]), "F0 B0 F1 B1 F2 B2 F3 B3 F4 B4 F5 B5");
  EXPECT_EQ(schedule.num_instructions(), 48u);
  for (int s = 0; s < 4; ++s) {
    for (const Instruction& ins : schedule.per_stage[s]) {
      EXPECT_EQ(ins.stage, s);
      EXPECT_EQ(ins.chunk, 0);
    }
  }
}

// The warm-up form of docs/solver.md, "Schedules": min(S-s-1, M) warm-up forwards,
// alternate, drain.
std::vector<Instruction> warmup_alternate_drain(int S, int M, int s) {
  std::vector<Instruction> order;
  const int warmup = std::min(S - s - 1, M);
  int next_forward = 0;
  int next_backward = 0;
  for (; next_forward < warmup; ++next_forward) order.push_back({InstructionKind::kForward, s, next_forward, 0});
  while (next_forward < M) {
    order.push_back({InstructionKind::kForward, s, next_forward++, 0});
    order.push_back({InstructionKind::kBackward, s, next_backward++, 0});
  }
  while (next_backward < M) order.push_back({InstructionKind::kBackward, s, next_backward++, 0});
  return order;
}

TEST(ScheduleTest, OneFOneBStepFormulaEqualsWarmupAlternateDrain) {
  for (int S : {1, 2, 3, 4, 5, 8}) {
    for (int M = 1; M <= 12; ++M) {
      const Schedule schedule = build(ScheduleKind::k1F1B, S, M);
      for (int s = 0; s < S; ++s) {
        EXPECT_EQ(order_string(schedule.per_stage[s]), order_string(warmup_alternate_drain(S, M, s)))
            << "S=" << S << " M=" << M << " s=" << s;
      }
    }
  }
}

TEST(ScheduleTest, GPipeRunsAllForwardsThenAllBackwards) {
  const Schedule schedule = build(ScheduleKind::kGPipe, 3, 4);
  for (int s = 0; s < 3; ++s) {
    EXPECT_EQ(order_string(schedule.per_stage[s]), "F0 F1 F2 F3 B0 B1 B2 B3");
  }
}

// Hand-derived from docs/solver.md ("Schedules") / Megatron-LM for S=2, v=2, M=4: virtual index k maps to
// forward (chunk, microbatch) (0,0) (0,1) (1,0) (1,1) (0,2) (0,3) (1,2) (1,3); backward chunk
// is 1 - that. Warm-up is 4 forwards on device 0 and 2 on device 1.
TEST(ScheduleTest, InterleavedMatchesMegatronOrderForSmallCase) {
  const Schedule schedule = build(ScheduleKind::kInterleaved1F1B, 2, 4, 2);
  EXPECT_EQ(order_string(schedule.per_stage[0]),
            "F0 F1 F0.1 F1.1 F2 B0.1 F3 B1.1 F2.1 B0 F3.1 B1 B2.1 B3.1 B2 B3");
  EXPECT_EQ(order_string(schedule.per_stage[1]),
            "F0 F1 F0.1 B0.1 F1.1 B1.1 F2 B0 F3 B1 F2.1 B2.1 F3.1 B3.1 B2 B3");
}

TEST(ScheduleTest, InterleavedWithMEqualSIsAllWarmup) {
  for (int S : {2, 3, 4}) {
    for (int v : {1, 2, 3}) {
      const Schedule schedule = build(ScheduleKind::kInterleaved1F1B, S, S, v);
      for (int s = 0; s < S; ++s) {
        const auto& order = schedule.per_stage[s];
        ASSERT_EQ(order.size(), static_cast<std::size_t>(2 * S * v));
        for (std::size_t i = 0; i < order.size(); ++i) {
          EXPECT_EQ(order[i].kind, i < order.size() / 2 ? InstructionKind::kForward : InstructionKind::kBackward)
              << "S=" << S << " v=" << v << " s=" << s << " i=" << i;
        }
      }
    }
  }
}

TEST(ScheduleTest, InterleavedWarmupLengthFollowsMegatron) {
  for (int S : {2, 3, 4, 8}) {
    for (int v : {1, 2, 3}) {
      for (int M : {2 * S, 3 * S}) {
        const Schedule schedule = build(ScheduleKind::kInterleaved1F1B, S, M, v);
        for (int r = 0; r < S; ++r) {
          const auto& order = schedule.per_stage[r];
          const auto first_backward = std::find_if(order.begin(), order.end(), [](const Instruction& ins) {
            return ins.kind == InstructionKind::kBackward;
          });
          // The warm-up forwards plus the first steady forward precede the first backward.
          const int warmup = std::min((S - r - 1) * 2 + (v - 1) * S, M * v);
          const int expected = warmup < M * v ? warmup + 1 : warmup;
          EXPECT_EQ(first_backward - order.begin(), expected) << "S=" << S << " M=" << M << " v=" << v << " r=" << r;
        }
      }
    }
  }
}

// On every stage, each R is immediately followed by the B of its microbatch and chunk, and
// without the Rs the order is `plain`'s.
void expect_recompute_right_before_each_backward(const Schedule& plain, const Schedule& recompute) {
  ASSERT_EQ(plain.per_stage.size(), recompute.per_stage.size());
  for (std::size_t s = 0; s < recompute.per_stage.size(); ++s) {
    std::vector<Instruction> without;
    const auto& order = recompute.per_stage[s];
    for (std::size_t i = 0; i < order.size(); ++i) {
      if (order[i].kind == InstructionKind::kRecompute) {
        ASSERT_LT(i + 1, order.size());
        EXPECT_EQ(order[i + 1].kind, InstructionKind::kBackward);
        EXPECT_EQ(order[i + 1].microbatch, order[i].microbatch);
        EXPECT_EQ(order[i + 1].chunk, order[i].chunk);
      } else {
        without.push_back(order[i]);
      }
    }
    EXPECT_EQ(without, plain.per_stage[s]) << "stage " << s;
  }
}

TEST(ScheduleTest, EarlyRecomputePutsRecomputeRightBeforeEachBackward) {
  const Schedule recompute = build(ScheduleKind::k1F1BEarlyRecompute, 4, 6);
  EXPECT_EQ(order_string(recompute.per_stage[0]),
            "F0 F1 F2 F3 R0 B0 F4 R1 B1 F5 R2 B2 R3 B3 R4 B4 R5 B5");
  expect_recompute_right_before_each_backward(build(ScheduleKind::k1F1B, 4, 6), recompute);
}

// Interleaved 1F1B with recomputation is the interleaved order with R right before each B,
// chunk by chunk.
TEST(ScheduleTest, InterleavedRecomputeIsTheInterleavedOrderWithRBeforeEachBackward) {
  expect_recompute_right_before_each_backward(build(ScheduleKind::kInterleaved1F1B, 2, 4, 2),
                                              build(ScheduleKind::kInterleaved1F1BRecompute, 2, 4, 2));
  EXPECT_THROW(build(ScheduleKind::kInterleaved1F1BRecompute, 4, 6, 2), InputError);  // M not a multiple of S
}

TEST(ScheduleTest, DataLoadPrecedesFirstForwardOnStageZero) {
  const Schedule schedule = build(ScheduleKind::k1F1B, 3, 4, 1, true);
  EXPECT_EQ(order_string(schedule.per_stage[0]), "L0 F0 L1 F1 L2 F2 B0 L3 F3 B1 B2 B3");
  EXPECT_EQ(order_string(schedule.per_stage[1]), "F0 F1 B0 F2 B1 F3 B2 B3");
  const Schedule interleaved = build(ScheduleKind::kInterleaved1F1B, 2, 4, 2, true);
  EXPECT_EQ(order_string(interleaved.per_stage[0]),
            "L0 F0 L1 F1 F0.1 F1.1 L2 F2 B0.1 L3 F3 B1.1 F2.1 B0 F3.1 B1 B2.1 B3.1 B2 B3");
}

// Every kind and size: each (kind, chunk, microbatch) once per stage, loads only on stage 0.
TEST(ScheduleTest, EveryInstructionAppearsExactlyOncePerStage) {
  struct Case {
    ScheduleKind kind;
    int S, M, v;
  };
  std::vector<Case> cases;
  for (int S : {1, 2, 3, 4, 8}) {
    for (int M = 1; M <= 12; ++M) {
      cases.push_back({ScheduleKind::k1F1B, S, M, 1});
      cases.push_back({ScheduleKind::kGPipe, S, M, 1});
      cases.push_back({ScheduleKind::k1F1BEarlyRecompute, S, M, 1});
    }
    for (int v : {1, 2, 3}) {
      for (int g = 1; g <= 4; ++g) {
        cases.push_back({ScheduleKind::kInterleaved1F1B, S, g * S, v});
        cases.push_back({ScheduleKind::kInterleaved1F1BRecompute, S, g * S, v});
      }
    }
  }
  for (const Case& c : cases) {
    for (bool load : {false, true}) {
      const Schedule schedule = build(c.kind, c.S, c.M, c.v, load);
      const bool recompute = recomputes(c.kind);
      std::size_t total = 0;
      for (int s = 0; s < c.S; ++s) {
        std::map<std::tuple<InstructionKind, int, int>, int> count;
        for (const Instruction& ins : schedule.per_stage[s]) {
          EXPECT_EQ(ins.stage, s);
          ++count[{ins.kind, ins.chunk, ins.microbatch}];
        }
        for (const auto& [key, n] : count) EXPECT_EQ(n, 1) << to_string(c.kind) << " S=" << c.S << " M=" << c.M;
        const int per_microbatch_chunk = recompute ? 3 : 2;
        const int loads = load && s == 0 ? c.M : 0;
        EXPECT_EQ(count.size(), static_cast<std::size_t>(per_microbatch_chunk * c.M * c.v + loads))
            << to_string(c.kind) << " S=" << c.S << " M=" << c.M << " v=" << c.v << " s=" << s;
        for (int chunk = 0; chunk < c.v; ++chunk) {
          for (int m = 0; m < c.M; ++m) {
            EXPECT_TRUE(count.contains({InstructionKind::kForward, chunk, m}));
            EXPECT_TRUE(count.contains({InstructionKind::kBackward, chunk, m}));
            EXPECT_EQ(count.contains({InstructionKind::kRecompute, chunk, m}), recompute);
          }
        }
        total += schedule.per_stage[s].size();
      }
      EXPECT_EQ(schedule.num_instructions(), total);
    }
  }
}

TEST(ScheduleTest, KindNamesRoundTrip) {
  for (ScheduleKind kind : {ScheduleKind::k1F1B, ScheduleKind::kGPipe, ScheduleKind::kInterleaved1F1B,
                            ScheduleKind::k1F1BEarlyRecompute, ScheduleKind::kPipeDream, ScheduleKind::kPipeDream2BW,
                            ScheduleKind::kInterleaved1F1BRecompute}) {
    EXPECT_EQ(parse_schedule_kind(to_string(kind)), kind);
  }
  EXPECT_EQ(to_string(ScheduleKind::kInterleaved1F1BRecompute), "interleaved-1f1b-recompute");
  EXPECT_EQ(to_string(ScheduleKind::k1F1B), "1f1b");
  EXPECT_EQ(to_string(ScheduleKind::kGPipe), "gpipe");
  EXPECT_EQ(to_string(ScheduleKind::kInterleaved1F1B), "interleaved-1f1b");
  EXPECT_EQ(to_string(ScheduleKind::k1F1BEarlyRecompute), "1f1b-recompute");
  EXPECT_EQ(to_string(ScheduleKind::kPipeDream), "pipedream");
  EXPECT_EQ(to_string(ScheduleKind::kPipeDream2BW), "pipedream-2bw");
  EXPECT_EQ(parse_schedule_kind("interleaved"), ScheduleKind::kInterleaved1F1B);
  EXPECT_EQ(parse_schedule_kind("GPipe"), ScheduleKind::kGPipe);
  EXPECT_EQ(parse_schedule_kind("PipeDream-Flush"), ScheduleKind::k1F1B);
  EXPECT_EQ(parse_schedule_kind("2BW"), ScheduleKind::kPipeDream2BW);
}

TEST(ScheduleTest, AsynchronousKindsAreNotBuiltAsAFlushedIteration) {
  for (ScheduleKind kind : {ScheduleKind::kPipeDream, ScheduleKind::kPipeDream2BW}) {
    try {
      make_schedule(ScheduleSpec{kind, 4, 8, 1, false});
      FAIL() << "expected InputError for " << to_string(kind);
    } catch (const InputError& e) {
      const std::string message = e.what();
      EXPECT_NE(message.find(to_string(kind)), std::string::npos) << message;
      EXPECT_NE(message.find("no flush"), std::string::npos) << message;
    }
  }
}

TEST(ScheduleTest, UnknownKindListsTheKnownOnes) {
  try {
    parse_schedule_kind("zero-bubble");
    FAIL() << "expected InputError";
  } catch (const InputError& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("zero-bubble"), std::string::npos) << message;
    for (const char* name : {"1f1b", "gpipe", "interleaved-1f1b", "1f1b-recompute", "pipedream", "pipedream-2bw",
                             "interleaved-1f1b-recompute", "interleaved", "pipedream-flush", "2bw"}) {
      EXPECT_NE(message.find(name), std::string::npos) << message;
    }
  }
}

TEST(ScheduleTest, RejectsBadSpecs) {
  EXPECT_THROW(build(ScheduleKind::k1F1B, 0, 4), InputError);
  EXPECT_THROW(build(ScheduleKind::k1F1B, -1, 4), InputError);
  EXPECT_THROW(build(ScheduleKind::k1F1B, 4, 0), InputError);
  EXPECT_THROW(build(ScheduleKind::kGPipe, 4, -3), InputError);
  EXPECT_THROW(build(ScheduleKind::kInterleaved1F1B, 4, 8, 0), InputError);
  EXPECT_THROW(build(ScheduleKind::k1F1B, 4, 8, 2), InputError);
  EXPECT_THROW(build(ScheduleKind::kGPipe, 4, 8, 2), InputError);
  EXPECT_THROW(build(ScheduleKind::k1F1BEarlyRecompute, 4, 8, 2), InputError);
  EXPECT_THROW(build(ScheduleKind::kInterleaved1F1B, 4, 6, 2), InputError);
  EXPECT_THROW(build(ScheduleKind::kInterleaved1F1B, 1 << 16, 1 << 16, 1), InputError);
  // The limits (model/limits.hpp) are checked before any work, and stated in the message.
  const auto message_of = [](ScheduleKind kind, int stages, int microbatches, int chunks) {
    try {
      build(kind, stages, microbatches, chunks);
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string("(built)");
  };
  EXPECT_NE(message_of(ScheduleKind::k1F1B, 100000, 4, 1).find("must be 1..1024, got 100000"), std::string::npos);
  EXPECT_NE(message_of(ScheduleKind::k1F1B, 4, 70000, 1).find("must be 1..65536"), std::string::npos);
  EXPECT_NE(message_of(ScheduleKind::kInterleaved1F1B, 4, 8, 65).find("must be 1..64"), std::string::npos);
  EXPECT_NE(message_of(ScheduleKind::k1F1B, 1024, 65536, 1).find("more than the 2097152"), std::string::npos);
  EXPECT_NO_THROW(build(ScheduleKind::k1F1B, 2, 20000));
  EXPECT_NO_THROW(build(ScheduleKind::kInterleaved1F1B, 4, 8, 2));
  try {
    build(ScheduleKind::kInterleaved1F1B, 4, 6, 2);
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("multiple"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace perseus
