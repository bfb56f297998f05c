// `perseus cluster ...` as a user runs it.
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "command_output.hpp"
#include "temp_dir.hpp"

namespace {

perseus::testing::CommandOutput run(const std::string& args) {
  return perseus::testing::run_command(std::string(PERSEUS_BINARY) + " " + args);
}

TEST(ClusterCli, RunsFromItsOwnExecutableAsIfPerseusRanIt) {
  // `perseus cluster` runs perseus-cluster beside perseus (cli/main.cpp): the same usage, help,
  // errors and exit statuses.
  const auto top = run("--help");
  ASSERT_EQ(top.status, 0) << top.out;
  EXPECT_NE(top.out.find("cluster"), std::string::npos) << top.out;
  const auto help = run("cluster --help");
  ASSERT_EQ(help.status, 0) << help.out;
  EXPECT_NE(help.out.find("Usage: perseus cluster"), std::string::npos) << help.out;
  EXPECT_NE(help.out.find("allocate"), std::string::npos) << help.out;
  const auto bad_flag = run("cluster allocate --no-such-flag");
  EXPECT_EQ(bad_flag.status, 2) << bad_flag.out;
  const auto bad_input = run("cluster allocate --random 5 --gpus tpu:8");
  EXPECT_EQ(bad_input.status, 2) << bad_input.out;
  EXPECT_NE(bad_input.out.find("perseus: error:"), std::string::npos) << bad_input.out;
  // Alone, perseus says what it cannot find.
  const perseus::testing::TempDir dir;
  const std::filesystem::path alone = dir.path() / "perseus";
  std::filesystem::copy_file(PERSEUS_BINARY, alone);
  const auto missing = perseus::testing::run_command(alone.string() + " cluster --help");
  EXPECT_EQ(missing.status, 4) << missing.out;
  EXPECT_NE(missing.out.find((dir.path() / "perseus-cluster").string()), std::string::npos) << missing.out;
}

TEST(ClusterCli, AllocatesRandomJobsOnGavelsMatrix) {
  const auto r = run("cluster allocate --random 30 --gpus k80:4,p100:4,v100:4 --json");
  ASSERT_EQ(r.status, 0) << r.out;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["gpu_types"], (nlohmann::json{"k80", "p100", "v100"}));
  ASSERT_EQ(j["jobs"].size(), 30u);
  std::vector<double> used(3, 0.0);
  for (const auto& job : j["jobs"])
    for (int k = 0; k < 3; ++k) used[k] += job["share"][k].get<double>();  // every random job uses one GPU
  for (double u : used) EXPECT_LE(u, 4.0 + 1e-6);
  EXPECT_GT(j["objective"].get<double>(), 0.0);
}

TEST(ClusterCli, ReadsAJobsFileAndNamesBadLines) {
  const perseus::testing::TempDir temp;
  const auto path = (temp.path() / "jobs.csv").string();
  std::ofstream(path) << "job,weight,steps\nResNet-50 (batch size 64) x1,1,1000\nA3C x1,2,500\n";
  const auto ok = run("cluster allocate --jobs " + path + " --policy makespan --gpus k80:1,v100:1 --csv");
  ASSERT_EQ(ok.status, 0) << ok.out;
  EXPECT_NE(ok.out.find("\"A3C x1\""), std::string::npos) << ok.out;
  std::ofstream(path) << "job,weight\nResNet-50 (batch size 64) x1,1\nGPT-5,1\n";
  const auto bad = run("cluster allocate --jobs " + path);
  EXPECT_NE(bad.status, 0);
  EXPECT_NE(bad.out.find(":3: unknown job type 'GPT-5'"), std::string::npos) << bad.out;
  const auto bad_gpus = run("cluster allocate --random 5 --gpus tpu:8");
  EXPECT_NE(bad_gpus.status, 0);
  EXPECT_NE(bad_gpus.out.find("unknown GPU type 'tpu'"), std::string::npos) << bad_gpus.out;
  const auto negative = run("cluster allocate --random 5 --gpus v100:-1");
  EXPECT_NE(negative.status, 0);
  const auto price = run("cluster allocate --random 5 --policy min-cost --prices v100:x");
  EXPECT_NE(price.status, 0);
  EXPECT_NE(price.out.find("--prices 'v100:x': 'x' is not a price > 0"), std::string::npos) << price.out;
  const auto priced = run("cluster allocate --random 5 --policy min-cost --prices v100:2 --json");
  ASSERT_EQ(priced.status, 0) << priced.out;
  EXPECT_EQ(nlohmann::json::parse(priced.out)["policy"], "min-cost");
}

