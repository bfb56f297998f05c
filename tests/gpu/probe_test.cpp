// perseus_gpu_probe run against the fake NVML: its JSON report and the calls it makes.
#include <gtest/gtest.h>

#include <sys/wait.h>

#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>

#include "test_support.hpp"

namespace perseus {
namespace {

struct ProbeRun {
  int exit_code = -1;
  nlohmann::json report;
};

ProbeRun run_program(const std::string& program, const std::string& arguments) {
  const std::string command = program + " " + arguments;
  FILE* pipe = ::popen(command.c_str(), "r");
  if (pipe == nullptr) {
    ADD_FAILURE() << "cannot run " << command;
    return {};
  }
  std::string output;
  char buffer[4096];
  for (std::size_t n; (n = std::fread(buffer, 1, sizeof buffer, pipe)) > 0;) {
    output.append(buffer, n);
  }
  const int status = ::pclose(pipe);
  ProbeRun run;
  run.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  run.report = nlohmann::json::parse(output, nullptr, /*allow_exceptions=*/false);
  EXPECT_FALSE(run.report.is_discarded()) << output;
  return run;
}

ProbeRun run_probe(const std::string& arguments) { return run_program(GPU_PROBE_PROGRAM, arguments); }

class GpuProbe : public testing::FakeNvmlTest {};

TEST_F(GpuProbe, ListsDevicesLocksAndResetsAClock) {
  ::setenv("FAKE_NVML_DEVICE_COUNT", "2", 1);
  const ProbeRun run = run_probe("--library " + testing::kFakeNvml + " --device 1 --hold-ms 0");
  ASSERT_EQ(run.exit_code, 0) << run.report.dump(2);
  const nlohmann::json& report = run.report;
  EXPECT_EQ(report["device_count"], 2);
  ASSERT_EQ(report["devices"].size(), 2u);
  EXPECT_EQ(report["devices"][1]["name"], "Fake NVML GPU 1");
  EXPECT_EQ(report["devices"][1]["max_memory_clock_mhz"], 1593);
  EXPECT_EQ(report["devices"][1]["supported_graphics_clocks_mhz"],
            nlohmann::json({1410, 1395, 1380, 1365, 1200, 1005, 810, 210}));
  EXPECT_EQ(report["devices"][0]["power_mw"], 50'000 + 100 * 1410);
  EXPECT_EQ(report["devices"][1]["energy_mj"], 10'000'000 + 1410);

  // The middle of the 8 clocks (index 4) is locked; both energy reads fall outside the lock,
  // so each adds the unlocked top clock.
  const nlohmann::json& lock = report["lock_test"];
  EXPECT_EQ(lock["device"], 1);
  EXPECT_EQ(lock["frequency_mhz"], 1200);
  EXPECT_EQ(lock["locked"], true);
  EXPECT_EQ(lock["reset"], true);
  EXPECT_EQ(lock["power_while_locked_mw"], 50'000 + 100 * 1200);
  EXPECT_EQ(lock["energy_before_mj"], 10'000'000 + 2 * 1410);
  EXPECT_EQ(lock["energy_after_mj"], 10'000'000 + 3 * 1410);
  EXPECT_EQ(lock["energy_increased"], true);
  EXPECT_FALSE(report.contains("errors"));

  const std::vector<std::string> lines = log_lines();
  const auto position = [&](const std::string& line) { return std::find(lines.begin(), lines.end(), line); };
  const auto locked = position("nvmlDeviceSetGpuLockedClocks dev1 1200 1200");
  const auto reset = position("nvmlDeviceResetGpuLockedClocks dev1");
  ASSERT_NE(locked, lines.end());
  ASSERT_NE(reset, lines.end());
  EXPECT_LT(locked, reset);
  EXPECT_EQ(lines.back(), "nvmlShutdown");
}

TEST_F(GpuProbe, ReportsARefusedLockAndExitsWithTwo) {
  ::setenv("FAKE_NVML_FAIL", "nvmlDeviceSetGpuLockedClocks:4", 1);
  const ProbeRun run = run_probe("--library " + testing::kFakeNvml + " --frequency 810 --hold-ms 0");
  EXPECT_EQ(run.exit_code, 2);
  const nlohmann::json& lock = run.report["lock_test"];
  EXPECT_EQ(lock["frequency_mhz"], 810);
  EXPECT_EQ(lock["errors"]["locked"],
            "nvmlDeviceSetGpuLockedClocks(device 0, 810, 810): Insufficient Permissions (NVML error 4)");
  EXPECT_EQ(lock["reset"], true);  // reset is still attempted
}

TEST_F(GpuProbe, ListOnlyChangesNoClock) {
  const ProbeRun run = run_probe("--library " + testing::kFakeNvml + " --no-lock");
  EXPECT_EQ(run.exit_code, 0);
  EXPECT_FALSE(run.report.contains("lock_test"));
  for (const std::string& line : log_lines()) {
    EXPECT_EQ(line.find("Locked"), std::string::npos) << line;
  }
}

TEST_F(GpuProbe, MissingLibraryExitsWithOne) {
  const ProbeRun run = run_probe("--library /nonexistent/libnvidia-ml.so.1");
  EXPECT_EQ(run.exit_code, 1);
  EXPECT_NE(run.report["errors"]["load"].get<std::string>().find("/nonexistent/libnvidia-ml.so.1"),
            std::string::npos);
}

// perseus_gpu_client_check, the client half of tests/gpu/real_gpu_check.sh, on the fake: the
// fake's energy counter adds the clock at every read, so the highest clock "draws" more.
// Power is that energy over the measured time: each instruction is held 50 ms, so that a
// sleep overrunning by a few milliseconds on a loaded machine cannot reverse the order (the
// two energies differ by 17.5%; with 1 ms holds it did, once in some hundred runs).
TEST_F(GpuProbe, ClientCheckLocksThePlannedClocksAndMeasuresEachInstruction) {
  const ProbeRun run = run_program(GPU_CLIENT_CHECK_PROGRAM,
                                   "--library " + testing::kFakeNvml + " --steps 2 --hold-ms 50 --expect-power-order");
  ASSERT_EQ(run.exit_code, 0) << run.report.dump(2);
  const nlohmann::json& report = run.report;
  EXPECT_EQ(report["plan_mhz"], nlohmann::json({1410, 1200}));
  EXPECT_EQ(report["locked_mhz"], nlohmann::json({1410, 1200, 1410, 1200}));
  EXPECT_EQ(report["locks_as_planned"], true);
  EXPECT_EQ(report["memory_clock_locked"], true);
  // Two steps, each instruction measured once a step over an interval that ends while its own
  // clock is locked: the fake's counter adds 1,410 mJ and 1,200 mJ a read.
  for (const auto& [name, joules] : {std::pair{"forward", 1.41}, std::pair{"backward", 1.2}}) {
    const nlohmann::json& steps = report["energy_breakdown_j"][name];
    ASSERT_EQ(steps.size(), 2u) << name;
    for (const nlohmann::json& step : steps) {
      ASSERT_EQ(step.size(), 1u) << name;
      EXPECT_NEAR(step[0].get<double>(), joules, 1e-9) << name;
    }
  }
  EXPECT_EQ(report["high_clock_draws_more"], true);
  // Closing the client reset the clocks it locked.
  const std::vector<std::string> lines = log_lines();
  EXPECT_NE(std::find(lines.begin(), lines.end(), "nvmlDeviceResetGpuLockedClocks dev0"), lines.end());
}

TEST_F(GpuProbe, ClientCheckRunsWhereTheMemoryClockCannotBeLocked) {
  ::setenv("FAKE_NVML_FAIL", "nvmlDeviceSetMemoryLockedClocks:3", 1);  // as an H100 answers
  const ProbeRun run =
      run_program(GPU_CLIENT_CHECK_PROGRAM, "--library " + testing::kFakeNvml + " --steps 1 --hold-ms 1");
  ASSERT_EQ(run.exit_code, 0) << run.report.dump(2);
  EXPECT_EQ(run.report["memory_clock_locked"], false);
  EXPECT_EQ(run.report["locked_mhz"], nlohmann::json({1410, 1200}));
}

TEST_F(GpuProbe, ClientCheckFailsWhenALockIsRefused) {
  ::setenv("FAKE_NVML_FAIL", "nvmlDeviceSetGpuLockedClocks:4", 1);
  const ProbeRun run =
      run_program(GPU_CLIENT_CHECK_PROGRAM, "--library " + testing::kFakeNvml + " --steps 1 --hold-ms 1");
  EXPECT_EQ(run.exit_code, 2) << run.report.dump(2);
  EXPECT_EQ(run.report["locks_as_planned"], false);
}

}  // namespace
}  // namespace perseus
