// The appendix's launch-timing dynamic program: its patterns, and with one (fused) collective its
// front equals the launch windows' front, the emulated GPU being additive over segments.
#include <gtest/gtest.h>

#include <set>

#include "perseus/kareus/knob_space.hpp"
#include "perseus/kareus/launch_timing.hpp"

namespace perseus::kareus {
namespace {

TEST(KareusLaunchTiming, PatternsCoverEachOperationOnceInOrder) {
  for (int n = 1; n <= 6; ++n) {
    const auto one = launch_timing_patterns(n, 1);
    // One collective: beside any contiguous run of kernels (n(n+1)/2), or alone at any of n + 1 places.
    EXPECT_EQ(one.size(), static_cast<std::size_t>(n * (n + 1) / 2 + n + 1)) << n;
  }
  for (const auto& pattern : launch_timing_patterns(4, 3)) {
    int next_kernel = 0, next_collective = 0;
    for (const Segment& s : pattern) {
      if (s.first_kernel >= 0) {
        EXPECT_EQ(s.first_kernel, next_kernel);
        next_kernel = s.last_kernel + 1;
      }
      if (s.first_collective >= 0) {
        EXPECT_EQ(s.first_collective, next_collective);
        next_collective = s.last_collective + 1;
      }
      // One side of an overlap is a single operation.
      EXPECT_TRUE(s.first_kernel == s.last_kernel || s.first_collective == s.last_collective);
    }
    EXPECT_EQ(next_kernel, 4);
    EXPECT_EQ(next_collective, 3);
  }
  EXPECT_THROW(launch_timing_patterns(12, 8), InputError);
}

TEST(KareusLaunchTiming, WithOneCollectiveItsFrontIsTheLaunchWindowsFront) {
  const Workload w{planner::find_model("llama3.2-3b"), planner::find_gpu("a100-sxm"), 8, 1, 2, 8, 4096, 8};
  EmulatedGpu gpu(w.gpu);
  for (const Partition& p : layer_partitions(w)) {
    for (const int clock : {1410, 1110}) {
      const std::vector<TimingSchedule> dp = launch_timing_front(p, std::span(&p.comm, 1), clock, 12, gpu);
      std::vector<TradeoffPoint> windows;
      const int n = static_cast<int>(p.compute.size());
      for (int first = 0; first < n; ++first) {
        for (int last = first; last < n; ++last) {
          const Measurement m = gpu.evaluate(p, Config{clock, 12, first, last});
          windows.push_back({m.time_s, m.total_j(), windows.size()});
        }
      }
      const Measurement sequential = gpu.evaluate(p, Config{clock, 12, -1, -1});
      windows.push_back({sequential.time_s, sequential.total_j(), windows.size()});
      const std::vector<TradeoffPoint> front = pareto_front(windows);
      ASSERT_EQ(dp.size(), front.size()) << p.name << " at " << clock;
      for (std::size_t i = 0; i < front.size(); ++i) {
        EXPECT_NEAR(dp[i].time_s, front[i].time_s, 1e-12 * front[i].time_s) << p.name;
        EXPECT_NEAR(dp[i].energy_j, front[i].energy_j, 1e-9 * front[i].energy_j) << p.name;
      }
    }
  }
}

TEST(KareusLaunchTiming, UnfusedCollectivesArePlacedOneByOne) {
  const Workload w{planner::find_model("qwen3-1.7b"), planner::find_gpu("a100-sxm"), 4, 2, 2, 8, 4096, 8};
  EmulatedGpu gpu(w.gpu);
  const Partition p = layer_partitions(w)[0];  // KV all-gather fused with the TP all-reduce
  const double allreduce = 2.0 * 3 / 4 * 2 * 4 * 2048.0 * 2048;
  const Collective parts[] = {{"kv-allgather", p.comm.bus_bytes - allreduce}, {"allreduce", allreduce}};
  const auto split = launch_timing_front(p, parts, 1410, 12, gpu);
  ASSERT_FALSE(split.empty());
  for (const TimingSchedule& t : split) {
    int collectives = 0;
    for (const Segment& s : t.segments) {
      if (s.first_collective >= 0) collectives += s.last_collective - s.first_collective + 1;
    }
    EXPECT_EQ(collectives, 2);
  }
  // Two collectives open more patterns than one (each may overlap its own run of kernels).
  EXPECT_GT(launch_timing_patterns(5, 2).size(), launch_timing_patterns(5, 1).size());
  EXPECT_THROW(launch_timing_front(p, {}, 1410, 12, gpu), InputError);
}

}  // namespace
}  // namespace perseus::kareus
