// The compact plan store: round trips, the byte layout docs/formats.md promises, and every
// kind of damage read as a clear error.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <random>

#include <nlohmann/json.hpp>

#include "perseus/plan/output_files.hpp"
#include "perseus/plan/plan_files.hpp"
#include "perseus/plan/plan_store.hpp"
#include "temp_dir.hpp"

namespace perseus {
namespace {

namespace fs = std::filesystem;

PlanStoreLayout layout_with(int stages, int microbatches, std::vector<int> clocks) {
  PlanStoreLayout layout;
  for (int s = 0; s < stages; ++s) {
    auto& list = layout.stages.emplace_back();
    for (int m = 0; m < microbatches; ++m) {
      list.push_back({InstructionKind::kForward, s, m, 0});
      list.push_back({InstructionKind::kBackward, s, m, 0});
    }
  }
  layout.clocks_mhz = std::move(clocks);
  layout.problem_digest = "test:1";
  return layout;
}

std::vector<std::vector<int>> random_plans(const PlanStoreLayout& layout, std::size_t count, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<std::size_t> pick(0, layout.clocks_mhz.size() - 1);
  std::vector<std::vector<int>> plans(count, std::vector<int>(layout.instructions()));
  for (auto& plan : plans) {
    for (int& clock : plan) clock = layout.clocks_mhz[pick(rng)];
  }
  return plans;
}

TEST(PlanStore, RoundTripsEveryPlanAndReadsOneOnDemand) {
  testing::TempDir tmp;
  const PlanStoreLayout layout = layout_with(4, 6, {1410, 1005, 210, 1200});  // unsorted on purpose
  const auto plans = random_plans(layout, 57, 1);
  write_plan_store(tmp.path() / "plans.bin", layout, plans);

  const PlanStore store(tmp.path() / "plans.bin");
  EXPECT_EQ(store.size(), 57u);
  EXPECT_EQ(store.layout().clocks_mhz, (std::vector<int>{210, 1005, 1200, 1410}));
  EXPECT_EQ(store.layout().stages, layout.stages);
  EXPECT_EQ(store.layout().problem_digest, "test:1");
  for (std::size_t i : {56u, 0u, 17u}) EXPECT_EQ(store.clocks(i), plans[i]) << i;  // any order
  const PipelineFrequencies f = store.frequencies(17);
  ASSERT_EQ(f.size(), 4u);
  EXPECT_EQ(f[2][3], (std::pair<std::string, int>("backward", plans[17][2 * 12 + 3])));
  EXPECT_THROW(store.clocks(57), InputError);
}

// The layout other tools rely on: magic, header length, JSON header, 64-byte aligned records
// of one index per instruction (two bytes, little-endian, beyond 256 clocks).
TEST(PlanStore, ByteLayoutIsAsDocumented) {
  testing::TempDir tmp;
  for (const int clocks : {3, 300}) {
    std::vector<int> table;
    for (int c = 0; c < clocks; ++c) table.push_back(200 + 5 * c);
    const PlanStoreLayout layout = layout_with(2, 3, table);
    const auto plans = random_plans(layout, 5, 2);
    const fs::path path = tmp.path() / ("plans" + std::to_string(clocks) + ".bin");
    write_plan_store(path, layout, plans);
    const std::string bytes = read_text_file(path);
    ASSERT_EQ(bytes.substr(0, 16), "perseus.plans/1\n");
    std::uint64_t header_bytes = 0;
    for (int b = 7; b >= 0; --b) header_bytes = (header_bytes << 8) | static_cast<unsigned char>(bytes[16 + b]);
    const std::size_t offset = 24 + header_bytes;
    EXPECT_EQ(offset % 64, 0u);
    const nlohmann::json header = nlohmann::json::parse(bytes.substr(24, header_bytes));
    EXPECT_EQ(header.at("schema"), "perseus.plans/1");
    EXPECT_EQ(header.at("plans"), 5);
    const int width = clocks <= 256 ? 1 : 2;
    EXPECT_EQ(header.at("index_bytes"), width);
    EXPECT_EQ(header.at("record_bytes"), 12 * width);
    EXPECT_EQ(header.at("instructions").at(1).at(3), nlohmann::json::array({"backward", 1, 0}));
    ASSERT_EQ(bytes.size(), offset + 5 * 12 * width);
    // Plan 4, instruction 7 (stage 1's second): its clock's index in clocks_mhz.
    const std::size_t at = offset + (4 * 12 + 7) * width;
    std::size_t index = static_cast<unsigned char>(bytes[at]);
    if (width == 2) index |= static_cast<std::size_t>(static_cast<unsigned char>(bytes[at + 1])) << 8;
    EXPECT_EQ(table[index], plans[4][7]);
  }
}

TEST(PlanStore, WriterRefusesPlansThatDoNotFit) {
  testing::TempDir tmp;
  const PlanStoreLayout layout = layout_with(1, 2, {1000, 1400});
  EXPECT_THROW(write_plan_store(tmp.path() / "a.bin", layout, {{1000, 1400, 1000, 1234}}), InputError);  // not a clock
  EXPECT_THROW(write_plan_store(tmp.path() / "b.bin", layout, {{1000, 1400}}), InputError);              // too short
  EXPECT_FALSE(fs::exists(tmp.path() / "a.bin"));  // nothing half-written is left
  EXPECT_FALSE(fs::exists(tmp.path() / "b.bin"));
  std::size_t left = 0;
  for ([[maybe_unused]] const auto& entry : fs::directory_iterator(tmp.path())) ++left;
  EXPECT_EQ(left, 0u);
  PlanStoreWriter writer(tmp.path() / "c.bin", layout, 2);
  writer.add(std::vector<int>{1000, 1400, 1000, 1400});
  EXPECT_THROW(writer.finish(), InputError);  // one plan short of those announced
}

std::string open_error(const fs::path& path) {
  try {
    PlanStore store(path);
    for (std::size_t i = 0; i < store.size(); ++i) store.clocks(i);
  } catch (const InputError& e) {
    return e.what();
  }
  return "(accepted)";
}

TEST(PlanStore, DamageIsAClearErrorNamingTheFile) {
  testing::TempDir tmp;
  const PlanStoreLayout layout = layout_with(2, 2, {1000, 1200, 1400});
  const fs::path path = tmp.path() / "plans.bin";
  write_plan_store(path, layout, random_plans(layout, 3, 3));
  const std::string good = read_text_file(path);
  const auto damaged = [&](std::string bytes) {
    write_file_atomically(path, bytes);
    return open_error(path);
  };
  EXPECT_EQ(open_error(path), "(accepted)");
  EXPECT_NE(damaged(good.substr(0, good.size() - 1)).find("plans.bin: truncated: the header announces 3 plans"),
            std::string::npos);
  EXPECT_NE(damaged(good + "x").find("trailing bytes"), std::string::npos);
  EXPECT_NE(damaged(good.substr(0, 10)).find("not a perseus plan store"), std::string::npos);
  EXPECT_NE(damaged("PK" + good.substr(2)).find("not a perseus plan store"), std::string::npos);
  std::string bad_index = good;
  bad_index.back() = static_cast<char>(7);  // beyond the 3 clocks
  EXPECT_NE(damaged(bad_index).find("plan 2, clock 7: index 7 beyond the 3 clocks"), std::string::npos)
      << damaged(bad_index);
  std::string bad_header = good;
  bad_header.replace(bad_header.find("\"plans\":3"), 9, "\"plans\":9");
  EXPECT_NE(damaged(bad_header).find("truncated: the header announces 9 plans"), std::string::npos);
  std::string bad_json = good;
  bad_json[24] = '[';
  EXPECT_NE(damaged(bad_json).find("header"), std::string::npos);
  std::string huge_header = good;
  huge_header[23] = static_cast<char>(0x7f);
  EXPECT_NE(damaged(huge_header).find("truncated: the header claims"), std::string::npos);
  EXPECT_NE(open_error(tmp.path() / "missing.bin").find("missing.bin: cannot open"), std::string::npos);
}

}  // namespace
}  // namespace perseus
