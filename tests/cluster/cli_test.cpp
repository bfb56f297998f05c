// `perseus cluster ...` as a user runs it.
#include <fstream>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "command_output.hpp"
#include "temp_dir.hpp"

namespace {

perseus::testing::CommandOutput run(const std::string& args) {
  return perseus::testing::run_command(std::string(PERSEUS_BINARY) + " " + args);
}

TEST(ClusterCli, AllocatesRandomJobsOnGavelsMatrix) {
  const auto r = run("cluster allocate --random 30 --gpus k80:4,p100:4,v100:4 --json");
  ASSERT_EQ(r.status, 0) << r.out;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["gpu_types"], (nlohmann::json{"k80", "p100", "v100"}));
  ASSERT_EQ(j["jobs"].size(), 30u);
  std::vector<double> used(3, 0.0);
  for (const auto& job : j["jobs"])
    for (int k = 0; k < 3; ++k) used[k] += job["share"][k].get<double>();  // every random job uses one GPU
  for (double u : used) EXPECT_LE(u, 4.0 + 1e-6);
  EXPECT_GT(j["objective"].get<double>(), 0.0);
}

TEST(ClusterCli, ReadsAJobsFileAndNamesBadLines) {
  const perseus::testing::TempDir temp;
  const auto path = (temp.path() / "jobs.csv").string();
  std::ofstream(path) << "job,weight,steps\nResNet-50 (batch size 64) x1,1,1000\nA3C x1,2,500\n";
  const auto ok = run("cluster allocate --jobs " + path + " --policy makespan --gpus k80:1,v100:1 --csv");
  ASSERT_EQ(ok.status, 0) << ok.out;
  EXPECT_NE(ok.out.find("\"A3C x1\""), std::string::npos) << ok.out;
  std::ofstream(path) << "job,weight\nResNet-50 (batch size 64) x1,1\nGPT-5,1\n";
  const auto bad = run("cluster allocate --jobs " + path);
  EXPECT_NE(bad.status, 0);
  EXPECT_NE(bad.out.find(":3: unknown job type 'GPT-5'"), std::string::npos) << bad.out;
  const auto bad_gpus = run("cluster allocate --random 5 --gpus tpu:8");
  EXPECT_NE(bad_gpus.status, 0);
  EXPECT_NE(bad_gpus.out.find("unknown GPU type 'tpu'"), std::string::npos) << bad_gpus.out;
  const auto negative = run("cluster allocate --random 5 --gpus v100:-1");
  EXPECT_NE(negative.status, 0);
}

}  // namespace
