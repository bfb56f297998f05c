// A stand-in for libnvidia-ml.so.1 that exports the NVML symbols NvmlBackend uses, keeps a
// little device state, and appends every call with its arguments to the file named by
// $FAKE_NVML_LOG (one line per call: "<function> <arguments>", devices written "dev<i>").
// nvmlErrorString is not logged: it describes, it does not call the device.
//
// Configuration, read by the first nvmlInit_v2 (and again after a full nvmlShutdown):
//   FAKE_NVML_DEVICE_COUNT    0..2 devices (default 1)
//   FAKE_NVML_GRAPHICS_CLOCKS comma-separated MHz, in the order NVML reports them
//                             (default 1410,1395,1380,1365,1200,1005,810,210)
//   FAKE_NVML_MEMORY_CLOCKS   comma-separated MHz (default 1215,1593)
//   FAKE_NVML_FAIL            comma-separated "<function>:<code>": that call returns <code>
// Device i starts with 5,000,000·(i+1) mJ on its energy counter; each read adds the current
// graphics clock in mJ (so a reading taken while locked at f rises by exactly f). Power is
// 50 W + 0.1 W per MHz of the current clock. The default power limit is 400 W (device 0) and
// 350 W (device 1), and starts lowered to 300 W.
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <type_traits>
#include <vector>

#include "perseus/gpu/nvml_abi.hpp"

// Declarations spelled as in the public nvml.h; nvmlDevice_t is the same opaque pointer.
using nvmlReturn_t = int;
using nvmlDevice_t = perseus::nvml::Device;
using nvmlClockType_t = int;

extern "C" {
nvmlReturn_t nvmlInit_v2(void);
nvmlReturn_t nvmlShutdown(void);
const char* nvmlErrorString(nvmlReturn_t result);
nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int* deviceCount);
nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t* device);
nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t device, char* name, unsigned int length);
nvmlReturn_t nvmlDeviceGetSupportedMemoryClocks(nvmlDevice_t device, unsigned int* count, unsigned int* clocksMHz);
nvmlReturn_t nvmlDeviceGetSupportedGraphicsClocks(nvmlDevice_t device, unsigned int memoryClockMHz,
                                                  unsigned int* count, unsigned int* clocksMHz);
nvmlReturn_t nvmlDeviceGetMaxClockInfo(nvmlDevice_t device, nvmlClockType_t type, unsigned int* clock);
nvmlReturn_t nvmlDeviceSetGpuLockedClocks(nvmlDevice_t device, unsigned int minGpuClockMHz,
                                          unsigned int maxGpuClockMHz);
nvmlReturn_t nvmlDeviceResetGpuLockedClocks(nvmlDevice_t device);
nvmlReturn_t nvmlDeviceSetMemoryLockedClocks(nvmlDevice_t device, unsigned int minMemClockMHz,
                                             unsigned int maxMemClockMHz);
nvmlReturn_t nvmlDeviceResetMemoryLockedClocks(nvmlDevice_t device);
nvmlReturn_t nvmlDeviceGetPowerManagementDefaultLimit(nvmlDevice_t device, unsigned int* defaultLimit);
nvmlReturn_t nvmlDeviceSetPowerManagementLimit(nvmlDevice_t device, unsigned int limit);
nvmlReturn_t nvmlDeviceGetTotalEnergyConsumption(nvmlDevice_t device, unsigned long long* energy);
nvmlReturn_t nvmlDeviceGetPowerUsage(nvmlDevice_t device, unsigned int* power);
}

// The backend's function pointer types must match these nvml.h signatures exactly.
namespace abi = perseus::nvml;
static_assert(std::is_same_v<decltype(&nvmlInit_v2), abi::InitV2Fn>);
static_assert(std::is_same_v<decltype(&nvmlShutdown), abi::ShutdownFn>);
static_assert(std::is_same_v<decltype(&nvmlErrorString), abi::ErrorStringFn>);
static_assert(std::is_same_v<decltype(&nvmlDeviceGetCount_v2), abi::DeviceGetCountV2Fn>);
static_assert(std::is_same_v<decltype(&nvmlDeviceGetHandleByIndex_v2), abi::DeviceGetHandleByIndexV2Fn>);
static_assert(std::is_same_v<decltype(&nvmlDeviceGetName), abi::DeviceGetNameFn>);
static_assert(std::is_same_v<decltype(&nvmlDeviceGetSupportedMemoryClocks), abi::DeviceGetSupportedMemoryClocksFn>);
static_assert(
    std::is_same_v<decltype(&nvmlDeviceGetSupportedGraphicsClocks), abi::DeviceGetSupportedGraphicsClocksFn>);
