// The dependency DAG: structure (acyclic, de-duplicated, exact edge counts), the closed
// forms of docs/solver.md ("Schedules") for iteration time, bubble and in-flight
// microbatches, and the longest path against a brute-force time-stepped simulation of the
// devices.
#include "perseus/model/errors.hpp"
#include "perseus/schedule/dag.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <random>
#include <string>
#include <tuple>
#include <vector>

namespace perseus {
namespace {

using Duration = std::int64_t;

struct Case {
  ScheduleKind kind;
  int S, M, v;
};

std::string name(const Case& c) {
  return std::string(to_string(c.kind)) + " S=" + std::to_string(c.S) + " M=" + std::to_string(c.M) +
         " v=" + std::to_string(c.v);
}

// The grid of the brief: S in {1,2,3,4,8}; M in 1..12 (multiples of S up to 4S for interleaved).
std::vector<Case> grid() {
  std::vector<Case> cases;
  for (int S : {1, 2, 3, 4, 8}) {
    for (int M = 1; M <= 12; ++M) {
      cases.push_back({ScheduleKind::k1F1B, S, M, 1});
      cases.push_back({ScheduleKind::kGPipe, S, M, 1});
      cases.push_back({ScheduleKind::k1F1BEarlyRecompute, S, M, 1});
    }
    for (int v : {1, 2, 3}) {
      for (int g = 1; g <= 4; ++g) cases.push_back({ScheduleKind::kInterleaved1F1B, S, g * S, v});
    }
  }
  return cases;
}

Schedule build(const Case& c, bool data_load = false) {
  return make_schedule(ScheduleSpec{c.kind, c.S, c.M, c.v, data_load});
}

// Per-node durations by instruction kind.
std::vector<Duration> durations_by_kind(const Dag& dag, Duration forward, Duration backward, Duration recompute = 0,
                                        Duration load = 0) {
  std::vector<Duration> d(dag.num_nodes());
  for (std::size_t n = 0; n < d.size(); ++n) {
    switch (dag.instruction(static_cast<Dag::NodeId>(n)).kind) {
      case InstructionKind::kForward: d[n] = forward; break;
      case InstructionKind::kBackward: d[n] = backward; break;
      case InstructionKind::kRecompute: d[n] = recompute; break;
      case InstructionKind::kLoad: d[n] = load; break;
      case InstructionKind::kCommunication: d[n] = 0; break;
    }
  }
  return d;
}

Duration longest_path(const Dag& dag, const std::vector<Duration>& durations,
                      std::vector<Duration>* start = nullptr) {
  return critical_path_length<Duration>(dag, durations, start);
}

TEST(DagTest, StructureOverTheGrid) {
  for (const Case& c : grid()) {
    for (bool load : {false, true}) {
      const Schedule schedule = build(c, load);
      const Dag dag(schedule);
      const std::string what = name(c) + (load ? " +load" : "");
      ASSERT_EQ(dag.num_nodes(), schedule.num_instructions()) << what;
      ASSERT_EQ(dag.num_stages(), c.S) << what;
      EXPECT_EQ(dag.chunks(), c.v) << what;

      // stage_nodes lists the schedule's instructions in execution order.
      for (int s = 0; s < c.S; ++s) {
        const auto nodes = dag.stage_nodes(s);
        ASSERT_EQ(nodes.size(), schedule.per_stage[s].size()) << what;
        for (std::size_t i = 0; i < nodes.size(); ++i) {
          EXPECT_EQ(dag.instruction(nodes[i]), schedule.per_stage[s][i]) << what;
          EXPECT_EQ(dag.virtual_stage(nodes[i]), schedule.per_stage[s][i].chunk * c.S + s) << what;
        }
      }

      // The topological order is a permutation and every edge goes forward in it.
      const auto& topo = dag.topological_order();
      ASSERT_EQ(topo.size(), dag.num_nodes()) << what;
      std::vector<std::size_t> position(dag.num_nodes(), dag.num_nodes());
      for (std::size_t i = 0; i < topo.size(); ++i) {
        ASSERT_EQ(position[topo[i]], dag.num_nodes()) << what << ": node twice in the order";
        position[topo[i]] = i;
      }
      std::size_t edges = 0;
      std::size_t reverse_edges = 0;
      for (std::size_t n = 0; n < dag.num_nodes(); ++n) {
        const auto succ = dag.successors(static_cast<Dag::NodeId>(n));
        edges += succ.size();
        reverse_edges += dag.predecessors(static_cast<Dag::NodeId>(n)).size();
        for (std::size_t i = 0; i < succ.size(); ++i) {
          EXPECT_LT(position[n], position[succ[i]]) << what;
          if (i > 0) {
            EXPECT_LT(succ[i - 1], succ[i]) << what << ": parallel edge";
          }
          const auto pred = dag.predecessors(succ[i]);
          EXPECT_NE(std::find(pred.begin(), pred.end(), static_cast<Dag::NodeId>(n)), pred.end()) << what;
        }
      }
      EXPECT_EQ(edges, dag.num_edges()) << what;
      EXPECT_EQ(reverse_edges, dag.num_edges()) << what;

      // Exact counts, linear in M. Program order gives N - S edges; the cross-stage edges
      // F(vs)->F(vs+1) and B(vs+1)->B(vs) add 2(S-1)M. F(last)->B(last) is already program
      // order in 1F1B (F m is right before B m on the last stage), but R sits between them in
      // the recompute schedule, and in GPipe they are adjacent only when M = 1.
      // R->B and L->F always duplicate program order.
      const std::size_t S = c.S, M = c.M, v = c.v;
      const std::size_t loads = load ? M : 0;
      if (c.kind == ScheduleKind::k1F1B) {
        EXPECT_EQ(dag.num_nodes(), 2 * S * M + loads) << what;
        EXPECT_EQ(dag.num_edges(), 2 * S * M + loads - S + 2 * (S - 1) * M) << what;
      } else if (c.kind == ScheduleKind::k1F1BEarlyRecompute) {
        EXPECT_EQ(dag.num_nodes(), 3 * S * M + loads) << what;
        EXPECT_EQ(dag.num_edges(), 3 * S * M + loads - S + 2 * (S - 1) * M + M) << what;
      } else if (c.kind == ScheduleKind::kGPipe) {
        EXPECT_EQ(dag.num_nodes(), 2 * S * M + loads) << what;
        EXPECT_EQ(dag.num_edges(), 2 * S * M + loads - S + 2 * (S - 1) * M + M - (M == 1 ? 1 : 0)) << what;
      } else {
        EXPECT_EQ(dag.num_nodes(), 2 * S * M * v + loads) << what;
        const std::size_t program = 2 * S * M * v + loads - S;
        EXPECT_GE(dag.num_edges(), program) << what;
        EXPECT_LE(dag.num_edges(), program + 2 * (S * v - 1) * M + M) << what;
      }
    }
  }
}

// The closed forms of docs/solver.md, "Schedules", with equal integer durations and zero communication.
TEST(DagTest, IterationTimeAndBubbleMatchClosedForms) {
  for (const Case& c : grid()) {
    const Dag dag(build(c));
    for (auto [chunk_forward, chunk_backward] : {std::pair<Duration, Duration>{1, 2}, {1, 1}, {2, 3}, {3, 5}}) {
      // Each chunk runs 1/v of the device's layers: t_f = v * chunk_forward, t_b likewise.
      const Duration tf = c.v * chunk_forward;
      const Duration tb = c.v * chunk_backward;
      const auto d = durations_by_kind(dag, chunk_forward, chunk_backward, 0);
      const Duration T = longest_path(dag, d);
      const std::string what = name(c) + " tf=" + std::to_string(tf) + " tb=" + std::to_string(tb);
      if (c.kind == ScheduleKind::kInterleaved1F1B) {
        // (M + (S-1)/v)(tf + tb), multiplied through by v to stay in integers.
        EXPECT_EQ(T * c.v, (static_cast<Duration>(c.M) * c.v + (c.S - 1)) * (tf + tb)) << what;
      } else {
        EXPECT_EQ(T, static_cast<Duration>(c.M + c.S - 1) * (tf + tb)) << what;
      }
      // Bubble fraction idle/busy on every device: (S-1)/M, and (S-1)/(vM) interleaved.
      for (int s = 0; s < c.S; ++s) {
        Duration busy = 0;
        for (Dag::NodeId n : dag.stage_nodes(s)) busy += d[n];
        ASSERT_EQ(busy, static_cast<Duration>(c.M) * (tf + tb)) << what;
        const Duration idle = T - busy;
        const Duration v = c.kind == ScheduleKind::kInterleaved1F1B ? c.v : 1;
        EXPECT_EQ(idle * v * c.M, static_cast<Duration>(c.S - 1) * busy) << what << " s=" << s;
      }
    }
  }
}

// Forwards issued minus backwards completed, walked along each stage's order.
int peak_in_flight(const Dag& dag, int stage) {
  int in_flight = 0, peak = 0;
  for (Dag::NodeId n : dag.stage_nodes(stage)) {
    const InstructionKind kind = dag.instruction(n).kind;
    if (kind == InstructionKind::kForward) peak = std::max(peak, ++in_flight);
    if (kind == InstructionKind::kBackward) --in_flight;
  }
  EXPECT_EQ(in_flight, 0);
  return peak;
}

TEST(DagTest, PeakInFlightMicrobatches) {
  for (const Case& c : grid()) {
    if (c.kind == ScheduleKind::kInterleaved1F1B) continue;
    const Dag dag(build(c, /*data_load=*/true));
    for (int s = 0; s < c.S; ++s) {
      const int expected = c.kind == ScheduleKind::kGPipe ? c.M : std::min(c.S - s, c.M);
      EXPECT_EQ(peak_in_flight(dag, s), expected) << name(c) << " s=" << s;
    }
  }
}

// Brute force: advance time one unit at a time; a device starts its next instruction when it
// is idle and every dependency has finished. Dependencies are derived here from the
// pipeline's rules, not taken from the DAG.
struct Simulated {
  Duration makespan = 0;
  std::map<std::tuple<InstructionKind, int, int>, Duration> start;  // (kind, vstage, microbatch)
};

Simulated simulate(const Schedule& schedule, const std::map<std::tuple<InstructionKind, int, int>, Duration>& dur) {
  const int S = schedule.spec.stages;
  const int V = S * schedule.spec.chunks;
  using Key = std::tuple<InstructionKind, int, int>;
  auto key_of = [&](const Instruction& ins) { return Key{ins.kind, ins.chunk * S + ins.stage, ins.microbatch}; };
  std::map<Key, bool> present;
  for (const auto& order : schedule.per_stage) {
    for (const Instruction& ins : order) present[key_of(ins)] = true;
  }
  auto dependencies = [&](const Key& key) {
    const auto [kind, vs, m] = key;
    std::vector<Key> deps;
    if (kind == InstructionKind::kForward) {
      if (vs > 0) deps.push_back({InstructionKind::kForward, vs - 1, m});
      if (present.contains({InstructionKind::kLoad, vs, m})) deps.push_back({InstructionKind::kLoad, vs, m});
    } else if (kind == InstructionKind::kBackward) {
      deps.push_back(vs + 1 < V ? Key{InstructionKind::kBackward, vs + 1, m} : Key{InstructionKind::kForward, vs, m});
      if (present.contains({InstructionKind::kRecompute, vs, m})) deps.push_back({InstructionKind::kRecompute, vs, m});
    }
    return deps;
  };

  Duration horizon = 1;
  for (const auto& [key, d] : dur) horizon += d;
  Simulated result;
  std::map<Key, Duration> finish;
  std::vector<std::size_t> next(S, 0);
  std::vector<Duration> free_at(S, 0);
  std::size_t remaining = schedule.num_instructions();
  for (Duration t = 0; remaining > 0; ++t) {
    if (t > horizon) ADD_FAILURE() << "simulation deadlocked";
    if (t > horizon) return result;
    for (int s = 0; s < S; ++s) {
      if (free_at[s] > t || next[s] == schedule.per_stage[s].size()) continue;
      const Key key = key_of(schedule.per_stage[s][next[s]]);
      bool ready = true;
      for (const Key& dep : dependencies(key)) {
        const auto it = finish.find(dep);
        ready = ready && it != finish.end() && it->second <= t;
      }
      if (!ready) continue;
      result.start[key] = t;
      finish[key] = t + dur.at(key);
      free_at[s] = t + dur.at(key);
      result.makespan = std::max(result.makespan, finish[key]);
      ++next[s];
      --remaining;
    }
  }
  return result;
}

TEST(DagTest, LongestPathEqualsBruteForceSimulation) {
  std::mt19937 rng(20240611);
  std::uniform_int_distribution<int> pick(1, 9);
  std::vector<std::pair<Case, bool>> cases;
  for (int S : {1, 2, 3, 4}) {
    for (int M : {1, 2, 3, 5, 8}) {
      cases.push_back({{ScheduleKind::k1F1B, S, M, 1}, false});
      cases.push_back({{ScheduleKind::k1F1B, S, M, 1}, true});
      cases.push_back({{ScheduleKind::kGPipe, S, M, 1}, true});
      cases.push_back({{ScheduleKind::k1F1BEarlyRecompute, S, M, 1}, false});
    }
    for (int v : {1, 2, 3}) cases.push_back({{ScheduleKind::kInterleaved1F1B, S, 2 * S, v}, true});
  }
  for (const auto& [c, load] : cases) {
    for (int trial = 0; trial < 3; ++trial) {
      const Schedule schedule = build(c, load);
      const Dag dag(schedule);
      std::map<std::tuple<InstructionKind, int, int>, Duration> dur;
      std::vector<Duration> d(dag.num_nodes());
      for (std::size_t n = 0; n < d.size(); ++n) {
        const auto id = static_cast<Dag::NodeId>(n);
        const Instruction& ins = dag.instruction(id);
        d[n] = pick(rng);
        dur[{ins.kind, dag.virtual_stage(id), ins.microbatch}] = d[n];
      }
      std::vector<Duration> start;
      const Duration length = longest_path(dag, d, &start);
      const Simulated sim = simulate(schedule, dur);
      EXPECT_EQ(length, sim.makespan) << name(c) << (load ? " +load" : "") << " trial " << trial;
      for (std::size_t n = 0; n < d.size(); ++n) {
        const auto id = static_cast<Dag::NodeId>(n);
        const Instruction& ins = dag.instruction(id);
        EXPECT_EQ(start[n], sim.start.at({ins.kind, dag.virtual_stage(id), ins.microbatch}))
            << name(c) << " " << label(ins) << " on stage " << ins.stage;
      }
    }
  }
}

// Recomputation overlaps the wait for the gradient: on a stage that waits, R costs less than
// its duration, and with R = 0 the recompute schedule is exactly 1F1B.
TEST(DagTest, EarlyRecomputeOverlapsWaiting) {
  for (int S : {1, 2, 4}) {
    for (int M : {1, 4, 8}) {
      const Dag plain(build({ScheduleKind::k1F1B, S, M, 1}));
      const Dag recompute(build({ScheduleKind::k1F1BEarlyRecompute, S, M, 1}));
      const Duration base = longest_path(plain, durations_by_kind(plain, 2, 4));
      EXPECT_EQ(longest_path(recompute, durations_by_kind(recompute, 2, 4, 0)), base);
      // R folded into B (no overlap) is an upper bound; with S > 1 some R hides in a wait.
      const Duration with_r = longest_path(recompute, durations_by_kind(recompute, 2, 4, 2));
      const Duration folded = longest_path(plain, durations_by_kind(plain, 2, 6));
      EXPECT_LE(with_r, folded) << "S=" << S << " M=" << M;
      if (S > 1) {
        EXPECT_LT(with_r, folded) << "S=" << S << " M=" << M;
      } else {
        EXPECT_EQ(with_r, folded);
      }
    }
  }
}

Schedule hand_made(int S, int M, std::vector<std::vector<Instruction>> per_stage) {
  Schedule schedule{ScheduleSpec{ScheduleKind::k1F1B, S, M, 1, false}, std::move(per_stage)};
  return schedule;
}

TEST(DagTest, DeadlockingScheduleIsASolveError) {
  using K = InstructionKind;
  // Stage 0 waits for B0 before running F0, which B0 needs: a cycle through stage 1.
  const Schedule schedule = hand_made(2, 1, {{{K::kBackward, 0, 0, 0}, {K::kForward, 0, 0, 0}},
                                             {{K::kForward, 1, 0, 0}, {K::kBackward, 1, 0, 0}}});
  try {
    Dag dag(schedule);
    FAIL() << "expected SolveError";
  } catch (const SolveError& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("deadlock"), std::string::npos) << message;
    EXPECT_NE(message.find("stage 0 F0"), std::string::npos) << message;
    EXPECT_NE(message.find("stage 1 B0"), std::string::npos) << message;
  }
  // Two stages running their microbatches in opposite orders with GPipe forwards.
  const Schedule crossed = hand_made(
      2, 2,
      {{{K::kForward, 0, 0, 0}, {K::kForward, 0, 1, 0}, {K::kBackward, 0, 0, 0}, {K::kBackward, 0, 1, 0}},
       {{K::kForward, 1, 1, 0}, {K::kBackward, 1, 1, 0}, {K::kForward, 1, 0, 0}, {K::kBackward, 1, 0, 0}}});
  EXPECT_NO_THROW(Dag{crossed});
  const Schedule crossed_backwards = hand_made(
      2, 2,
      {{{K::kForward, 0, 0, 0}, {K::kForward, 0, 1, 0}, {K::kBackward, 0, 1, 0}, {K::kBackward, 0, 0, 0}},
       {{K::kForward, 1, 0, 0}, {K::kBackward, 1, 1, 0}, {K::kForward, 1, 1, 0}, {K::kBackward, 1, 0, 0}}});
  EXPECT_THROW(Dag{crossed_backwards}, SolveError);
}

TEST(DagTest, MalformedSchedulesAreInputErrors) {
  using K = InstructionKind;
  // Duplicate instruction.
  EXPECT_THROW(Dag(hand_made(1, 1, {{{K::kForward, 0, 0, 0}, {K::kForward, 0, 0, 0}, {K::kBackward, 0, 0, 0}}})),
               InputError);
  // Missing backward.
  EXPECT_THROW(Dag(hand_made(1, 1, {{{K::kForward, 0, 0, 0}}})), InputError);
  // Instruction listed on the wrong stage.
  EXPECT_THROW(Dag(hand_made(2, 1, {{{K::kForward, 1, 0, 0}, {K::kBackward, 0, 0, 0}},
                                    {{K::kForward, 1, 0, 0}, {K::kBackward, 1, 0, 0}}})),
               InputError);
  // Microbatch out of range.
  EXPECT_THROW(Dag(hand_made(1, 1, {{{K::kForward, 0, 0, 0}, {K::kBackward, 0, 0, 0}, {K::kForward, 0, 1, 0}}})),
               InputError);
  // Stage count disagrees with the spec.
  EXPECT_THROW(Dag(hand_made(2, 1, {{{K::kForward, 0, 0, 0}, {K::kBackward, 0, 0, 0}}})), InputError);
  // Recompute after its backward is a cycle (R -> B dependency against program order).
  EXPECT_THROW(Dag(hand_made(1, 1, {{{K::kForward, 0, 0, 0}, {K::kBackward, 0, 0, 0}, {K::kRecompute, 0, 0, 0}}})),
               SolveError);
}

TEST(DagTest, StageNodesOutOfRangeThrows) {
  const Dag dag(build({ScheduleKind::k1F1B, 2, 2, 1}));
  EXPECT_THROW((void)dag.stage_nodes(2), std::out_of_range);
  EXPECT_THROW((void)dag.stage_nodes(-1), std::out_of_range);
}

}  // namespace
}  // namespace perseus
