// `perseus kareus space` and `perseus kareus frontier`, run as a user runs them.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "command_output.hpp"

namespace {

namespace fs = std::filesystem;

using CliRun = perseus::testing::CommandOutput;

CliRun perseus(const std::string& args) { return perseus::testing::run_command(std::string(PERSEUS_BINARY) + " " + args); }

TEST(KareusCli, SpaceCountsEachPartitionsConfigurations) {
  const CliRun help = perseus("kareus space --help");
  EXPECT_EQ(help.status, 0);
  EXPECT_NE(help.out.find("Example:"), std::string::npos);
  const CliRun run = perseus("kareus space --model llama3.2-3b --tp 8 --json");
  ASSERT_EQ(run.status, 0) << run.out;
  const nlohmann::json j = nlohmann::json::parse(run.out);
  ASSERT_EQ(j["partitions"].size(), 4u);
  std::size_t sum = 0;
  for (const auto& p : j["partitions"]) {
    const std::size_t windows = p["kernels"].size() * (p["kernels"].size() + 1) / 2;
    EXPECT_EQ(p["configurations"].get<std::size_t>(), 35 * (30 * windows + 1)) << p["name"];
    sum += p["configurations"].get<std::size_t>();
  }
  EXPECT_EQ(j["configurations"].get<std::size_t>(), sum);
  const CliRun text = perseus("kareus space --model qwen3-1.7b --tp 4 --cp 2");
  ASSERT_EQ(text.status, 0) << text.out;
  EXPECT_NE(text.out.find("kv-allgather+allreduce"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("85,050"), std::string::npos);
}

TEST(KareusCli, FrontierWritesSamplesAndFrontsAndRefusesBadInput) {
  const fs::path dir = fs::temp_directory_path() / ("perseus-kareus-" + std::to_string(std::random_device{}()));
  const CliRun run = perseus("kareus frontier --model qwen3-1.7b --tp 8 --partition 0 --min-mhz 1200 --out " +
                             (dir / "out").string() + " -q");
  ASSERT_EQ(run.status, 0) << run.out;
  EXPECT_NE(run.out.find("forward-attention-allreduce"), std::string::npos) << run.out;
  std::ifstream samples(dir / "out" / "samples.csv");
  std::string line;
  std::size_t rows = 0;
  std::getline(samples, line);
  EXPECT_EQ(line, "partition,index,clock_mhz,comm_sms,first,last,time_s,dynamic_j,static_j,total_j,effective_mhz");
  while (std::getline(samples, line)) ++rows;
  EXPECT_EQ(rows, 15u * (30 * 15 + 1));  // 1200..1410 MHz: 15 clocks
  const nlohmann::json j = nlohmann::json::parse(std::ifstream(dir / "out" / "frontier.json"));
  EXPECT_GT(j["partitions"][0]["frontier_points"].get<int>(), 2);
  fs::remove_all(dir);

  const CliRun model = perseus("kareus space --model gpt9");
  EXPECT_EQ(model.status, 2);
  EXPECT_NE(model.out.find("unknown model 'gpt9'"), std::string::npos) << model.out;
  const CliRun tp = perseus("kareus space --tp 5");
  EXPECT_EQ(tp.status, 2);
  EXPECT_NE(tp.out.find("tensor parallelism 5 must divide"), std::string::npos) << tp.out;
  const CliRun sms = perseus("kareus space --max-sms 200");
  EXPECT_EQ(sms.status, 2);
  EXPECT_NE(sms.out.find("1..108"), std::string::npos) << sms.out;
  const CliRun partition = perseus("kareus frontier --partition bogus -q");
  EXPECT_EQ(partition.status, 2);
  EXPECT_NE(partition.out.find("no such partition"), std::string::npos) << partition.out;
}

TEST(KareusCli, CompareSolvesEveryMethodsFrontierAndWritesProfilesPerseusReads) {
  const fs::path dir = fs::temp_directory_path() / ("perseus-kareus-cmp-" + std::to_string(std::random_device{}()));
  const CliRun run = perseus("kareus compare --model qwen3-1.7b --tp 8 --pp 2 --microbatch-size 4 --seq-len 2048 "
                             "--microbatches 4 --min-mhz 1200 --out " + (dir / "cmp").string() + " --json -q");
  ASSERT_EQ(run.status, 0) << run.out;
  const nlohmann::json j = nlohmann::json::parse(run.out);
  ASSERT_EQ(j["methods"].size(), 4u);
  EXPECT_EQ(j["methods"][0]["method"], "Megatron-LM");
  EXPECT_EQ(j["methods"][3]["method"], "Kareus");
  EXPECT_GE(j["methods"][3]["energy_reduction_vs_megatron"].get<double>(),
            j["methods"][1]["energy_reduction_vs_megatron"].get<double>());
  EXPECT_GT(j["methods"][3]["time_reduction_vs_megatron"].get<double>(), 0.0);
  // Kareus's profile, with its schedule knob column, goes into perseus optimize as it is.
  const fs::path profile = dir / "cmp" / "profile-kareus.csv";
  ASSERT_TRUE(fs::exists(profile));
  const CliRun optimize = perseus("optimize --profile " + profile.string() +
                                  " --microbatches 4 --p-blocking 83.64 --unit-time 0.0001 --out " + (dir / "opt").string() + " -q");
  EXPECT_EQ(optimize.status, 0) << optimize.out;
  std::ifstream head(profile);
  std::string header;
  std::getline(head, header);
  EXPECT_EQ(header, "stage,instruction,frequency,schedule,time,energy");
  // The four frontiers on one plot, and in perseus report.
  std::ifstream svg(dir / "cmp" / "frontiers.svg");
  std::stringstream plot;
  plot << svg.rdbuf();
  EXPECT_NE(plot.str().find("class=\"series kareus\""), std::string::npos);
  EXPECT_NE(plot.str().find("class=\"series megatron-lm\""), std::string::npos);
  const CliRun report = perseus("report --profile " PERSEUS_SOURCE_DIR "/data/profiles/bloom-176b+a100-sxm.csv "
                                "--microbatches 12 --p-blocking 83.64 -q --out " + (dir / "r.html").string() +
                                " --kareus " + (dir / "cmp").string());
  ASSERT_EQ(report.status, 0) << report.out;
  std::ifstream html(dir / "r.html");
  std::stringstream page;
  page << html.rdbuf();
  EXPECT_NE(page.str().find("Kareus: qwen3-1.7b on a100-sxm, the four methods"), std::string::npos);
  EXPECT_NE(page.str().find("tradeoff-curves"), std::string::npos);
  fs::remove_all(dir);
}

TEST(KareusCli, AnExternalEvaluatorThatCrashesLosesNothingAndTheRunResumes) {
  const fs::path dir = fs::temp_directory_path() / ("perseus-kareus-ext-" + std::to_string(std::random_device{}()));
  fs::create_directories(dir);
  const std::string fake = "/usr/bin/python3 " PERSEUS_SOURCE_DIR "/tests/kareus/fake_evaluator.py";
  const std::string flags = "kareus frontier --model qwen3-1.7b --tp 8 --partition 1 --min-mhz 1380 --max-sms 4 --samples " +
                            (dir / "samples.csv").string() + " -q --evaluator ";
  const CliRun crash = perseus(flags + "'" + fake + " --crash-after 40'");
  EXPECT_EQ(crash.status, 2) << crash.out;
  EXPECT_NE(crash.out.find("ended without answering"), std::string::npos) << crash.out;
  EXPECT_NE(crash.out.find("40 samples of forward-mlp-allreduce measured this run"), std::string::npos) << crash.out;
  EXPECT_NE(crash.out.find("run the same command again to resume"), std::string::npos) << crash.out;
  const auto rows = [&] {
    std::ifstream in(dir / "samples.csv");
    std::size_t n = 0;
    for (std::string line; std::getline(in, line);) ++n;
    return n - 1;  // the header
  };
  EXPECT_EQ(rows(), 40u);
  // Resumed with a working evaluator: only the rest is measured; 3 clocks x (4 x 10 + 1).
  const CliRun resumed = perseus(flags + "'" + fake + "' --json");
  ASSERT_EQ(resumed.status, 0) << resumed.out;
  EXPECT_EQ(rows(), 3u * 41);
  const nlohmann::json j = nlohmann::json::parse(resumed.out);
  EXPECT_EQ(j["evaluator"], "external: " + fake);
  EXPECT_EQ(j["partitions"][0]["configurations"], 3 * 41);
  fs::remove_all(dir);
}

TEST(KareusCli, SearchWritesSamplesFrontsAProfileAndTheIterationFrontier) {
  const fs::path dir = fs::temp_directory_path() / ("perseus-kareus-search-" + std::to_string(std::random_device{}()));
  const std::string flags = "kareus search --model qwen3-1.7b --tp 8 --pp 2 --microbatch-size 4 --seq-len 2048 "
                            "--microbatches 4 --min-mhz 1200 --json -q --out ";
  const CliRun run = perseus(flags + (dir / "a").string());
  ASSERT_EQ(run.status, 0) << run.out;
  const nlohmann::json j = nlohmann::json::parse(run.out);
  EXPECT_EQ(j["search"], "mbo");
  ASSERT_EQ(j["partitions"].size(), 4u);
  for (const auto& p : j["partitions"]) {
    EXPECT_LT(p["measured_share"].get<double>(), 0.2) << p;  // 96 + batches of a 15 x 451 space
    EXPECT_GT(p["frontier_points"].get<int>(), 1) << p;
  }
  EXPECT_GT(j["iteration"]["points"].get<int>(), 1);
  EXPECT_LT(j["iteration"]["t_min_s"].get<double>(), j["iteration"]["t_star_s"].get<double>());
  for (const char* file : {"samples.csv", "partition_frontiers.csv", "profile.csv", "plan_schedules.csv", "search.json",
                           "frontier/frontier.csv", "frontier/plans.bin", "frontier/summary.json"}) {
    EXPECT_TRUE(fs::exists(dir / "a" / file)) << file;
  }
  // Every instruction of every plan names its partitions' schedules.
  std::ifstream schedules(dir / "a" / "plan_schedules.csv");
  std::string line;
  std::getline(schedules, line);
  EXPECT_EQ(line, "point,stage,instruction,microbatch,frequency,schedule");
  std::getline(schedules, line);
  EXPECT_NE(line.find('+'), std::string::npos) << line;  // two partitions per forward
  // The same seed, the same search.
  const CliRun again = perseus(flags + (dir / "b").string());
  ASSERT_EQ(again.status, 0) << again.out;
  EXPECT_EQ(nlohmann::json::parse(again.out)["iteration"], j["iteration"]);
  fs::remove_all(dir);
}

TEST(KareusCli, CalibrateReportsErrorsBeforeAndAfterAndTheBestSchedules) {
  const CliRun run = perseus("kareus calibrate --measured " PERSEUS_SOURCE_DIR "/data/kareus --json");
  ASSERT_EQ(run.status, 0) << run.out;
  const nlohmann::json j = nlohmann::json::parse(run.out);
  EXPECT_EQ(j["configurations"], 438);  // block size 1024: 320 at the default clock, 118 at 1200 MHz
  EXPECT_LT(j["after"]["time_median"].get<double>(), j["before"]["time_median"].get<double>());
  ASSERT_EQ(j["best"].size(), 2u);
  EXPECT_EQ(j["best"][1]["measured_fastest"], "1410 MHz, 9 SMs, beside qkv..out-proj");
  const CliRun missing = perseus("kareus calibrate --measured /nonexistent");
  EXPECT_EQ(missing.status, 2);
  EXPECT_NE(missing.out.find("not a directory"), std::string::npos) << missing.out;
}

}  // namespace
