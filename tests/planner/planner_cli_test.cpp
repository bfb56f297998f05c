// The planner's commands as users run them: outputs, exit codes and messages.
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/wait.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "perseus/planner/energy_model.hpp"
#include "perseus/profile/profile.hpp"

namespace perseus {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

class ScratchDir {
 public:
  ScratchDir() {
    std::string pattern = (fs::temp_directory_path() / "perseus-planner-cli-XXXXXX").string();
    if (!::mkdtemp(pattern.data())) throw std::runtime_error("mkdtemp failed");
    path_ = pattern;
  }
  ~ScratchDir() {
    std::error_code ignored;
    fs::remove_all(path_, ignored);
  }
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

std::string slurp(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

// Single-quoted for /bin/sh.
std::string quote(const std::string& arg) {
  std::string out(1, '\'');
  for (char c : arg) {
    if (c == '\'') {
      out.append("'\\''");
    } else {
      out.push_back(c);
    }
  }
  out.push_back('\'');
  return out;
}

struct CommandRun {
  int exit_code = -1;
  std::string out, err;
};

CommandRun perseus(const std::vector<std::string>& args) {
  ScratchDir io;
  std::string command = quote(PERSEUS_BINARY);
  for (const std::string& a : args) {
    command.push_back(' ');
    command.append(quote(a));
  }
  command.append(" >").append(quote((io.path() / "out").string()));
  command.append(" 2>").append(quote((io.path() / "err").string())).append(" </dev/null");
  const int status = std::system(command.c_str());
  CommandRun run;
  if (status != -1 && WIFEXITED(status)) run.exit_code = WEXITSTATUS(status);
  run.out = slurp(io.path() / "out");
  run.err = slurp(io.path() / "err");
  return run;
}

const std::string kMeasured = std::string(PERSEUS_SOURCE_DIR) + "/data/profiles/gpt3-175b+a100-sxm.csv";

TEST(PlannerCli, EveryCommandHasHelp) {
  for (const std::vector<std::string>& command :
       std::vector<std::vector<std::string>>{{"models"}, {"gpus"}, {"profile", "synth"}, {"profile", "compare"},
                                             {"calibrate"}, {"partition"}, {"configure"}, {"schedules"}, {"plan"}}) {
    std::vector<std::string> args = command;
    args.push_back("--help");
    const CommandRun run = perseus(args);
    EXPECT_EQ(run.exit_code, 0) << command.back() << ": " << run.err;
    EXPECT_NE(run.out.find("--"), std::string::npos) << command.back();
  }
}

TEST(PlannerCli, SynthesisedProfilesFeedTheSolverAndCompareWithMeasuredOnes) {
  ScratchDir tmp;
  const std::string csv = (tmp.path() / "gpt3.csv").string();
  // The bundled profile's configuration: t = 8, 12 blocks a stage (plus the embedding and head).
  const CommandRun synth = perseus({"profile", "synth", "--model", "gpt3-175b", "--gpu", "a100-sxm", "--tensor-parallel", "8",
                             "--boundaries", "13,25,37,49,61,73,85", "--out", csv, "--json"});
  ASSERT_EQ(synth.exit_code, 0) << synth.err;
  EXPECT_EQ(json::parse(synth.out).at("stages"), 8);
  const Profile profile = Profile::read_csv(csv);
  profile.validate_for(8);

  const CommandRun compare = perseus({"profile", "compare", "--measured", kMeasured, "--predicted", csv, "--json"});
  ASSERT_EQ(compare.exit_code, 0) << compare.err;
  const json errors = json::parse(compare.out);
  EXPECT_EQ(errors.at("time").at("rows"), 608);
  EXPECT_LT(errors.at("time").at("median").get<double>(), 0.03);
  EXPECT_LT(errors.at("energy").at("median").get<double>(), 0.015);

  const CommandRun optimize = perseus({"optimize", "--profile", csv, "--microbatches", "12", "--p-blocking", "83.64",
                                "--unit-time", "0.001", "--out", (tmp.path() / "frontier").string(), "-q", "--json"});
  ASSERT_EQ(optimize.exit_code, 0) << optimize.err;
  EXPECT_GT(json::parse(optimize.out).at("savings_at_t_min_fraction").get<double>(), 0.05);

  // An existing file is not replaced without --force.
  const std::string before = slurp(csv);
  const CommandRun again = perseus({"profile", "synth", "--model", "gpt3-1.3b", "--gpu", "a40", "--stages", "2", "--out", csv});
  EXPECT_EQ(again.exit_code, 2);
  EXPECT_NE(again.err.find("--force"), std::string::npos) << again.err;
  EXPECT_EQ(slurp(csv), before);
}

// calibrate --held-out: the fitted model's errors on a profile the fit did not see, as the
// library computes them; a profile of another GPU is refused by name.
TEST(PlannerCli, CalibrateReportsHeldOutProfiles) {
  const std::string bloom = std::string(PERSEUS_SOURCE_DIR) + "/data/profiles/bloom-176b+a100-sxm.csv";
  const CommandRun run = perseus({"calibrate", "--profile", kMeasured, "--held-out", bloom, "--json"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  const auto out = nlohmann::json::parse(run.out);
  ASSERT_TRUE(out.contains("held_out")) << run.out;
  const auto& held = out["held_out"]["bloom-176b+a100-sxm"];
  const planner::CalibrationResult fit = planner::calibrate({planner::reference_case(kMeasured)});
  const planner::ProfileComparison expected = planner::compare_with_reference(planner::reference_case(bloom), fit.params);
  EXPECT_NEAR(held["time"]["median"].get<double>(), expected.time.median, 1e-9);
  EXPECT_NEAR(held["energy"]["p90"].get<double>(), expected.energy.p90, 1e-9);
  EXPECT_FALSE(out["profiles"].contains("bloom-176b+a100-sxm"));  // not fitted on

  const std::string a40 = std::string(PERSEUS_SOURCE_DIR) + "/data/profiles/gpt3-175b+a40.csv";
  const CommandRun other = perseus({"calibrate", "--profile", kMeasured, "--held-out", a40});
  EXPECT_EQ(other.exit_code, 2);
  EXPECT_NE(other.err.find("measured on a40, the fit is for a100-sxm"), std::string::npos) << other.err;
}

TEST(PlannerCli, PlanWritesTheFrontierAndExplainsItself) {
  ScratchDir tmp;
  const fs::path out = tmp.path() / "plan";
  const CommandRun run = perseus({"plan", "--model", "gpt3-1.3b", "--gpu", "a100-sxm", "--gpus", "8", "--global-batch", "64",
                           "--out", out.string(), "--max-plans", "5", "--json"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  const json plan = json::parse(run.out);
  const json& c = plan.at("configuration");
  EXPECT_EQ(c.at("tensor").get<int>() * c.at("pipeline").get<int>() * c.at("data").get<int>(), 8);
  EXPECT_TRUE(c.at("fits").get<bool>());
  EXPECT_FALSE(plan.at("reasons").empty());
  EXPECT_GE(plan.at("frontier").at("savings_at_t_min_fraction").get<double>(), 0.0);
  EXPECT_EQ(plan.at("frontier").at("stragglers").size(), 4u);
  EXPECT_NE(run.err.find("sweeping configurations"), std::string::npos);  // progress on stderr
  for (const char* file : {"frontier.csv", "summary.json", "profile.csv", "plan.json"}) {
    EXPECT_TRUE(fs::exists(out / file)) << file;
  }
  EXPECT_EQ(json::parse(slurp(out / "plan.json")).at("model"), "gpt3-1.3b");
  // Human output says what it saves and why.
  const CommandRun human = perseus({"plan", "--model", "gpt3-1.3b", "--gpu", "a100-sxm", "--gpus", "8", "--global-batch",
                             "64", "-q"});
  ASSERT_EQ(human.exit_code, 0) << human.err;
  EXPECT_NE(human.out.find("Why:"), std::string::npos);
  EXPECT_NE(human.out.find("at T_min"), std::string::npos);
  // T_min beside the estimate: how far apart, against the estimate's pipeline part.
  const double t_min = plan.at("frontier").at("t_min_s").get<double>();
  const double pipeline_s = c.at("pipeline_s").get<double>();
  EXPECT_NE(human.out.find(fmt::format("{:.1f}% {} the estimate's pipeline time ({:.3f} s)",
                                       100.0 * std::abs(t_min / pipeline_s - 1.0), t_min <= pipeline_s ? "below" : "above",
                                       pipeline_s)),
            std::string::npos)
      << human.out;
  // Refuses to replace the directory.
  EXPECT_EQ(perseus({"plan", "--model", "gpt3-1.3b", "--gpu", "a100-sxm", "--gpus", "8", "--out", out.string(), "-q"})
                .exit_code,
            2);
  // Without the solve too, the output is a directory of its own, put in place whole; a
  // directory of the user's is never written into, even with --force.
  const fs::path unsolved = tmp.path() / "unsolved";
  ASSERT_EQ(perseus({"plan", "--model", "gpt3-1.3b", "--gpu", "a100-sxm", "--gpus", "8", "--no-solve", "--out",
                     unsolved.string(), "-q"})
                .exit_code,
            0);
  for (const char* file : {"profile.csv", "plan.json"}) EXPECT_TRUE(fs::exists(unsolved / file)) << file;
  const fs::path users = tmp.path() / "users";
  fs::create_directories(users);
  std::ofstream(users / "profile.csv") << "mine\n";
  const CommandRun refused = perseus({"plan", "--model", "gpt3-1.3b", "--gpu", "a100-sxm", "--gpus", "8", "--no-solve",
                                      "--out", users.string(), "--force", "-q"});
  EXPECT_EQ(refused.exit_code, 2);
  EXPECT_NE(refused.err.find("perseus did not write it"), std::string::npos) << refused.err;
  EXPECT_EQ(slurp(users / "profile.csv"), "mine\n");
  EXPECT_FALSE(fs::exists(users / "plan.json"));
}

TEST(PlannerCli, PipeDream2BwBeatsOneFOneBAndRefinementCanBeSkipped) {
  // The same configuration under both schedules: 2BW's steady-state window has no fill or drain.
  const std::vector<std::string> base = {"plan", "--model", "gpt3-1.3b", "--gpu", "a100-sxm", "--gpus", "8",
                                         "--global-batch", "32", "-t", "2", "-p", "4", "-b", "1", "--no-recompute",
                                         "--stragglers", "1.1", "--json"};
  auto with = [&](std::vector<std::string> extra) {
    std::vector<std::string> args = base;
    args.insert(args.end(), extra.begin(), extra.end());
    return perseus(args);
  };
  const CommandRun flush = with({"--schedule", "1f1b"});
  const CommandRun two_bw = with({"--schedule", "pipedream-2bw"});
  ASSERT_EQ(flush.exit_code, 0) << flush.err;
  ASSERT_EQ(two_bw.exit_code, 0) << two_bw.err;
  const json a = json::parse(flush.out), b = json::parse(two_bw.out);
  for (const char* key : {"tensor", "pipeline", "data", "microbatch_size", "microbatches"}) {
    EXPECT_EQ(a.at("configuration").at(key), b.at("configuration").at(key)) << key;
  }
  EXPECT_EQ(b.at("configuration").at("schedule"), "pipedream-2bw");
  EXPECT_LT(b.at("frontier").at("t_min_s").get<double>(), a.at("frontier").at("t_min_s").get<double>());
  // Progress around the frontier on stderr, and --no-refine keeps the crawl's plans.
  EXPECT_NE(flush.err.find("crawling the frontier"), std::string::npos) << flush.err;
  EXPECT_NE(flush.err.find("points from"), std::string::npos) << flush.err;
  const CommandRun raw = with({"--no-refine"});
  ASSERT_EQ(raw.exit_code, 0) << raw.err;
  EXPECT_NE(raw.err.find("no refinement"), std::string::npos) << raw.err;
  EXPECT_FALSE(json::parse(raw.out).at("frontier").at("points").get<std::size_t>() == 0);
  // --certify reaches the solver (T_min's relaxation, solved on this small DAG anyway) and the
  // summary says where T_min's bound came from; a negative budget is refused.
  const CommandRun certified = with({"--schedule", "1f1b", "--certify", "0.05"});
  ASSERT_EQ(certified.exit_code, 0) << certified.err;
  const json f = json::parse(certified.out).at("frontier");
  EXPECT_TRUE(f.at("t_min_relaxation_solved").get<bool>());
  EXPECT_LE(f.at("t_min_lower_bound_j").get<double>(), f.at("t_min_energy_j").get<double>());
  EXPECT_GT(f.at("t_min_lower_bound_j").get<double>(), 0.9 * f.at("t_min_energy_j").get<double>());
  EXPECT_NE(with({"--certify", "-1"}).exit_code, 0);
}

TEST(PlannerCli, PlansAGptGivenByItsShape) {
  // The dissertation's 1-trillion-parameter run (Table 4.1): 128 layers, hidden 25,600, 160
  // heads, 3,072 GPUs at t = 8, p = 64, batch 3,072.
  const CommandRun run = perseus({"plan", "--layers", "128", "--hidden", "25600", "--heads", "160", "--gpu", "a100-sxm",
                                  "--gpus", "3072", "--global-batch", "3072", "-t", "8", "-p", "64", "--no-solve", "--json", "-q"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  const json plan = json::parse(run.out);
  EXPECT_EQ(plan.at("model"), "gpt-l128-h25600-a160");
  EXPECT_EQ(plan.at("configuration").at("tensor"), 8);
  EXPECT_EQ(plan.at("configuration").at("pipeline"), 64);
  EXPECT_EQ(plan.at("configuration").at("data"), 6);
  const CommandRun configure = perseus({"configure", "--layers", "24", "--hidden", "2304", "--heads", "24", "--gpu",
                                        "a100-sxm", "--gpus", "32", "--global-batch", "512", "--top", "1", "--json"});
  ASSERT_EQ(configure.exit_code, 0) << configure.err;
  EXPECT_EQ(json::parse(configure.out).at("configurations").size(), 1u);
  // Megatron-LM's split: 24 layers on p*v = 4*4 virtual stages do not divide; the error says so.
  const CommandRun uneven = perseus({"configure", "--layers", "24", "--hidden", "2304", "--heads", "24", "--gpu",
                                     "a100-sxm", "--gpus", "32", "--global-batch", "512", "-p", "4", "--schedule",
                                     "interleaved-1f1b", "--megatron-split", "-q"});
  EXPECT_EQ(uneven.exit_code, 0) << uneven.err;  // v = 2 (8 stages of 3 layers) still splits
  EXPECT_NE(uneven.out.find("v=2"), std::string::npos) << uneven.out;
  EXPECT_EQ(uneven.out.find("v=4"), std::string::npos) << uneven.out;
  const CommandRun bad = perseus({"plan", "--layers", "24", "--hidden", "2304", "--heads", "25", "--gpu", "a100-sxm",
                                  "--gpus", "32", "-q"});
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.err.find("--heads 25 does not divide --hidden 2304"), std::string::npos) << bad.err;
}

TEST(PlannerCli, PlanSaysWhichTimeModelItUsedAndTakesEither) {
  const std::vector<std::string> base = {"plan", "--model", "gpt3-13b", "--gpu", "a100-sxm", "--gpus", "64",
                                         "--no-solve", "--json", "-q"};
  const CommandRun published = perseus(base);
  ASSERT_EQ(published.exit_code, 0) << published.err;
  std::vector<std::string> with_profiles = base;
  with_profiles.insert(with_profiles.end(), {"--time-model", "profiles"});
  const CommandRun profiles = perseus(with_profiles);
  ASSERT_EQ(profiles.exit_code, 0) << profiles.err;
  const auto a = nlohmann::json::parse(published.out), b = nlohmann::json::parse(profiles.out);
  EXPECT_EQ(a["time_model"], "published");
  EXPECT_EQ(b["time_model"], "profiles");
  // The published runs ran slower than the profiles' computations at the same shape.
  EXPECT_GT(a["configuration"]["iteration_time_s"].get<double>(), 1.2 * b["configuration"]["iteration_time_s"].get<double>());
  // A GPU without a published fit says so whatever was asked.
  const CommandRun a40 = perseus({"plan", "--model", "gpt3-13b", "--gpu", "a40", "--gpus", "64", "--no-solve", "--json", "-q"});
  ASSERT_EQ(a40.exit_code, 0) << a40.err;
  EXPECT_EQ(nlohmann::json::parse(a40.out)["time_model"], "profiles");

  const CommandRun bad = perseus({"configure", "--model", "gpt3-13b", "--gpu", "a100-sxm", "--gpus", "64",
                                  "--time-model", "measured"});
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.err.find("--time-model measured: expected published"), std::string::npos) << bad.err;
  const CommandRun neither = perseus({"calibrate"});
  EXPECT_EQ(neither.exit_code, 2);
  EXPECT_NE(neither.err.find("give --profile"), std::string::npos) << neither.err;
  const CommandRun both = perseus({"calibrate", "--profile", kMeasured, "--published",
                                   std::string(PERSEUS_SOURCE_DIR) + "/data/published/ptdp.csv"});
  EXPECT_NE(both.exit_code, 0);
}

TEST(PlannerCli, ConfigureAndPartitionPrintJson) {
  const CommandRun configure = perseus({"configure", "--model", "gpt3-175b", "--gpu", "a100-sxm", "--gpus", "1024",
                                 "--global-batch", "1536", "--top", "3", "--json"});
  ASSERT_EQ(configure.exit_code, 0) << configure.err;
  const json sweep = json::parse(configure.out);
  ASSERT_EQ(sweep.at("configurations").size(), 3u);
  EXPECT_EQ(sweep.at("configurations")[0].at("tensor"), 8);
  const CommandRun partition = perseus({"partition", "--model", "bloom-176b", "--stages", "8", "--tensor-parallel", "8",
                                 "--json"});
  ASSERT_EQ(partition.exit_code, 0) << partition.err;
  const json p = json::parse(partition.out);
  EXPECT_EQ(p.at("boundaries").size(), 9u);
  EXPECT_GE(p.at("imbalance_ratio").get<double>(), 1.0);
  const CommandRun schedules = perseus({"schedules", "--stages", "4", "--microbatches", "8", "--json"});
  ASSERT_EQ(schedules.exit_code, 0) << schedules.err;
  EXPECT_EQ(json::parse(schedules.out).size(), 7u);
  // A shape with no interleaved schedule keeps the row and says why.
  const CommandRun odd = perseus({"schedules", "--stages", "4", "--microbatches", "6", "--chunks", "4", "--json"});
  ASSERT_EQ(odd.exit_code, 0) << odd.err;
  std::size_t skipped = 0;
  for (const json& row : json::parse(odd.out)) {
    if (!row.contains("skipped")) {
      EXPECT_LT(row.at("bubble_share").get<double>(), 1.0);
      continue;
    }
    ++skipped;
    EXPECT_NE(row.at("schedule").get<std::string>().find("interleaved"), std::string::npos);
    EXPECT_NE(row.at("skipped").get<std::string>().find("6 is not a multiple of 4"), std::string::npos);
  }
  EXPECT_EQ(skipped, 2u);
  const CommandRun text = perseus({"schedules", "--stages", "8", "--microbatches", "3"});
  ASSERT_EQ(text.exit_code, 0) << text.err;
  EXPECT_NE(text.out.find("70.0%"), std::string::npos) << text.out;  // 7/(3+7), not 7/3
  EXPECT_EQ(text.out.find("233"), std::string::npos) << text.out;
}

// Placement as Megatron-LM places ranks: one 64-stage pipeline spans 8 nodes, 7 of its hops
// cross them; with t = 1 there is no tensor group to place.
TEST(PlannerCli, ConfigurePlacesPipelinesThatSpanNodes) {
  const CommandRun run = perseus({"configure", "--model", "gpt3-175b", "--gpu", "a100-sxm", "--gpus", "64", "-t", "1",
                                  "-p", "64", "-b", "1", "--all", "-q"});
  EXPECT_NE(run.out.find("TP none, PP 7 of 63 hops across nodes"), std::string::npos) << run.out;
  EXPECT_EQ(run.err.find("sweeping"), std::string::npos) << run.err;  // -q
  EXPECT_EQ(run.out.find(" b=2 "), std::string::npos) << run.out;  // -b 1
}

TEST(PlannerCli, BadInputGetsOneClearMessage) {
  ScratchDir tmp;
  const std::string bad_weights = (tmp.path() / "weights.csv").string();
  std::ofstream(bad_weights) << "1.0\nlots\n";
  struct Case {
    std::vector<std::string> args;
    std::string message;
  };
  const std::vector<Case> cases = {
      {{"plan", "--model", "gpt5", "--gpu", "a100-sxm", "--gpus", "8"}, "known models: gpt3-1.3b"},
      {{"plan", "--model", "gpt3-13b", "--gpu", "b200", "--gpus", "8"}, "known GPUs: a100-sxm"},
      {{"plan", "--model", "gpt3-13b", "--gpu", "a100-sxm", "--gpus", "60", "-t", "8"}, "does not divide the 60 GPUs"},
      {{"plan", "--model", "gpt3-175b", "--gpu", "a100-sxm", "--gpus", "8", "--global-batch", "1536"}, "would fit on"},
      // The real cause, not the last rejection: 64 stages for 42 layers, not the heads.
      {{"plan", "--model", "gpt3-13b", "--gpu", "a100-sxm", "--gpus", "64", "--global-batch", "1024", "-p", "64"},
       "more pipeline stages than gpt3-13b's 42 layers"},
      {{"plan", "--model", "gpt3-13b", "--gpu", "a100-sxm", "--gpus", "63", "--global-batch", "1024"}, "Would work:"},
      {{"configure", "--model", "gpt3-13b", "--gpu", "a100-sxm", "--gpus", "63", "--global-batch", "1024"},
       "does not divide the global batch 1024"},
      // Nothing fits: configure fails too, saying where it would.
      {{"configure", "--model", "gpt3-175b", "--gpu", "a100-sxm", "--gpus", "8", "--global-batch", "1536"},
       "would fit on"},
      {{"partition", "--weights", bad_weights, "--stages", "1"}, "weights.csv:2"},
      {{"partition", "--model", "gpt3-13b", "--stages", "100"}, "100 stages need at least"},
      {{"profile", "synth", "--model", "gpt3-13b", "--gpu", "a100-sxm", "--tensor-parallel", "3", "--stages", "2"},
       "does not divide"},
      {{"schedules", "--stages", "0"}, "--stages"},
      {{"configure", "--model", "gpt3-13b", "--gpu", "a100-sxm", "--gpus", "8", "--global-batch", "-4"},
       "--global-batch: must be positive, got -4"},
      {{"plan", "--model", "gpt3-13b", "--gpu", "a100-sxm", "--gpus", "8", "--global-batch", "0"},
       "--global-batch: must be positive, got 0"},
      // A suggestion that needs 2,936 GiB per GPU is valid, not one that would work.
      {{"configure", "--model", "gpt3-175b", "--gpu", "a100-sxm", "--gpus", "8", "-d", "8", "--global-batch", "1500"},
       "Valid, but too large for 76.0 GiB (80 GiB less 5% headroom) per GPU: --global-batch 1496"},
      {{"partition", "--method", "pipedream"}, "partition --method pipedream: give --model"},
      {{"partition", "--method", "pipedream", "--model", "gpt3-13b", "--stages", "4"}, "--stages does not apply"},
      {{"partition", "--method", "bogus", "--model", "gpt3-13b", "--stages", "4"}, "uniform, pipedream"},
      // A misspelt method is named before the options it would need.
      {{"partition", "--method", "bogus"}, "unknown partition method 'bogus'"},
  };
  for (const Case& c : cases) {
    const CommandRun run = perseus(c.args);
    EXPECT_NE(run.exit_code, 0) << c.message;
    EXPECT_NE(run.exit_code, 4) << "an internal error: " << run.err;
    EXPECT_NE(run.err.find(c.message), std::string::npos) << "expected '" << c.message << "' in: " << run.err;
  }
}

}  // namespace
}  // namespace perseus
