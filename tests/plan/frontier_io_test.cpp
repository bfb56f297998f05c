// The output directory of `perseus optimize`: what it holds, reading it back, selecting a
// plan for a deadline, and refusing to clobber or half-write.
#include <gtest/gtest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include <fmt/format.h>

#include "perseus/model/errors.hpp"
#include "perseus/plan/frontier_io.hpp"
#include "perseus/plan/output_files.hpp"
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

TEST(FrontierDirectory, HoldsEveryPlanInTheStoreAndReadsBack) {
  testing::TempDir tmp;
  const fs::path dir = tmp.path() / "out";
  write(dir);
  const Frontier& frontier = solved().frontier;
  const std::size_t count = frontier.points.size();
  ASSERT_GT(count, 10u);
  EXPECT_FALSE(fs::exists(dir / "plans"));  // no file per plan

  const FrontierIndex index = read_frontier_directory(dir);
  ASSERT_TRUE(index.store);
  ASSERT_EQ(index.entries.size(), count);
  EXPECT_EQ(index.store->size(), count);
  for (std::size_t i = 0; i < count; ++i) {
    EXPECT_DOUBLE_EQ(index.entries[i].time_s, frontier.points[i].measured.time_s);
    EXPECT_DOUBLE_EQ(index.entries[i].energy_j, frontier.points[i].measured.energy_j);
    EXPECT_EQ(index.entries[i].plan, i);
    // Every plan reads back exactly, clock for clock, in execution order.
    EXPECT_EQ(index.frequencies(i), plan_frequencies(make_plan(solved().problem, frontier.points[i].option_choice())))
        << "point " << i;
  }

  // freqs_pipeline files for T_min, T*, the least-energy point and five more, evenly spread.
  std::size_t least = 0;
  for (std::size_t i = 0; i < count; ++i) {
    if (frontier.points[i].measured.energy_j < frontier.points[least].measured.energy_j) least = i;
  }
  const std::size_t files = count_files(dir, "freqs_pipeline_");
  EXPECT_GE(files, 5u);
  EXPECT_LE(files, 8u);
  for (std::size_t row : {std::size_t{0}, least, count - 1}) {
    ASSERT_FALSE(index.entries[row].plan_file.empty()) << row;
    // A larger file number is a faster plan; the file holds the row's plan.
    EXPECT_EQ(index.entries[row].plan_file, fmt::format("freqs_pipeline_{:05d}.py", count - 1 - row));
    EXPECT_EQ(read_freqs_pipeline(dir / index.entries[row].plan_file), index.frequencies(row));
  }
  EXPECT_EQ(index.summary.at("plans").at("freqs_pipeline_files").size(), files);
  // Exports: the same plan as a freqs_pipeline text and as perseus.plan/1 JSON.
  EXPECT_EQ(parse_freqs_pipeline(export_freqs_pipeline(index, 3), "export"), index.frequencies(3));
  const nlohmann::json json = export_plan_json(index, 3);
  EXPECT_EQ(json.at("schema"), "perseus.plan/1");
  EXPECT_DOUBLE_EQ(json.at("time_s").get<double>(), frontier.points[3].measured.time_s);
  const Plan plan = make_plan(solved().problem, frontier.points[3].option_choice());
  EXPECT_EQ(json.at("stages").at(1).at(2).at("microbatch"), plan.stages[1][2].instruction.microbatch);
  EXPECT_EQ(json.at("stages").at(1).at(2).at("frequency_mhz"), plan.stages[1][2].frequency_mhz);

  const nlohmann::json& summary = index.summary;
  EXPECT_EQ(summary.at("points"), frontier.points.size());
  EXPECT_DOUBLE_EQ(summary.at("t_min_s").get<double>(), frontier.t_min_point().measured.time_s);
  EXPECT_DOUBLE_EQ(summary.at("t_star_s").get<double>(), frontier.t_star_point().measured.time_s);
  EXPECT_NEAR(summary.at("savings_at_t_min_j").get<double>(),
              frontier.all_max.energy_j - frontier.t_min_point().measured.energy_j, 1e-9);
  EXPECT_LE(summary.at("t_min_lower_bound_j").get<double>(), frontier.t_min_point().measured.energy_j + 1e-9);
  // At iso-time (the all-max plan's time): the plan select picks there, blocking until then,
  // no dearer than the T_min plan would be, and the savings against the all-max plan.
  const nlohmann::json& iso = summary.at("iso_time");
  const double deadline = frontier.all_max.time_s;
  EXPECT_DOUBLE_EQ(iso.at("deadline_s").get<double>(), deadline);
  const FrontierPoint* picked = select_for_deadline(frontier, deadline);
  ASSERT_NE(picked, nullptr);
  EXPECT_DOUBLE_EQ(iso.at("plan_time_s").get<double>(), picked->measured.time_s);
  EXPECT_LE(picked->measured.time_s, deadline + 1e-9);
  const double energy = iso.at("energy_j").get<double>();
  EXPECT_NEAR(energy, energy_at(solved().problem, *picked, deadline), 1e-9);
  EXPECT_LE(energy, energy_at(solved().problem, frontier.t_min_point(), deadline) + 1e-9);
  EXPECT_NEAR(iso.at("savings_j").get<double>(), frontier.all_max.energy_j - energy, 1e-9);
  EXPECT_NEAR(iso.at("savings_fraction").get<double>(), (frontier.all_max.energy_j - energy) / frontier.all_max.energy_j, 1e-12);
  EXPECT_EQ(summary.at("warnings").at(0), "a warning");
  // crawl.csv, when asked for, has the reference's figures for every step.
  EXPECT_FALSE(fs::exists(dir / "crawl.csv"));
  OutputOptions with_crawl;
  with_crawl.crawl_csv = true;
  write(tmp.path() / "with-crawl", with_crawl);
  std::ifstream crawl(tmp.path() / "with-crawl" / "crawl.csv");
  std::string line;
  std::size_t rows = 0;
  while (std::getline(crawl, line)) ++rows;
  EXPECT_EQ(rows, solved().crawl.steps.size() + 1);
}

