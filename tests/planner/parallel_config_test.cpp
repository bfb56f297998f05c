// The PTD-P configuration sweep: memory and communication against closed forms, and the
// published guidance (Narayanan et al., SC'21): tensor parallelism within a node, pipeline
// parallelism across nodes.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include "perseus/model/errors.hpp"
#include "perseus/planner/catalogue.hpp"
#include "perseus/planner/parallel_config.hpp"

namespace perseus::planner {
namespace {

ParallelConfig config(int t, int p, int d, int b, bool recompute = false,
                      ScheduleKind schedule = ScheduleKind::k1F1B, int v = 1) {
  ParallelConfig c;
  c.tensor = t;
  c.pipeline = p;
  c.data = d;
  c.microbatch_size = b;
  c.recompute = recompute;
  c.schedule = schedule;
  c.chunks = v;
  return c;
}

TEST(Configuration, MemoryIsTheClosedForm) {
  const ModelSpec& model = find_model("gpt3-175b");
  const ClusterSpec cluster{&find_gpu("a100-sxm"), 1024};
  SweepOptions options;
  options.global_batch = 1536;
  const ConfigEstimate e = estimate_configuration(model, cluster, config(8, 16, 8, 1), options);
  ASSERT_EQ(e.config.microbatches, 1536 / 8);
  ASSERT_EQ(e.memory.stage, 0);  // the first stage stashes the most (p microbatches)
  const double h = 12288, s = 2048, a = 96, t = 8, V = 50257;
  const int blocks = e.boundaries[1] - 1;  // stage 0: the embedding and `blocks` layers
  // Weights, FP32 gradients and Adam: 18 bytes per parameter of the GPU's shard.
  const double params = blocks * (12 * h * h / t + 7 * h / t + 6 * h) + std::ceil(V / t) * h + s * h;
  EXPECT_NEAR((e.memory.weights_bytes + e.memory.gradients_bytes + e.memory.optimizer_bytes) / (18 * params), 1.0,
              1e-3);
  // 1F1B: p microbatches in flight on stage 0, each sbh(10 + 24/t + 5as/(ht)) per layer.
  const double per_layer = s * h * (10 + 24 / t + 5 * a * s / (h * t));
  EXPECT_EQ(e.memory.activation_stashes, 16);
  EXPECT_NEAR(e.memory.activations_bytes / (16 * blocks * per_layer), 1.0, 0.01);
  // Full recomputation keeps only each layer's 2sbh input per microbatch (plus one layer).
  const ConfigEstimate r = estimate_configuration(model, cluster, config(8, 16, 8, 1, true), options);
  EXPECT_NEAR(r.memory.activations_bytes, 16 * blocks * 2 * s * h + per_layer, 0.02 * r.memory.activations_bytes);
  EXPECT_EQ(r.config.schedule, ScheduleKind::k1F1BEarlyRecompute);
  // Bubble and scatter/gather P2P volume: 2 directions x m microbatches x sbh*2/t bytes.
  EXPECT_DOUBLE_EQ(e.bubble_fraction, 15.0 / 192.0);
  EXPECT_DOUBLE_EQ(e.pipeline_bytes, 2.0 * 192 * 2 * s * h / t);
  EXPECT_TRUE(e.tensor_within_node);
  EXPECT_TRUE(e.pipeline_across_nodes);
}

TEST(Configuration, WeightVersionsOfTheAsynchronousSchedules) {
  const ModelSpec& model = find_model("gpt3-2.7b");
  const ClusterSpec cluster{&find_gpu("a100-sxm"), 8};
  SweepOptions options;
  options.global_batch = 64;
  const ConfigEstimate flush = estimate_configuration(model, cluster, config(1, 4, 2, 1), options);
  const ConfigEstimate two_bw =
      estimate_configuration(model, cluster, config(1, 4, 2, 1, false, ScheduleKind::kPipeDream2BW), options);
  const ConfigEstimate pipedream =
      estimate_configuration(model, cluster, config(1, 4, 2, 1, false, ScheduleKind::kPipeDream), options);
  EXPECT_EQ(two_bw.memory.weight_versions, 2);
  EXPECT_EQ(pipedream.memory.weight_versions, 4);
  EXPECT_NEAR(two_bw.memory.weights_bytes, 2.0 * flush.memory.weights_bytes, 1e-6 * flush.memory.weights_bytes);
  EXPECT_NEAR(pipedream.memory.weights_bytes, 4.0 * flush.memory.weights_bytes, 1e-6 * flush.memory.weights_bytes);
  EXPECT_DOUBLE_EQ(two_bw.memory.activations_bytes, flush.memory.activations_bytes);
  // No flush: no bubble, and the iteration is m times the bottleneck stage.
  EXPECT_EQ(two_bw.bubble_fraction, 0.0);
  EXPECT_LT(two_bw.pipeline_s, flush.pipeline_s);
  EXPECT_NEAR(flush.pipeline_s / two_bw.pipeline_s, (32 + 3.0) / 32, 1e-9);
}

TEST(Configuration, TwoBwNeedsAtLeastAsManyMicrobatchesAsStages) {
  // 2BW is defined for m >= p; below p - 1 the two buffers would not even hold the versions in
  // flight (what the update rule's simulation and memory_footprint say).
  const ModelSpec& model = find_model("gpt3-2.7b");
  const ClusterSpec cluster{&find_gpu("a100-sxm"), 8};
  for (int batch : {2, 4, 6, 8, 16}) {
    SweepOptions options;
    options.global_batch = batch;
    const int m = batch / 2;  // d = 2, b = 1
    const ParallelConfig c = config(1, 4, 2, 1, false, ScheduleKind::kPipeDream2BW);
    if (m < 4) {
      EXPECT_EQ(memory_footprint(ScheduleKind::kPipeDream2BW, 4, m).front().weight_versions > 2, m < 3);
      EXPECT_THROW(estimate_configuration(model, cluster, c, options), InputError) << "m=" << m;
    } else {
      EXPECT_EQ(estimate_configuration(model, cluster, c, options).memory.weight_versions, 2);
    }
    options.schedules = {ScheduleKind::kPipeDream2BW};
    try {
      for (const ConfigEstimate& e : sweep_configurations(model, cluster, options)) {
        EXPECT_GE(e.config.microbatches, e.config.pipeline) << describe(e.config);
        EXPECT_EQ(e.memory.weight_versions, 2);
      }
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find("PipeDream-2BW with fewer microbatches per update than stages"),
                std::string::npos)
          << e.what();
    }
  }
}

TEST(Configuration, AsynchronousSchedulesSweepRecomputation) {
  const ModelSpec& model = find_model("gpt3-2.7b");
  const ClusterSpec cluster{&find_gpu("a100-sxm"), 8};
  SweepOptions options;
  options.global_batch = 64;
  for (ScheduleKind schedule : {ScheduleKind::kPipeDream, ScheduleKind::kPipeDream2BW}) {
    options.schedules = {schedule};
    const auto all = sweep_configurations(model, cluster, options);
    const auto with = std::count_if(all.begin(), all.end(), [](const ConfigEstimate& e) { return e.config.recompute; });
    EXPECT_EQ(2 * with, static_cast<long>(all.size())) << to_string(schedule);  // every valid one, both ways
    // Recomputation keeps the schedule, stashes only layer inputs and costs a forward per microbatch.
    const ConfigEstimate plain = estimate_configuration(model, cluster, config(1, 4, 2, 1, false, schedule), options);
    const ConfigEstimate recompute = estimate_configuration(model, cluster, config(1, 4, 2, 1, true, schedule), options);
    EXPECT_EQ(recompute.config.schedule, schedule);
    EXPECT_LT(recompute.memory.activations_bytes, plain.memory.activations_bytes);
    EXPECT_GT(recompute.pipeline_s, plain.pipeline_s);
    EXPECT_EQ(recompute.memory.weight_versions, plain.memory.weight_versions);
    EXPECT_EQ(describe(recompute.config), describe(plain.config) + " recompute");
  }
  // The recomputing 1F1B says so once.
  EXPECT_EQ(describe(config(1, 4, 2, 1, true, ScheduleKind::k1F1BEarlyRecompute)), "t=1 p=4 d=2 b=1 m=1 1f1b-recompute");
}

TEST(Configuration, NoValidConfigurationSaysWhyAndWhatWouldWork) {
  const ModelSpec& model = find_model("gpt3-13b");  // 40 heads, 40 blocks + embedding + head = 42 layers
  const int layers = static_cast<int>(model_layers(model, Workload{}).size());
  ASSERT_EQ(layers, 42);
  SweepOptions options;
  options.global_batch = 1024;
  auto error_of = [&](int gpus, const SweepOptions& o) -> std::string {
    try {
      sweep_configurations(model, ClusterSpec{&find_gpu("a100-sxm"), gpus}, o);
    } catch (const InputError& e) {
      return e.what();
    }
    return "(valid)";
  };
  // 64 stages on 64 GPUs: the cause is the layer count, every candidate (4 microbatch sizes x
  // with and without recomputation) fails on it, not the heads (t = 1 is the only degree left).
  SweepOptions deep = options;
  deep.pipeline = 64;
  const std::string too_deep = error_of(64, deep);
  const std::size_t candidates = options.microbatch_sizes.size() * options.recompute.size();
  EXPECT_NE(too_deep.find(std::to_string(candidates) + " configurations with more pipeline stages than gpt3-13b's " +
                          std::to_string(layers) + " layers"),
            std::string::npos)
      << too_deep;
  EXPECT_EQ(too_deep.find("heads"), std::string::npos) << too_deep;
  EXPECT_NE(too_deep.find("p*v <= " + std::to_string(layers)), std::string::npos) << too_deep;
  EXPECT_NE(too_deep.find("without p=64, these 64 GPUs (t="), std::string::npos) << too_deep;

  // 63 GPUs: t must divide 40 heads (only 1 of 63's divisors does), d = 63/p must divide the
  // batch, p at most 42: nothing is valid. The nearest GPU counts that are, by brute force.
  const std::string odd = error_of(63, options);
  for (const char* cause : {"attention heads", "does not divide the global batch 1024", "42 layers"}) {
    EXPECT_NE(odd.find(cause), std::string::npos) << cause << " in " << odd;
  }
  EXPECT_NE(odd.find("t in {1}"), std::string::npos) << odd;
  int below = 62, above = 64;
  while (error_of(below, options) != "(valid)") --below;
  while (error_of(above, options) != "(valid)") ++above;
  EXPECT_NE(odd.find(std::to_string(below) + " GPUs (t="), std::string::npos) << odd;
  if (above - 63 == 63 - below) {
    EXPECT_NE(odd.find(std::to_string(above) + " GPUs (t="), std::string::npos) << odd;
  }
  // The suggested global batch is valid on these GPUs, and none nearer is.
  const auto at = odd.find("--global-batch ");
  ASSERT_NE(at, std::string::npos) << odd;
  const int suggested = std::stoi(odd.substr(at + 15));
  SweepOptions changed = options;
  changed.global_batch = suggested;
  EXPECT_EQ(error_of(63, changed), "(valid)");
  for (int batch = 1024 - std::abs(suggested - 1024) + 1; batch < 1024 + std::abs(suggested - 1024); ++batch) {
    changed.global_batch = batch;
    EXPECT_NE(error_of(63, changed), "(valid)") << batch;
  }
}

TEST(Configuration, InterleavingShrinksTheBubbleAndGrowsTheStash) {
  const ModelSpec& model = find_model("gpt3-13b");
  const ClusterSpec cluster{&find_gpu("a100-sxm"), 64};
  SweepOptions options;
  options.global_batch = 256;
  const ConfigEstimate plain = estimate_configuration(model, cluster, config(8, 4, 2, 1), options);
  const ConfigEstimate inter = estimate_configuration(
      model, cluster, config(8, 4, 2, 1, false, ScheduleKind::kInterleaved1F1B, 2), options);
  EXPECT_DOUBLE_EQ(inter.bubble_fraction, plain.bubble_fraction / 2);
  // The share of the iteration the bubble takes stays below 1 even with fewer microbatches
  // than stages; Megatron's bubble/ideal does not.
  EXPECT_DOUBLE_EQ(plain.bubble_share(), plain.bubble_fraction / (1.0 + plain.bubble_fraction));
  // With recomputation the interleaved schedule is the kind whose DAG holds the recomputations.
  const ConfigEstimate inter_recompute = estimate_configuration(
      model, cluster, config(8, 4, 2, 1, true, ScheduleKind::kInterleaved1F1B, 2), options);
  EXPECT_EQ(inter_recompute.config.schedule, ScheduleKind::kInterleaved1F1BRecompute);
  EXPECT_EQ(describe(inter_recompute.config), "t=8 p=4 d=2 b=1 m=128 interleaved-1f1b-recompute v=2");
  EXPECT_LT(inter_recompute.memory.activations_bytes, inter.memory.activations_bytes);
  EXPECT_GT(inter.memory.activations_bytes, plain.memory.activations_bytes);
  EXPECT_GT(inter.pipeline_bytes, plain.pipeline_bytes);  // v times the P2P traffic
  EXPECT_THROW(estimate_configuration(model, cluster, config(8, 4, 2, 1, false, ScheduleKind::kInterleaved1F1B, 1),
                                      options),
               InputError);
}

// Megatron-LM's rank order puts pipeline neighbours t*d ranks apart: a pipeline crosses the
// nodes of 8 GPUs at exactly the hops where (a brute-force check over every pipeline) some pair
// of neighbours sits on different nodes; tensor groups that do not divide a node straddle two.
TEST(Configuration, PlacementCountsTheHopsThatCrossNodes) {
  const ModelSpec& model = find_model("gpt3-175b");
  const GpuSpec& gpu = find_gpu("a100-sxm");
  ASSERT_EQ(gpu.gpus_per_node, 8);
  SweepOptions options;
  options.global_batch = 1536;
  struct Case {
    int t, p, d;
  };
  for (const Case& c : {Case{1, 64, 1}, Case{2, 8, 1}, Case{8, 4, 1}, Case{1, 8, 1}, Case{4, 16, 2}, Case{2, 4, 2},
                        Case{3, 3, 1}}) {
    const int gpus = c.t * c.p * c.d, stride = c.t * c.d;
    const ConfigEstimate e = estimate_configuration(model, ClusterSpec{&gpu, gpus}, config(c.t, c.p, c.d, 1, true),
                                                    options);
    int crossing = 0;
    for (int hop = 0; hop + 1 < c.p; ++hop) {
      bool crosses = false;
      for (int first = 0; first < stride; ++first) {
        crosses |= (first + hop * stride) / 8 != (first + (hop + 1) * stride) / 8;
      }
      crossing += crosses;
    }
    bool tensor_straddles = false;
    for (int group = 0; group * c.t < gpus; ++group) tensor_straddles |= (group * c.t) / 8 != (group * c.t + c.t - 1) / 8;
    EXPECT_EQ(e.pipeline_hops_across, crossing) << c.t << " " << c.p << " " << c.d;
    EXPECT_EQ(e.pipeline_across_nodes, crossing > 0) << c.t << " " << c.p << " " << c.d;
    EXPECT_EQ(e.tensor_within_node, !tensor_straddles) << c.t << " " << c.p << " " << c.d;
  }
  // One pipeline of 64 stages on 8 nodes: 7 of its 63 hops cross, and they cost the network's
  // bandwidth, so it is slower than the same pipeline priced all on NVLink would be.
  const ConfigEstimate deep =
      estimate_configuration(model, ClusterSpec{&gpu, 64}, config(1, 64, 1, 1, true), options);
  EXPECT_EQ(deep.pipeline_hops_across, 7);
}

// A configuration fits in the GPU's memory less the headroom: 175B on 1,024 A100s without
// recomputation needs 78.6 GiB at t=8 p=16, which fits with no headroom and not with 5%.
TEST(Configuration, FitsLeaveTheHeadroomFree) {
  const ModelSpec& model = find_model("gpt3-175b");
  const GpuSpec& gpu = find_gpu("a100-sxm");
  for (double headroom : {0.0, 0.05, 0.2}) {
    SweepOptions options;
    options.global_batch = 1536;
    options.memory.headroom = headroom;
    const ConfigEstimate e = estimate_configuration(model, ClusterSpec{&gpu, 1024}, config(8, 16, 8, 1), options);
    EXPECT_DOUBLE_EQ(e.memory.capacity_bytes, gpu.memory_bytes * (1.0 - headroom));
    EXPECT_EQ(e.fits, e.memory.total_bytes <= gpu.memory_bytes * (1.0 - headroom)) << headroom;
    const auto all = sweep_configurations(model, ClusterSpec{&gpu, 1024}, options);
    for (const ConfigEstimate& c : all) {
      if (c.fits) {
        EXPECT_LE(c.memory.total_bytes, gpu.memory_bytes * (1.0 - headroom)) << describe(c.config);
      }
    }
  }
  SweepOptions none, some;
  none.global_batch = some.global_batch = 1536;
  none.memory.headroom = 0.0;
  const ConfigEstimate tight = estimate_configuration(model, ClusterSpec{&gpu, 1024}, config(8, 16, 8, 1), none);
  ASSERT_GT(tight.memory.total_bytes, 0.95 * gpu.memory_bytes);
  EXPECT_TRUE(tight.fits);
  EXPECT_FALSE(estimate_configuration(model, ClusterSpec{&gpu, 1024}, config(8, 16, 8, 1), some).fits);
}

TEST(Configuration, ReproducesThePublishedGuidance) {
  // GPT-3 175B on 1024 A100s (128 nodes of 8), batch 1536.
  const ModelSpec& model = find_model("gpt3-175b");
  const ClusterSpec cluster{&find_gpu("a100-sxm"), 1024};
  SweepOptions options;
  options.global_batch = 1536;
  const auto all = sweep_configurations(model, cluster, options);
  ASSERT_TRUE(all.front().fits);
  const ConfigEstimate& best = all.front();
  // Tensor parallelism up to the node size, pipeline parallelism across nodes.
  EXPECT_EQ(best.config.tensor, 8);
  EXPECT_GT(best.config.pipeline, 1);
  EXPECT_TRUE(best.pipeline_across_nodes);
  // Any tensor degree beyond a node is slower than the best that keeps it inside one.
  double best_beyond_node = std::numeric_limits<double>::infinity();
  for (const ConfigEstimate& e : all) {
    if (e.fits && e.config.tensor > 8) best_beyond_node = std::min(best_beyond_node, e.iteration_time_s);
  }
  EXPECT_GT(best_beyond_node, 1.2 * best.iteration_time_s);
  // Without enough model parallelism it does not fit: 175B needs t*p >= 16 even with recompute.
  for (const ConfigEstimate& e : all) {
    if (e.config.tensor * e.config.pipeline < 16) {
      EXPECT_FALSE(e.fits) << describe(e.config);
    }
  }
  // Sorted: everything that fits first, fastest first.
  for (std::size_t i = 1; i < all.size(); ++i) {
    if (all[i].fits) {
      ASSERT_TRUE(all[i - 1].fits);
      EXPECT_LE(all[i - 1].iteration_time_s, all[i].iteration_time_s);
    }
  }

  // A 13B model on 64 GPUs also keeps tensor parallelism inside the node.
  SweepOptions small;
  small.global_batch = 1024;
  const auto thirteen = sweep_configurations(find_model("gpt3-13b"), ClusterSpec{&find_gpu("a100-sxm"), 64}, small);
  EXPECT_LE(thirteen.front().config.tensor, 8);
  EXPECT_TRUE(thirteen.front().fits);
}

TEST(Configuration, DataParallelAllReduceIsTheRingVolume) {
  // Two data-parallel replicas inside one node: 2(d-1)/d * 4-byte gradients over the node's
  // bus bandwidth.
  const ModelSpec& model = find_model("bert-large");
  const GpuSpec& gpu = find_gpu("a100-sxm");
  SweepOptions options;
  options.global_batch = 64;
  const ConfigEstimate e = estimate_configuration(model, ClusterSpec{&gpu, 2}, config(1, 1, 2, 8), options);
  double params = 0.0;
  for (const LayerCost& layer : model_layers(model, Workload{8, 1, 0, false, false})) params += layer.parameters;
  params -= model_layers(model, Workload{})[25].tied_copy_parameters;  // the tied MLM decoder
  EXPECT_NEAR(e.data_bytes, 2.0 * 1 / 2 * 4.0 * params, 1.0);
  EXPECT_NEAR(e.data_parallel_s, e.data_bytes / gpu.intra_node_busbw, 1e-12);
  EXPECT_EQ(e.bubble_fraction, 0.0);
  EXPECT_EQ(e.config.microbatches, 4);
}

// Megatron-LM's split (as the published runs ran): equal Transformer layer counts per virtual
// stage, the embedding with the first and the head with the last; p*v must divide the layers.
// Against the time-balanced split it can only lengthen the longest stage, and the head's stage
// is the longest.
TEST(Configuration, MegatronSplitGivesEveryVirtualStageTheSameLayers) {
  // 24 Transformer layers of hidden 2304 (the published 1.7B run's) with a vocabulary of 256,000
  // words: the head's logits cost several layers.
  const ModelSpec model = resolve_model("", ModelShape{24, 2304, 24, 2048, 256000});
  const ClusterSpec cluster{&find_gpu("a100-sxm"), 32};
  SweepOptions balanced;
  balanced.global_batch = 512;
  SweepOptions megatron = balanced;
  megatron.megatron_layer_split = true;
  const ParallelConfig c = config(1, 4, 8, 1, true);
  const ConfigEstimate even = estimate_configuration(model, cluster, c, megatron);
  const ConfigEstimate free = estimate_configuration(model, cluster, c, balanced);
  ASSERT_EQ(even.boundaries.size(), 5u);  // p + 1
  const int n = even.boundaries.back();
  EXPECT_EQ(n, 26);                       // embedding, 24 layers, head
  EXPECT_EQ(even.boundaries[1], 1 + 6);   // the embedding and 6 layers
  for (int k = 1; k + 1 < 4; ++k) EXPECT_EQ(even.boundaries[k + 1] - even.boundaries[k], 6) << k;
  EXPECT_EQ(n - even.boundaries[3], 6 + 1);  // 6 layers and the head
  EXPECT_LT(n - free.boundaries[3], 6 + 1);  // balancing moves layers off the head's stage
  EXPECT_GT(even.stage_forward_s + even.stage_backward_s, free.stage_forward_s + free.stage_backward_s);
  EXPECT_GT(even.iteration_time_s, free.iteration_time_s);

  // p*v = 4*4 does not divide 24: invalid with the split, a valid (balanced) configuration without.
  const ParallelConfig sixteen = config(1, 4, 8, 1, true, ScheduleKind::kInterleaved1F1B, 4);
  EXPECT_NO_THROW(estimate_configuration(model, cluster, sixteen, balanced));
  try {
    estimate_configuration(model, cluster, sixteen, megatron);
    ADD_FAILURE() << "expected an InputError";
  } catch (const InputError& error) {
    EXPECT_NE(std::string(error.what()).find("p*v = 16 to divide"), std::string::npos) << error.what();
  }
  // The sweep leaves such configurations out, and says why when none is left.
  megatron.tensor = 1;
  megatron.pipeline = 4;
  megatron.schedules = {ScheduleKind::kInterleaved1F1B};
  megatron.interleave_chunks = {4, 5};
  try {
    sweep_configurations(model, cluster, megatron);
    ADD_FAILURE() << "expected an InputError";
  } catch (const InputError& error) {
    EXPECT_NE(std::string(error.what()).find("Megatron-LM's split"), std::string::npos) << error.what();
  }
  megatron.interleave_chunks = {3, 4};
  for (const ConfigEstimate& e : sweep_configurations(model, cluster, megatron)) EXPECT_EQ(e.config.chunks, 3);
}

TEST(Configuration, ClearErrorsForImpossibleConfigurations) {
  const ModelSpec& model = find_model("gpt3-13b");
  const ClusterSpec cluster{&find_gpu("a100-sxm"), 64};
  SweepOptions options;
  options.global_batch = 1024;
  EXPECT_THROW(estimate_configuration(model, cluster, config(8, 4, 4, 1), options), InputError);  // 128 != 64
  EXPECT_THROW(estimate_configuration(model, cluster, config(8, 8, 1, 3), options), InputError);  // 1024 % 3
  // Wide-ResNet-50 has 18 layers and no tensor parallelism: with a batch of 7, d must be 1 or 7,
  // so 64 GPUs would need a 64- or 9.1-stage pipeline.
  options.global_batch = 7;
  EXPECT_THROW(sweep_configurations(find_model("wide-resnet50-8"), cluster, options), InputError);
}

}  // namespace
}  // namespace perseus::planner
