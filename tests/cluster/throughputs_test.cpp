#include <fstream>

#include <gtest/gtest.h>

#include "perseus/cluster/throughputs.hpp"
#include "temp_dir.hpp"

namespace perseus::cluster {
namespace {

const std::string kGavel = std::string(PERSEUS_SOURCE_DIR) + "/data/gavel/simulation_throughputs.json";

TEST(Throughputs, ReadsGavelsMatrix) {
  const ThroughputMatrix t = read_gavel_throughputs(kGavel);
  EXPECT_EQ(t.gpu_types, (std::vector<std::string>{"k80", "p100", "v100"}));
  const int m = t.job_index("ResNet-18 (batch size 16) x1");
  EXPECT_DOUBLE_EQ(t.at(m, t.gpu_index("K80")), 4.795294551566172);
  EXPECT_EQ(t.job_types[static_cast<std::size_t>(t.job_index("ResNet-50 (batch size 64) x4"))].scale_factor, 4);
  // Two ResNet-18 (batch size 16) jobs sharing a K80 each get 2.408 steps/s.
  EXPECT_DOUBLE_EQ(t.shared.at({m, m, t.gpu_index("k80")}).first, 2.4081728540044867);
  // The V100 is the fastest for ResNet-50 by far, A3C gains little (Fig. 5.1).
  const int resnet = t.job_index("ResNet-50 (batch size 64) x1");
  EXPECT_GT(t.at(resnet, t.gpu_index("v100")) / t.at(resnet, t.gpu_index("k80")), 5.0);
  const int with_unconsolidated = read_gavel_throughputs(kGavel, true).num_gpu_types();
  EXPECT_EQ(with_unconsolidated, 6);
}

TEST(Throughputs, ReadsACsvAndNamesBadLines) {
  const perseus::testing::TempDir temp;
  const auto path = (temp.path() / "t.csv").string();
  std::ofstream(path) << "job,scale_factor,gpu,steps_per_s\n\"GPT small\",1,a100,3.5\nGPT small,1,h100,7\nBERT,2,a100,1\n";
  const ThroughputMatrix t = read_throughput_csv(path);
  EXPECT_EQ(t.num_job_types(), 2);
  EXPECT_DOUBLE_EQ(t.at(t.job_index("GPT small x1"), t.gpu_index("h100")), 7.0);
  EXPECT_DOUBLE_EQ(t.at(t.job_index("BERT x2"), t.gpu_index("h100")), 0.0);
  std::ofstream(path) << "job,scale_factor,gpu,steps_per_s\nGPT,1,a100,fast\n";
  try {
    read_throughput_csv(path);
    ADD_FAILURE();
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find(":2: column 'steps_per_s'"), std::string::npos) << e.what();
  }
  std::ofstream(path) << "job,scale_factor,gpu,steps_per_s\nGPT,1,a100,0\n";
  try {
    read_throughput_csv(path);
    ADD_FAILURE();
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("no throughput on any GPU type"), std::string::npos) << e.what();
  }
  EXPECT_THROW(read_gavel_throughputs(path), InputError);  // not JSON
}

TEST(Throughputs, ACsvWithEnergyHasOperatingPointsFastestFirst) {
  const perseus::testing::TempDir temp;
  const auto path = (temp.path() / "t.csv").string();
  std::ofstream(path) << "job,scale_factor,gpu,steps_per_s,joules_per_step\n"
                         "GPT,1,a100,2.5,300\nGPT,1,a100,3,400\nGPT,1,h100,6,200\nBERT,1,h100,10,50\n";
  const ThroughputMatrix t = read_throughput_csv(path);
  ASSERT_TRUE(t.has_energy());
  const int gpt = t.job_index("GPT x1"), a100 = t.gpu_index("a100"), h100 = t.gpu_index("h100");
  EXPECT_DOUBLE_EQ(t.at(gpt, a100), 3.0);  // the fastest point
  ASSERT_EQ(t.operating_points[gpt][a100].size(), 2u);
  EXPECT_DOUBLE_EQ(t.operating_points[gpt][a100][1].joules_per_step, 300.0);
  EXPECT_TRUE(t.operating_points[t.job_index("BERT x1")][a100].empty());
  EXPECT_DOUBLE_EQ(t.operating_points[gpt][h100].front().joules_per_step, 200.0);
  // Written and read back.
  std::ofstream(path) << throughput_csv(t);
  const ThroughputMatrix back = read_throughput_csv(path);
  EXPECT_EQ(back.steps_per_s, t.steps_per_s);
  EXPECT_DOUBLE_EQ(back.operating_points[gpt][a100][1].steps_per_s, 2.5);
  // Without energy figures a repeated cell is an error naming both lines.
  std::ofstream(path) << "job,scale_factor,gpu,steps_per_s\nGPT,1,a100,3\nGPT,1,a100,2\n";
  try {
    read_throughput_csv(path);
    ADD_FAILURE();
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find(":3: GPT x1 on a100 is given again (first on line 2)"), std::string::npos) << e.what();
  }
  std::ofstream(path) << "job,scale_factor,gpu,steps_per_s,joules_per_step\nGPT,1,a100,3,0\n";
  EXPECT_THROW(read_throughput_csv(path), InputError);
  // Without energy, a point is the throughput at no known energy.
  std::ofstream(path) << "job,scale_factor,gpu,steps_per_s\nGPT,1,a100,3\n";
  EXPECT_FALSE(read_throughput_csv(path).has_energy());
}

}  // namespace
}  // namespace perseus::cluster
