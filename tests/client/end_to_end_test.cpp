// End to end: `perseus serve` (its own process) and S x D emulated ranks (one process each)
// run an emulated training job. The server profiles every clock in vivo, computes the
// frontier while the job runs at the highest clock, and deploys the T_min plan; then one
// pipeline straggles, the infrastructure announces it, the other pipeline moves to the
// T_opt plan, and when the straggler recovers both move back to T_min.
//
// Ranks run on virtual time (fabric.hpp), so instruction times are the profile's, yet an
// iteration takes a few milliseconds of real time.
#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>

#include <gtest/gtest.h>

#include "child_process.hpp"
#include "fabric.hpp"
#include "perseus/client/server_connection.hpp"
#include "perseus/server/frontier_table.hpp"
#include "perseus/server/zeus_dump.hpp"
#include "server_test_support.hpp"
#include "synthetic.hpp"

namespace perseus::client {
namespace {

using namespace std::chrono_literals;
using json = nlohmann::json;
using perseus::server::testing::TempDir;
using perseus::testing::ChildProcess;
using perseus::testing::FabricHub;
using perseus::testing::IterationDecision;

constexpr int kStages = 3;
constexpr int kPipelines = 2;
constexpr int kRanks = kStages * kPipelines;
constexpr int kMicrobatches = 4;
constexpr int kClocks = 6;
constexpr double kPBlocking = 80.0;
constexpr double kDegree = 1.2;           // the straggler's slowdown
constexpr double kTimeTolerance = 0.01;   // T_min plans may not make an iteration more than 1% slower
constexpr int kIterationsPerPhase = 3;

// What the job does in an iteration, as the hub's scenario decided it.
enum class Phase { kWarmUp, kTMin, kStragglerUnannounced, kStragglerAnnounced, kRecovered };

struct Record {
  double time_s = 0.0, energy_j = 0.0;
  std::vector<int> clocks;
};

TEST(EndToEnd, ProfilesInVivoDeploysTMinAndFollowsAStraggler) {
  TempDir dir;
  const std::string profile_path =
      dir.write("profile.csv", server::profile_to_csv(perseus::testing::synthetic_profile(kStages, kClocks, 7))).string();

  ChildProcess server(PERSEUS_SERVE_BINARY,
                      {"serve", "--port", "0", "--db", (dir.path() / "server.db").string(), "--token", "e2e",
                       "--dump-dir", (dir.path() / "dump").string(),
                       "--scheduler", "InVivoProfiling", "--scheduler-args",
                       json({{"p_blocking", kPBlocking}, {"unit_time", 0.001}, {"iterations_per_frequency", 2}}).dump(),
                       "--barrier-timeout", "60"});
  const auto port = server.wait_for_log(std::regex("event=listening host=\\S+ port=(\\d+)"), 20s);
  ASSERT_TRUE(port) << server.log();
  const std::string url = "http://127.0.0.1:" + *port;
  ServerConnection infrastructure(ConnectionOptions{url, "e2e", 5.0, 30.0, 5.0});

  // The scenario, driven at the end of every iteration (no rank runs meanwhile).
  Phase phase = Phase::kWarmUp;
  int in_phase = 0;
  std::map<int, Phase> phase_of;
  std::map<int, std::string> label_of;
  std::string job_id;
  json frontier_at_t_min;
  std::vector<double> slowdown(kRanks, 1.0);
  std::string scenario_error;
  const int straggler_rank = 1 * kStages + 0;  // pipeline 1, stage 0
  FabricHub hub(kRanks, [&](int iteration, double) -> IterationDecision {
    try {
      const json jobs = infrastructure.get_json("/api/jobs").at("jobs");
      if (jobs.size() != 1) throw std::runtime_error("expected one job, the server has " + jobs.dump());
      const json& job = jobs[0];
      job_id = job.at("job_id").get<std::string>();
      const std::string label = job.at("deployment").is_string() ? job.at("deployment").get<std::string>() : "";
      label_of[iteration] = label;
      if (phase == Phase::kWarmUp && label == "T_min") {
        phase = Phase::kTMin;
        frontier_at_t_min = job.at("frontier");
      }
      phase_of[iteration] = phase;
      if (phase != Phase::kWarmUp && ++in_phase == kIterationsPerPhase) {
        in_phase = 0;
        if (phase == Phase::kTMin) {
          // Pipeline 1 slows down; nobody has said so yet.
          for (int s = 0; s < kStages; ++s) slowdown[static_cast<std::size_t>(kStages + s)] = kDegree;
          phase = Phase::kStragglerUnannounced;
        } else if (phase == Phase::kStragglerUnannounced) {
          infrastructure.announce_straggler(StragglerNotice{job_id, straggler_rank, 0.0, kDegree});
          phase = Phase::kStragglerAnnounced;
        } else if (phase == Phase::kStragglerAnnounced) {
          std::fill(slowdown.begin(), slowdown.end(), 1.0);
          infrastructure.announce_straggler(StragglerNotice{job_id, straggler_rank, 0.0, 1.0});
          phase = Phase::kRecovered;
        } else {
          return IterationDecision{true, slowdown};
        }
      }
      return IterationDecision{iteration >= 3000, slowdown};
    } catch (const std::exception& e) {
      scenario_error = e.what();
      return IterationDecision{true, slowdown};
    }
  });

  std::vector<std::unique_ptr<ChildProcess>> ranks;
  for (int d = 0; d < kPipelines; ++d) {
    for (int s = 0; s < kStages; ++s) {
      const int rank = d * kStages + s;
      ChildProcess::Options options;
      options.stdout_path = (dir.path() / ("rank" + std::to_string(rank) + ".jsonl")).string();
      options.stderr_path = (dir.path() / ("rank" + std::to_string(rank) + ".log")).string();
      options.pass_fd = hub.child_fd(rank);
      ranks.push_back(std::make_unique<ChildProcess>(
          EMULATED_RANK_BINARY,
          std::vector<std::string>{"--server", url, "--token", "e2e", "--rank", std::to_string(rank), "--dp-rank",
                                   std::to_string(d), "--pp-rank", std::to_string(s), "--dp-degree",
                                   std::to_string(kPipelines), "--pp-degree", std::to_string(kStages), "--profile",
                                   profile_path, "--p-blocking", std::to_string(kPBlocking), "--microbatches",
                                   std::to_string(kMicrobatches)},
          options));
    }
  }
  hub.close_child_ends();
  hub.start();
  for (int r = 0; r < kRanks; ++r) {
    const auto status = ranks[static_cast<std::size_t>(r)]->wait(120s);
    std::ifstream log(dir.path() / ("rank" + std::to_string(r) + ".log"));
    const std::string text((std::istreambuf_iterator<char>(log)), std::istreambuf_iterator<char>());
    ASSERT_TRUE(status) << "rank " << r << " did not finish: " << text;
    ASSERT_TRUE(WIFEXITED(*status) && WEXITSTATUS(*status) == 0) << "rank " << r << ": " << text;
  }
  hub.join();
  ASSERT_EQ(hub.error(), "");
  ASSERT_EQ(scenario_error, "");
  ASSERT_EQ(phase, Phase::kRecovered) << "the scenario did not finish; last deployment: " << label_of.rbegin()->second;

  // zeus's dump, on by default: the ranks, and each round's plans and results.
  const std::filesystem::path dumped = dir.path() / "dump" / server::dump_folder_name(job_id);
  EXPECT_TRUE(std::filesystem::is_regular_file(dumped / "ranks.json")) << dumped;
  EXPECT_TRUE(std::filesystem::is_regular_file(dumped / "0.sched.json")) << dumped;
  EXPECT_TRUE(std::filesystem::is_regular_file(dumped / "0.prof.json")) << dumped;

  // Every rank's iterations.
  std::vector<std::map<int, Record>> records(kRanks);
  for (int r = 0; r < kRanks; ++r) {
    std::ifstream in(dir.path() / ("rank" + std::to_string(r) + ".jsonl"));
    for (std::string line; std::getline(in, line);) {
      const json j = json::parse(line);
      records[static_cast<std::size_t>(r)][j.at("iteration").get<int>()] =
          Record{j.at("time_s"), j.at("energy_j"), j.at("clocks").get<std::vector<int>>()};
    }
    ASSERT_EQ(records[static_cast<std::size_t>(r)].size(), phase_of.size()) << "rank " << r;
  }
  const auto pipeline_energy = [&](int d, int iteration) {
    double sum = 0.0;
    for (int s = 0; s < kStages; ++s) sum += records[static_cast<std::size_t>(d * kStages + s)].at(iteration).energy_j;
    return sum;
  };
  const auto job_energy = [&](int iteration) { return pipeline_energy(0, iteration) + pipeline_energy(1, iteration); };
  const auto job_time = [&](int iteration) { return records[0].at(iteration).time_s; };  // synchronised: all equal
  const auto clocks_of = [&](int d, int iteration) {
    std::vector<std::vector<int>> out;
    for (int s = 0; s < kStages; ++s) out.push_back(records[static_cast<std::size_t>(d * kStages + s)].at(iteration).clocks);
    return out;
  };
  const auto iterations_in = [&](Phase p) {
    std::vector<int> out;
    for (const auto& [k, q] : phase_of) {
      if (q == p) out.push_back(k);
    }
    return out;
  };

  // 1. In-vivo profiling: the first iterations run every instruction at one clock, from the
  // highest down, two iterations each.
  std::vector<int> profiled;
  for (const auto& [k, label] : label_of) {
    if (label.rfind("profiling", 0) != 0) continue;
    const int mhz = records[0].at(k).clocks.front();
    for (int d = 0; d < kPipelines; ++d) {
      for (const auto& stage : clocks_of(d, k)) {
        for (int c : stage) ASSERT_EQ(c, mhz) << "iteration " << k << " (" << label << ")";
      }
    }
    if (profiled.empty() || profiled.back() != mhz) profiled.push_back(mhz);
  }
  ASSERT_GE(profiled.size(), 2u);
  EXPECT_EQ(profiled.front(), 1410);
  EXPECT_TRUE(std::is_sorted(profiled.rbegin(), profiled.rend())) << "clocks were not walked downwards";
  EXPECT_EQ(label_of.at(0), "profiling 1410 MHz (1/6)");
  EXPECT_EQ(label_of.at(1), "profiling 1410 MHz (1/6)");  // two iterations per clock
  const double baseline_energy = job_energy(0);
  const double baseline_time = job_time(0);

  // 2. T_min deployed: less energy, and no slower than at the highest clock (within 1%).
  const std::vector<int> t_min = iterations_in(Phase::kTMin);
  ASSERT_EQ(t_min.size(), static_cast<std::size_t>(kIterationsPerPhase));
  const auto t_min_clocks = clocks_of(0, t_min[0]);
  for (int k : t_min) {
    EXPECT_LT(job_energy(k), 0.99 * baseline_energy) << "iteration " << k;
    EXPECT_LE(job_time(k), baseline_time * (1.0 + kTimeTolerance)) << "iteration " << k;
    EXPECT_EQ(clocks_of(0, k), t_min_clocks);
    EXPECT_EQ(clocks_of(1, k), t_min_clocks);
  }
  // The profile measured in vivo is the GPUs' own: what the server planned is what ran.
  const double planned_time = frontier_at_t_min.at("current")[0].get<double>();
  const double planned_energy = frontier_at_t_min.at("current")[1].get<double>();
  EXPECT_NEAR(job_time(t_min[0]), planned_time, 1e-6 * planned_time);
  EXPECT_NEAR(pipeline_energy(0, t_min[0]), planned_energy, 1e-3 * planned_energy);
  std::cout << "[ e2e      ] " << hub.iterations() << " iterations (" << profiled.size() << " clocks profiled, "
            << label_of.size() - static_cast<std::size_t>(std::count_if(label_of.begin(), label_of.end(), [](const auto& e) {
                 return e.second.rfind("highest clock", 0) != 0;
               }))
            << " while the frontier was computed)\n";
  std::cout << "[ e2e      ] highest clock: " << baseline_time << " s, " << baseline_energy << " J; T_min plan: "
            << job_time(t_min[0]) << " s, " << job_energy(t_min[0]) << " J\n";

  // 3. Pipeline 1 straggles unannounced: pipeline 0 keeps T_min and waits for it.
  const std::vector<int> waiting = iterations_in(Phase::kStragglerUnannounced);
  ASSERT_EQ(waiting.size(), static_cast<std::size_t>(kIterationsPerPhase));
  for (int k : waiting) {
    EXPECT_EQ(clocks_of(0, k), t_min_clocks);
    EXPECT_NEAR(job_time(k), kDegree * job_time(t_min[0]), 1e-6);
  }
  // 4. Announced: from the next iteration the other pipeline runs the T_opt plan (slower
  // clocks, less energy), the straggler keeps T_min, the iteration takes no longer.
  const std::vector<int> announced = iterations_in(Phase::kStragglerAnnounced);
  ASSERT_EQ(announced.size(), static_cast<std::size_t>(kIterationsPerPhase));
  for (int k : announced) {
    EXPECT_NE(label_of.at(k).find("T_opt"), std::string::npos) << label_of.at(k);
    EXPECT_NE(clocks_of(0, k), t_min_clocks) << "iteration " << k;
    EXPECT_EQ(clocks_of(1, k), t_min_clocks) << "iteration " << k;
    EXPECT_LT(pipeline_energy(0, k), 0.99 * pipeline_energy(0, waiting.back())) << "iteration " << k;
    EXPECT_LE(job_time(k), job_time(waiting.back()) * (1.0 + kTimeTolerance)) << "iteration " << k;
  }
  std::cout << "[ e2e      ] straggler x" << kDegree << ": pipeline 0 at T_min " << pipeline_energy(0, waiting.back())
            << " J, at T_opt " << pipeline_energy(0, announced.back()) << " J\n";
  // 5. Recovered: both pipelines back on T_min at the next iteration.
  const std::vector<int> recovered = iterations_in(Phase::kRecovered);
  ASSERT_EQ(recovered.size(), static_cast<std::size_t>(kIterationsPerPhase));
  for (int k : recovered) {
    EXPECT_EQ(label_of.at(k), "T_min");
    EXPECT_EQ(clocks_of(0, k), t_min_clocks);
    EXPECT_EQ(clocks_of(1, k), t_min_clocks);
    EXPECT_NEAR(job_time(k), job_time(t_min[0]), 1e-9);
  }
  server.kill_and_wait(SIGTERM);
}

}  // namespace
}  // namespace perseus::client
