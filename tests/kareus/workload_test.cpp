// Kareus's partitions of a layer and the knob space of each, against closed forms.
#include <gtest/gtest.h>

#include <set>
#include <string>

#include "perseus/kareus/knob_space.hpp"
#include "perseus/kareus/workload.hpp"

namespace perseus::kareus {
namespace {

Workload llama(int tp, int cp, int mbs = 8, int seq = 4096) {
  return {planner::find_model("llama3.2-3b"), planner::find_gpu("a100-sxm"), tp, cp, 2, mbs, seq, 8};
}

std::string error_of(const Workload& w) {
  try {
    layer_partitions(w);
  } catch (const InputError& e) {
    return e.what();
  }
  return "(no InputError)";
}

TEST(KareusWorkload, TensorParallelLayerHasFourPartitionsOfClosedFormWork) {
  const std::vector<Partition> parts = layer_partitions(llama(8, 1));
  ASSERT_EQ(parts.size(), 4u);
  EXPECT_EQ(parts[0].name, "attention-allreduce");
  EXPECT_TRUE(parts[0].forward);
  EXPECT_EQ(parts[1].name, "mlp-allreduce");
  EXPECT_FALSE(parts[2].forward);
  EXPECT_EQ(parts[3].name, "attention-allreduce");
  // Llama 3.2 3B: hidden 3072, 24 heads of 128, 8 KV heads, ffn 8192 (SwiGLU); a nanobatch is
  // 4 sequences of 4096 tokens; TP 8 splits heads and ffn.
  const double tokens = 4 * 4096.0, h = 3072, a = 3072 / 8.0, kv = 8 * 128 / 8.0, ffn = 8192 / 8.0;
  const Kernel& qkv = parts[0].compute[1];
  EXPECT_EQ(qkv.name, "qkv");
  EXPECT_DOUBLE_EQ(qkv.flops, 2 * tokens * h * (a + 2 * kv));
  EXPECT_DOUBLE_EQ(parts[1].compute[1].flops, 2 * tokens * h * 2 * ffn);  // fc1: gate and up
  EXPECT_DOUBLE_EQ(parts[2].compute[0].flops, 2 * 2 * tokens * ffn * h);  // fc2's gradients: twice its forward
  // Ring all-reduce of the layer output: 2 (n-1)/n of the fp16 buffer.
  EXPECT_DOUBLE_EQ(parts[0].comm.bus_bytes, 2.0 * 7 / 8 * 2 * tokens * h);
  EXPECT_EQ(parts[0].per_microbatch, 2 * 14);  // two nanobatches x 28 layers / PP 2
  // The grouped memory-bound kernels are memory-bound, the GEMMs are not.
  const planner::GpuSpec& gpu = planner::find_gpu("a100-sxm");
  EXPECT_TRUE(parts[0].compute[0].memory_bound(gpu));
  EXPECT_FALSE(qkv.memory_bound(gpu));
  EXPECT_TRUE(parts[0].compute[2].memory_bound(gpu));
}

TEST(KareusWorkload, ContextParallelismFusesTheKvExchangeIntoTheAttentionCollective) {
  const std::vector<Partition> parts = layer_partitions(llama(4, 2));
  ASSERT_EQ(parts.size(), 4u);
  EXPECT_EQ(parts[0].name, "attention-kv-allgather+allreduce");
  EXPECT_EQ(parts[3].name, "attention-kv-reducescatter+allreduce");
  // Each GPU holds 2048 tokens of each sequence; it gathers the other rank's K and V.
  const double tokens = 4 * 2048.0, h = 3072, kv = 8 * 128 / 4.0;
  EXPECT_DOUBLE_EQ(parts[0].comm.bus_bytes, 2.0 * 3 / 4 * 2 * tokens * h + 1 * 2 * tokens * 2 * kv);
  EXPECT_DOUBLE_EQ(parts[1].comm.bus_bytes, 2.0 * 3 / 4 * 2 * tokens * h);
  // Attention spans the whole sequence: twice the local queries' keys.
  EXPECT_DOUBLE_EQ(parts[0].compute[3].flops, 2 * tokens * 4096 * (3072 / 4.0));
  // Context parallelism alone: only attention has a collective.
  const std::vector<Partition> cp_only = layer_partitions(llama(1, 2));
  ASSERT_EQ(cp_only.size(), 2u);
  EXPECT_EQ(cp_only[0].name, "attention-kv-allgather");
}

TEST(KareusWorkload, BadWorkloadsNameWhatIsWrong) {
  EXPECT_NE(error_of(llama(5, 1)).find("tensor parallelism 5 must divide"), std::string::npos);
  EXPECT_NE(error_of(llama(8, 1, 7)).find("microbatch size must be even"), std::string::npos);
  EXPECT_NE(error_of(llama(2, 3, 8, 4096)).find("context parallelism 3 must divide"), std::string::npos);
  EXPECT_NE(error_of(llama(8, 2)).find("spans more than a node"), std::string::npos);
  EXPECT_NE(error_of(llama(1, 1)).find("no collective"), std::string::npos);
  Workload pp = llama(8, 1);
  pp.pipeline_parallel = 3;
  EXPECT_NE(error_of(pp).find("must divide the 28 layers"), std::string::npos);
  Workload bert = llama(8, 1);
  bert.model = planner::find_model("bert-large");
  EXPECT_NE(error_of(bert).find("decoder-only"), std::string::npos);
  EXPECT_THROW(planner::find_model("llama9"), InputError);
}

TEST(KareusKnobSpace, CountsAndEnumeratesEveryConfigurationOnce) {
  const std::vector<Partition> parts = layer_partitions(llama(8, 1));
  const KnobSpace space = knob_space(planner::find_gpu("a100-sxm"), parts[0]);
  // 900..1410 MHz in 15 MHz steps: 35 clocks (the paper's count); 30 SM counts; 5 kernels give
  // 15 windows; plus the sequential execution at each clock.
  EXPECT_EQ(space.clocks().size(), 35u);
  EXPECT_EQ(space.clocks().front(), 900);
  EXPECT_EQ(space.clocks().back(), 1410);
  EXPECT_EQ(space.windows(), 15u);
  EXPECT_EQ(space.size(), 35u * (30 * 15 + 1));
  std::set<std::tuple<int, int, int, int>> seen;
  for (std::size_t i = 0; i < space.size(); ++i) {
    const Config c = space.at(i);
    ASSERT_EQ(space.index_of(c), i) << describe(c, parts[0]);
    seen.insert({c.clock_mhz, c.comm_sms, c.first, c.last});
    if (!c.sequential()) {
      EXPECT_LE(c.first, c.last);
      EXPECT_LT(c.last, 5);
    }
  }
  EXPECT_EQ(seen.size(), space.size());
  EXPECT_THROW(space.at(space.size()), InputError);
  EXPECT_THROW(space.index_of(Config{1400, 4, 0, 1}), InputError);  // not a clock of the space
  EXPECT_THROW(space.index_of(Config{1410, 31, 0, 1}), InputError);
  EXPECT_THROW(space.index_of(Config{1410, 4, 2, 5}), InputError);
  EXPECT_THROW(knob_space(planner::find_gpu("a100-sxm"), parts[0], 100), InputError);
  EXPECT_THROW(knob_space(planner::find_gpu("a100-sxm"), parts[0], 900, 200), InputError);
  EXPECT_EQ(describe(space.at(space.per_clock() - 1), parts[0]), "900 MHz, sequential");
  EXPECT_EQ(describe(Config{1410, 8, 1, 3}, parts[0]), "1410 MHz, 8 SMs, beside qkv..flash-attention");
}

}  // namespace
}  // namespace perseus::kareus