TEST(ClusterCli, HierarchicalSharesAcrossEntitiesFromAJobsFile) {
  // One GPU type in use (ResNet-50 on V100s only), research (FIFO) weighs 3 and product 1: the
  // agnostic policy splits the 4 V100s 3:1, research's first three jobs whole and the fourth none.
  const perseus::testing::TempDir temp;
  const auto path = (temp.path() / "jobs.csv").string();
  std::ofstream jobs(path);
  jobs << "job,entity\n";
  for (int k = 0; k < 4; ++k) jobs << "ResNet-50 (batch size 64) x1,research\nResNet-50 (batch size 64) x1,product\n";
  jobs.close();
  const auto r = run("cluster allocate --jobs " + path +
                     " --policy hierarchical --agnostic --entities product:1,research:3:fifo --gpus k80:0,p100:0,v100:4 --json");
  ASSERT_EQ(r.status, 0) << r.out;
  const auto j = nlohmann::json::parse(r.out);
  ASSERT_EQ(j["entities"].size(), 2u);
  EXPECT_EQ(j["entities"][1]["policy"], "fifo");
  EXPECT_NEAR(j["entities"][0]["gpus"].get<double>(), 1.0, 1e-4);
  EXPECT_NEAR(j["entities"][1]["gpus"].get<double>(), 3.0, 1e-4);
  EXPECT_EQ(j["jobs"][0]["entity"], "research");
  EXPECT_NEAR(j["jobs"][6]["share"][2].get<double>(), 0.0, 1e-4);  // research's fourth job waits
  // Without --entities the file's names are the entities, weight 1 and fairness each.
  const auto plain = run("cluster allocate --jobs " + path + " --policy hierarchical --gpus k80:0,p100:0,v100:4 --csv");
  ASSERT_EQ(plain.status, 0) << plain.out;
  EXPECT_NE(plain.out.find(",research,"), std::string::npos) << plain.out;
  const auto unknown = run("cluster allocate --jobs " + path + " --policy hierarchical --entities product,ops");
  EXPECT_NE(unknown.status, 0);
  EXPECT_NE(unknown.out.find("one of the entities given (product, ops)"), std::string::npos) << unknown.out;
  const auto bad = run("cluster allocate --random 4 --policy hierarchical --entities a:0");
  EXPECT_NE(bad.status, 0);
  EXPECT_NE(bad.out.find("weight '0' of a must be a number > 0"), std::string::npos) << bad.out;
  const auto wrong_policy = run("cluster allocate --random 4 --entities a:1");
  EXPECT_NE(wrong_policy.status, 0);
  // Simulated: jobs dealt to the entities round-robin, named in jobs.csv, and every job finishes.
  const auto out = (temp.path() / "sim").string();
  const auto sim = run("cluster simulate --trace static --jobs 12 --gpus k80:2,p100:2,v100:2 --policy hierarchical "
                       "--entities a:1,b:2:fifo -q --out " + out);
  ASSERT_EQ(sim.status, 0) << sim.out;
  std::ifstream written(out + "/jobs.csv");
  const std::string text((std::istreambuf_iterator<char>(written)), std::istreambuf_iterator<char>());
  EXPECT_NE(text.find(",\"a\","), std::string::npos);
  EXPECT_NE(text.find(",\"b\","), std::string::npos);
  std::ifstream runs(out + "/runs.csv");
  std::string header, row;
  std::getline(runs, header), std::getline(runs, row);
  EXPECT_NE(row.find("hierarchical,true,false,,0,1,12,12,0,"), std::string::npos) << header << "\n" << row;
}