static_assert(std::is_same_v<decltype(&nvmlDeviceGetMaxClockInfo), abi::DeviceGetMaxClockInfoFn>);
static_assert(std::is_same_v<decltype(&nvmlDeviceSetGpuLockedClocks), abi::DeviceSetGpuLockedClocksFn>);
static_assert(std::is_same_v<decltype(&nvmlDeviceResetGpuLockedClocks), abi::DeviceResetGpuLockedClocksFn>);
static_assert(std::is_same_v<decltype(&nvmlDeviceSetMemoryLockedClocks), abi::DeviceSetMemoryLockedClocksFn>);
static_assert(std::is_same_v<decltype(&nvmlDeviceResetMemoryLockedClocks), abi::DeviceResetMemoryLockedClocksFn>);
static_assert(std::is_same_v<decltype(&nvmlDeviceGetPowerManagementDefaultLimit),
                             abi::DeviceGetPowerManagementDefaultLimitFn>);
static_assert(
    std::is_same_v<decltype(&nvmlDeviceSetPowerManagementLimit), abi::DeviceSetPowerManagementLimitFn>);
static_assert(
    std::is_same_v<decltype(&nvmlDeviceGetTotalEnergyConsumption), abi::DeviceGetTotalEnergyConsumptionFn>);
static_assert(std::is_same_v<decltype(&nvmlDeviceGetPowerUsage), abi::DeviceGetPowerUsageFn>);

namespace {

constexpr nvmlReturn_t kSuccess = 0;
constexpr nvmlReturn_t kUninitialized = 1;
constexpr nvmlReturn_t kInvalidArgument = 2;
constexpr nvmlReturn_t kNotSupported = 3;
constexpr nvmlReturn_t kNotFound = 6;
constexpr nvmlReturn_t kInsufficientSize = 7;
constexpr int kMaxDevices = 2;

struct FakeDevice {
  unsigned int graphics_min = 0, graphics_max = 0;  // 0: not locked
  unsigned int memory_min = 0, memory_max = 0;
  unsigned int default_power_limit_mw = 0;
  unsigned int power_limit_mw = 0;
  unsigned long long energy_mj = 0;
};

struct Config {
  int device_count = 1;
  std::vector<unsigned int> graphics_clocks;
  std::vector<unsigned int> memory_clocks;
  std::vector<std::pair<std::string, nvmlReturn_t>> failures;
};

int g_init_count = 0;
Config g_config;
FakeDevice g_devices[kMaxDevices];

std::vector<unsigned int> parse_clocks(const char* text, const char* fallback) {
  std::string list = (text != nullptr && *text != '\0') ? text : fallback;
  std::vector<unsigned int> clocks;
  std::size_t start = 0;
  while (start <= list.size()) {
    const std::size_t end = std::min(list.find(',', start), list.size());
    if (end > start) {
      clocks.push_back(static_cast<unsigned int>(std::strtoul(list.substr(start, end - start).c_str(), nullptr, 10)));
    }
    start = end + 1;
  }
  return clocks;
}

void load_config() {
  g_config = Config{};
  if (const char* count = std::getenv("FAKE_NVML_DEVICE_COUNT")) {
    g_config.device_count = std::clamp(std::atoi(count), 0, kMaxDevices);
  }
  g_config.graphics_clocks =
      parse_clocks(std::getenv("FAKE_NVML_GRAPHICS_CLOCKS"), "1410,1395,1380,1365,1200,1005,810,210");
  g_config.memory_clocks = parse_clocks(std::getenv("FAKE_NVML_MEMORY_CLOCKS"), "1215,1593");
  if (const char* fail = std::getenv("FAKE_NVML_FAIL")) {
    std::string list = fail;
    std::size_t start = 0;
    while (start < list.size()) {
      const std::size_t end = std::min(list.find(',', start), list.size());
      const std::string item = list.substr(start, end - start);
      const std::size_t colon = item.find(':');
      if (colon != std::string::npos) {
        g_config.failures.emplace_back(item.substr(0, colon), std::atoi(item.c_str() + colon + 1));
      }
      start = end + 1;
    }
  }
  for (int i = 0; i < kMaxDevices; ++i) {
    g_devices[i] = FakeDevice{};
    g_devices[i].default_power_limit_mw = i == 0 ? 400'000 : 350'000;
    g_devices[i].power_limit_mw = 300'000;
    g_devices[i].energy_mj = 5'000'000ULL * static_cast<unsigned long long>(i + 1);
  }
}

// Appends one line to $FAKE_NVML_LOG with plain write(2): safe from the signal handlers that
// call NVML while a process dies, and atomic per line across processes (O_APPEND).
void log_call(const char* format, ...) __attribute__((format(printf, 1, 2)));
void log_call(const char* format, ...) {
  const char* path = std::getenv("FAKE_NVML_LOG");
  if (path == nullptr || *path == '\0') {
    return;
  }
  char line[256];
  va_list args;
  va_start(args, format);
  int length = std::vsnprintf(line, sizeof line - 1, format, args);
  va_end(args);
  if (length < 0) {
    return;
  }
  length = std::min<int>(length, sizeof line - 2);
  line[length++] = '\n';
  const int fd = ::open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) {
    return;
  }
  [[maybe_unused]] const ssize_t written = ::write(fd, line, static_cast<std::size_t>(length));
  ::close(fd);
}

