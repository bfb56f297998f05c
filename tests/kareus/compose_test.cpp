// Algorithm 2 against brute force on a small space, the methods' restrictions, and the
// comparison's ordering (Kareus's options include every other method's).
#include <gtest/gtest.h>

#include <limits>
#include <map>
#include <set>

#include "perseus/kareus/compose.hpp"

namespace perseus::kareus {
namespace {

struct Small {
  Workload workload;
  std::vector<Partition> partitions;
  std::vector<PartitionFrontier> frontiers;
};

// Two clocks and two SM counts: small enough to enumerate every combination.
Small small_space(EmulatedGpu& gpu) {
  Small s{{planner::find_model("qwen3-1.7b"), planner::find_gpu("a100-sxm"), 8, 1, 2, 4, 2048, 4}, {}, {}};
  s.partitions = layer_partitions(s.workload);
  for (const Partition& p : s.partitions) s.frontiers.push_back(exhaustive_search(p, knob_space(s.workload.gpu, p, 1395, 2), gpu));
  return s;
}

TEST(KareusCompose, MicrobatchOptionsAreTheFrontOfEveryCombination) {
  EmulatedGpu gpu(planner::find_gpu("a100-sxm"));
  Small s = small_space(gpu);
  s.workload.pipeline_parallel = 4;  // stage 1 is a middle stage: nothing outside its partitions
  for (const bool forward : {true, false}) {
    const auto options = microbatch_options(s.workload, s.partitions, s.frontiers, 1, forward, Method::kKareus, gpu);
    std::vector<std::size_t> ks;
    for (std::size_t k = 0; k < s.partitions.size(); ++k) {
      if (s.partitions[k].forward == forward) ks.push_back(k);
    }
    ASSERT_EQ(ks.size(), 2u);
    // Brute force: at each clock every pair of samples, summed with their counts.
    std::vector<TradeoffPoint> all;
    for (const Sample& a : s.frontiers[ks[0]].samples) {
      for (const Sample& b : s.frontiers[ks[1]].samples) {
        if (a.config.clock_mhz != b.config.clock_mhz) continue;  // one clock per microbatch
        const double na = s.partitions[ks[0]].per_microbatch, nb = s.partitions[ks[1]].per_microbatch;
        all.push_back({na * a.measurement.time_s + nb * b.measurement.time_s,
                       na * a.measurement.total_j() + nb * b.measurement.total_j(), all.size()});
      }
    }
    EXPECT_EQ(all.size(), 2u * 31 * 21);  // 2 clocks x (2 SMs x 15 windows + 1) x (2 x 10 + 1)
    // The front, options closer than kSameOptionTime_s merged as microbatch_options does.
    std::vector<TradeoffPoint> front;
    for (const TradeoffPoint& p : pareto_front(all)) {
      if (!front.empty() && p.time_s - front.back().time_s < kSameOptionTime_s) front.pop_back();
      front.push_back(p);
    }
    ASSERT_EQ(front.size(), options.size()) << forward;
    for (std::size_t i = 0; i < front.size(); ++i) {
      EXPECT_NEAR(front[i].time_s, options[i].time_s, 1e-12);
      EXPECT_NEAR(front[i].energy_j, options[i].energy_j, 1e-9);
      const Sample& a = s.frontiers[ks[0]].samples[options[i].samples[ks[0]]];
      const Sample& b = s.frontiers[ks[1]].samples[options[i].samples[ks[1]]];
      EXPECT_EQ(a.config.clock_mhz, options[i].clock_mhz);
      EXPECT_EQ(b.config.clock_mhz, options[i].clock_mhz);
    }
  }
  // The first and last stages add the embedding and the LM head: slower than a middle stage.
  const auto middle = microbatch_options(s.workload, s.partitions, s.frontiers, 1, true, Method::kMegatron, gpu);
  const auto first = microbatch_options(s.workload, s.partitions, s.frontiers, 0, true, Method::kMegatron, gpu);
  const auto last = microbatch_options(s.workload, s.partitions, s.frontiers, 3, true, Method::kMegatron, gpu);
  EXPECT_GT(first[0].time_s, middle[0].time_s);
  EXPECT_GT(last[0].time_s, first[0].time_s);  // the LM head is a large GEMM
}

TEST(KareusCompose, EachMethodComposesOnlyWhatItMayRun) {
  EmulatedGpu gpu(planner::find_gpu("a100-sxm"));
  const Small s = small_space(gpu);
  const auto megatron = microbatch_options(s.workload, s.partitions, s.frontiers, 0, true, Method::kMegatron, gpu);
  ASSERT_EQ(megatron.size(), 1u);
  EXPECT_EQ(megatron[0].clock_mhz, 1410);
  EXPECT_EQ(schedule_label(megatron[0], s.frontiers, true, s.partitions), "seq+seq");
  for (const auto& o : microbatch_options(s.workload, s.partitions, s.frontiers, 0, true, Method::kMegatronPerseus, gpu)) {
    EXPECT_EQ(schedule_label(o, s.frontiers, true, s.partitions), "seq+seq");
  }
  for (const auto& o : microbatch_options(s.workload, s.partitions, s.frontiers, 0, true, Method::kNanobatchPerseus, gpu)) {
    EXPECT_EQ(schedule_label(o, s.frontiers, true, s.partitions), "2s0-4+2s0-3");
  }
  // A profile round-trips through its CSV with the schedule as a knob column.
  const Profile profile = method_profile(s.workload, s.partitions, s.frontiers, Method::kKareus, gpu);
  const Profile read = Profile::parse_csv(profile_csv(profile), "kareus.csv");
  ASSERT_EQ(read.operations().size(), profile.operations().size());
  for (std::size_t i = 0; i < read.operations().size(); ++i) {
    ASSERT_EQ(read.operations()[i].measurements.size(), profile.operations()[i].measurements.size());
    for (std::size_t j = 0; j < read.operations()[i].measurements.size(); ++j) {
      EXPECT_EQ(read.operations()[i].measurements[j].knob, profile.operations()[i].measurements[j].knob);
      EXPECT_NEAR(read.operations()[i].measurements[j].time_s, profile.operations()[i].measurements[j].time_s, 1e-9);
    }
  }
}

TEST(KareusCompose, KareusFrontierIsAtLeastAsGoodAsEveryBaselines) {
  EmulatedGpu gpu(planner::find_gpu("a100-sxm"));
  const Small s = small_space(gpu);
  const Comparison c = compare(s.workload, s.partitions, s.frontiers, gpu);
  ASSERT_EQ(c.methods.size(), 4u);
  EXPECT_EQ(c.methods[0].solution.frontier.points.size(), 1u);  // Megatron-LM: one plan
  EXPECT_DOUBLE_EQ(c.time_reduction[0], 0.0);
  const MethodResult& kareus = c.methods[3];
  for (const MethodResult& r : c.methods) {
    EXPECT_LE(kareus.fastest_time_s, r.fastest_time_s * (1 + 1e-9)) << to_string(r.method);
    EXPECT_LE(kareus.least_energy_j, r.least_energy_j * (1 + 1e-6)) << to_string(r.method);
  }
  EXPECT_GE(c.iso_time_energy_reduction[3], c.iso_time_energy_reduction[2] - 1e-9);
  EXPECT_GT(c.energy_reduction[3], 0.0);
  EXPECT_GT(c.time_reduction[3], 0.0);
}

}  // namespace
}  // namespace perseus::kareus
