// Shared by the GPU tests: a fixture that points the fake NVML library at a fresh log file
// and a clean configuration, and reads the calls it logged.
#pragma once

#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

namespace perseus::testing {

inline const std::string kFakeNvml = FAKE_NVML_LIBRARY;

// Every FAKE_NVML_* variable is cleared before and after each test.
class FakeNvmlTest : public ::testing::Test {
 protected:
  void SetUp() override;
  void TearDown() override;

  // The logged calls, one per line, in order.
  std::vector<std::string> log_lines() const;
  // Forgets what was logged so far (e.g. the calls of a constructor).
  void clear_log() const;
  const std::filesystem::path& log_path() const { return log_path_; }

 private:
  std::filesystem::path log_path_;
};

// The calls NvmlBackend makes when it loads with `devices` fake devices.
std::vector<std::string> backend_startup_calls(int devices = 1);

}  // namespace perseus::testing