TEST(FrontierDirectory, PyFilesAllOrNone) {
  testing::TempDir tmp;
  OutputOptions all;
  all.py = PyFiles::kAll;
  write(tmp.path() / "all", all);
  EXPECT_EQ(count_files(tmp.path() / "all", "freqs_pipeline_"), solved().frontier.points.size());
  OutputOptions none;
  none.py = PyFiles::kNone;
  write(tmp.path() / "none", none);
  EXPECT_EQ(count_files(tmp.path() / "none", "freqs_pipeline_"), 0u);
  EXPECT_EQ(read_frontier_directory(tmp.path() / "none").plans(), solved().frontier.points.size());
}

// A directory written by the release before the plan store (kept in tests/data): plans are
// files, and everything that reads plans still reads them.
TEST(FrontierDirectory, ReadsADirectoryWrittenBeforeTheStore) {
  const fs::path dir = fs::path(PERSEUS_SOURCE_DIR) / "tests/data/frontier-v1";
  const FrontierIndex index = read_frontier_directory(dir);
  EXPECT_FALSE(index.store);
  EXPECT_EQ(index.entries.size(), 539u);
  EXPECT_EQ(index.plans(), 3u);
  EXPECT_TRUE(index.has_plan(0));
  EXPECT_FALSE(index.has_plan(1));
  EXPECT_THROW(index.frequencies(1), InputError);
  const PipelineFrequencies fastest = index.frequencies(0);
  EXPECT_EQ(fastest, read_freqs_pipeline(dir / "freqs_pipeline_00538.py"));
  ASSERT_EQ(fastest.size(), 8u);
  EXPECT_EQ(fastest[0].size(), 8u);  // 4 microbatches: a forward and a backward each
  EXPECT_EQ(export_plan_json(index, 0).at("stages").at(0).size(), 8u);
  EXPECT_EQ(parse_freqs_pipeline(export_freqs_pipeline(index, 0), "export"), fastest);
  // Selecting skips rows without a plan file: between the middle plan and T*, the middle plan.
  EXPECT_EQ(select_entry(index, (index.entries[269].time_s + index.entries.back().time_s) / 2), 269u);
  EXPECT_EQ(select_entry(index, index.entries[200].time_s), 0u);
  EXPECT_EQ(select_entry(index, 100.0), 538u);
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
  EXPECT_LE(count_files(tmp.path() / "out", "freqs_pipeline_"), 3u);
  const FrontierIndex index = read_frontier_directory(tmp.path() / "out");
  EXPECT_EQ(index.store->size(), 3u);
  EXPECT_EQ(index.plans(), 3u);
  EXPECT_TRUE(index.has_plan(0));
  EXPECT_TRUE(index.has_plan(index.entries.size() - 1));
  EXPECT_FALSE(index.entries.front().plan_file.empty());
  EXPECT_FALSE(index.entries.back().plan_file.empty());
  // Between the last two stored plans, the faster one is chosen, never a row without a plan.
  std::size_t before = index.entries.size() - 2;
  while (!index.has_plan(before)) --before;
  const auto row = select_entry(index, (index.entries[before].time_s + index.entries.back().time_s) / 2);
  ASSERT_TRUE(row.has_value());
  EXPECT_EQ(*row, before);
  EXPECT_EQ(index.frequencies(*row),
            plan_frequencies(make_plan(solved().problem, solved().frontier.points[*row].option_choice())));
}