TEST(ClusterCli, SimulatesAndWritesAReportThatReplays) {
  const perseus::testing::TempDir temp;
  const auto out = (temp.path() / "sim").string();
  const auto r = run("cluster simulate --gpus k80:4,p100:4,v100:4 --lambda 0.5,1 --jobs 40 --compare --out " + out + " --json -q");
  ASSERT_EQ(r.status, 0) << r.out;
  const auto j = nlohmann::json::parse(r.out);
  ASSERT_EQ(j["runs"].size(), 4u);  // 2 rates x aware and agnostic
  for (const auto& run : j["runs"]) {
    EXPECT_EQ(run["window_jobs"], 8);  // the last fifth of 40
    EXPECT_EQ(run["window_unfinished"], 0);
    EXPECT_GT(run["average_jct_h"].get<double>(), 0.0);
  }
  for (const char* file : {"report.html", "summary.json", "runs.csv", "jobs.csv", "rounds.csv", "jct_vs_load.svg", "jct_cdf.svg"})
    EXPECT_TRUE(std::filesystem::exists(std::filesystem::path(out) / file)) << file;
  std::ifstream html(std::filesystem::path(out) / "report.html");
  const std::string page((std::istreambuf_iterator<char>(html)), std::istreambuf_iterator<char>());
  EXPECT_NE(page.find("<svg"), std::string::npos);
  EXPECT_NE(page.find("max-min-fairness (agnostic)"), std::string::npos);

  // jobs.csv replays as a trace: its first run's jobs (every arrival of rate 0.5, seed 1).
  const auto replay = run("cluster simulate --gpus k80:4,p100:4,v100:4 --trace " + out + "/jobs.csv --json -q");
  ASSERT_EQ(replay.status, 0) << replay.out;
  const auto rj = nlohmann::json::parse(replay.out);
  EXPECT_EQ(rj["runs"][0]["jobs_arrived"], j["runs"][0]["jobs_arrived"]);

  // Nothing is overwritten without --force, and bad flags are named.
  const auto again = run("cluster simulate --gpus v100:1 --lambda 1 --jobs 5 --out " + out + " -q");
  EXPECT_NE(again.status, 0);
  EXPECT_NE(again.out.find("--force"), std::string::npos) << again.out;
  const auto rate = run("cluster simulate --lambda 0 -q");
  EXPECT_NE(rate.status, 0);
  EXPECT_NE(rate.out.find("--lambda '0'"), std::string::npos) << rate.out;
  const auto window = run("cluster simulate --window 10 -q");
  EXPECT_NE(window.status, 0);
  EXPECT_NE(window.out.find("FIRST:END"), std::string::npos) << window.out;
  const auto fits = run("cluster simulate --trace continuous-multiple --gpus v100:4 --jobs 50 -q");
  EXPECT_NE(fits.status, 0);
  EXPECT_NE(fits.out.find("can run on no GPU type"), std::string::npos) << fits.out;
}

