// `perseus geo ...` as a user runs it.
#include <filesystem>
#include <fstream>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "command_output.hpp"
#include "temp_dir.hpp"

namespace {

using CommandResult = perseus::testing::CommandOutput;

CommandResult run(const std::string& args) { return perseus::testing::run_command(std::string(PERSEUS_BINARY) + " " + args); }

TEST(GeoCli, SimulateEveryScheduler) {
  const CommandResult r = run("geo simulate --scheduler all --connections 64 --json");
  ASSERT_EQ(r.status, 0) << r.out;
  const auto j = nlohmann::json::parse(r.out);
  ASSERT_EQ(j.size(), 4u);
  EXPECT_EQ(j[3]["scheduler"], "atlas");
  EXPECT_LT(j[3]["pipeline_time_s"].get<double>(), j[0]["pipeline_time_s"].get<double>());
}

TEST(GeoCli, WritesATimelineAndATrace) {
  const perseus::testing::TempDir temp;
  const auto dir = temp.path() / "out";
  const CommandResult r = run("geo bubbletea --rate 30 --out " + dir.string());
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_NE(r.out.find("unchanged"), std::string::npos) << r.out;
  std::ifstream trace(dir / "trace.json");
  const auto j = nlohmann::json::parse(trace);
  bool prefill = false, transfer = false;
  for (const auto& e : j["traceEvents"]) {
    prefill = prefill || e.value("cat", "") == "prefill";
    transfer = transfer || e.value("cat", "") == "transfer";
  }
  EXPECT_TRUE(prefill && transfer);
  EXPECT_TRUE(std::filesystem::exists(dir / "timeline.csv"));
  EXPECT_NE(run("geo bubbletea --out " + dir.string()).status, 0);  // exists: --force needed
}

TEST(GeoCli, FillOrSlowComparesThePolicies) {
  const CommandResult r = run("geo fill-or-slow --rate 20 --json");
  ASSERT_EQ(r.status, 0) << r.out;
  const auto j = nlohmann::json::parse(r.out);
  ASSERT_EQ(j["policies"].size(), 4u);
  for (const auto& p : j["policies"]) EXPECT_TRUE(p["training_unchanged"].get<bool>()) << p["policy"];
  EXPECT_EQ(j["policies"][3]["policy"], "mixed");
  const perseus::testing::TempDir temp;
  const auto dir = temp.path() / "fos";
  ASSERT_EQ(run("geo fill-or-slow --objective price --out " + dir.string()).status, 0);
  std::ifstream in(dir / "fill_or_slow.json");
  const auto written = nlohmann::json::parse(in);
  EXPECT_EQ(written["objective"], "price");
  EXPECT_EQ(written["per_bubble"].size(), written["bubbles"].get<std::size_t>());
  const CommandResult bad = run("geo fill-or-slow --objective speed");
  EXPECT_NE(bad.status, 0);
  EXPECT_NE(bad.out.find("energy-per-flop or price"), std::string::npos) << bad.out;
}

TEST(GeoCli, ReproduceWritesTheFiguresAndTheTables) {
  const perseus::testing::TempDir temp;
  const auto dir = temp.path() / "figures";
  const CommandResult r = run("geo reproduce --quiet --json --out " + dir.string());
  ASSERT_EQ(r.status, 0) << r.out;
  const auto j = nlohmann::json::parse(r.out);
  for (const char* key : {"fig8", "fig9", "fig10", "fig11", "bubbletea", "fill_or_slow"}) EXPECT_TRUE(j.contains(key)) << key;
  EXPECT_EQ(j["fig10"].size(), 20u);
  std::size_t svgs = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) svgs += entry.path().extension() == ".svg";
  EXPECT_EQ(svgs, 9u);
  std::ifstream in(dir / "reproduce.json");
  EXPECT_EQ(nlohmann::json::parse(in), j);
}

TEST(GeoCli, SelectDcsPrintsTheWhatIfTable) {
  const CommandResult r = run("geo select-dcs --dcs 600,60 --cell-size 2 --comm-ratio 2 --forward-ms 50 --keep-order --json");
  ASSERT_EQ(r.status, 0) << r.out;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_GT(j["choices"].size(), 4u);
  EXPECT_FALSE(j["best"].is_null());
}

TEST(GeoCli, BadInputGetsAClearError) {
  for (const auto& [args, words] : std::vector<std::pair<std::string, std::string>>{
           {"geo simulate --dcs 4,0,4", "has 0 GPUs"},
           {"geo simulate --latency-ms -5", "latency"},
           {"geo simulate --dcs 2 --stages 4", "more stages than"},
           {"geo simulate --model gpt-b --stages 1 --memory-gb 20", "does not fit"},
           {"geo simulate --scheduler pipedream", "unknown scheduler"},
           {"geo simulate --model resnet", "resnet"}}) {
    const CommandResult r = run(args);
    EXPECT_NE(r.status, 0) << args;
    EXPECT_NE(r.out.find(words), std::string::npos) << args << ": " << r.out;
  }
}

}  // namespace
