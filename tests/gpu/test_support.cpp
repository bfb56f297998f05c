#include "test_support.hpp"

#include <unistd.h>

#include <cstdlib>
#include <fstream>

namespace perseus::testing {

namespace {

const char* const kFakeVariables[] = {"FAKE_NVML_LOG", "FAKE_NVML_DEVICE_COUNT", "FAKE_NVML_GRAPHICS_CLOCKS",
                                      "FAKE_NVML_MEMORY_CLOCKS", "FAKE_NVML_FAIL", "PERSEUS_NVML_LIBRARY"};

}  // namespace

void FakeNvmlTest::SetUp() {
  for (const char* name : kFakeVariables) {
    ::unsetenv(name);
  }
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  log_path_ = std::filesystem::temp_directory_path() /
              ("perseus-fake-nvml-" + std::to_string(::getpid()) + "-" + info->test_suite_name() + "-" +
               info->name() + ".log");
  std::filesystem::remove(log_path_);
  ::setenv("FAKE_NVML_LOG", log_path_.c_str(), 1);
}

void FakeNvmlTest::TearDown() {
  for (const char* name : kFakeVariables) {
    ::unsetenv(name);
  }
  std::filesystem::remove(log_path_);
}

std::vector<std::string> FakeNvmlTest::log_lines() const {
  std::vector<std::string> lines;
  std::ifstream in(log_path_);
  for (std::string line; std::getline(in, line);) {
    lines.push_back(line);
  }
  return lines;
}

void FakeNvmlTest::clear_log() const { std::filesystem::remove(log_path_); }

std::vector<std::string> backend_startup_calls(int devices) {
  std::vector<std::string> calls{"nvmlInit_v2", "nvmlDeviceGetCount_v2"};
  for (int i = 0; i < devices; ++i) {
    calls.push_back("nvmlDeviceGetHandleByIndex_v2 " + std::to_string(i));
  }
  return calls;
}

}  // namespace perseus::testing