TEST(ClusterCli, SpaceSharingPairsJobsAndBeatsTakingTurns) {
  // 30 jobs on 6 GPUs: scarce, so pairs pay. The JSON lists the pairs; each job's time alone and
  // in pairs stays within 1.
  const auto r = run("cluster allocate --random 30 --gpus k80:2,p100:2,v100:2 --space-sharing --json");
  ASSERT_EQ(r.status, 0) << r.out;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["space_sharing"], true);
  ASSERT_FALSE(j["pairs"].empty());
  std::vector<double> time(30, 0.0);
  for (const auto& job : j["jobs"])
    for (const auto& x : job["share"]) time[job["job"].get<std::size_t>()] += x.get<double>();
  for (const auto& pair : j["pairs"]) {
    for (const auto& x : pair["share"])
      for (const auto& id : pair["jobs"]) time[id.get<std::size_t>()] += x.get<double>();
    ASSERT_EQ(pair["speed_steps_per_s"].size(), 3u);  // per GPU type: [first's, second's] or null
    for (std::size_t k = 0; k < 3; ++k)
      if (pair["share"][k].get<double>() > 0.0) {
        EXPECT_EQ(pair["speed_steps_per_s"][k].size(), 2u);
      }
  }
  for (double t : time) EXPECT_LE(t, 1.0 + 1e-6);
  const auto turns = nlohmann::json::parse(run("cluster allocate --random 30 --gpus k80:2,p100:2,v100:2 --json").out);
  EXPECT_GT(j["objective"].get<double>(), turns["objective"].get<double>());

  // Simulated: one run without and one with; only the aware run shares under --compare.
  const auto sim = run("cluster simulate --gpus k80:2,p100:2,v100:2 --trace static --jobs 12 --space-sharing off,on --compare --json -q");
  ASSERT_EQ(sim.status, 0) << sim.out;
  const auto runs = nlohmann::json::parse(sim.out)["runs"];
  ASSERT_EQ(runs.size(), 3u);
  EXPECT_EQ(runs[2]["space_sharing"], true);
  EXPECT_EQ(runs[2]["heterogeneity_aware"], true);
  EXPECT_EQ(runs[2]["window_unfinished"], 0);

  // No pair throughputs in a CSV matrix; agnostic policies do not share; bad modes are named.
  const auto planned = run("cluster allocate --throughputs planned --random 4 --space-sharing");
  EXPECT_NE(planned.status, 0);
  EXPECT_NE(planned.out.find("throughputs of jobs sharing a GPU"), std::string::npos) << planned.out;
  const auto agnostic = run("cluster allocate --random 4 --space-sharing --agnostic");
  EXPECT_NE(agnostic.status, 0);
  EXPECT_NE(agnostic.out.find("heterogeneity-aware"), std::string::npos) << agnostic.out;
  const auto mode = run("cluster simulate --space-sharing maybe -q");
  EXPECT_NE(mode.status, 0);
  EXPECT_NE(mode.out.find("--space-sharing 'maybe'"), std::string::npos) << mode.out;
}

