// NvmlBackend against the fake libnvidia-ml.so.1: the exact NVML calls each method makes,
// the values it returns, and the errors it reports.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "perseus/gpu/nvml_backend.hpp"
#include "test_support.hpp"

namespace perseus {
namespace {

using Lines = std::vector<std::string>;
using testing::backend_startup_calls;
using testing::kFakeNvml;

// The GpuError message of `action`, or "" when it does not throw.
template <typename Action>
std::string gpu_error(Action&& action) {
  try {
    action();
  } catch (const GpuError& e) {
    return e.what();
  }
  return "";
}

class NvmlBackendTest : public testing::FakeNvmlTest {};

TEST_F(NvmlBackendTest, LoadsInitialisesAndTakesAHandlePerDevice) {
  {
    NvmlBackend gpu(kFakeNvml);
    EXPECT_EQ(gpu.device_count(), 1);
    EXPECT_EQ(gpu.library_path(), kFakeNvml);
    EXPECT_EQ(log_lines(), backend_startup_calls(1));
  }
  Lines expected = backend_startup_calls(1);
  expected.push_back("nvmlShutdown");
  EXPECT_EQ(log_lines(), expected);
}

TEST_F(NvmlBackendTest, SeesEveryDevice) {
  ::setenv("FAKE_NVML_DEVICE_COUNT", "2", 1);
  NvmlBackend gpu(kFakeNvml);
  EXPECT_EQ(gpu.device_count(), 2);
  EXPECT_EQ(log_lines(), backend_startup_calls(2));
  clear_log();
  EXPECT_EQ(gpu.name(1), "Fake NVML GPU 1");
  gpu.reset_power_limit(1);
  EXPECT_EQ(log_lines(), (Lines{"nvmlDeviceGetName dev1 96", "nvmlDeviceGetPowerManagementDefaultLimit dev1",
                                "nvmlDeviceSetPowerManagementLimit dev1 350000"}));
}

TEST_F(NvmlBackendTest, ClocksComeSortedDescendingWithoutRepeatsAtTheMaximumMemoryClock) {
  ::setenv("FAKE_NVML_GRAPHICS_CLOCKS", "810,1410,1200,810,1395", 1);
  ::setenv("FAKE_NVML_MEMORY_CLOCKS", "1215,1593,877", 1);
  NvmlBackend gpu(kFakeNvml);
  clear_log();
  EXPECT_EQ(gpu.max_memory_clock(0), 1593);
  EXPECT_EQ(gpu.supported_graphics_clocks(0), (std::vector<int>{1410, 1395, 1200, 810}));
  EXPECT_EQ(log_lines(), (Lines{"nvmlDeviceGetSupportedMemoryClocks dev0 capacity=256",
                                "nvmlDeviceGetSupportedMemoryClocks dev0 capacity=256",
                                "nvmlDeviceGetSupportedGraphicsClocks dev0 1593 capacity=256"}));
}

TEST_F(NvmlBackendTest, GrowsTheClockBufferWhenNvmlSaysItIsTooSmall) {
  std::string clocks;
  for (int mhz = 2000; mhz > 2000 - 300; --mhz) {
    if (!clocks.empty()) {
      clocks += ',';
    }
    clocks += std::to_string(mhz);
  }
  ::setenv("FAKE_NVML_GRAPHICS_CLOCKS", clocks.c_str(), 1);
  NvmlBackend gpu(kFakeNvml);
  clear_log();
  const std::vector<int> supported = gpu.supported_graphics_clocks(0);
  ASSERT_EQ(supported.size(), 300u);
  EXPECT_EQ(supported.front(), 2000);
  EXPECT_EQ(supported.back(), 1701);
  EXPECT_EQ(log_lines(), (Lines{"nvmlDeviceGetSupportedMemoryClocks dev0 capacity=256",
                                "nvmlDeviceGetSupportedGraphicsClocks dev0 1593 capacity=256",
                                "nvmlDeviceGetSupportedGraphicsClocks dev0 1593 capacity=300"}));
}

TEST_F(NvmlBackendTest, LocksAndResetsWithTheExactNvmlCalls) {
  NvmlBackend gpu(kFakeNvml);
  clear_log();
  gpu.set_locked_graphics_clocks(0, 1200, 1200);
  gpu.set_locked_memory_clocks(0, 1593, 1593);
  gpu.reset_locked_graphics_clocks(0);
  gpu.reset_locked_memory_clocks(0);
  gpu.reset_power_limit(0);
  gpu.reset_clocks_best_effort(0);
  EXPECT_EQ(log_lines(), (Lines{"nvmlDeviceSetGpuLockedClocks dev0 1200 1200",
                                "nvmlDeviceSetMemoryLockedClocks dev0 1593 1593",
                                "nvmlDeviceResetGpuLockedClocks dev0", "nvmlDeviceResetMemoryLockedClocks dev0",
                                "nvmlDeviceGetPowerManagementDefaultLimit dev0",
                                "nvmlDeviceSetPowerManagementLimit dev0 400000",
                                "nvmlDeviceResetGpuLockedClocks dev0", "nvmlDeviceResetMemoryLockedClocks dev0"}));
}

TEST_F(NvmlBackendTest, EnergyCounterAndPowerFollowTheLockedClock) {
  // The fake adds the current graphics clock (in mJ) to its counter on every read and draws
  // 50 W + 0.1 W/MHz: unlocked it runs at its top clock, 1410 MHz.
  NvmlBackend gpu(kFakeNvml);
  const std::uint64_t first = gpu.total_energy_mj(0);
  EXPECT_EQ(first, 5'000'000u + 1410u);
  EXPECT_EQ(gpu.total_energy_mj(0) - first, 1410u);
  EXPECT_EQ(gpu.power_mw(0), 50'000u + 100u * 1410u);
  gpu.set_locked_graphics_clocks(0, 1000, 1300);  // highest supported clock in range: 1200
  const std::uint64_t locked = gpu.total_energy_mj(0);
  EXPECT_EQ(gpu.total_energy_mj(0) - locked, 1200u);
  EXPECT_EQ(gpu.power_mw(0), 50'000u + 100u * 1200u);
}

TEST_F(NvmlBackendTest, FailedCallsNameTheCallAndNvmlsReason) {
  NvmlBackend gpu(kFakeNvml);
  const std::string message = gpu_error([&] { gpu.set_locked_graphics_clocks(0, 100, 150); });
  EXPECT_EQ(message, "nvmlDeviceSetGpuLockedClocks(device 0, 100, 150): Invalid Argument (NVML error 2)");
}

TEST_F(NvmlBackendTest, InjectedPermissionErrorIsReported) {
  ::setenv("FAKE_NVML_FAIL", "nvmlDeviceSetPowerManagementLimit:4,nvmlDeviceGetPowerUsage:3", 1);
  NvmlBackend gpu(kFakeNvml);
  EXPECT_EQ(gpu_error([&] { gpu.reset_power_limit(0); }),
            "nvmlDeviceSetPowerManagementLimit(device 0, 400000): Insufficient Permissions (NVML error 4)");
  EXPECT_EQ(gpu_error([&] { gpu.power_mw(0); }), "nvmlDeviceGetPowerUsage(device 0): Not Supported (NVML error 3)");
}

// "Not supported" is its own type (callers may go on without the call); a refusal is not.
TEST_F(NvmlBackendTest, NotSupportedIsToldApartFromRefused) {
  ::setenv("FAKE_NVML_FAIL", "nvmlDeviceSetMemoryLockedClocks:3,nvmlDeviceSetGpuLockedClocks:4", 1);
  NvmlBackend gpu(kFakeNvml);
  EXPECT_THROW(gpu.set_locked_memory_clocks(0, 1593, 1593), GpuNotSupported);
  try {
    gpu.set_locked_graphics_clocks(0, 1200, 1200);
    ADD_FAILURE() << "no error";
  } catch (const GpuNotSupported&) {
    ADD_FAILURE() << "a permission error is not 'not supported'";
  } catch (const GpuError&) {
  }
}

TEST_F(NvmlBackendTest, DeviceIndexOutOfRangeIsAnError) {
  NvmlBackend gpu(kFakeNvml);
  clear_log();
  EXPECT_EQ(gpu_error([&] { gpu.name(1); }), "NVML device index 1 out of range: 1 device(s)");
  EXPECT_EQ(gpu_error([&] { gpu.set_locked_graphics_clocks(-1, 1200, 1200); }),
            "NVML device index -1 out of range: 1 device(s)");
  EXPECT_EQ(gpu_error([&] { gpu.set_locked_graphics_clocks(0, -5, 1200); }),
            "nvmlDeviceSetGpuLockedClocks(device 0, -5, 1200): negative clock -5 MHz");
  EXPECT_TRUE(log_lines().empty());  // nothing reached NVML
  gpu.reset_clocks_best_effort(7);   // silently nothing
  EXPECT_TRUE(log_lines().empty());
}

TEST_F(NvmlBackendTest, FailedInitIsAnErrorAndNothingIsLeftInitialised) {
  ::setenv("FAKE_NVML_FAIL", "nvmlInit_v2:9", 1);
  EXPECT_EQ(gpu_error([&] { NvmlBackend gpu(kFakeNvml); }), "nvmlInit_v2(): Driver Not Loaded (NVML error 9)");
  EXPECT_EQ(log_lines(), Lines{"nvmlInit_v2"});
}

TEST_F(NvmlBackendTest, FailureAfterInitShutsNvmlDown) {
  ::setenv("FAKE_NVML_FAIL", "nvmlDeviceGetHandleByIndex_v2:15", 1);
  EXPECT_EQ(gpu_error([&] { NvmlBackend gpu(kFakeNvml); }),
            "nvmlDeviceGetHandleByIndex_v2(0): GPU is lost (NVML error 15)");
  Lines expected = backend_startup_calls(1);
  expected.push_back("nvmlShutdown");
  EXPECT_EQ(log_lines(), expected);
}

TEST_F(NvmlBackendTest, MissingLibraryIsAClearError) {
  const std::string message = gpu_error([] { NvmlBackend gpu("/nonexistent/libnvidia-ml.so.1"); });
  EXPECT_NE(message.find("cannot load the NVML library '/nonexistent/libnvidia-ml.so.1'"), std::string::npos)
      << message;
  EXPECT_NE(message.find("PERSEUS_NVML_LIBRARY"), std::string::npos) << message;
}

TEST_F(NvmlBackendTest, LibraryWithoutNvmlSymbolsIsAClearError) {
  const std::string message = gpu_error([] { NvmlBackend gpu("libm.so.6"); });
  EXPECT_NE(message.find("NVML library 'libm.so.6' lacks symbol nvmlInit_v2"), std::string::npos) << message;
}

TEST_F(NvmlBackendTest, LibraryPathComesFromTheEnvironment) {
  EXPECT_EQ(NvmlBackend::default_library_path(), "libnvidia-ml.so.1");
  ::setenv("PERSEUS_NVML_LIBRARY", "", 1);
  EXPECT_EQ(NvmlBackend::default_library_path(), "libnvidia-ml.so.1");
  ::setenv("PERSEUS_NVML_LIBRARY", kFakeNvml.c_str(), 1);
  NvmlBackend gpu;
  EXPECT_EQ(gpu.library_path(), kFakeNvml);
  EXPECT_EQ(gpu.name(0), "Fake NVML GPU 0");
}

}  // namespace
}  // namespace perseus