// The injected failure for `function`, or success.
nvmlReturn_t injected(const char* function) {
  for (const auto& [name, code] : g_config.failures) {
    if (name == function) {
      return code;
    }
  }
  return kSuccess;
}

// Index of a handle this library gave out, or -1.
int device_index(nvmlDevice_t device) {
  for (int i = 0; i < g_config.device_count; ++i) {
    if (reinterpret_cast<void*>(device) == static_cast<void*>(&g_devices[i])) {
      return i;
    }
  }
  return -1;
}

// Common entry checks of a device call: initialised, valid handle, no injected failure.
nvmlReturn_t enter(const char* function, nvmlDevice_t device, int* index) {
  if (g_init_count == 0) {
    return kUninitialized;
  }
  *index = device_index(device);
  if (*index < 0) {
    return kInvalidArgument;
  }
  return injected(function);
}

unsigned int current_graphics_clock(const FakeDevice& device) {
  unsigned int best = 0;
  for (unsigned int clock : g_config.graphics_clocks) {
    const bool allowed = device.graphics_max == 0 || (clock >= device.graphics_min && clock <= device.graphics_max);
    if (allowed) {
      best = std::max(best, clock);
    }
  }
  return best;
}

bool contains(const std::vector<unsigned int>& clocks, unsigned int clock) {
  return std::find(clocks.begin(), clocks.end(), clock) != clocks.end();
}

nvmlReturn_t copy_list(const std::vector<unsigned int>& list, unsigned int* count, unsigned int* out) {
  if (count == nullptr) {
    return kInvalidArgument;
  }
  if (*count < list.size()) {
    *count = static_cast<unsigned int>(list.size());
    return kInsufficientSize;
  }
  if (out == nullptr) {
    return kInvalidArgument;
  }
  std::copy(list.begin(), list.end(), out);
  *count = static_cast<unsigned int>(list.size());
  return kSuccess;
}

}  // namespace

extern "C" {

nvmlReturn_t nvmlInit_v2(void) {
  if (g_init_count == 0) {
    load_config();
  }
  log_call("nvmlInit_v2");
  if (const nvmlReturn_t failure = injected("nvmlInit_v2")) {
    return failure;
  }
  ++g_init_count;
  return kSuccess;
}

nvmlReturn_t nvmlShutdown(void) {
  log_call("nvmlShutdown");
  if (g_init_count == 0) {
    return kUninitialized;
  }
  --g_init_count;
  return kSuccess;
}

const char* nvmlErrorString(nvmlReturn_t result) {
  switch (result) {
    case 0: return "Success";
    case 1: return "Uninitialized";
    case 2: return "Invalid Argument";
    case 3: return "Not Supported";
    case 4: return "Insufficient Permissions";
    case 6: return "Not Found";
    case 7: return "Insufficient Size";
    case 9: return "Driver Not Loaded";
    case 15: return "GPU is lost";
    default: return "Unknown Error";
  }
}

nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int* deviceCount) {
  log_call("nvmlDeviceGetCount_v2");
  if (g_init_count == 0) {
    return kUninitialized;
  }
  if (const nvmlReturn_t failure = injected("nvmlDeviceGetCount_v2")) {
    return failure;
  }
  if (deviceCount == nullptr) {
    return kInvalidArgument;
  }
  *deviceCount = static_cast<unsigned int>(g_config.device_count);
  return kSuccess;
}

nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t* device) {
  log_call("nvmlDeviceGetHandleByIndex_v2 %u", index);
  if (g_init_count == 0) {
    return kUninitialized;
  }
  if (const nvmlReturn_t failure = injected("nvmlDeviceGetHandleByIndex_v2")) {
    return failure;
  }
  if (device == nullptr || index >= static_cast<unsigned int>(g_config.device_count)) {
    return kInvalidArgument;
  }
  *device = reinterpret_cast<nvmlDevice_t>(&g_devices[index]);
  return kSuccess;
}

nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t device, char* name, unsigned int length) {
  int i = -1;
  const nvmlReturn_t failure = enter("nvmlDeviceGetName", device, &i);
  log_call("nvmlDeviceGetName dev%d %u", i, length);
  if (failure != kSuccess) {
    return failure;
  }
  const std::string text = "Fake NVML GPU " + std::to_string(i);
  if (name == nullptr || length < text.size() + 1) {
    return kInsufficientSize;
  }
  std::memcpy(name, text.c_str(), text.size() + 1);
  return kSuccess;
}

nvmlReturn_t nvmlDeviceGetSupportedMemoryClocks(nvmlDevice_t device, unsigned int* count, unsigned int* clocksMHz) {
  int i = -1;
  const nvmlReturn_t failure = enter("nvmlDeviceGetSupportedMemoryClocks", device, &i);
  log_call("nvmlDeviceGetSupportedMemoryClocks dev%d capacity=%u", i, count != nullptr ? *count : 0U);
  if (failure != kSuccess) {
    return failure;
  }
  return copy_list(g_config.memory_clocks, count, clocksMHz);
}

nvmlReturn_t nvmlDeviceGetSupportedGraphicsClocks(nvmlDevice_t device, unsigned int memoryClockMHz,
                                                  unsigned int* count, unsigned int* clocksMHz) {
  int i = -1;
  const nvmlReturn_t failure = enter("nvmlDeviceGetSupportedGraphicsClocks", device, &i);
  log_call("nvmlDeviceGetSupportedGraphicsClocks dev%d %u capacity=%u", i, memoryClockMHz,
           count != nullptr ? *count : 0U);
  if (failure != kSuccess) {
    return failure;
  }
  if (!contains(g_config.memory_clocks, memoryClockMHz)) {
    return kNotFound;
  }
  return copy_list(g_config.graphics_clocks, count, clocksMHz);
}

nvmlReturn_t nvmlDeviceGetMaxClockInfo(nvmlDevice_t device, nvmlClockType_t type, unsigned int* clock) {
  int i = -1;
  const nvmlReturn_t failure = enter("nvmlDeviceGetMaxClockInfo", device, &i);
  log_call("nvmlDeviceGetMaxClockInfo dev%d %d", i, type);
  if (failure != kSuccess) {
    return failure;
  }
  if (clock == nullptr) {
    return kInvalidArgument;
  }
  const std::vector<unsigned int>* list = nullptr;
  if (type == abi::kClockGraphics || type == abi::kClockSm) {
    list = &g_config.graphics_clocks;
  } else if (type == abi::kClockMem) {
    list = &g_config.memory_clocks;
  } else {
    return kNotSupported;
  }
  *clock = list->empty() ? 0 : *std::max_element(list->begin(), list->end());
  return kSuccess;
}

nvmlReturn_t nvmlDeviceSetGpuLockedClocks(nvmlDevice_t device, unsigned int minGpuClockMHz,
                                          unsigned int maxGpuClockMHz) {
  int i = -1;
  const nvmlReturn_t failure = enter("nvmlDeviceSetGpuLockedClocks", device, &i);
  log_call("nvmlDeviceSetGpuLockedClocks dev%d %u %u", i, minGpuClockMHz, maxGpuClockMHz);
  if (failure != kSuccess) {
    return failure;
  }
  // Like the driver: the range must hold at least one supported clock.
  const bool any = std::any_of(g_config.graphics_clocks.begin(), g_config.graphics_clocks.end(),
                               [&](unsigned int c) { return c >= minGpuClockMHz && c <= maxGpuClockMHz; });
  if (minGpuClockMHz > maxGpuClockMHz || !any) {
    return kInvalidArgument;
  }
  g_devices[i].graphics_min = minGpuClockMHz;
  g_devices[i].graphics_max = maxGpuClockMHz;
  return kSuccess;
}

