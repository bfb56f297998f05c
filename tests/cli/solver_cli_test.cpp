// `perseus optimize` and `perseus select` as users run them: outputs, exit codes, and one
// clear message (with nothing left behind) for every kind of bad input.
#include <gtest/gtest.h>

#include <sys/wait.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "child_process.hpp"
#include "perseus/plan/frontier_io.hpp"
#include "perseus/plan/output_files.hpp"
#include "perseus/plan/plan_files.hpp"
#include "temp_dir.hpp"

namespace perseus {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

struct CommandResult {
  int exit_code = -1;
  std::string out;
  std::string err;
};

CommandResult perseus(const std::vector<std::string>& args) {
  testing::TempDir tmp;
  const std::string out_path = (tmp.path() / "stdout").string();
  testing::ChildProcessOptions options;
  options.stdout_path = out_path;
  testing::ChildProcess child(PERSEUS_BINARY, args, options);
  const auto status = child.wait(std::chrono::seconds(120));
  CommandResult run;
  run.err = child.log();
  run.out = read_text_file(out_path);
  if (status && WIFEXITED(*status)) run.exit_code = WEXITSTATUS(*status);
  return run;
}

const std::string kBloom = std::string(PERSEUS_SOURCE_DIR) + "/data/profiles/bloom-176b+a100-sxm.csv";

std::vector<std::string> optimize_args(const std::string& profile, const fs::path& out) {
  return {"optimize", "--profile", profile, "--stages", "8", "--microbatches", "12", "--p-blocking", "83.64",
          "--unit-time", "0.001", "--out", out.string()};
}

// Full precision: std::to_string keeps six decimals.
std::string number(double value) { return fmt::format("{:.17g}", value); }

std::vector<std::string> with(std::vector<std::string> args, const std::vector<std::string>& more) {
  args.insert(args.end(), more.begin(), more.end());
  return args;
}

TEST(Cli, EveryCommandHasHelp) {
  for (const std::string command : {"optimize", "select", "plans export", "plans info"}) {
    std::vector<std::string> args;
    std::istringstream words(command);
    for (std::string word; words >> word;) args.push_back(word);
    const CommandResult run = perseus(with(args, {"--help"}));
    EXPECT_EQ(run.exit_code, 0) << command;
    EXPECT_NE(run.out.find("--"), std::string::npos) << command;
  }
  const CommandResult top = perseus({"--help"});
  EXPECT_EQ(top.exit_code, 0);
  EXPECT_NE(top.out.find("optimize"), std::string::npos);
}

TEST(Cli, StartsWithoutLoadingTheLibrariesOnlySomeCommandsUse) {
  // librsvg (with cairo, pango, GLib, ...) and XGBoost are loaded by the commands that use them
  // (model/shared_library.hpp), and `perseus cluster` runs perseus-cluster, which links CLP,
  // CBC and libslurm (cli/main.cpp): linked, they were 62 of the binary's 71 libraries and most
  // of every command's start. The dynamic section lists what the loader maps at start.
  testing::TempDir tmp;
  const std::string listing = (tmp.path() / "dynamic").string();
  ASSERT_EQ(std::system(fmt::format("readelf -d '{}' > '{}'", PERSEUS_BINARY, listing).c_str()), 0);
  const std::string dynamic = read_text_file(listing);
  ASSERT_NE(dynamic.find("NEEDED"), std::string::npos) << dynamic;
  for (const char* library : {"librsvg", "libcairo", "libglib", "libxgboost", "libClp", "libCbc", "libslurm"})
    EXPECT_EQ(dynamic.find(library), std::string::npos) << library << " is linked:\n" << dynamic;
}

TEST(Cli, OptimizeWritesTheFrontierAndSelectPicksFromIt) {
  testing::TempDir tmp;
  const fs::path out = tmp.path() / "runs" / "today" / "bloom";  // parents are created, as mkdir -p
  const CommandResult run = perseus(with(optimize_args(kBloom, out), {"--json"}));
  ASSERT_EQ(run.exit_code, 0) << run.err;
  const json summary = json::parse(run.out);
  EXPECT_EQ(summary.at("schema"), "perseus.summary/1");
  EXPECT_EQ(summary.at("crawl").at("steps"), 640);  // the reference's 640 steps
  EXPECT_GT(summary.at("savings_at_t_min_fraction").get<double>(), 0.05);
  EXPECT_NE(run.err.find("crawling"), std::string::npos);  // progress goes to stderr
  EXPECT_TRUE(fs::exists(out / "frontier.csv"));
  EXPECT_TRUE(fs::exists(out / "summary.json"));
  EXPECT_TRUE(fs::exists(out / "freqs_pipeline_00000.py"));

  const double t_min = summary.at("t_min_s").get<double>();
  const double t_star = summary.at("t_star_s").get<double>();
  // The least energy per iteration lies between T_min and T*, at no more energy than T*'s.
  const json& least = summary.at("least_energy");
  EXPECT_GE(least.at("time_s").get<double>(), t_min);
  EXPECT_LE(least.at("time_s").get<double>(), t_star);
  EXPECT_LE(least.at("energy_j").get<double>(), summary.at("energy_at_t_star_j").get<double>());
  const CommandResult select = perseus({"select", "--frontier", out.string(), "--straggler-time", number(t_star * 1.5), "--json"});
  ASSERT_EQ(select.exit_code, 0) << select.err;
  const json chosen = json::parse(select.out);
  EXPECT_NEAR(chosen.at("t_opt_s").get<double>(), t_star, 1e-9);  // T' beyond T*: T_opt = T*
  EXPECT_NEAR(chosen.at("plan_time_s").get<double>(), t_star, 1e-9);
  EXPECT_TRUE(fs::exists(chosen.at("plan_file").get<std::string>()));
  const CommandResult fastest = perseus({"select", "--frontier", out.string(), "--deadline", number(t_min + 1e-7), "--json"});
  ASSERT_EQ(fastest.exit_code, 0) << fastest.err;
  EXPECT_NEAR(json::parse(fastest.out).at("plan_time_s").get<double>(), t_min, 1e-9);
  const CommandResult human = perseus({"select", "--frontier", out.string(), "--deadline", number((t_min + t_star) / 2)});
  EXPECT_EQ(human.exit_code, 0);
  EXPECT_NE(human.out.find("T_opt"), std::string::npos);

  // An existing output is refused without --force and left as it was.
  const std::string before = read_text_file(out / "frontier.csv");
  const CommandResult again = perseus(optimize_args(kBloom, out));
  EXPECT_EQ(again.exit_code, 2);
  EXPECT_NE(again.err.find("--force"), std::string::npos) << again.err;
  EXPECT_EQ(again.err.find("crawling"), std::string::npos) << "refused only after solving: " << again.err;
  EXPECT_EQ(read_text_file(out / "frontier.csv"), before);
  EXPECT_EQ(perseus(with(optimize_args(kBloom, out), {"--force", "-q"})).exit_code, 0);
  // A deadline faster than T_min is an error, not a plan.
  const CommandResult too_fast = perseus({"select", "--frontier", out.string(), "--deadline", number(t_min * 0.9)});
  EXPECT_EQ(too_fast.exit_code, 2);
  EXPECT_NE(too_fast.err.find("no plan finishes within"), std::string::npos) << too_fast.err;
}

// Every plan lives in plans.bin; freqs_pipeline files exist for the few a deployment loads
// first, and any other is one command away.
// The second crawl (on the measured hull) bounds every plan and offers plans of its own;
// --no-hull-crawl skips it, and the summary says which ran.
// select --exact: the exact MILP at the deadline, from the frontier's plan. Whatever CBC finds
// in its time, the plan written is the one reported, meets the deadline and is no dearer than
// the frontier's, under a bound no lower than the frontier's LP bound there.
TEST(Cli, SelectExactImprovesOnTheFrontiersPlanUnderAProvenBound) {
  testing::TempDir tmp;
  const fs::path out = tmp.path() / "bloom";
  ASSERT_EQ(perseus(with(optimize_args(kBloom, out), {"-q"})).exit_code, 0);
  const FrontierIndex index = read_frontier_directory(out);
  // Near T_min, where the frontier's plans are furthest above their bounds.
  const std::size_t row = 13;
  const double deadline = index.entries[row].time_s;
  const fs::path py = tmp.path() / "exact.py";
  const CommandResult run = perseus({"select", "--frontier", out.string(), "--deadline", number(deadline), "--exact", "3",
                                     "--py", py.string(), "--json"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  const json chosen = json::parse(run.out);
  ASSERT_EQ(chosen.at("point").get<std::size_t>(), row);
  const json& exact = chosen.at("exact");
  const double energy = exact.at("energy_at_requested_j").get<double>();
  const double bound = exact.at("lower_bound_j").get<double>();
  EXPECT_LE(energy, index.entries[row].energy_j + 1e-9);
  EXPECT_LE(bound, energy + 1e-9);
  EXPECT_GE(bound, index.entries[row].lower_bound_j * (1 - 1e-6));
  EXPECT_NEAR(exact.at("gap_fraction").get<double>(), energy / bound - 1, 1e-12);
  // The plan written is the one reported: evaluated anew on the problem the frontier was for.
  const EnergyProblem problem = frontier_problem(index);
  const MeasuredFigures measured = evaluate_measured(problem, choice_for_frequencies(problem, read_freqs_pipeline(py)));
  EXPECT_LE(measured.time_s, deadline + 1e-9);
  EXPECT_NEAR(measured.energy_j + problem.p_blocking * problem.num_gpus() * (deadline - measured.time_s), energy, 1e-6);
  EXPECT_EQ(exact.at("improved").get<bool>(), read_freqs_pipeline(py) != index.frequencies(row));
  std::cout << "select --exact 3: " << (exact.at("improved").get<bool>() ? "improved" : "not improved") << ", "
            << index.entries[row].energy_j << " -> " << energy << " J, bound " << index.entries[row].lower_bound_j
            << " -> " << bound << " J\n";

  // Another profile than the plans were solved on is refused, naming why; so is a missing one.
  const std::string gpt3 = std::string(PERSEUS_SOURCE_DIR) + "/data/profiles/gpt3-175b+a100-sxm.csv";
  const CommandResult other = perseus({"select", "--frontier", out.string(), "--deadline", number(deadline), "--exact",
                                       "1", "--profile", gpt3});
  EXPECT_EQ(other.exit_code, 2);
  EXPECT_NE(other.err.find("problem digest"), std::string::npos) << other.err;
  const CommandResult missing = perseus({"select", "--frontier", out.string(), "--deadline", number(deadline), "--exact",
                                         "1", "--profile", (tmp.path() / "nope.csv").string()});
  EXPECT_EQ(missing.exit_code, 2);
  EXPECT_NE(missing.err.find("is not there"), std::string::npos) << missing.err;
}

TEST(Cli, NoHullCrawlNoLpSweepAndNoCertifySkipWhatTheySay) {
  testing::TempDir tmp;
  const CommandResult with_hull = perseus(with(optimize_args(kBloom, tmp.path() / "with"), {"--json", "-q"}));
  ASSERT_EQ(with_hull.exit_code, 0) << with_hull.err;
  const json certified = json::parse(with_hull.out).at("certification");
  EXPECT_GE(certified.at("hull_crawl_steps").get<int>(), 64);
  EXPECT_GT(certified.at("hull_crawl_plans").get<int>(), 0);
  EXPECT_GT(certified.at("sweep_solves").get<int>(), 0);
  const CommandResult without = perseus(with(optimize_args(kBloom, tmp.path() / "without"), {"--json", "-q", "--no-hull-crawl"}));
  ASSERT_EQ(without.exit_code, 0) << without.err;
  const json summary = json::parse(without.out);
  EXPECT_EQ(summary.at("certification").at("hull_crawl_steps"), 0);
  EXPECT_EQ(summary.at("certification").at("hull_crawl_plans"), 0);
  // The LP solves still bound every point.
  EXPECT_EQ(summary.at("certification").at("bounded_points"), summary.at("points"));
  // --no-lp-sweep skips the sweep, and its plans: the median gap widens.
  const CommandResult unswept = perseus(with(optimize_args(kBloom, tmp.path() / "unswept"), {"--json", "-q", "--no-lp-sweep"}));
  ASSERT_EQ(unswept.exit_code, 0) << unswept.err;
  const json plain = json::parse(unswept.out).at("certification");
  EXPECT_EQ(plain.at("sweep_solves"), 0);
  EXPECT_GT(plain.at("median_gap_fraction").get<double>(), certified.at("median_gap_fraction").get<double>());
  // --no-certify skips all of it, still bounds every point (from the solves made anyway),
  // says so, and cannot be asked for with --certify.
  EXPECT_TRUE(certified.at("certified").get<bool>());
  const CommandResult quick = perseus(with(optimize_args(kBloom, tmp.path() / "quick"), {"--json", "-q", "--no-certify"}));
  ASSERT_EQ(quick.exit_code, 0) << quick.err;
  const json uncertified = json::parse(quick.out);
  const json& bounds = uncertified.at("certification");
  EXPECT_FALSE(bounds.at("certified").get<bool>());
  EXPECT_EQ(bounds.at("lp_solves"), 0);
  EXPECT_EQ(bounds.at("hull_crawl_steps"), 0);
  EXPECT_EQ(bounds.at("sweep_solves"), 0);
  EXPECT_EQ(bounds.at("bounded_points"), uncertified.at("points"));
  EXPECT_GT(bounds.at("median_gap_fraction").get<double>(), plain.at("median_gap_fraction").get<double>());
  const CommandResult text = perseus(with(optimize_args(kBloom, tmp.path() / "text"), {"-q", "--no-certify"}));
  ASSERT_EQ(text.exit_code, 0) << text.err;
  EXPECT_NE(text.out.find("Not certified (--no-certify)"), std::string::npos) << text.out;
  const CommandResult both = perseus(with(optimize_args(kBloom, tmp.path() / "both"), {"-q", "--no-certify", "--certify", "1"}));
  EXPECT_NE(both.exit_code, 0);
  EXPECT_NE(both.err.find("excludes"), std::string::npos) << both.err;
  EXPECT_FALSE(fs::exists(tmp.path() / "both"));
}

// --timings with --json: every part of the command, the parts within the total, the
// certification (the frontier's last part) within the frontier's time, and the CPU time the
// process spent before the command began (loading the program at least).
TEST(Cli, TimingsAddUpAndPlaceTheCertificationWithinTheFrontier) {
  testing::TempDir tmp;
  const CommandResult run = perseus(with(optimize_args(kBloom, tmp.path() / "bloom"), {"--json", "--timings"}));
  ASSERT_EQ(run.exit_code, 0) << run.err;
  const json timings = json::parse(run.out).at("timings");
  double parts = 0.0;
  for (const char* part : {"profile_read_s", "problem_s", "crawl_s", "frontier_s", "output_s"}) {
    ASSERT_TRUE(timings.contains(part)) << part << " in " << timings.dump();
    EXPECT_GE(timings[part].get<double>(), 0.0) << part;
    parts += timings[part].get<double>();
  }
  EXPECT_LE(parts, timings.at("total_s").get<double>());
  EXPECT_GT(timings.at("certification_s").get<double>(), 0.0);
  EXPECT_LE(timings.at("certification_s").get<double>(), timings.at("frontier_s").get<double>());
  EXPECT_GT(timings.at("process_start_s").get<double>(), 0.0);
}

TEST(Cli, PlansAreStoredOnceAndExportedOnDemand) {
  testing::TempDir tmp;
  const fs::path out = tmp.path() / "bloom";
  const CommandResult run = perseus(with(optimize_args(kBloom, out), {"--timings", "-q"}));
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_NE(run.out.find("Timings (s): process_start "), std::string::npos) << run.out;
  EXPECT_NE(run.out.find(" profile_read "), std::string::npos) << run.out;
  EXPECT_NE(run.out.find(" certification "), std::string::npos) << run.out;
  const FrontierIndex index = read_frontier_directory(out);
  const std::size_t points = index.entries.size();
  ASSERT_GT(points, 500u);  // hundreds of plans (553 with the hull crawl's rounded plans among the candidates)
  EXPECT_EQ(index.plans(), points);
  std::size_t py_files = 0, bytes = 0;
  for (const auto& entry : fs::directory_iterator(out)) {
    py_files += entry.path().extension() == ".py";
    bytes += fs::file_size(entry.path());
  }
  EXPECT_LE(py_files, 8u);
  EXPECT_GE(py_files, 3u);
  EXPECT_LT(bytes, 2048 * points);  // the whole output, under 2 KB per frontier point

  // One plan, three ways: export by point, select --py, and the store itself.
  const std::size_t row = points / 3;
  const fs::path exported = tmp.path() / "point.py";
  ASSERT_EQ(perseus({"plans", "export", "--frontier", out.string(), "--point", std::to_string(row), "--out",
                     exported.string(), "-q"}).exit_code, 0);
  EXPECT_EQ(read_freqs_pipeline(exported), index.frequencies(row));
  const CommandResult again = perseus({"plans", "export", "--frontier", out.string(), "--point", "0", "--out",
                                       exported.string()});
  EXPECT_EQ(again.exit_code, 2);  // exists: refused without --force, and left as it was
  EXPECT_EQ(read_freqs_pipeline(exported), index.frequencies(row));
  const double deadline = index.entries[row].time_s;
  const fs::path selected = tmp.path() / "sel" / "chosen.py";
  const CommandResult select = perseus({"select", "--frontier", out.string(), "--deadline", number(deadline), "--py",
                                        selected.string(), "--json"});
  ASSERT_EQ(select.exit_code, 0) << select.err;
  const std::size_t chosen = json::parse(select.out).at("point").get<std::size_t>();
  EXPECT_EQ(index.entries[chosen].time_s, index.entries[row].time_s);
  EXPECT_EQ(read_freqs_pipeline(selected), index.frequencies(chosen));
  const CommandResult as_json = perseus({"plans", "export", "--frontier", out.string(), "--point", "0", "--format",
                                         "json", "--out", "-"});
  ASSERT_EQ(as_json.exit_code, 0) << as_json.err;
  EXPECT_EQ(json::parse(as_json.out).at("schema"), "perseus.plan/1");

  // --all writes every plan as optimize used to; info describes the store.
  const fs::path all = tmp.path() / "all";
  ASSERT_EQ(perseus({"plans", "export", "--frontier", out.string(), "--all", "--out", all.string(), "-q"}).exit_code, 0);
  std::size_t all_files = 0;
  for (const auto& entry : fs::directory_iterator(all)) all_files += entry.path().extension() == ".py";
  EXPECT_EQ(all_files, points);
  EXPECT_EQ(read_freqs_pipeline(all / fmt::format("freqs_pipeline_{:05d}.py", points - 1)), index.frequencies(0));
  const CommandResult info = perseus({"plans", "info", "--frontier", out.string(), "--json"});
  ASSERT_EQ(info.exit_code, 0) << info.err;
  EXPECT_EQ(json::parse(info.out).at("store").at("record_bytes"), 8 * 24);  // 8 stages x 12 x (F, B)

  // Bad requests: a point beyond the frontier, two choices at once, a directory that is not one.
  EXPECT_EQ(perseus({"plans", "export", "--frontier", out.string(), "--point", std::to_string(points), "--out", "-"}).exit_code, 2);
  EXPECT_NE(perseus({"plans", "export", "--frontier", out.string(), "--point", "1", "--all", "--out", "-"}).exit_code, 0);
  const CommandResult missing = perseus({"plans", "info", "--frontier", (tmp.path() / "nope").string()});
  EXPECT_EQ(missing.exit_code, 2);
  EXPECT_NE(missing.err.find("not a frontier directory"), std::string::npos) << missing.err;
}

// A frontier directory's damage is found by select, not by the deployment that loads the plan.
TEST(Cli, SelectRefusesNonsenseDeadlinesAndDamagedPlans) {
  testing::TempDir tmp;
  const std::string v1 = std::string(PERSEUS_SOURCE_DIR) + "/tests/data/frontier-v1";
  const CommandResult nan = perseus({"select", "--frontier", v1, "--deadline", "nan"});
  EXPECT_EQ(nan.exit_code, 2);
  EXPECT_NE(nan.err.find("got nan"), std::string::npos) << nan.err;
  const CommandResult tiny = perseus({"select", "--frontier", v1, "--deadline", "1e-300"});
  EXPECT_EQ(tiny.exit_code, 2);
  EXPECT_NE(tiny.err.find("within 1e-300 s"), std::string::npos) << tiny.err;  // not 300 zeros

  // A copy of the older directory whose chosen plan file is missing, then damaged, then outside.
  const fs::path copy = tmp.path() / "v1";
  fs::copy(v1, copy, fs::copy_options::recursive);
  fs::remove(copy / "freqs_pipeline_00269.py");
  const CommandResult missing = perseus({"select", "--frontier", copy.string(), "--deadline", "2.0"});
  EXPECT_EQ(missing.exit_code, 2);
  EXPECT_NE(missing.err.find("freqs_pipeline_00269.py"), std::string::npos) << missing.err;
  std::ofstream(copy / "freqs_pipeline_00269.py") << "[[('forward', 1410)";
  EXPECT_EQ(perseus({"select", "--frontier", copy.string(), "--deadline", "2.0"}).exit_code, 2);
  std::string csv = read_text_file(copy / "frontier.csv");
  csv.replace(csv.find("freqs_pipeline_00269.py"), 23, "../../../../etc/passwd");
  std::ofstream(copy / "frontier.csv", std::ios::trunc) << csv;
  const CommandResult outside = perseus({"select", "--frontier", copy.string(), "--deadline", "2.0"});
  EXPECT_EQ(outside.exit_code, 2);
  EXPECT_NE(outside.err.find("outside the frontier directory"), std::string::npos) << outside.err;
}

// The directory written by the release before the store (tests/data/frontier-v1) reads.
TEST(Cli, ReadsADirectoryWrittenBeforeTheStore) {
  testing::TempDir tmp;
  const std::string v1 = std::string(PERSEUS_SOURCE_DIR) + "/tests/data/frontier-v1";
  const CommandResult select = perseus({"select", "--frontier", v1, "--deadline", "2.0", "--json"});
  ASSERT_EQ(select.exit_code, 0) << select.err;
  EXPECT_EQ(json::parse(select.out).at("point"), 269);
  const fs::path exported = tmp.path() / "p.py";
  ASSERT_EQ(perseus({"plans", "export", "--frontier", v1, "--point", "0", "--out", exported.string(), "-q"}).exit_code, 0);
  EXPECT_EQ(read_freqs_pipeline(exported), read_freqs_pipeline(v1 + "/freqs_pipeline_00538.py"));
}

TEST(Cli, BadInputGetsOneClearMessageAndLeavesNothingBehind) {
  testing::TempDir tmp;
  const fs::path out = tmp.path() / "out";
  const auto bad_profile = [&](const std::string& name, const std::string& text) { return tmp.write(name, text).string(); };
  struct Case {
    std::vector<std::string> args;
    std::string message;
  };
  const std::string header = "stage,instruction,frequency,time,energy\n";
  const std::vector<Case> cases = {
      {with(optimize_args(kBloom, out), {"--schedule", "zigzag"}), "unknown schedule 'zigzag'"},
      {{"optimize", "--profile", kBloom, "--stages", "8", "--microbatches", "12", "--schedule", "interleaved-1f1b",
        "--chunks", "2", "--p-blocking", "83.64", "--unit-time", "0.001", "--out", out.string()},
       "multiple of"},
      {{"optimize", "--profile", kBloom, "--stages", "8", "--microbatches", "12", "--p-blocking", "0", "--unit-time",
        "0.001", "--out", out.string()},
       "p_blocking"},
      {{"optimize", "--profile", kBloom, "--stages", "8", "--microbatches", "12", "--p-blocking", "83.64",
        "--unit-time", "-0.001", "--out", out.string()},
       "unit"},
      {{"optimize", "--profile", kBloom, "--stages", "8", "--microbatches", "12", "--p-blocking", "83.64",
        "--unit-time", "10", "--out", out.string()},
       "unit"},
      {optimize_args(bad_profile("empty.csv", ""), out), "empty.csv"},
      {optimize_args(bad_profile("nan.csv", header + "0,forward,1410,nan,1\n"), out), "nan.csv:2"},
      {optimize_args(bad_profile("neg.csv", header + "0,forward,1410,-0.1,1\n"), out), "neg.csv:2"},
      {optimize_args(bad_profile("dup.csv", header + "0,forward,1410,0.1,1\n0,forward,1410,0.1,1\n"), out), "dup.csv:3"},
      {optimize_args(bad_profile("text.csv", "this is not a profile\n"), out), "text.csv"},
      {optimize_args(bad_profile("two.csv", header + "0,forward,1410,0.1,30\n0,forward,1300,0.11,25\n"
                                                     "0,backward,1410,0.2,60\n0,backward,1300,0.22,50\n"), out),
       "stage"},
      {{"optimize", "--profile", (tmp.path() / "missing.csv").string(), "--microbatches", "4", "--p-blocking", "80",
        "--unit-time", "0.001", "--out", out.string()},
       "missing.csv"},
      {with(optimize_args(kBloom, tmp.path() / "empty.csv" / "out"), {}), "cannot create the output's directory"},
      {{"select", "--frontier", (tmp.path() / "nothing").string(), "--deadline", "3"}, "not a frontier directory"},
      {{"select", "--frontier", (tmp.path() / "nothing").string()}, "--deadline or --straggler-time"},
      // Sizes beyond the limits are refused at once, naming the limit.
      {with(optimize_args(kBloom, out), {"--stages", "100000"}), "--stages: Value 100000 not in range 1 to 1024"},
      {with(optimize_args(kBloom, out), {"--stages", "0"}), "--stages: Value 0 not in range"},
      {with(optimize_args(kBloom, out), {"--max-plans", "-1"}), "--max-plans"},
      {optimize_args(bad_profile("far.csv", header + "100000,forward,1410,0.1,30\n"), out), "at most 1024 stages"},
      {optimize_args(bad_profile("tiny.csv", header + "0,forward,1410,1e-320,30\n"), out), "tiny.csv:2"},
      {optimize_args(bad_profile("free.csv", header + "0,forward,1410,0.1,0\n"), out), "free.csv:2"},
      // Outputs that would destroy something: the input, the current directory, nothing at all.
      {with(optimize_args(kBloom, kBloom), {"--force"}), "would replace the input"},
      {with(optimize_args(kBloom, ""), {"--force"}), "empty path"},
      {with(optimize_args(kBloom, "."), {"--force"}), "current directory"},
      {with(optimize_args(kBloom, "/"), {"--force"}), "current directory, one above it or the root"},
      {with(optimize_args(kBloom, tmp.path()), {"--force"}), "perseus did not write it"},
  };
  for (const Case& c : cases) {
    const CommandResult run = perseus(c.args);
    EXPECT_NE(run.exit_code, 0) << c.message;
    EXPECT_NE(run.exit_code, 4) << "an internal error: " << run.err;
    EXPECT_NE(run.err.find(c.message), std::string::npos) << "expected '" << c.message << "' in: " << run.err;
    EXPECT_FALSE(fs::exists(out)) << c.message;
  }
  // Nothing but the inputs written above is left in the directory (no staging directories).
  for (const auto& entry : fs::directory_iterator(tmp.path())) {
    EXPECT_EQ(entry.path().extension(), ".csv") << entry.path();
  }
}

}  // namespace
}  // namespace perseus
