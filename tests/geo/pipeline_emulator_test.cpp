#include <algorithm>
#include <map>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "perseus/geo/pipeline_emulator.hpp"
#include "perseus/geo/reproduce.hpp"

namespace perseus::geo {
namespace {

// F = 10 ms, B = 20 ms, R = 10 ms; a WAN transfer `ratio` forwards at the pair bandwidth.
struct Cluster {
  NetworkSpec net;
  Workload w;
  Cluster(const char* dcs, int stages, int microbatches, double ratio, double latency_ms = 20.0, bool recompute = true) {
    net.dcs = parse_dcs(dcs);
    net.wan_latency_ms = latency_ms;
    net.connections = 64;
    net.intra_dc_gbps = 1e9;  // free inside a DC
    WorkloadSpec spec;
    spec.stages = stages, spec.microbatches = microbatches, spec.layers = std::max(stages, 8);
    spec.forward_ms = 10.0, spec.comm_ratio = ratio, spec.recompute = recompute, spec.memory_gb = 1000.0;
    w = make_workload(spec, net);
  }
};

TEST(PipelineEmulator, GPipeInOneDcIsTheClosedForm) {
  const Cluster s("8", 4, 6, 1.0);
  const Placement pl = place_stage_major(s.net, 4, 1, 1);
  const GeoEmulation e = emulate(s.w, s.net, pl, {Scheduler::kGPipe, LinkSharing::kQueue, {}});
  // (M + S - 1) forwards and (M + S - 1) backwards along the critical path.
  EXPECT_NEAR(e.pipeline_time_s, (6 + 3) * 0.010 + (6 + 3) * 0.020, 1e-9);
  EXPECT_NEAR(e.busy_s, 4 * 6 * 0.030, 1e-9);
}

TEST(PipelineEmulator, OneFOneBInOneDcIsTheClosedForm) {
  const Cluster s("8", 4, 8, 1.0);
  const Placement pl = place_stage_major(s.net, 4, 1, 1);
  const GeoEmulation e = emulate(s.w, s.net, pl, {Scheduler::k1F1B, LinkSharing::kQueue, {}});
  // 1F1B with B = 2F: (S - 1)(F + B) of fill and drain plus M (F + B) on the first stage.
  EXPECT_NEAR(e.pipeline_time_s, 3 * 0.030 + 8 * 0.030, 1e-9);
}

TEST(PipelineEmulator, ALinkBoundPipelineIsTheClosedForm) {
  // Two stages in two DCs, transfers x = 5 F > B: GPipe is bound by the link.
  const Cluster s("1,1", 2, 4, 5.0);
  const Placement pl = place_stage_major(s.net, 2, 1, 1);
  const GeoEmulation e = emulate(s.w, s.net, pl, {Scheduler::kGPipe, LinkSharing::kQueue, {}});
  const double F = 0.010, B = 0.020, x = 0.050, L = 0.020;
  EXPECT_NEAR(e.pipeline_time_s, 2 * F + 2 * B + 2 * 4 * x + 2 * L, 1e-9);
  // Queued transfers go one at a time; split ones share the link, which is busy as long.
  const GeoEmulation split = emulate(s.w, s.net, pl, {Scheduler::kGPipe, LinkSharing::kSplit, {}});
  auto last_sent = [](const GeoEmulation& r) {
    double t = 0.0;
    for (const GeoTransfer& tr : r.transfers)
      if (!tr.gradient) t = std::max(t, tr.sent_s);
    return t;
  };
  EXPECT_NEAR(last_sent(split), last_sent(e), 1e-9);
  EXPECT_GT(split.transfers.front().arrival_s, e.transfers.front().arrival_s);
}

TEST(PipelineEmulator, AtlasGivesThePooledLinkToOneTransferAtATime) {
  const Cluster s("6,6", 4, 8, 3.0);
  const Placement pl = place_stage_major(s.net, 4, 3, 3);
  const GeoEmulation e = emulate(s.w, s.net, pl, {Scheduler::kAtlas, LinkSharing::kQueue, {}});
  std::map<std::pair<int, bool>, std::vector<Interval>> wan;  // (hop, gradient) of the one cell
  const double pooled_s = s.w.activation_bytes / (3 * s.net.wan_pair_bandwidth());
  for (const GeoTransfer& t : e.transfers) {
    if (!t.wan) continue;
    wan[{std::min(t.from_stage, t.to_stage), t.gradient}].push_back({t.start_s, t.sent_s});
    EXPECT_NEAR(t.sent_s - t.start_s, pooled_s, 1e-9);  // never waited: rule 3
  }
  ASSERT_FALSE(wan.empty());
  for (auto& [key, intervals] : wan) {
    std::sort(intervals.begin(), intervals.end(), [](auto& a, auto& b) { return a.start_s < b.start_s; });
    for (std::size_t i = 1; i < intervals.size(); ++i) EXPECT_LE(intervals[i - 1].end_s, intervals[i].start_s + 1e-9);
  }
  // A computation whose output crosses the WAN ends when its transfer starts.
  for (const GeoTransfer& t : e.transfers) {
    if (!t.wan) continue;
    const auto& tasks = e.tasks[static_cast<std::size_t>(pl.gpu(t.pipeline, t.from_stage))];
    const bool found = std::any_of(tasks.begin(), tasks.end(), [&](const GeoTask& task) {
      return task.microbatch == t.microbatch && std::abs(task.end_s - t.start_s) < 1e-12;
    });
    EXPECT_TRUE(found);
  }
}

TEST(PipelineEmulator, AtlasRecomputesRightBeforeItsBackwardAndKeepsToMemory) {
  Cluster s("6,6", 4, 12, 3.0);
  for (StageWork& stage : s.w.stages) stage.max_in_flight = 2;
  const Placement pl = place_stage_major(s.net, 4, 3, 3);
  const GeoEmulation atlas = emulate(s.w, s.net, pl, {Scheduler::kAtlas, LinkSharing::kQueue, {}});
  for (int stage = 0; stage < 4; ++stage) EXPECT_LE(atlas.peak_in_flight[stage], 2);
  for (const auto& tasks : atlas.tasks)
    for (std::size_t i = 0; i + 1 < tasks.size(); ++i)
      if (tasks[i].kind == InstructionKind::kRecompute) {
        EXPECT_EQ(tasks[i + 1].kind, InstructionKind::kBackward);  // rule 4
        EXPECT_EQ(tasks[i + 1].microbatch, tasks[i].microbatch);
      }
  // Varuna has no memory filter.
  const GeoEmulation varuna = emulate(s.w, s.net, pl, {Scheduler::kVaruna, LinkSharing::kQueue, {}});
  EXPECT_GT(*std::max_element(varuna.peak_in_flight.begin(), varuna.peak_in_flight.end()), 2);
}

TEST(PipelineEmulator, EveryMicrobatchRunsOnceEverywhere) {
  const Cluster s("6,6", 4, 5, 3.0);
  for (Scheduler scheduler : {Scheduler::kGPipe, Scheduler::k1F1B, Scheduler::kVaruna, Scheduler::kAtlas}) {
    const Placement pl = place_stage_major(s.net, 4, 3, scheduler == Scheduler::kAtlas ? 3 : 1);
    const GeoEmulation e = emulate(s.w, s.net, pl, {scheduler, LinkSharing::kQueue, {}});
    for (int g = 0; g < pl.num_gpus(); ++g) {
      int forwards = 0, backwards = 0;
      double free_at = 0.0;
      for (const GeoTask& t : e.tasks[static_cast<std::size_t>(g)]) {
        forwards += t.kind == InstructionKind::kForward;
        backwards += t.kind == InstructionKind::kBackward;
        EXPECT_GE(t.start_s, free_at - 1e-12);  // one at a time
        free_at = t.end_s;
      }
      EXPECT_EQ(forwards, 5) << to_string(scheduler);
      EXPECT_EQ(backwards, 5) << to_string(scheduler);
    }
  }
}

TEST(PipelineEmulator, ReplayReproducesAndHeldIntervalsOnlyDelayWhenInTheWay) {
  const Cluster s("6,6", 4, 6, 3.0);
  for (Scheduler scheduler : {Scheduler::kVaruna, Scheduler::kAtlas, Scheduler::k1F1B}) {
    const Placement pl = place_stage_major(s.net, 4, 3, 3);
    const GeoEmulation e = emulate(s.w, s.net, pl, {scheduler, LinkSharing::kQueue, {}});
    EXPECT_EQ(replay(s.w, s.net, e, {}).iteration_time_s, e.iteration_time_s);
    // Every bubble held: nothing moves.
    const auto idle = bubbles(e);
    const GeoEmulation held = replay(s.w, s.net, e, idle);
    EXPECT_EQ(held.iteration_time_s, e.iteration_time_s) << to_string(scheduler);
    // A hold over the first computation of the last stage delays the iteration.
    std::vector<std::vector<Interval>> in_the_way(static_cast<std::size_t>(pl.num_gpus()));
    const GeoTask& first = e.tasks[static_cast<std::size_t>(pl.gpu(0, 3))].front();
    in_the_way[static_cast<std::size_t>(pl.gpu(0, 3))].push_back({first.start_s, first.start_s + 0.5});
    EXPECT_GT(replay(s.w, s.net, e, in_the_way).iteration_time_s, e.iteration_time_s + 0.1);
  }
}

TEST(PipelineEmulator, SlackIsTheClosedFormOnALinkBoundPipeline) {
  // Two stages in two DCs, GPipe, transfers x = 5 F queued on the link: F(3) starts at 3F and
  // its activation leaves at F + 3x, so it may take until then without moving anything.
  const Cluster s("1,1", 2, 4, 5.0);
  const Placement pl = place_stage_major(s.net, 2, 1, 1);
  const GeoEmulation e = emulate(s.w, s.net, pl, {Scheduler::kGPipe, LinkSharing::kQueue, {}});
  std::map<std::pair<int, int>, double> windows;
  const TaskCosts costs = stretch_into_slack(e, [&](int gpu, int index, double window) {
    windows[{gpu, index}] = window;
    const GeoTask& t = e.tasks[static_cast<std::size_t>(gpu)][static_cast<std::size_t>(index)];
    return TaskCost{t.end_s - t.start_s, 0.0};  // nothing taken: each sees its own slack
  });
  const double F = 0.010, x = 0.050;
  EXPECT_NEAR(windows.at({0, 3}), F + 3 * x - 3 * F, 1e-8);
  EXPECT_NEAR(windows.at({0, 0}), F, 1e-8);  // its transfer leaves at once: no slack
  // On a link that splits its bandwidth every request moves the others: no slack from it.
  const GeoEmulation split = emulate(s.w, s.net, pl, {Scheduler::kGPipe, LinkSharing::kSplit, {}});
  stretch_into_slack(split, [&](int gpu, int index, double window) {
    const GeoTask& t = split.tasks[static_cast<std::size_t>(gpu)][static_cast<std::size_t>(index)];
    if (gpu == 0 && t.kind == InstructionKind::kForward) {
      EXPECT_NEAR(window, t.end_s - t.start_s, 1e-8);
    }
    return TaskCost{t.end_s - t.start_s, 0.0};
  });
}

TEST(PipelineEmulator, StretchingIntoSlackKeepsTheIteration) {
  // Every computation takes all the slack it is given; the replay must keep the iteration time,
  // every all-reduce, and each computation inside its window.
  const Cluster s("6,6", 4, 6, 3.0);
  for (LinkSharing sharing : {LinkSharing::kQueue, LinkSharing::kSplit}) {
    for (Scheduler scheduler : {Scheduler::kGPipe, Scheduler::k1F1B, Scheduler::kVaruna, Scheduler::kAtlas}) {
      const Placement pl = place_stage_major(s.net, 4, 3, 3);
      const GeoEmulation e = emulate(s.w, s.net, pl, {scheduler, sharing, {}});
      double stretched = 0.0;
      const TaskCosts costs = stretch_into_slack(e, [&](int gpu, int index, double window) {
        const GeoTask& t = e.tasks[static_cast<std::size_t>(gpu)][static_cast<std::size_t>(index)];
        stretched += window - (t.end_s - t.start_s);
        return TaskCost{window, 1.0};
      });
      const GeoEmulation slow = replay(s.w, s.net, e, {}, costs);
      const std::string name = fmt::format("{} {}", to_string(scheduler), to_string(sharing));
      EXPECT_NEAR(slow.iteration_time_s, e.iteration_time_s, 1e-9) << name;
      for (std::size_t st = 0; st < e.allreduces.size(); ++st)
        EXPECT_NEAR(slow.allreduces[st].start_s, e.allreduces[st].start_s, 1e-9) << name << " stage " << st;
      EXPECT_GT(stretched, 0.0) << name;  // this cluster is link-bound: there is slack to take
      for (std::size_t g = 0; g < e.tasks.size(); ++g)
        for (std::size_t i = 0; i < e.tasks[g].size(); ++i)
          EXPECT_NEAR(slow.tasks[g][i].end_s - slow.tasks[g][i].start_s, costs[g][i].time_s, 1e-9);
      double computations = 0.0;  // each given 1 J
      for (const auto& list : e.tasks) computations += static_cast<double>(list.size());
      EXPECT_NEAR(slow.computation_j, computations, 1e-9) << name;
    }
  }
}

TEST(PipelineEmulator, StragglingDcsShareTheirAllReduceOverTheWan) {
  // 3 pipelines of 4 stages over 3 DCs of 4: stage 1 has replicas in two DCs.
  const Cluster s("4,4,4", 4, 4, 3.0);
  const Placement pl = place_stage_major(s.net, 4, 3, 1);
  EXPECT_EQ(pl.dc_of(0, 1), 0);
  EXPECT_EQ(pl.dc_of(1, 1), 1);
  const GeoEmulation e = emulate(s.w, s.net, pl, {Scheduler::kVaruna, LinkSharing::kQueue, {}});
  EXPECT_FALSE(e.allreduces[0].wan);
  EXPECT_TRUE(e.allreduces[1].wan);
  EXPECT_NEAR(e.allreduces[1].end_s - e.allreduces[1].start_s,
              ring_allreduce_s(s.w.stages[1].parameters, 3, s.net.wan_pair_bandwidth()), 1e-9);
}

TEST(PipelineEmulator, BadInputIsRefused) {
  NetworkSpec net;
  net.dcs = parse_dcs("2,2");
  EXPECT_THROW(place_stage_major(net, 5, 0, 1), InputError);  // more stages than GPUs
  EXPECT_THROW(place_stage_major(net, 2, 3, 1), InputError);  // 3 pipelines of 2 need 6 GPUs
  EXPECT_THROW(parse_scheduler("pipedream"), InputError);
  EXPECT_EQ(parse_scheduler("Megatron"), Scheduler::k1F1B);
}

// Atlas's Figs. 8 and 9 on the testbed (12 GPUs, 3 DCs): the shapes the paper reports.
TEST(PaperFigures, Fig8AtlasGainsGrowWithLatency) {
  const auto points = testbed_sweep(1);
  auto time = [&](const std::string& model, int M, double latency, Scheduler s) {
    for (const TestbedPoint& p : points)
      if (p.model == model && p.microbatches == M && p.latency_ms == latency && p.scheduler == s) return p.pipeline_time_s;
    return 0.0;
  };
  for (const char* model : {"gpt-a", "gpt-b"})
    for (int M : {4, 16})
      for (Scheduler baseline : {Scheduler::kGPipe, Scheduler::k1F1B, Scheduler::kVaruna}) {
        double previous = 0.0;
        for (double latency : {10.0, 20.0, 30.0, 40.0}) {
          const double gain = time(model, M, latency, baseline) / time(model, M, latency, Scheduler::kAtlas);
          EXPECT_GT(gain, 1.5) << model << " M=" << M << " " << latency;
          EXPECT_GT(gain, previous) << model << " M=" << M << " " << latency;
          previous = gain;
        }
      }
  // The paper's largest gains: 17x over GPipe, 13x over Megatron, 12x over Varuna (M = 4, 40 ms).
  const double gpipe = time("gpt-a", 4, 40, Scheduler::kGPipe) / time("gpt-a", 4, 40, Scheduler::kAtlas);
  EXPECT_GT(gpipe, 10.0);
  EXPECT_LT(gpipe, 25.0);
}

TEST(PaperFigures, Fig9TemporalSharingAloneBeatsEveryBaseline) {
  const auto points = testbed_sweep(64);
  for (const TestbedPoint& atlas : points) {
    if (atlas.scheduler != Scheduler::kAtlas) continue;
    for (const TestbedPoint& p : points)
      if (p.model == atlas.model && p.microbatches == atlas.microbatches && p.latency_ms == atlas.latency_ms &&
          p.scheduler != Scheduler::kAtlas) {
        EXPECT_GT(p.pipeline_time_s / atlas.pipeline_time_s, 1.0)
            << atlas.model << " M=" << atlas.microbatches << " " << atlas.latency_ms << " " << to_string(p.scheduler);
        EXPECT_LT(p.pipeline_time_s / atlas.pipeline_time_s, 2.5);  // the paper: up to 1.82x
      }
  }
}

}  // namespace
}  // namespace perseus::geo