std::string write_error(const fs::path& dir, const OutputOptions& options = {}) {
  try {
    write(dir, options);
  } catch (const InputError& e) {
    return e.what();
  }
  return "(written)";
}

TEST(FrontierDirectory, RefusesToClobberAndNeverLeavesHalfAnOutput) {
  testing::TempDir tmp;
  const fs::path dir = tmp.path() / "out";
  write(dir);
  EXPECT_TRUE(fs::exists(dir / kOutputMarker));
  std::ofstream(dir / "mine.txt") << "from an earlier look";
  EXPECT_NE(write_error(dir).find("--force"), std::string::npos) << write_error(dir);
  EXPECT_TRUE(fs::exists(dir / "mine.txt"));
  OutputOptions force;
  force.force = true;
  write(dir, force);  // a directory perseus wrote: replaced whole
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
  // "out/" is "out".
  write(tmp.path() / "slash/", force);
  EXPECT_TRUE(fs::exists(tmp.path() / "slash" / "frontier.csv"));
}

// --force replaces only what perseus wrote: never a user's directory, a file, a device, a
// link, the input, the current directory or one above it.
TEST(FrontierDirectory, ForceNeverReplacesWhatPerseusDidNotWrite) {
  testing::TempDir tmp;
  OutputOptions force;
  force.force = true;
  const fs::path mine = tmp.path() / "mine";
  fs::create_directories(mine);
  std::ofstream(mine / "thesis.tex") << "years of work";
  EXPECT_NE(write_error(mine, force).find("perseus did not write it"), std::string::npos) << write_error(mine, force);
  EXPECT_TRUE(fs::exists(mine / "thesis.tex"));

  const fs::path file = tmp.path() / "notes.txt";
  std::ofstream(file) << "notes";
  EXPECT_NE(write_error(file, force).find("not a directory perseus wrote"), std::string::npos);
  EXPECT_EQ(read_text_file(file), "notes");
  EXPECT_NE(write_error("/dev/null", force).find("not a directory perseus wrote"), std::string::npos);
  EXPECT_TRUE(fs::is_character_file("/dev/null"));

  write(tmp.path() / "real");
  fs::create_directory_symlink(tmp.path() / "real", tmp.path() / "link");
  EXPECT_NE(write_error(tmp.path() / "link", force).find("not a directory perseus wrote"), std::string::npos);
  EXPECT_TRUE(fs::exists(tmp.path() / "real" / "frontier.csv"));

  // The input: the profile itself, or a directory holding it (even one perseus wrote).
  OutputOptions with_input = force;
  with_input.inputs = {tmp.path() / "real" / "profile.csv"};
  std::ofstream(tmp.path() / "real" / "profile.csv") << "stage,instruction,frequency,time,energy\n";
  EXPECT_NE(write_error(tmp.path() / "real", with_input).find("would replace the input"), std::string::npos);
  EXPECT_TRUE(fs::exists(tmp.path() / "real" / "profile.csv"));
  with_input.inputs = {file};
  EXPECT_NE(write_error(file, with_input).find("would replace the input"), std::string::npos);

  for (const std::string path : {"", ".", "..", "/", "a/..", "./"}) {
    const std::string error = write_error(path, force);
    EXPECT_EQ(error.find("(written)"), std::string::npos) << "'" << path << "'";
    EXPECT_TRUE(error.find("empty path") != std::string::npos || error.find("current directory") != std::string::npos)
        << "'" << path << "': " << error;
  }
  const fs::path cwd = fs::current_path();
  fs::current_path(tmp.path() / "real");
  EXPECT_NE(write_error(tmp.path() / "real", force).find("current directory"), std::string::npos);
  EXPECT_NE(write_error(tmp.path(), force).find("current directory"), std::string::npos);
  fs::current_path(cwd);
  // None of the refusals left anything behind.
  for (const auto& entry : fs::directory_iterator(tmp.path())) {
    EXPECT_EQ(entry.path().filename().string().rfind(".perseus-", 0), std::string::npos) << entry.path();
  }
}

// A run killed mid-write leaves its staging copy; the next run writing there removes it, and
// never a live run's.
TEST(FrontierDirectory, CopiesAbandonedByKilledRunsAreRemoved) {
  testing::TempDir tmp;
  const pid_t child = ::fork();
  if (child == 0) ::_exit(0);
  ASSERT_GT(child, 0);
  ::waitpid(child, nullptr, 0);  // a pid no process has now
  const fs::path dead = tmp.path() / (".perseus-tmp-" + std::to_string(child) + "-out");
  const fs::path live = tmp.path() / (".perseus-tmp-" + std::to_string(::getppid()) + "-out");
  fs::create_directories(dead / "plans");
  fs::create_directories(live);
  write(tmp.path() / "out");
  EXPECT_FALSE(fs::exists(dead));
  EXPECT_TRUE(fs::exists(live));  // its writer may still be at work
}

