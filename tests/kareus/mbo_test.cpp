// Kareus's MBO on the emulated GPU: reproducible by seed, every pass contributing, resumable,
// and sample-efficient against the exhaustive front (docs/kareus.md, "Sample efficiency").
#include <gtest/gtest.h>

#include <map>
#include <set>

#include "perseus/kareus/mbo.hpp"

namespace perseus::kareus {
namespace {

Workload llama_tp8() { return {planner::find_model("llama3.2-3b"), planner::find_gpu("a100-sxm"), 8, 1, 2, 8, 4096, 8}; }

// Hypervolume of the first `n` samples under a reference just beyond the exhaustive front.
double front_hv(const std::vector<Sample>& samples, std::size_t n, double rt, double re) {
  std::vector<TradeoffPoint> points;
  for (std::size_t i = 0; i < n; ++i) points.push_back({samples[i].measurement.time_s, samples[i].measurement.total_j(), i});
  return hypervolume(points, rt, re);
}

TEST(KareusMbo, TheSameSeedGivesTheSameSearchAndEveryPassContributes) {
  EmulatedGpu gpu(planner::find_gpu("a100-sxm"));
  const Partition p = layer_partitions(llama_tp8())[3];  // backward attention: 5 kernels, "large"
  const KnobSpace space = knob_space(gpu.gpu(), p);
  MboOptions options;
  options.max_batches = 2;
  std::size_t streamed = 0;
  ResumableSearch io;
  io.on_sample = [&](const Sample&) { ++streamed; };
  const MboResult a = mbo_search(p, space, gpu, options, std::move(io));
  const MboResult b = mbo_search(p, space, gpu, options);
  ASSERT_EQ(a.frontier.samples.size(), 96u + 2 * 32);  // Appendix C: 96 initial, batches of 32
  EXPECT_EQ(streamed, a.frontier.samples.size());
  ASSERT_EQ(a.frontier.samples.size(), b.frontier.samples.size());
  for (std::size_t i = 0; i < a.frontier.samples.size(); ++i) EXPECT_EQ(a.frontier.samples[i].index, b.frontier.samples[i].index);
  std::map<SamplePass, int> by_pass;
  for (SamplePass pass : a.pass) ++by_pass[pass];
  EXPECT_EQ(by_pass[SamplePass::kInitial], 96);
  // Per batch of 32: 0.4, 0.2, 0.2 of it by the energy passes (when they find improvement), the rest by uncertainty.
  EXPECT_GT(by_pass[SamplePass::kTotalEnergy], 0);
  EXPECT_GT(by_pass[SamplePass::kUncertainty], 0);
  EXPECT_EQ(by_pass[SamplePass::kTotalEnergy] + by_pass[SamplePass::kDynamicEnergy] + by_pass[SamplePass::kStaticEnergy] +
                by_pass[SamplePass::kUncertainty],
            64);
  std::set<std::size_t> distinct;
  for (const Sample& s : a.frontier.samples) distinct.insert(s.index);
  EXPECT_EQ(distinct.size(), a.frontier.samples.size());  // never the same configuration twice
  options.seed = 2;
  const MboResult c = mbo_search(p, space, gpu, options);
  EXPECT_NE(c.frontier.samples[0].index, a.frontier.samples[0].index);
}

TEST(KareusMbo, ItResumesFromKnownSamples) {
  EmulatedGpu gpu(planner::find_gpu("a100-sxm"));
  const Partition p = layer_partitions(llama_tp8())[1];
  const KnobSpace space = knob_space(gpu.gpu(), p);
  MboOptions options;
  options.max_batches = 1;
  const MboResult first = mbo_search(p, space, gpu, options);
  ResumableSearch io;
  io.known = first.frontier.samples;
  std::size_t fresh = 0;
  io.on_sample = [&](const Sample&) { ++fresh; };
  const MboResult second = mbo_search(p, space, gpu, options, std::move(io));
  // The known samples count as initial ones: only the batch is measured.
  EXPECT_EQ(fresh, 32u);  // four kernels: a "large" partition, batches of 32
  EXPECT_EQ(second.frontier.samples.size(), first.frontier.samples.size() + 32);
}

// The goal: MBO reaches 99 % of the exhaustive front's hypervolume with under 5 % of the
// space evaluated (reference just beyond the front, where schedules differ; a reference at the
// worst configuration would count mostly the area every search gets).
TEST(KareusMbo, ReachesNinetyNinePercentOfTheExhaustiveFrontWithUnderFivePercentOfTheSpace) {
  EmulatedGpu gpu(planner::find_gpu("a100-sxm"));
  const Partition p = layer_partitions(llama_tp8())[3];
  const KnobSpace space = knob_space(gpu.gpu(), p);
  const PartitionFrontier exhaustive = exhaustive_search(p, space, gpu);
  double rt = 0.0, re = 0.0;
  for (const TradeoffPoint& t : exhaustive.total) rt = std::max(rt, t.time_s), re = std::max(re, t.energy_j);
  rt *= 1.1, re *= 1.1;
  const double full = front_hv(exhaustive.samples, exhaustive.samples.size(), rt, re);
  MboOptions options;
  options.max_batches = 20;
  options.stop_epsilon = 0.0;  // the budget, not the stopping rule, ends it
  const MboResult r = mbo_search(p, space, gpu, options);
  std::size_t needed = 0;
  for (std::size_t n = 1; n <= r.frontier.samples.size() && !needed; ++n) {
    if (front_hv(r.frontier.samples, n, rt, re) >= 0.99 * full) needed = n;
  }
  ASSERT_GT(needed, 0u);
  EXPECT_LT(static_cast<double>(needed), 0.05 * space.size()) << needed << " of " << space.size();
}

}  // namespace
}  // namespace perseus::kareus
