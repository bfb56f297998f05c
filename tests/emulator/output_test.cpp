#include <gtest/gtest.h>

#include <algorithm>
#include <sstream>
#include <string>
#include <vector>

#include "fixtures.hpp"
#include "perseus/emulator/emulation_output.hpp"
#include "perseus/model/errors.hpp"

namespace perseus {
namespace {

std::vector<std::vector<std::string>> parse_csv(const std::string& text) {
  std::vector<std::vector<std::string>> rows;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    std::vector<std::string> cells;
    std::istringstream fields(line);
    std::string cell;
    while (std::getline(fields, cell, ',')) cells.push_back(cell);
    rows.push_back(cells);
  }
  return rows;
}

EmulationResult sample_result() {
  const EnergyProblem problem = testing::random_problem({ScheduleKind::k1F1B, 3, 4, 1, false}, 7);
  EmulationConfig config;
  config.data_parallel = 2;
  config.tensor_parallel = 4;
  config.stragglers = {{1, 1.3, 0.0}};
  config.p2p = {0.001, 0.0};
  config.allreduce = {0.0, 1e10};
  config.allreduce_bytes = 1e9;
  return emulate(problem, plan_from_choice(problem, testing::random_choice(problem, 2)), config);
}

// emulation.json: the cluster's figures and a line per pipeline, no instruction.
TEST(EmulationOutput, SummaryJsonCarriesTheFiguresAndAnIndexOfTheDetail) {
  const EmulationResult r = sample_result();
  std::ostringstream out;
  write_emulation_json(out, r);
  const nlohmann::json j = nlohmann::json::parse(out.str());
  EXPECT_EQ(j["schema"], "perseus.emulation/2");
  EXPECT_EQ(j["gpus"], 24);
  EXPECT_DOUBLE_EQ(j["iteration_time_s"].get<double>(), r.iteration_time_s);
  EXPECT_DOUBLE_EQ(j["energy_j"]["total"].get<double>(), r.energy.total_j());
  EXPECT_DOUBLE_EQ(j["energy_j"]["extrinsic_blocking"].get<double>(), r.energy.extrinsic_blocking_j);
  EXPECT_DOUBLE_EQ(j["average_power_w"].get<double>(), r.energy.total_j() / r.iteration_time_s);
  ASSERT_EQ(j["pipelines"].size(), 2u);
  EXPECT_TRUE(j["pipelines"][1]["straggler"].get<bool>());
  EXPECT_EQ(j["allreduce"].size(), 3u);
  EXPECT_EQ(j["detail"], "all");
  EXPECT_EQ(j["fastest_pipeline"], 0);
  EXPECT_EQ(j["typical_pipeline"], 0);
  ASSERT_EQ(j["detailed_pipelines"].size(), 2u);
  EXPECT_EQ(j["detailed_pipelines"][0]["file"], "pipelines/pipeline_00000.json");
  EXPECT_EQ(j["detailed_pipelines"][0]["notable"], nlohmann::json({"fastest", "typical"}));
  EXPECT_EQ(j["detailed_pipelines"][1]["notable"], nlohmann::json({"straggler"}));
  for (const char* key : {"timeline", "transfers", "devices"}) EXPECT_FALSE(j.contains(key)) << key;
}

// pipelines/pipeline_NNNNN.json: one pipeline's devices, transfers and timeline.
TEST(EmulationOutput, PipelineJsonCarriesItsTimeline) {
  const EmulationResult r = sample_result();
  double energy = 0.0;
  std::size_t instructions = 0, transfers = 0;
  for (int p = 0; p < 2; ++p) {
    std::ostringstream out;
    write_pipeline_json(out, r, p);
    const nlohmann::json j = nlohmann::json::parse(out.str());
    EXPECT_EQ(j["schema"], "perseus.emulation.pipeline/1");
    EXPECT_EQ(j["pipeline"], p);
    EXPECT_EQ(j["straggler"].get<bool>(), p == 1);
    EXPECT_DOUBLE_EQ(j["energy_j"]["total"].get<double>(), r.pipelines[p].energy.total_j());
    ASSERT_EQ(j["devices"].size(), 3u);
    EXPECT_DOUBLE_EQ(j["devices"][2]["energy_j_per_gpu"]["total"].get<double>(), r.devices[p * 3 + 2].energy.total_j());
    for (const auto& e : j["timeline"]) {
      EXPECT_EQ(e["pipeline"], p);
      energy += e["energy_j"].get<double>();
      EXPECT_NEAR(e["power_w"].get<double>() * (e["end_s"].get<double>() - e["start_s"].get<double>()),
                  e["energy_j"].get<double>(), 1e-9);
    }
    for (const auto& t : j["transfers"]) EXPECT_EQ(t["pipeline"], p);
    instructions += j["timeline"].size();
    transfers += j["transfers"].size();
  }
  EXPECT_EQ(instructions, r.timeline.size());
  EXPECT_EQ(transfers, r.transfers.size());
  EXPECT_NEAR(energy * 4, r.energy.computation_j, 1e-9 * r.energy.computation_j);

  std::ostringstream compact;
  write_pipeline_json(compact, r, 0, {false, false});
  const nlohmann::json k = nlohmann::json::parse(compact.str());
  EXPECT_FALSE(k.contains("timeline"));
  EXPECT_FALSE(k.contains("transfers"));
  EXPECT_THROW(pipeline_to_json(r, 2), InputError);
}

TEST(EmulationOutput, TheStreamedJsonIsTheSameDocumentAsTheTree) {
  const EmulationResult r = sample_result();
  ASSERT_FALSE(r.transfers.empty());
  std::ostringstream summary;
  write_emulation_json(summary, r);
  EXPECT_EQ(nlohmann::json::parse(summary.str()), emulation_to_json(r));
  for (const JsonOutputOptions options : {JsonOutputOptions{true, true}, JsonOutputOptions{false, true},
                                          JsonOutputOptions{true, false}, JsonOutputOptions{false, false}}) {
    for (int p = 0; p < 2; ++p) {
      std::ostringstream out;
      write_pipeline_json(out, r, p, options);
      EXPECT_EQ(nlohmann::json::parse(out.str()), pipeline_to_json(r, p, options));
    }
  }
}

TEST(EmulationOutput, TimelineCsvHasARowPerInstructionOrPerGpu) {
  const EmulationResult r = sample_result();
  std::ostringstream grouped, per_gpu;
  write_timeline_csv(grouped, r);
  write_timeline_csv(per_gpu, r, true);
  const auto rows = parse_csv(grouped.str());
  const auto gpu_rows = parse_csv(per_gpu.str());
  ASSERT_EQ(rows.size(), r.timeline.size() + 1);
  ASSERT_EQ(gpu_rows.size(), 4 * r.timeline.size() + 1);
  EXPECT_EQ(rows[0][0], "first_gpu");
  EXPECT_EQ(rows[0].size(), 14u);
  double energy = 0.0;
  std::vector<int> seen(24, 0);
  for (std::size_t i = 1; i < gpu_rows.size(); ++i) {
    ASSERT_EQ(gpu_rows[i].size(), 14u);
    EXPECT_EQ(gpu_rows[i][1], "1");
    energy += std::stod(gpu_rows[i][12]);
    ++seen.at(std::stoi(gpu_rows[i][0]));
  }
  EXPECT_NEAR(energy, r.energy.computation_j, 1e-9 * r.energy.computation_j);
  for (int count : seen) EXPECT_EQ(count, 8);  // every GPU runs 2M instructions
  // The first row is pipeline 0, stage 0's first instruction, exactly as emulated.
  EXPECT_EQ(rows[1][2], "0");
  EXPECT_EQ(std::stod(rows[1][8]), r.timeline[0].end_s);
}

TEST(EmulationOutput, DevicesCsvSumsToTheTotal) {
  const EmulationResult r = sample_result();
  std::ostringstream out;
  write_devices_csv(out, r);
  const auto rows = parse_csv(out.str());
  ASSERT_EQ(rows.size(), 7u);
  const auto column = [&](const std::string& name) {
    const auto at = std::find(rows[0].begin(), rows[0].end(), name);
    EXPECT_NE(at, rows[0].end()) << name;
    return static_cast<std::size_t>(at - rows[0].begin());
  };
  double total = 0.0;
  for (std::size_t i = 1; i < rows.size(); ++i) total += std::stod(rows[i][column("total_j")]) * std::stoi(rows[i][column("gpus")]);
  EXPECT_NEAR(total, r.energy.total_j(), 1e-9 * total);
  EXPECT_EQ(rows[4][4], "1");  // pipeline 1 is the straggler
}

}  // namespace
}  // namespace perseus
