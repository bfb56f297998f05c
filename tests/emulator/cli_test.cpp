// `perseus emulate`, `compare` and `report` as a user runs them: help, outputs that agree
// with each other and with `perseus optimize`, and bad input refused with exit status 2.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>
#include <regex>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

#include "command_output.hpp"
#include "temp_dir.hpp"

namespace perseus {
namespace {

namespace fs = std::filesystem;

const std::string kBloom = PERSEUS_SOURCE_DIR "/data/profiles/bloom-176b+a100-sxm.csv";
const std::string kProblem = " --profile " + kBloom + " --microbatches 12 --p-blocking 83.64 --unit-time 0.001";

using CliRun = testing::CommandOutput;
using testing::TempDir;

// Runs `binary args` in `dir` (default: the test's working directory).
CliRun perseus(const std::string& args, const std::string& dir = "", const std::string& binary = PERSEUS_BINARY) {
  const std::string cd = dir.empty() ? "" : "cd '" + dir + "' && ";
  return testing::run_command(cd + binary + " " + args);
}

std::string read(const std::string& path) {
  std::ifstream in(path);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

nlohmann::json json_of(const CliRun& run) {
  const std::size_t start = run.out.find('{');
  if (start == std::string::npos) throw std::runtime_error("no JSON in: " + run.out);
  return nlohmann::json::parse(run.out.substr(start));
}

std::string fmt_percent(double fraction) {
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%.2f%%", 100.0 * fraction);
  return buffer;
}

// Nothing half-written left behind: no temporary files or directories.
void expect_no_temporaries(const fs::path& dir) {
  for (const auto& entry : fs::directory_iterator(dir)) {
    EXPECT_EQ(entry.path().filename().string().rfind(".tmp-", 0), std::string::npos) << entry.path();
  }
}

TEST(EmulatorCli, EveryCommandHasHelp) {
  for (const std::string command : {"emulate", "compare", "report"}) {
    const CliRun run = perseus(command + " --help");
    EXPECT_EQ(run.status, 0) << command;
    EXPECT_NE(run.out.find("--profile"), std::string::npos) << run.out;
    EXPECT_NE(run.out.find("Example:"), std::string::npos) << run.out;
  }
  EXPECT_NE(perseus("emulate --help").out.find("--straggler"), std::string::npos);
  EXPECT_NE(perseus("compare --help").out.find("--straggler-ratios"), std::string::npos);
}

TEST(EmulatorCli, EmulatesAClusterWithAStragglerAndWritesEveryOutput) {
  TempDir dir;
  const CliRun one = perseus("emulate" + kProblem + " --baseline allmax --json -q");
  ASSERT_EQ(one.status, 0) << one.out;
  const double t = json_of(one)["iteration_time_s"].get<double>();
  const double e = json_of(one)["energy_j"]["total"].get<double>();

  const CliRun run = perseus("emulate" + kProblem + " --baseline allmax --data-parallel 4 --tensor-parallel 8 "
                          "--straggler 2:1.25 --out " + dir / "emu");
  ASSERT_EQ(run.status, 0) << run.out;
  EXPECT_NE(run.out.find("Cluster: 4 pipelines x 8 stages x TP 8 = 256 GPUs"), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("pipeline    2 (straggler x1.25"), std::string::npos) << run.out;
  for (const char* file : {"emulation.json", "timeline.csv", "devices.csv", "trace.json", "timeline.svg",
                           "pipelines/pipeline_00000.json", "pipelines/pipeline_00002.json"}) {
    EXPECT_TRUE(fs::exists(dir.path() / "emu" / file)) << file;
  }
  const nlohmann::json j = nlohmann::json::parse(read(dir / "emu/emulation.json"));
  EXPECT_EQ(j["gpus"], 256);
  EXPECT_NEAR(j["iteration_time_s"].get<double>(), 1.25 * t, 1e-9);
  // Three pipelines wait for the straggler; each of their 64 GPUs blocks for (T' - T).
  const double extrinsic = 3 * 64 * 83.64 * (1.25 * t - t);
  EXPECT_NEAR(j["energy_j"]["extrinsic_blocking"].get<double>(), extrinsic, 1e-6 * extrinsic);
  EXPECT_NEAR(j["pipelines"][0]["energy_j"]["total"].get<double>(), 8 * e + extrinsic / 3, 1e-6 * e);
  // The timelines of the notable pipelines (the straggler, and pipeline 0: the fastest and
  // typical one) are in files of their own.
  for (const char* file : {"emu/pipelines/pipeline_00000.json", "emu/pipelines/pipeline_00002.json"}) {
    EXPECT_EQ(nlohmann::json::parse(read(dir / file))["timeline"].size(), 8u * 24) << file;
  }
  const nlohmann::json trace = nlohmann::json::parse(read(dir / "emu/trace.json"));
  EXPECT_GT(trace["traceEvents"].size(), 2u * 8 * 24);
  EXPECT_NE(read(dir / "emu/timeline.svg").find("class=\"critical-path\""), std::string::npos);
  // The directory exists now: refused without --force, replaced with it.
  const CliRun again = perseus("emulate" + kProblem + " --out " + dir / "emu -q");
  EXPECT_EQ(again.status, 2);
  EXPECT_NE(again.out.find("exists"), std::string::npos) << again.out;
  EXPECT_EQ(perseus("emulate" + kProblem + " --out " + dir / "emu --force -q").status, 0);
  expect_no_temporaries(dir.path());
}

std::vector<std::vector<std::string>> csv_rows(const std::string& text) {
  std::vector<std::vector<std::string>> rows;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    std::vector<std::string> cells;
    std::stringstream fields(line);
    for (std::string cell; std::getline(fields, cell, ',');) cells.push_back(cell);
    rows.push_back(cells);
  }
  return rows;
}

std::set<std::string> files_in(const fs::path& dir) {
  std::set<std::string> names;
  for (const auto& entry : fs::directory_iterator(dir)) names.insert(entry.path().filename().string());
  return names;
}

// The pipelines timeline.csv and trace.json have instructions of.
std::set<int> pipelines_in_timeline(const std::string& dir) {
  std::set<int> pipelines;
  const auto rows = csv_rows(read(dir + "/timeline.csv"));
  for (std::size_t i = 1; i < rows.size(); ++i) pipelines.insert(std::stoi(rows[i].at(2)));
  return pipelines;
}
std::set<int> pipelines_in_trace(const std::string& dir) {
  std::set<int> pipelines;
  const nlohmann::json trace = nlohmann::json::parse(read(dir + "/trace.json"));
  for (const nlohmann::json& e : trace["traceEvents"]) {
    if (e["ph"] == "X" && e["cat"] != "allreduce") pipelines.insert(e["pid"].get<int>());
  }
  return pipelines;
}

// At cluster scale --out writes every pipeline's figures (emulation.json, devices.csv) but
// the timelines only of the stragglers, the fastest and a typical pipeline (and the one
// timeline.svg draws); --trace all writes every timeline, with the same figures.
TEST(EmulatorCli, TermsAroundTheInstructionsLengthenTheIterationAndShowInEveryOutput) {
  TempDir dir;
  const CliRun bare = perseus("emulate" + kProblem + " --baseline allmax --json -q");
  ASSERT_EQ(bare.status, 0) << bare.out;
  const double t = json_of(bare)["iteration_time_s"].get<double>();
  const double e = json_of(bare)["energy_j"]["total"].get<double>();
  const CliRun run = perseus("emulate" + kProblem + " --baseline allmax --load-first 0.002 --load-last 0.003 "
                             "--optimizer-step 0.05 --optimizer-power 200 --between-iterations 0.02 --out " +
                             dir / "emu");
  ASSERT_EQ(run.status, 0) << run.out;
  EXPECT_NE(run.out.find("then optimizer step 0.05 s and gap 0.02 s"), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("data loading 0.002 s (first stage) and 0.003 s (last stage)"), std::string::npos) << run.out;
  const nlohmann::json j = nlohmann::json::parse(read(dir / "emu/emulation.json"));
  const double comm = j["communication_end_s"].get<double>();
  // Each load lies on the critical path of at least one microbatch: the pipeline is longer.
  EXPECT_GT(comm, t + 0.005);
  EXPECT_NEAR(j["iteration_time_s"].get<double>(), comm + 0.07, 1e-9);
  EXPECT_NEAR(j["energy_j"]["overhead"].get<double>(), 8 * (200 * 0.05 + 83.64 * 0.02), 1e-6);
  EXPECT_GT(j["energy_j"]["total"].get<double>(), e);
  EXPECT_EQ(j["overheads"]["optimizer_power_w"], 200.0);
  const nlohmann::json pipeline = nlohmann::json::parse(read(dir / "emu/pipelines/pipeline_00000.json"));
  int loads = 0;
  for (const auto& row : pipeline["timeline"]) loads += row["load_s"].get<double>() > 0.0;
  EXPECT_EQ(loads, 2 * 12);  // every forward of the first and of the last stage
  const std::string trace = read(dir / "emu/trace.json");
  EXPECT_NE(trace.find("\"cat\":\"load\""), std::string::npos);
  EXPECT_NE(trace.find("\"name\":\"optimizer step\""), std::string::npos);
  EXPECT_NE(read(dir / "emu/devices.csv").find("overhead_j"), std::string::npos);

  const CliRun negative = perseus("emulate" + kProblem + " --baseline allmax --load-first -1");
  EXPECT_EQ(negative.status, 2) << negative.out;
  EXPECT_NE(negative.out.find("--load-first"), std::string::npos) << negative.out;
}

TEST(EmulatorCli, TimelinesOfTheNotablePipelinesByDefaultOfEveryOneWithTraceAll) {
  TempDir dir;
  const std::string cluster = "emulate" + kProblem + " --baseline envpipe --data-parallel 16 --tensor-parallel 2 "
                              "--straggler 11:1.2:0.05 --switch-latency 0.01 --p2p-latency 1e-5 --p2p-bandwidth 25e9 "
                              "--activation-bytes 5e7 --gradient-bytes 5e7 --allreduce-bandwidth 25e9 "
                              "--allreduce-bytes 1e10 -q --out ";
  const CliRun notable = perseus(cluster + dir / "notable");
  ASSERT_EQ(notable.status, 0) << notable.out;
  EXPECT_NE(notable.out.find("Timelines of pipelines 0 (fastest, typical), 11 (straggler);"), std::string::npos)
      << notable.out;
  const CliRun all = perseus(cluster + dir / "all --trace all");
  ASSERT_EQ(all.status, 0) << all.out;
  const CliRun six = perseus(cluster + dir / "six --timeline-pipeline 6");
  ASSERT_EQ(six.status, 0) << six.out;

  EXPECT_EQ(files_in(dir.path() / "notable/pipelines"),
            (std::set<std::string>{"pipeline_00000.json", "pipeline_00011.json"}));
  EXPECT_EQ(pipelines_in_timeline(dir / "notable"), (std::set<int>{0, 11}));
  EXPECT_EQ(pipelines_in_trace(dir / "notable"), (std::set<int>{0, 11}));
  EXPECT_EQ(files_in(dir.path() / "six/pipelines"),
            (std::set<std::string>{"pipeline_00000.json", "pipeline_00006.json", "pipeline_00011.json"}));
  EXPECT_EQ(pipelines_in_timeline(dir / "six"), (std::set<int>{0, 6, 11}));
  EXPECT_EQ(files_in(dir.path() / "all/pipelines").size(), 16u);
  std::set<int> every;
  for (int p = 0; p < 16; ++p) every.insert(p);
  EXPECT_EQ(pipelines_in_timeline(dir / "all"), every);
  EXPECT_EQ(pipelines_in_trace(dir / "all"), every);

  // The index of what is where, and the same figures either way.
  nlohmann::json summary = nlohmann::json::parse(read(dir / "notable/emulation.json"));
  nlohmann::json full = nlohmann::json::parse(read(dir / "all/emulation.json"));
  EXPECT_EQ(summary["detail"], "notable");
  EXPECT_EQ(full["detail"], "all");
  EXPECT_EQ(summary["fastest_pipeline"], 0);
  EXPECT_EQ(summary["typical_pipeline"], 0);
  ASSERT_EQ(summary["detailed_pipelines"].size(), 2u);
  EXPECT_EQ(summary["detailed_pipelines"][1],
            nlohmann::json({{"pipeline", 11}, {"notable", {"straggler"}}, {"file", "pipelines/pipeline_00011.json"}}));
  EXPECT_EQ(full["detailed_pipelines"].size(), 16u);
  EXPECT_EQ(summary["pipelines"].size(), 16u);
  EXPECT_FALSE(summary.contains("timeline"));
  for (nlohmann::json* j : {&summary, &full}) {
    j->erase("detail");
    j->erase("detailed_pipelines");
  }
  EXPECT_EQ(summary, full);
  EXPECT_EQ(read(dir / "notable/devices.csv"), read(dir / "all/devices.csv"));
  EXPECT_EQ(csv_rows(read(dir / "notable/devices.csv")).size(), 16u * 8 + 1);
  for (const char* file : {"pipeline_00000.json", "pipeline_00011.json"}) {
    EXPECT_EQ(read(dir / "notable/pipelines/" + file), read(dir / "all/pipelines/" + file)) << file;
  }
  // Every pipeline's timeline adds up to the cluster's computation energy (per GPU x TP 2).
  double computation = 0.0;
  for (int p = 0; p < 16; ++p) {
    char name[64];
    std::snprintf(name, sizeof name, "all/pipelines/pipeline_%05d.json", p);
    const nlohmann::json pipeline = nlohmann::json::parse(read(dir / name));
    for (const nlohmann::json& e : pipeline["timeline"]) {
      computation += 2 * e["energy_j"].get<double>();
    }
  }
  const double expected = full["energy_j"]["computation"].get<double>();
  EXPECT_NEAR(computation, expected, 1e-9 * expected);
  expect_no_temporaries(dir.path());
}

TEST(EmulatorCli, PlansOfPerseusOptimizeEmulateToTheirFrontierFigures) {
  TempDir dir;
  const CliRun optimize = perseus("optimize" + kProblem + " --out " + dir / "frontier --max-plans 5 -q");
  ASSERT_EQ(optimize.status, 0) << optimize.out;
  // frontier.csv: time,energy,effective_energy,plan,... of every point; five of them have a
  // plan in plans.bin. Each, exported as a file and emulated, takes its row's time and energy.
  std::istringstream csv(read(dir / "frontier/frontier.csv"));
  std::string line;
  std::getline(csv, line);
  int plans = 0;
  for (int row = 0; std::getline(csv, line); ++row) {
    std::vector<std::string> cells;
    std::stringstream fields(line);
    for (std::string cell; std::getline(fields, cell, ',');) cells.push_back(cell);
    if (cells.size() < 4 || cells[3].empty()) continue;
    ++plans;
    const std::string file = dir / ("plan" + std::to_string(row) + (plans % 2 ? ".py" : ".json"));
    const CliRun exported = perseus("plans export --frontier " + dir / "frontier --point " + std::to_string(row) +
                                    " --format " + (plans % 2 ? "py" : "json") + " --out " + file + " -q");
    ASSERT_EQ(exported.status, 0) << exported.out;
    const CliRun run = perseus("emulate --plan " + file + kProblem + " --json -q");
    ASSERT_EQ(run.status, 0) << run.out;
    const nlohmann::json j = json_of(run);
    EXPECT_NEAR(j["iteration_time_s"].get<double>(), std::stod(cells[0]), 1e-9) << row;
    EXPECT_NEAR(j["energy_j"]["total"].get<double>(), std::stod(cells[1]), 1e-6) << row;
  }
  EXPECT_EQ(plans, 5);
  // --frontier picks the plan for a deadline, reading the problem from summary.json.
  const CliRun chosen = perseus("emulate --frontier " + dir / "frontier --deadline 3.0 --json -q");
  ASSERT_EQ(chosen.status, 0) << chosen.out;
  EXPECT_LE(json_of(chosen)["iteration_time_s"].get<double>(), 3.0);
  // --respond: the others run the plan for T_opt while pipeline 1 straggles on the fastest.
  const CliRun respond = perseus("emulate --frontier " + dir / "frontier --data-parallel 3 --straggler 1:1.1 --respond -q");
  ASSERT_EQ(respond.status, 0) << respond.out;
  EXPECT_NE(respond.out.find("T_opt"), std::string::npos) << respond.out;
  // ... among the five plans there are, and it says so.
  EXPECT_NE(respond.out.find("holds plans for 5 of its"), std::string::npos) << respond.out;
}

TEST(EmulatorCli, SeveralIterationsWithDrawnStragglersSaveEnergyAndSampleThePower) {
  TempDir dir;
  const CliRun optimize = perseus("optimize" + kProblem + " --out " + dir / "frontier -q");
  ASSERT_EQ(optimize.status, 0) << optimize.out;
  const std::string flags = "emulate --frontier " + dir / "frontier" +
                            " --data-parallel 4 --iterations 6 --straggler-slowdown 1.1:1.4 --straggler-placement moving "
                            "--straggler-pipeline 1 --noise 0.01 --power-sample 0.1 --seed 7";
  const CliRun run = perseus(flags + " --out " + dir / "run -q");
  ASSERT_EQ(run.status, 0) << run.out;
  EXPECT_NE(run.out.find("Perseus saves"), std::string::npos) << run.out;
  const nlohmann::json j = nlohmann::json::parse(read(dir / "run/run.json"));
  EXPECT_EQ(j["per_iteration"].size(), 6u);
  for (const auto& k : j["per_iteration"]) EXPECT_EQ(k["straggler"], (1 + k["iteration"].get<int>()) % 4);
  EXPECT_GT(j["savings_vs_baseline"].get<double>(), j["savings_vs_fastest_everywhere"].get<double>());
  EXPECT_GT(j["savings_vs_fastest_everywhere"].get<double>(), 0.0);
  // The power curve holds the run's energy.
  std::istringstream csv(read(dir / "run/power.csv"));
  std::string line;
  std::getline(csv, line);
  EXPECT_EQ(line, "run,iteration,start_s,duration_s,power_w");
  double energy = 0.0;
  while (std::getline(csv, line)) {
    std::vector<std::string> cells;
    std::stringstream fields(line);
    for (std::string cell; std::getline(fields, cell, ',');) cells.push_back(cell);
    if (cells[0] == "perseus") energy += std::stod(cells[3]) * std::stod(cells[4]);
  }
  const double total = j["totals"]["perseus"]["energy_j"].get<double>();
  EXPECT_NEAR(energy, total, 1e-5 * total);  // the CSV rounds to the mW and the us
  // The same seed, the same run; --json prints it.
  const CliRun again = perseus(flags + " --json -q");
  ASSERT_EQ(again.status, 0) << again.out;
  EXPECT_EQ(json_of(again)["totals"], j["totals"]);

  const CliRun listed = perseus(flags + " --straggler 0:1.2");
  EXPECT_NE(listed.status, 0);
  EXPECT_NE(listed.out.find("drawn"), std::string::npos) << listed.out;
  const CliRun no_frontier = perseus("emulate" + kProblem + " --iterations 3");
  EXPECT_NE(no_frontier.status, 0);
  EXPECT_NE(no_frontier.out.find("--frontier"), std::string::npos) << no_frontier.out;
}

// Running a plan needs the measured options only: a profile whose options admit no cost fit
// (energy rising with time, so no a*exp(b*q)+c with a >= 0, b <= 0) cannot be optimized but
// still emulates.
TEST(EmulatorCli, PlansRunWithoutCostFits) {
  TempDir dir;
  std::string csv = "stage,instruction,frequency,time,energy\n";
  const double times[] = {0.1005, 0.1015, 0.1025, 0.1035, 0.1045, 0.2005};
  const double rising[] = {100.0, 100.5, 101.0, 101.5, 102.0, 300.0};
  for (int stage = 0; stage < 2; ++stage) {
    for (int k = 0; k < 6; ++k) {
      const int mhz = 1410 - 100 * k;
      csv += fmt::format("{},forward,{},{},{}\n", stage, mhz, times[k], stage == 0 ? rising[k] : 100.0 - 5 * k);
      csv += fmt::format("{},backward,{},{},{}\n", stage, mhz, 2 * times[k], 200.0 - 10 * k);
    }
  }
  const std::string profile = dir / "unfittable.csv";
  std::ofstream(profile) << csv;
  const std::string problem = " --profile " + profile + " --microbatches 4 --p-blocking 1";
  const CliRun solve = perseus("optimize" + problem + " --out " + dir / "frontier -q");
  EXPECT_EQ(solve.status, 3) << solve.out;  // a solve error
  EXPECT_NE(solve.out.find("cannot fit"), std::string::npos) << solve.out;
  const CliRun run = perseus("emulate" + problem + " --baseline allmax --json -q");
  ASSERT_EQ(run.status, 0) << run.out;
  EXPECT_GT(json_of(run)["iteration_time_s"].get<double>(), 0.0);
}

TEST(EmulatorCli, BadInputIsRefusedWithAClearMessage) {
  TempDir dir;
  ASSERT_EQ(perseus("optimize" + kProblem + " --out " + dir / "frontier --max-plans 1 -q").status, 0);
  std::string plan;
  for (const auto& entry : fs::directory_iterator(dir.path() / "frontier")) {
    if (entry.path().extension() == ".py") plan = entry.path().string();
  }
  ASSERT_FALSE(plan.empty()) << "optimize wrote no plan file";
  // A frequency the profile never measured.
  std::string text = read(plan);
  text = std::regex_replace(text, std::regex("\\('forward', [0-9]+\\)"), "('forward', 1411)",
                            std::regex_constants::format_first_only);
  std::ofstream(dir / "bad_frequency.py") << text;

  struct Case {
    std::string args, message;
  };
  const Case cases[] = {
      {"emulate --plan " + plan + " --profile " + kBloom + " --microbatches 8 --p-blocking 83.64",
       "a plan for a different schedule?"},
      {"emulate --plan " + dir / "bad_frequency.py" + kProblem, "1411 MHz is not in the profile"},
      {"emulate" + kProblem + " --data-parallel 2 --straggler 1:0.8", "slowdown factor must be 1..1000, not 0.8"},
      {"emulate" + kProblem + " --data-parallel 2 --straggler 1:1e308", "slowdown factor must be 1..1000, not 1e+308"},
      {"emulate" + kProblem + " --data-parallel 2 --straggler 1:fast", "is not a number"},
      {"emulate" + kProblem + " --data-parallel 2 --straggler 5:1.2", "does not exist"},
      {"emulate" + kProblem + " --baseline turbo", "--baseline"},
      {"emulate" + kProblem + " --data-parallel 100000000", "more than the 2097152 the emulator takes"},
      {"emulate" + kProblem + " --tensor-parallel 5000", "tensor parallelism must be 1..1024"},
      {"emulate" + kProblem + " --link 0:9:0.01", "stage 9"},
      {"emulate" + kProblem + " --trace some --out " + dir / "emu", "--trace: expected notable or all, not 'some'"},
      {"emulate" + kProblem + " --data-parallel 4 --timeline-pipeline 4 --out " + dir / "emu",
       "--timeline-pipeline 4: there are 4 pipelines (0..3)"},
      {"emulate --profile " + dir / "missing.csv --microbatches 12 --p-blocking 80", "missing.csv"},
      {"emulate --profile " + kBloom + " --p-blocking 80", "give --microbatches"},
      {"compare" + kProblem + " --straggler-ratios 1.1,0.9", "must be >= 1"},
      {"report" + kProblem + " --out " + dir / "no/such/dir/report.html", "report.html"},
  };
  for (const Case& c : cases) {
    const CliRun real = perseus(c.args + " -q");
    EXPECT_EQ(real.status, 2) << c.args << "\n" << real.out;
    EXPECT_NE(real.out.find("perseus: error:"), std::string::npos) << real.out;
    EXPECT_NE(real.out.find(c.message), std::string::npos) << c.args << "\n" << real.out;
  }
  expect_no_temporaries(dir.path());
}

TEST(EmulatorCli, ZeusGlobalRefusesClocksNeverMeasured) {
  struct Case {
    std::string clock, message;
  };
  // bloom-176b+a100-sxm is measured at 855..1410 MHz in steps of 15.
  const Case cases[] = {{"3000", "3000 MHz: outside the measured clocks, 855..1410 MHz"},
                        {"100", "100 MHz: outside the measured clocks, 855..1410 MHz"},
                        {"1400", "1400 MHz: not a measured clock (measured 855..1410 MHz; the nearest are 1395 and 1410"}};
  for (const Case& c : cases) {
    const CliRun run = perseus("emulate" + kProblem + " --baseline zeus-global:" + c.clock + " -q");
    EXPECT_EQ(run.status, 2) << c.clock << "\n" << run.out;
    EXPECT_NE(run.out.find("perseus: error: --baseline zeus-global:" + c.clock), std::string::npos) << run.out;
    EXPECT_NE(run.out.find(c.message), std::string::npos) << run.out;
  }
  EXPECT_EQ(perseus("emulate" + kProblem + " --baseline zeus-global:3000 --interpolate -q").status, 2);
  // A measured clock runs; an unmeasured one inside the range only when interpolating, and
  // then between its neighbours.
  const auto time_at = [&](const std::string& clock, const std::string& flags) {
    const CliRun run = perseus("emulate" + kProblem + " --baseline zeus-global:" + clock + flags + " --json -q");
    EXPECT_EQ(run.status, 0) << run.out;
    return run.status == 0 ? json_of(run)["iteration_time_s"].get<double>() : 0.0;
  };
  const double t1395 = time_at("1395", ""), t1400 = time_at("1400", " --interpolate"), t1410 = time_at("1410", "");
  EXPECT_LT(std::min(t1395, t1410), t1400);
  EXPECT_LT(t1400, std::max(t1395, t1410));
}

// With no --large-scale-profile, the large-scale table covers the four bundled profiles at
// their reference p_blocking and unit time, found under data/profiles of the current
// directory. One microbatch count keeps it short (all four takes about 25 s).
TEST(EmulatorCli, LargeScaleDefaultsToTheBundledProfiles) {
  TempDir dir;
  const CliRun run = perseus("compare" + kProblem + " --large-scale --large-scale-microbatches 12 --straggler-ratios 1.1 "
                             "-q --json --out " + dir / "cmp",
                             PERSEUS_SOURCE_DIR);
  ASSERT_EQ(run.status, 0) << run.out;
  const nlohmann::json rows = json_of(run)["large_scale"];
  ASSERT_EQ(rows.size(), 4u) << rows.dump(2);
  const char* workloads[] = {"bloom-176b+a100-sxm", "gpt3-175b+a100-sxm", "bloom-176b+a40", "gpt3-175b+a40"};
  for (std::size_t i = 0; i < 4; ++i) {
    SCOPED_TRACE(workloads[i]);
    EXPECT_EQ(rows[i]["workload"], workloads[i]);
    EXPECT_EQ(rows[i]["microbatches"], 12);
    EXPECT_EQ(rows[i]["pipelines"], 128);
    EXPECT_EQ(rows[i]["gpus"], 8192);
    // Perseus at iso-time: no slower than AllMax, and it saves energy.
    EXPECT_LE(rows[i]["perseus_time_s"].get<double>(), rows[i]["all_max_time_s"].get<double>() * (1 + 1e-12));
    EXPECT_GT(rows[i]["savings_fraction"].get<double>(), 0.05);
    EXPECT_LT(rows[i]["savings_fraction"].get<double>(), 0.25);
  }
  // Each at its own settings: AllMax of 128 pipelines x 64 GPUs on bloom A100 is the single
  // pipeline's (2.8235 s, 7343.6 J per pipeline of 8 GPUs at 83.64 W blocking) times 8 x 128.
  EXPECT_NEAR(rows[0]["all_max_time_s"].get<double>(), 2.8235, 1e-4);
  EXPECT_NEAR(rows[0]["all_max_energy_j"].get<double>(), 7343.6 * 8 * 128, 0.1 * 8 * 128);
  // The A40s at 0.1 ms: a finer crawl than the A100s' 1 ms.
  EXPECT_GT(rows[2]["crawl_steps"].get<double>(), rows[0]["crawl_steps"].get<double>());
  const std::string csv = read(dir / "cmp/large_scale.csv");
  for (const char* w : workloads) EXPECT_NE(csv.find(w), std::string::npos) << csv;

  // The same table as text.
  const CliRun text = perseus("compare" + kProblem + " --large-scale --large-scale-microbatches 12 "
                              "--straggler-ratios 1.1 -q",
                              PERSEUS_SOURCE_DIR);
  ASSERT_EQ(text.status, 0) << text.out;
  EXPECT_NE(text.out.find("Large scale"), std::string::npos) << text.out;
  const std::regex row("\\n  (bloom-176b|gpt3-175b)\\+a(100-sxm|40) +8192 +128 +12 ");
  EXPECT_EQ(std::distance(std::sregex_iterator(text.out.begin(), text.out.end(), row), std::sregex_iterator()), 4)
      << text.out;
}

TEST(EmulatorCli, LargeScaleWithoutTheBundledProfilesSaysWhatToDo) {
  // A copy of the executable outside the checkout, run from an empty directory: neither
  // ./data/profiles nor the executable's directories have the profiles.
  TempDir dir;
  const std::string binary = dir / "perseus";
  fs::copy_file(PERSEUS_BINARY, binary);
  fs::permissions(binary, fs::perms::owner_exec, fs::perm_options::add);
  const CliRun run = perseus("compare" + kProblem + " --large-scale --straggler-ratios 1.1 -q", dir.path().string(),
                             binary);
  EXPECT_EQ(run.status, 2) << run.out;
  EXPECT_NE(run.out.find("perseus: error: --large-scale: the bundled profiles"), std::string::npos) << run.out;
  EXPECT_NE(run.out.find((dir.path() / "data/profiles").string()), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("--large-scale-profile PATH:P_BLOCKING:UNIT_TIME"), std::string::npos) << run.out;
  // Given explicitly, no bundled directory is needed.
  const CliRun given = perseus("compare" + kProblem + " --large-scale --large-scale-microbatches 12 "
                               "--large-scale-profile " + kBloom + ":83.64:0.001 --straggler-ratios 1.1 -q --json",
                               dir.path().string(), binary);
  ASSERT_EQ(given.status, 0) << given.out;
  EXPECT_EQ(json_of(given)["large_scale"].size(), 1u);
}

TEST(EmulatorCli, CompareAndReportAgree) {
  TempDir dir;
  const CliRun compare = perseus("compare" + kProblem + " --json -q --out " + dir / "cmp");
  ASSERT_EQ(compare.status, 0) << compare.out;
  const nlohmann::json j = json_of(compare);
  ASSERT_EQ(j["iso_time"].size(), 5u);
  EXPECT_EQ(j["iso_time"][0]["method"], "Perseus");
  EXPECT_GT(j["iso_time"][0]["savings_fraction"].get<double>(), 0.0);
  EXPECT_EQ(j["stragglers"].size(), 6u);
  for (const char* file : {"comparison.json", "methods.csv", "stragglers.csv", "points.csv"}) {
    EXPECT_TRUE(fs::exists(dir.path() / "cmp" / file)) << file;
  }
  const CliRun text = perseus("compare" + kProblem + " -q");
  ASSERT_EQ(text.status, 0);
  EXPECT_NE(text.out.find("At iso-time"), std::string::npos);
  EXPECT_NE(text.out.find("T'/T"), std::string::npos);

  const CliRun report = perseus("report" + kProblem + " -q --out " + dir / "report.html --assets " + dir / "assets");
  ASSERT_EQ(report.status, 0) << report.out;
  const std::string html = read(dir / "report.html");
  EXPECT_NE(html.find("class=\"frontier-plot\""), std::string::npos);
  EXPECT_EQ(html.find("<script"), std::string::npos);
  // The report's summary carries the same iso-time savings as compare.
  const std::string savings = fmt_percent(j["iso_time"][0]["savings_fraction"].get<double>());
  EXPECT_NE(html.find(savings), std::string::npos) << savings;
  // T* is the plan of least effective energy; a slower plan may use less per iteration, so the
  // summary must not call it the least-energy plan.
  EXPECT_EQ(html.find("least-energy plan)"), std::string::npos);
  EXPECT_NE(html.find("T* (Perseus&#39;s plan of least effective energy"), std::string::npos)
      << html.substr(html.find("T* ("), 200);
  for (const char* file : {"frontier.svg", "timeline_t_min.svg", "timeline_t_star.svg", "savings_breakdown.svg",
                           "straggler_savings.svg", "trace_t_min.json"}) {
    EXPECT_TRUE(fs::exists(dir.path() / "assets" / file)) << file;
  }
  EXPECT_FALSE(fs::exists(dir.path() / "assets" / "frontier.png"));  // SVG unless asked
  expect_no_temporaries(dir.path());

  // Every figure as PNG and PDF too.
  const CliRun figures = perseus("report" + kProblem + " -q --out " + dir / "again.html --assets " + dir / "figures" +
                                 " --figure-formats svg,png,pdf");
  ASSERT_EQ(figures.status, 0) << figures.out;
  for (const char* name : {"frontier", "timeline_t_min", "timeline_t_star", "savings_breakdown", "straggler_savings"}) {
    EXPECT_EQ(read(dir / (std::string("figures/") + name + ".png")).rfind("\x89PNG", 0), 0u) << name;
    EXPECT_EQ(read(dir / (std::string("figures/") + name + ".pdf")).rfind("%PDF-", 0), 0u) << name;
  }
  const CliRun gif = perseus("report" + kProblem + " -q --out " + dir / "third.html --assets " + dir / "gif" +
                             " --figure-formats gif");
  EXPECT_EQ(gif.status, 2) << gif.out;
  EXPECT_NE(gif.out.find("expected svg, png or pdf"), std::string::npos) << gif.out;
  EXPECT_FALSE(fs::exists(dir.path() / "third.html"));  // refused before writing anything
}

}  // namespace
}  // namespace perseus
