// Exhaustive search of a partition on the emulated GPU, and the fronts it reports.
#include <gtest/gtest.h>

#include <set>

#include "perseus/kareus/search.hpp"

namespace perseus::kareus {
namespace {

TEST(KareusSearch, ExhaustiveSearchEvaluatesEveryConfigurationAndKeepsItsFront) {
  const Workload w{planner::find_model("qwen3-1.7b"), planner::find_gpu("a100-sxm"), 8, 1, 2, 8, 4096, 8};
  const Partition p = layer_partitions(w)[0];
  EmulatedGpu gpu(w.gpu);
  const KnobSpace space = knob_space(w.gpu, p, 1200, 16);
  std::size_t calls = 0, last = 0;
  const PartitionFrontier f = exhaustive_search(p, space, gpu, [&](std::size_t done, std::size_t total) {
    ++calls;
    last = done;
    EXPECT_EQ(total, space.size());
  });
  ASSERT_EQ(f.samples.size(), space.size());
  EXPECT_EQ(last, space.size());
  EXPECT_EQ(calls, (space.size() + 1023) / 1024);
  std::set<std::size_t> indices;
  for (const Sample& s : f.samples) {
    indices.insert(s.index);
    EXPECT_EQ(space.at(s.index), s.config);
  }
  EXPECT_EQ(indices.size(), space.size());
  // Every sample is at or above the front; the front's hypervolume is that of all samples.
  std::vector<TradeoffPoint> all;
  for (std::size_t i = 0; i < f.samples.size(); ++i) {
    all.push_back({f.samples[i].measurement.time_s, f.samples[i].measurement.total_j(), i});
  }
  EXPECT_DOUBLE_EQ(f.hypervolume_total, hypervolume(all, f.reference_time_s, f.reference_energy_j));
  EXPECT_GT(f.hypervolume_total, 0.0);
  for (const TradeoffPoint& t : f.total) {
    const Measurement& m = f.samples[t.id].measurement;
    EXPECT_EQ(m.time_s, t.time_s);
    EXPECT_EQ(m.total_j(), t.energy_j);
  }
  // Overlap pays: the fastest schedule beats the sequential execution at the top clock.
  const Measurement sequential = gpu.evaluate(p, Config{1410, 16, -1, -1});
  EXPECT_LT(f.total.front().time_s, sequential.time_s);
  EXPECT_LT(f.total.back().energy_j, sequential.total_j());
}

}  // namespace
}  // namespace perseus::kareus