// Two runs writing one directory: one wins, the other gets a clear error and leaves nothing.
TEST(FrontierDirectory, ConcurrentWritersLeaveOneWholeOutput) {
  testing::TempDir tmp;
  const fs::path dir = tmp.path() / "out";
  try {
    write_directory_atomically(dir, false, [&](const fs::path& staging) {
      // The other run (another process) puts its output in place while this one is still filling.
      fs::create_directories(dir);
      std::ofstream(dir / "frontier.csv") << "the other run's";
      write_file_atomically(staging / "mine.txt", "late");
    });
    ADD_FAILURE() << "the late writer replaced the other run's output";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("written by another run meanwhile"), std::string::npos) << e.what();
  }
  EXPECT_EQ(read_text_file(dir / "frontier.csv"), "the other run's");
  EXPECT_FALSE(fs::exists(dir / "mine.txt"));
  std::size_t entries = 0;
  for ([[maybe_unused]] const auto& entry : fs::directory_iterator(tmp.path())) ++entries;
  EXPECT_EQ(entries, 1u);  // no staging copy left behind
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
  expect_error(header + "abc,1,1,0,,,,,,\n", "frontier.csv:2: time: expected a number, got 'abc'");
  expect_error(header + "1,1,1,0,\n", "frontier.csv:2: expected 10 fields, found 5");
  expect_error(header + "2,1,1,0,,,,,,\n1,1,1,1,,,,,,\n", "frontier.csv:3: times must be ascending");
  expect_error(header + "1,1,1,x,,,,,,\n", "frontier.csv:2: plan: expected a record number, got 'x'");
  expect_error(header + "1,1,1,1,,,,,,\n", "frontier.csv:2: plan: expected record 0");
  expect_error(header, "no frontier points");
  std::ofstream(dir / "summary.json", std::ios::trunc) << "{not json";
  EXPECT_THROW(read_frontier_directory(dir), InputError);
}

std::string error_of(const fs::path& dir) {
  try {
    read_frontier_directory(dir);
  } catch (const InputError& e) {
    return e.what();
  }
  return "(accepted)";
}

TEST(FrontierDirectory, AStoreThatDoesNotBelongIsAClearError) {
  testing::TempDir tmp;
  const fs::path dir = tmp.path() / "out";
  write(dir);
  const std::string store = read_text_file(dir / "plans.bin");

  // Truncated: the error names the file, the plans announced and the bytes there are.
  write_file_atomically(dir / "plans.bin", store.substr(0, store.size() - 5));
  EXPECT_NE(error_of(dir).find("plans.bin: truncated"), std::string::npos) << error_of(dir);
  write_file_atomically(dir / "plans.bin", store.substr(0, 30));
  EXPECT_NE(error_of(dir).find("plans.bin: truncated"), std::string::npos) << error_of(dir);
  write_file_atomically(dir / "plans.bin", "hello");
  EXPECT_NE(error_of(dir).find("not a perseus plan store"), std::string::npos) << error_of(dir);
  fs::remove(dir / "plans.bin");
  EXPECT_NE(error_of(dir).find("plans.bin: cannot open"), std::string::npos) << error_of(dir);

  // The store of a thinned-out run beside this frontier.csv: the plan counts disagree.
  OutputOptions thinned;
  thinned.max_plans = 4;
  write(tmp.path() / "thin", thinned);
  fs::copy_file(tmp.path() / "thin" / "plans.bin", dir / "plans.bin");
  EXPECT_NE(error_of(dir).find("holds 4 plans, but frontier.csv has"), std::string::npos) << error_of(dir);

  // The store of another problem with as many plans: the digests disagree.
  EnergyProblem other = solved().problem;
  other.p_blocking *= 1.5;
  write_frontier_directory(tmp.path() / "other", other, solved().crawl, solved().frontier, info(), {});
  fs::copy_file(tmp.path() / "other" / "plans.bin", dir / "plans.bin", fs::copy_options::overwrite_existing);
  EXPECT_NE(error_of(dir).find("written for another problem"), std::string::npos) << error_of(dir);

  // Back in place, the directory reads again: nothing above touched anything but plans.bin.
  write_file_atomically(dir / "plans.bin", store);
  EXPECT_EQ(read_frontier_directory(dir).plans(), solved().frontier.points.size());
}

}  // namespace
}  // namespace perseus
