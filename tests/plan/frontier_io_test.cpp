// The output directory of `perseus optimize`: what it holds, reading it back, selecting a
// plan for a deadline, and refusing to clobber or half-write.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include <fmt/format.h>

#include "perseus/model/errors.hpp"
#include "perseus/plan/frontier_io.hpp"
#include "perseus/plan/plan_files.hpp"
#include "synthetic.hpp"
#include "temp_dir.hpp"

namespace perseus {
namespace {

namespace fs = std::filesystem;

struct Solved {
  EnergyProblem problem;
  CrawlResult crawl;
  Frontier frontier;
};

const Solved& solved() {
  static const Solved s = [] {
    EnergyProblem problem = testing::synthetic_problem({ScheduleKind::k1F1B, 3, 6, 1, false}, 10, 4);
    CrawlResult crawl = crawl_frontier(problem);
    Frontier frontier = build_frontier(problem, crawl);
    return Solved{std::move(problem), std::move(crawl), std::move(frontier)};
  }();
  return s;
}

RunInfo info() { return RunInfo{"synthetic.csv", {ScheduleKind::k1F1B, 3, 6, 1, false}, 0.1, {"a warning"}}; }

void write(const fs::path& dir, const OutputOptions& options = {}) {
  write_frontier_directory(dir, solved().problem, solved().crawl, solved().frontier, info(), options);
}

std::size_t count_files(const fs::path& dir, const std::string& prefix) {
  std::size_t n = 0;
  for (const auto& entry : fs::directory_iterator(dir)) n += entry.path().filename().string().rfind(prefix, 0) == 0;
  return n;
}

TEST(FrontierDirectory, HoldsEveryPlanAndReadsBack) {
  testing::TempDir tmp;
  const fs::path dir = tmp.path() / "out";
  write(dir);
  const Frontier& frontier = solved().frontier;
  EXPECT_EQ(count_files(dir, "freqs_pipeline_"), frontier.points.size());
  EXPECT_EQ(count_files(dir / "plans", "plan_"), frontier.points.size());

  const FrontierIndex index = read_frontier_directory(dir);
  ASSERT_EQ(index.entries.size(), frontier.points.size());
  for (std::size_t i = 0; i < index.entries.size(); ++i) {
    EXPECT_DOUBLE_EQ(index.entries[i].time_s, frontier.points[i].measured.time_s);
    EXPECT_DOUBLE_EQ(index.entries[i].energy_j, frontier.points[i].measured.energy_j);
  }
  // A larger file number is a faster plan; the fastest's plan is the T_min point's.
  EXPECT_EQ(index.entries.front().plan_file, fmt::format("freqs_pipeline_{:05d}.py", frontier.points.size() - 1));
  const PipelineFrequencies fastest = read_freqs_pipeline(dir / index.entries.front().plan_file);
  const Plan plan = make_plan(solved().problem, frontier.points.front().option_choice());
  ASSERT_EQ(fastest.size(), plan.stages.size());
  EXPECT_EQ(fastest[0][0].second, plan.stages[0][0].frequency_mhz);
  const nlohmann::json json = nlohmann::json::parse(read_text_file(dir / index.entries.front().json_file));
  EXPECT_DOUBLE_EQ(json.at("time_s").get<double>(), frontier.points.front().measured.time_s);

  const nlohmann::json& summary = index.summary;
  EXPECT_EQ(summary.at("points"), frontier.points.size());
  EXPECT_DOUBLE_EQ(summary.at("t_min_s").get<double>(), frontier.t_min_point().measured.time_s);
  EXPECT_DOUBLE_EQ(summary.at("t_star_s").get<double>(), frontier.t_star_point().measured.time_s);
  EXPECT_NEAR(summary.at("savings_at_t_min_j").get<double>(),
              frontier.all_max.energy_j - frontier.t_min_point().measured.energy_j, 1e-9);
  EXPECT_LE(summary.at("t_min_lower_bound_j").get<double>(), frontier.t_min_point().measured.energy_j + 1e-9);
  EXPECT_EQ(summary.at("warnings").at(0), "a warning");
  // crawl.csv has the reference's figures for every step.
  std::ifstream crawl(dir / "crawl.csv");
  std::string line;
  std::size_t rows = 0;
  while (std::getline(crawl, line)) ++rows;
  EXPECT_EQ(rows, solved().crawl.steps.size() + 1);
}

TEST(FrontierDirectory, SelectTakesTheSlowestPlanWithinTOpt) {
  testing::TempDir tmp;
  write(tmp.path() / "out");
  const FrontierIndex index = read_frontier_directory(tmp.path() / "out");
  const auto& e = index.entries;
  EXPECT_EQ(select_entry(index, e.front().time_s * 0.99), std::nullopt);
  EXPECT_EQ(select_entry(index, e.front().time_s), 0u);
  EXPECT_EQ(select_entry(index, e.back().time_s * 2), e.size() - 1);  // T' beyond T*: run T*
  const std::size_t mid = e.size() / 2;
  EXPECT_EQ(select_entry(index, (e[mid].time_s + e[mid + 1].time_s) / 2), mid);
}

TEST(FrontierDirectory, MaxPlansKeepsBothEndsAndSelectSkipsThinnedRows) {
  testing::TempDir tmp;
  OutputOptions options;
  options.max_plans = 3;
  write(tmp.path() / "out", options);
  EXPECT_EQ(count_files(tmp.path() / "out", "freqs_pipeline_"), 3u);
  const FrontierIndex index = read_frontier_directory(tmp.path() / "out");
  EXPECT_FALSE(index.entries.front().plan_file.empty());
  EXPECT_FALSE(index.entries.back().plan_file.empty());
  // Just below T*, the written plan before it is chosen, never a row without a file.
  const auto row = select_entry(index, index.entries.back().time_s - 1e-9);
  ASSERT_TRUE(row.has_value());
  EXPECT_FALSE(index.entries[*row].plan_file.empty());
}

TEST(FrontierDirectory, RefusesToClobberAndNeverLeavesHalfAnOutput) {
  testing::TempDir tmp;
  const fs::path dir = tmp.path() / "out";
  fs::create_directories(dir);
  std::ofstream(dir / "mine.txt") << "keep me";
  try {
    write(dir);
    ADD_FAILURE() << "an existing directory was replaced without force";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("--force"), std::string::npos) << e.what();
  }
  EXPECT_TRUE(fs::exists(dir / "mine.txt"));
  OutputOptions force;
  force.force = true;
  write(dir, force);
  EXPECT_FALSE(fs::exists(dir / "mine.txt"));
  EXPECT_TRUE(fs::exists(dir / "frontier.csv"));
  // Nothing but the output itself is left beside it (no staging or retired copies).
  std::size_t entries = 0;
  for ([[maybe_unused]] const auto& entry : fs::directory_iterator(tmp.path())) ++entries;
  EXPECT_EQ(entries, 1u);
  // Missing parents are created (as mkdir -p); a file in the way is a clear error.
  write(tmp.path() / "new" / "nested" / "out");
  EXPECT_TRUE(fs::exists(tmp.path() / "new" / "nested" / "out" / "frontier.csv"));
  EXPECT_THROW(write(dir / "frontier.csv" / "out"), InputError);
  EXPECT_FALSE(fs::exists(dir / "frontier.csv" / "out"));
}

TEST(FrontierDirectory, MalformedDirectoriesAreClearErrors) {
  testing::TempDir tmp;
  const fs::path dir = tmp.path() / "out";
  EXPECT_THROW(read_frontier_directory(dir), InputError);
  write(dir);
  const std::string good = read_text_file(dir / "frontier.csv");
  const auto expect_error = [&](const std::string& csv, const std::string& message) {
    std::ofstream(dir / "frontier.csv", std::ios::trunc) << csv;
    try {
      read_frontier_directory(dir);
      ADD_FAILURE() << "accepted: " << csv.substr(0, 60);
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find(message), std::string::npos) << e.what();
    }
  };
  expect_error("t,e\n1,2\n", "frontier.csv:1: expected the header");
  const std::string header = good.substr(0, good.find('\n') + 1);
  expect_error(header + "abc,1,1,p.py,p.json\n", "frontier.csv:2: time: expected a number, got 'abc'");
  expect_error(header + "2,1,1,p.py,p.json\n1,1,1,q.py,q.json\n", "frontier.csv:3: times must be ascending");
  expect_error(header, "no frontier points");
  std::ofstream(dir / "summary.json", std::ios::trunc) << "{not json";
  EXPECT_THROW(read_frontier_directory(dir), InputError);
}

}  // namespace
}  // namespace perseus