TEST(ClusterCli, PlansAMatrixWithEnergyAndSimulatesItsEnergyStage) {
  const perseus::testing::TempDir temp;
  const auto matrix = (temp.path() / "planned.csv").string();
  const auto planned = run("cluster throughputs --models bert-large,t5-large --gpu-types a40,h100-sxm --scales 1,2 --points 3 -o " +
                           matrix + " --json -q");
  ASSERT_EQ(planned.status, 0) << planned.out;
  const auto cells = nlohmann::json::parse(planned.out)["cells"];
  ASSERT_EQ(cells.size(), 8u);
  for (const auto& c : cells) {
    ASSERT_TRUE(c["fits"].get<bool>()) << c.dump();
    EXPECT_LT(c["least_energy_j"].get<double>(), c["t_min_energy_j"].get<double>()) << c.dump();
  }
  std::ifstream in(matrix);
  std::string header;
  std::getline(in, header);
  EXPECT_EQ(header, "job,scale_factor,gpu,steps_per_s,joules_per_step");
  // Again without --force: refused, the file kept.
  const auto again = run("cluster throughputs --models bert-large --gpu-types a40 --scales 1 -o " + matrix + " -q");
  EXPECT_NE(again.status, 0);
  EXPECT_NE(again.out.find("exists"), std::string::npos) << again.out;

  const auto sim = run("cluster simulate --throughputs " + matrix +
                       " --gpus a40:2,h100-sxm:2 --trace static --jobs 12 --energy-slack off,0.1 --json -q");
  ASSERT_EQ(sim.status, 0) << sim.out;
  const auto runs = nlohmann::json::parse(sim.out)["runs"];
  ASSERT_EQ(runs.size(), 2u);
  EXPECT_TRUE(runs[0]["energy_slack"].is_null());
  EXPECT_DOUBLE_EQ(runs[1]["energy_slack"].get<double>(), 0.1);
  EXPECT_LT(runs[1]["energy_kwh"].get<double>(), runs[0]["energy_kwh"].get<double>());
  EXPECT_EQ(runs[1]["window_unfinished"], 0);

  const auto alloc = run("cluster allocate --throughputs " + matrix + " --gpus a40:2,h100-sxm:2 --random 6 --energy-slack 0.2 --json");
  ASSERT_EQ(alloc.status, 0) << alloc.out;
  EXPECT_GT(nlohmann::json::parse(alloc.out)["power_w"].get<double>(), 0.0);
  // Energy needs a matrix with energy; slacks are shares below 1.
  const auto gavel = run("cluster allocate --random 5 --energy-slack 0.1");
  EXPECT_NE(gavel.status, 0);
  EXPECT_NE(gavel.out.find("needs energy per step"), std::string::npos) << gavel.out;
  const auto bad = run("cluster simulate --throughputs " + matrix + " --energy-slack off,1.5 -q");
  EXPECT_NE(bad.status, 0);
  EXPECT_NE(bad.out.find("'1.5' is neither 'off' nor a share in [0, 1)"), std::string::npos) << bad.out;
  // Durations of drawn jobs are measured on a type of the matrix: the planned one has no V100.
  const auto reference = run("cluster allocate --throughputs planned --random 5 --reference-gpu v100");
  EXPECT_NE(reference.status, 0);
  EXPECT_NE(reference.out.find("unknown GPU type 'v100'"), std::string::npos) << reference.out;
  const auto planned_default = run("cluster allocate --throughputs planned --random 5 --json");
  ASSERT_EQ(planned_default.status, 0) << planned_default.out;
  EXPECT_EQ(nlohmann::json::parse(planned_default.out)["gpu_types"], (nlohmann::json{"a40", "a100-sxm", "h100-sxm"}));
  const auto unknown = run("cluster throughputs --models gpt-17 -q");
  EXPECT_NE(unknown.status, 0);
  EXPECT_NE(unknown.out.find("gpt-17"), std::string::npos) << unknown.out;
}