nvmlReturn_t nvmlDeviceResetGpuLockedClocks(nvmlDevice_t device) {
  int i = -1;
  const nvmlReturn_t failure = enter("nvmlDeviceResetGpuLockedClocks", device, &i);
  log_call("nvmlDeviceResetGpuLockedClocks dev%d", i);
  if (failure != kSuccess) {
    return failure;
  }
  g_devices[i].graphics_min = g_devices[i].graphics_max = 0;
  return kSuccess;
}

nvmlReturn_t nvmlDeviceSetMemoryLockedClocks(nvmlDevice_t device, unsigned int minMemClockMHz,
                                             unsigned int maxMemClockMHz) {
  int i = -1;
  const nvmlReturn_t failure = enter("nvmlDeviceSetMemoryLockedClocks", device, &i);
  log_call("nvmlDeviceSetMemoryLockedClocks dev%d %u %u", i, minMemClockMHz, maxMemClockMHz);
  if (failure != kSuccess) {
    return failure;
  }
  if (minMemClockMHz > maxMemClockMHz || !contains(g_config.memory_clocks, minMemClockMHz)) {
    return kInvalidArgument;
  }
  g_devices[i].memory_min = minMemClockMHz;
  g_devices[i].memory_max = maxMemClockMHz;
  return kSuccess;
}

nvmlReturn_t nvmlDeviceResetMemoryLockedClocks(nvmlDevice_t device) {
  int i = -1;
  const nvmlReturn_t failure = enter("nvmlDeviceResetMemoryLockedClocks", device, &i);
  log_call("nvmlDeviceResetMemoryLockedClocks dev%d", i);
  if (failure != kSuccess) {
    return failure;
  }
  g_devices[i].memory_min = g_devices[i].memory_max = 0;
  return kSuccess;
}

nvmlReturn_t nvmlDeviceGetPowerManagementDefaultLimit(nvmlDevice_t device, unsigned int* defaultLimit) {
  int i = -1;
  const nvmlReturn_t failure = enter("nvmlDeviceGetPowerManagementDefaultLimit", device, &i);
  log_call("nvmlDeviceGetPowerManagementDefaultLimit dev%d", i);
  if (failure != kSuccess) {
    return failure;
  }
  if (defaultLimit == nullptr) {
    return kInvalidArgument;
  }
  *defaultLimit = g_devices[i].default_power_limit_mw;
  return kSuccess;
}

nvmlReturn_t nvmlDeviceSetPowerManagementLimit(nvmlDevice_t device, unsigned int limit) {
  int i = -1;
  const nvmlReturn_t failure = enter("nvmlDeviceSetPowerManagementLimit", device, &i);
  log_call("nvmlDeviceSetPowerManagementLimit dev%d %u", i, limit);
  if (failure != kSuccess) {
    return failure;
  }
  if (limit == 0 || limit > g_devices[i].default_power_limit_mw) {
    return kInvalidArgument;
  }
  g_devices[i].power_limit_mw = limit;
  return kSuccess;
}

nvmlReturn_t nvmlDeviceGetTotalEnergyConsumption(nvmlDevice_t device, unsigned long long* energy) {
  int i = -1;
  const nvmlReturn_t failure = enter("nvmlDeviceGetTotalEnergyConsumption", device, &i);
  log_call("nvmlDeviceGetTotalEnergyConsumption dev%d", i);
  if (failure != kSuccess) {
    return failure;
  }
  if (energy == nullptr) {
    return kInvalidArgument;
  }
  g_devices[i].energy_mj += current_graphics_clock(g_devices[i]);
  *energy = g_devices[i].energy_mj;
  return kSuccess;
}

nvmlReturn_t nvmlDeviceGetPowerUsage(nvmlDevice_t device, unsigned int* power) {
  int i = -1;
  const nvmlReturn_t failure = enter("nvmlDeviceGetPowerUsage", device, &i);
  log_call("nvmlDeviceGetPowerUsage dev%d", i);
  if (failure != kSuccess) {
    return failure;
  }
  if (power == nullptr) {
    return kInvalidArgument;
  }
  *power = 50'000 + 100 * current_graphics_clock(g_devices[i]);
  return kSuccess;
}

}  // extern "C"
