// Timelines kept for some pipelines only (EmulationConfig::detail): every pipeline's figures
// stay exactly those of full detail, and the kept ones are the stragglers, the fastest and a
// typical pipeline, and those asked for.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <vector>

#include "fixtures.hpp"
#include "perseus/emulator/emulator.hpp"
#include "perseus/model/errors.hpp"

namespace perseus {
namespace {

using testing::random_choice;
using testing::random_problem;

// 64 pipelines of 4 stages with everything that makes pipelines differ or cost time to
// record: two stragglers (one late), slow clock switches (late ones, hence the instant
// re-run), links with bandwidth (transfers) and a ring all-reduce.
struct Cluster {
  EnergyProblem problem = random_problem({ScheduleKind::k1F1B, 4, 6, 1, false}, 11);
  ExecutionPlan plan = plan_from_choice(problem, random_choice(problem, 3));
  EmulationConfig config;
  Cluster() {
    config.data_parallel = 64;
    config.tensor_parallel = 8;
    config.switch_latency_s = 0.004;
    config.p2p = {1e-4, 1e9};
    config.activation_bytes = 2e6;
    config.gradient_bytes = 3e6;
    config.allreduce = {1e-5, 1e10};
    config.allreduce_bytes = 4e9;
    config.stragglers = {{9, 1.3, 0.0}, {40, 1.1, 0.02}};
  }
  EmulationResult run(TimelineDetail detail, std::vector<int> listed = {}) const {
    EmulationConfig c = config;
    c.detail = detail;
    c.detail_pipelines = std::move(listed);
    return emulate(problem, plan, c);
  }
};

void expect_same_energy(const EnergySplit& a, const EnergySplit& b) {
  EXPECT_EQ(a.computation_j, b.computation_j);
  EXPECT_EQ(a.intrinsic_blocking_j, b.intrinsic_blocking_j);
  EXPECT_EQ(a.extrinsic_blocking_j, b.extrinsic_blocking_j);
  EXPECT_EQ(a.allreduce_j, b.allreduce_j);
}

void expect_same_instruction(const ExecutedInstruction& a, const ExecutedInstruction& b) {
  EXPECT_EQ(a.pipeline, b.pipeline);
  EXPECT_EQ(a.node, b.node);
  EXPECT_EQ(a.instruction.stage, b.instruction.stage);
  EXPECT_EQ(a.start_s, b.start_s);
  EXPECT_EQ(a.end_s, b.end_s);
  EXPECT_EQ(a.energy_j, b.energy_j);
  EXPECT_EQ(a.frequency_mhz, b.frequency_mhz);
  EXPECT_EQ(a.clock_at_start_mhz, b.clock_at_start_mhz);
  EXPECT_EQ(a.switch_outcome, b.switch_outcome);
  EXPECT_EQ(a.waited_for, b.waited_for);
}

// Everything but the timelines: the same to the last bit, whatever detail was kept.
void expect_same_figures(const EmulationResult& full, const EmulationResult& compact) {
  EXPECT_EQ(full.iteration_time_s, compact.iteration_time_s);
  EXPECT_EQ(full.sync_time_s, compact.sync_time_s);
  expect_same_energy(full.energy, compact.energy);
  EXPECT_EQ(full.switches, compact.switches);
  EXPECT_EQ(full.late_switches, compact.late_switches);
  EXPECT_EQ(full.missed_switches, compact.missed_switches);
  EXPECT_EQ(full.switching_delay_s, compact.switching_delay_s);
  EXPECT_EQ(full.switching_energy_j, compact.switching_energy_j);
  EXPECT_EQ(full.warnings, compact.warnings);
  EXPECT_EQ(full.fastest_pipeline, compact.fastest_pipeline);
  EXPECT_EQ(full.typical_pipeline, compact.typical_pipeline);
  ASSERT_EQ(full.devices.size(), compact.devices.size());
  for (std::size_t i = 0; i < full.devices.size(); ++i) {
    SCOPED_TRACE(i);
    const DeviceSummary &a = full.devices[i], &b = compact.devices[i];
    EXPECT_EQ(a.pipeline, b.pipeline);
    EXPECT_EQ(a.stage, b.stage);
    EXPECT_EQ(a.busy_s, b.busy_s);
    EXPECT_EQ(a.finish_s, b.finish_s);
    expect_same_energy(a.energy, b.energy);
    EXPECT_EQ(a.switches, b.switches);
    EXPECT_EQ(a.late_switches, b.late_switches);
    EXPECT_EQ(a.missed_switches, b.missed_switches);
  }
  ASSERT_EQ(full.pipelines.size(), compact.pipelines.size());
  for (std::size_t p = 0; p < full.pipelines.size(); ++p) {
    EXPECT_EQ(full.pipelines[p].time_s, compact.pipelines[p].time_s);
    expect_same_energy(full.pipelines[p].energy, compact.pipelines[p].energy);
  }
  ASSERT_EQ(full.allreduces.size(), compact.allreduces.size());
  for (std::size_t s = 0; s < full.allreduces.size(); ++s) {
    EXPECT_EQ(full.allreduces[s].start_s, compact.allreduces[s].start_s);
    EXPECT_EQ(full.allreduces[s].end_s, compact.allreduces[s].end_s);
  }
}

// The kept pipelines' timelines and transfers are those of full detail.
void expect_same_detail(const EmulationResult& full, const EmulationResult& compact) {
  std::size_t instructions = 0, transfers = 0;
  for (const int p : compact.detailed_pipelines) {
    SCOPED_TRACE(p);
    for (int s = 0; s < full.stages; ++s) {
      const auto a = full.device_timeline(p, s), b = compact.device_timeline(p, s);
      ASSERT_EQ(a.size(), b.size());
      for (std::size_t k = 0; k < a.size(); ++k) expect_same_instruction(a[k], b[k]);
      instructions += b.size();
    }
    std::vector<Transfer> expected;
    for (const Transfer& t : full.transfers) {
      if (t.pipeline == p) expected.push_back(t);
    }
    std::vector<Transfer> kept;
    for (const Transfer& t : compact.transfers) {
      if (t.pipeline == p) kept.push_back(t);
    }
    ASSERT_EQ(expected.size(), kept.size());
    for (std::size_t k = 0; k < kept.size(); ++k) {
      EXPECT_EQ(expected[k].from_node, kept[k].from_node);
      EXPECT_EQ(expected[k].start_s, kept[k].start_s);
      EXPECT_EQ(expected[k].arrival_s, kept[k].arrival_s);
    }
    transfers += kept.size();
    const auto full_path = critical_path(full, p), kept_path = critical_path(compact, p);
    ASSERT_EQ(full_path.size(), kept_path.size());
    for (std::size_t k = 0; k < kept_path.size(); ++k) {
      EXPECT_EQ(full.timeline[full_path[k]].node, compact.timeline[kept_path[k]].node);
    }
  }
  EXPECT_EQ(instructions, compact.timeline.size());
  EXPECT_EQ(transfers, compact.transfers.size());
}

std::set<int> as_set(const std::vector<std::int32_t>& pipelines) { return {pipelines.begin(), pipelines.end()}; }

TEST(EmulatorDetail, CompactRunsKeepEveryPipelinesExactFigures) {
  const Cluster cluster;
  const EmulationResult full = cluster.run(TimelineDetail::kAll);
  ASSERT_GT(full.late_switches, 0);  // the instant-switching re-run is part of what is compared
  ASSERT_FALSE(full.transfers.empty());
  EXPECT_EQ(full.detailed_pipelines.size(), 64u);
  for (const TimelineDetail detail : {TimelineDetail::kNotable, TimelineDetail::kListed}) {
    SCOPED_TRACE(static_cast<int>(detail));
    const EmulationResult compact = cluster.run(detail, {33});
    expect_same_figures(full, compact);
    expect_same_detail(full, compact);
  }
  // Summaries only: no timeline at all, the same figures.
  const EmulationResult none = cluster.run(TimelineDetail::kListed);
  expect_same_figures(full, none);
  EXPECT_TRUE(none.timeline.empty());
  EXPECT_TRUE(none.transfers.empty());
  EXPECT_TRUE(none.detailed_pipelines.empty());
  ASSERT_EQ(none.device_begin.size(), 64u * 4 + 1);
  EXPECT_TRUE(critical_path(none, 0).empty());
}

TEST(EmulatorDetail, NotablePipelinesAreTheStragglersTheFastestAndATypicalOne) {
  Cluster cluster;
  const EmulationResult r = cluster.run(TimelineDetail::kNotable);
  // Every non-straggler runs alike: the first of them is both the fastest and the typical one.
  EXPECT_EQ(r.fastest_pipeline, 0);
  EXPECT_EQ(r.typical_pipeline, 0);
  EXPECT_EQ(as_set(r.detailed_pipelines), (std::set<int>{0, 9, 40}));
  EXPECT_EQ(r.timeline.size(), 3 * cluster.problem.dag.num_nodes());
  for (int p = 0; p < 64; ++p) {
    EXPECT_EQ(r.has_detail(p), p == 0 || p == 9 || p == 40) << p;
    if (!r.has_detail(p)) {
      EXPECT_TRUE(r.device_timeline(p, 2).empty());
    }
  }
  EXPECT_TRUE(std::is_sorted(r.timeline.begin(), r.timeline.end(),
                             [](const ExecutedInstruction& a, const ExecutedInstruction& b) { return a.pipeline < b.pipeline; }));

  // Pipeline 0 straggling and one asked for: the fastest and typical pipeline, 1, is known
  // only after every pipeline ran, and recorded after 0 and 50.
  cluster.config.stragglers = {{0, 1.2, 0.0}};
  const EmulationResult late = cluster.run(TimelineDetail::kNotable, {50});
  EXPECT_EQ(late.fastest_pipeline, 1);
  EXPECT_EQ(late.typical_pipeline, 1);
  EXPECT_EQ(late.detailed_pipelines, (std::vector<std::int32_t>{0, 1, 50}));
  EXPECT_TRUE(std::is_sorted(late.transfers.begin(), late.transfers.end(),
                             [](const Transfer& a, const Transfer& b) { return a.pipeline < b.pipeline; }));
  expect_same_detail(cluster.run(TimelineDetail::kAll), late);

  // A straggler running a faster plan at its own pace is the fastest; the typical one is
  // still the median non-straggler.
  const ExecutionPlan fast = plan_from_choice(cluster.problem, fastest_choice(cluster.problem));
  cluster.config.stragglers = {{7, 1.0, 0.0}, {20, 1.5, 0.0}};
  EmulationConfig config = cluster.config;
  config.detail = TimelineDetail::kNotable;
  const EmulationResult mixed = emulate(cluster.problem, cluster.plan, config, &fast);
  ASSERT_LT(mixed.pipelines[7].time_s, mixed.pipelines[0].time_s);
  EXPECT_EQ(mixed.fastest_pipeline, 7);
  EXPECT_EQ(mixed.typical_pipeline, 0);
  EXPECT_EQ(mixed.detailed_pipelines, (std::vector<std::int32_t>{0, 7, 20}));

  // Every pipeline straggling: the typical one is their median.
  config.data_parallel = 3;
  config.stragglers = {{0, 1.5, 0.0}, {1, 1.1, 0.0}, {2, 1.3, 0.0}};
  const EmulationResult all = emulate(cluster.problem, cluster.plan, config);
  EXPECT_EQ(all.fastest_pipeline, 1);
  EXPECT_EQ(all.typical_pipeline, 2);
}

TEST(EmulatorDetail, APipelineAskedForMustExist) {
  const Cluster cluster;
  for (const int p : {-1, 64}) {
    try {
      cluster.run(TimelineDetail::kNotable, {p});
      ADD_FAILURE() << "no InputError for pipeline " << p;
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find("does not exist (there are 64 pipelines)"), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace perseus