TEST(ClusterCli, RunsAJobsFileOnTheEmulatedBackend) {
  const perseus::testing::TempDir temp;
  const auto path = (temp.path() / "jobs.csv").string();
  // Steps: 2 h on a V100 each (ResNet-50 at ~12 steps/s there, A3C at ~6 steps/s there).
  std::ofstream(path) << "job,steps,weight,command\nResNet-50 (batch size 64) x1,20000,1,train resnet\nA3C x1,50000,1,train a3c\n"
                      << "ResNet-50 (batch size 64) x1,1000,2,train short\n";
  const auto r = run("cluster run --jobs " + path + " --gpus k80:1,p100:1,v100:1 --gpus-per-server 1 --json -q");
  ASSERT_EQ(r.status, 0) << r.out;
  const auto j = nlohmann::json::parse(r.out.substr(r.out.find('{')));
  EXPECT_EQ(j["backend"], "emulated");
  ASSERT_EQ(j["jobs"].size(), 3u);
  double longest = 0.0;
  for (const auto& job : j["jobs"]) {
    EXPECT_EQ(job["status"], "finished") << job.dump();
    EXPECT_EQ(job["steps_done"], job["steps"]);
    longest = std::max(longest, job["jct_s"].get<double>());
  }
  // The short job finishes first, within its first rounds.
  EXPECT_LT(j["jobs"][2]["jct_s"].get<double>(), 2 * 360.0);
  EXPECT_EQ(j["time_s"].get<double>(), 360.0 * j["rounds"].get<double>());
  EXPECT_GT(j["time_s"].get<double>(), longest - 1e-6);
  // Human output: a line per round on stderr, a table of jobs.
  const auto human = run("cluster run --jobs " + path + " --gpus k80:1,p100:1,v100:1 --gpus-per-server 1");
  ASSERT_EQ(human.status, 0) << human.out;
  EXPECT_NE(human.out.find("round 0 (0 s):"), std::string::npos) << human.out;
  EXPECT_NE(human.out.find("3 jobs on the emulated backend"), std::string::npos) << human.out;

  // Stopped early: the jobs are preempted and the command says so.
  const auto early = run("cluster run --jobs " + path + " --gpus k80:1,p100:1,v100:1 --gpus-per-server 1 --max-rounds 2 -q");
  EXPECT_NE(early.status, 0);
  EXPECT_NE(early.out.find("jobs still unfinished after --max-rounds 2"), std::string::npos) << early.out;

  // Space sharing on the emulated cluster: ResNet-18 and A3C share the one V100 (together they do
  // more than taking turns), so the jobs finish sooner; Slurm refuses it before connecting.
  std::ofstream(path) << "job,steps,command\nResNet-18 (batch size 32) x1,40000,a\nA3C x1,20000,b\n";
  const auto turns = run("cluster run --jobs " + path + " --gpus k80:0,p100:0,v100:1 --gpus-per-server 1 --json -q");
  const auto shared = run("cluster run --jobs " + path + " --gpus k80:0,p100:0,v100:1 --gpus-per-server 1 --json -q --space-sharing");
  ASSERT_EQ(turns.status, 0) << turns.out;
  ASSERT_EQ(shared.status, 0) << shared.out;
  const auto time_of = [](const std::string& out) { return nlohmann::json::parse(out.substr(out.find('{')))["time_s"].get<double>(); };
  EXPECT_LT(time_of(shared.out), 0.8 * time_of(turns.out));
  const auto slurm_sharing = run("cluster run --backend slurm --space-sharing --jobs " + path);
  EXPECT_NE(slurm_sharing.status, 0);
  EXPECT_NE(slurm_sharing.out.find("space sharing: this cluster's backend runs one job per GPU"), std::string::npos) << slurm_sharing.out;

  // The slurm backend needs each job's command; a bad backend is named.
  std::ofstream(path) << "job,steps\nA3C x1,500\n";
  const auto no_command = run("cluster run --backend slurm --jobs " + path);
  EXPECT_NE(no_command.status, 0);
  EXPECT_NE(no_command.out.find("job 0 has no command"), std::string::npos) << no_command.out;
  const auto backend = run("cluster run --backend kubernetes --jobs " + path);
  EXPECT_NE(backend.status, 0);
  EXPECT_NE(backend.out.find("--backend 'kubernetes': emulated or slurm"), std::string::npos) << backend.out;
  std::ofstream(path) << "job,steps\nA3C x1,0\n";
  const auto zero = run("cluster run --jobs " + path);
  EXPECT_NE(zero.status, 0);
  EXPECT_NE(zero.out.find("job 0: 0 steps"), std::string::npos) << zero.out;
}

TEST(ClusterCli, ServesJobsOverHttpAndPicksThemUpAfterARestart) {
  // tests/cluster/serve_session.py: submissions (401 without the token, 400 for bad steps), a
  // job finished, SIGINT while another runs, a restart on the same database that resumes it.
  const perseus::testing::TempDir temp;
  const auto r = perseus::testing::run_command("python3 " + std::string(PERSEUS_SOURCE_DIR) + "/tests/cluster/serve_session.py " +
                                               PERSEUS_BINARY + " " + temp.path().string() + " 2>&1");
  EXPECT_EQ(r.status, 0) << r.out << "\nthe server's log:\n" << std::ifstream(temp.path() / "serve.log").rdbuf();
  EXPECT_NE(r.out.find("restarted: job 1 back at"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("OK"), std::string::npos) << r.out;
  // Bad options are named before anything starts.
  const auto bad = run("cluster serve --backend kubernetes");
  EXPECT_NE(bad.status, 0);
  EXPECT_NE(bad.out.find("--backend 'kubernetes'"), std::string::npos) << bad.out;
  const auto help = run("cluster serve --help");
  EXPECT_EQ(help.status, 0);
  EXPECT_NE(help.out.find("POST /jobs"), std::string::npos) << help.out;
}

}  // namespace
