// FrequencyController: start-up calls, ordering, skipping repeats, only the latest pending
// request applied, failures, reset on destruction; and in child processes, reset when the
// process is killed (SIGTERM, SIGINT), aborts, crashes or exits without destroying it.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <condition_variable>
#include <cstdlib>
#include <mutex>
#include <thread>

#include "perseus/client/frequency_controller.hpp"
#include "perseus/gpu/emulated_gpu.hpp"
#include "perseus/gpu/nvml_backend.hpp"
#include "perseus/model/errors.hpp"
#include "test_support.hpp"

namespace perseus {
namespace {

using Kind = EmulatedGpuEvent::Kind;
using Lines = std::vector<std::string>;
using testing::backend_startup_calls;
using testing::kFakeNvml;

EmulatedGpuSpec spec_with_clocks(std::initializer_list<int> clocks) {
  EmulatedGpuSpec spec;
  spec.p_blocking_w = 50.0;
  for (int mhz : clocks) {
    spec.costs[{0, InstructionKind::kForward, mhz}] = {1.0 / mhz, 0.2};
  }
  return spec;
}

std::vector<std::pair<Kind, int>> kinds_and_clocks(const std::vector<EmulatedGpuEvent>& events) {
  std::vector<std::pair<Kind, int>> out;
  for (const EmulatedGpuEvent& e : events) {
    out.emplace_back(e.kind, e.max_mhz);
  }
  return out;
}

// Forwards to an EmulatedGpu, but holds every graphics lock at a gate until the test opens
// it, so that the test can queue requests while the controller's thread is busy.
class GatedGpu final : public GpuBackend {
 public:
  explicit GatedGpu(EmulatedGpu& inner) : inner_(inner) {}

  void wait_until_blocked() {
    std::unique_lock lock(mutex_);
    changed_.wait(lock, [&] { return blocked_; });
  }
  void open() {
    {
      const std::lock_guard lock(mutex_);
      open_ = true;
    }
    changed_.notify_all();
  }

  int device_count() const override { return inner_.device_count(); }
  std::string name(int d) const override { return inner_.name(d); }
  std::vector<int> supported_graphics_clocks(int d) const override { return inner_.supported_graphics_clocks(d); }
  int max_memory_clock(int d) const override { return inner_.max_memory_clock(d); }
  void set_locked_graphics_clocks(int d, int lo, int hi) override {
    {
      std::unique_lock lock(mutex_);
      blocked_ = true;
      changed_.notify_all();
      changed_.wait(lock, [&] { return open_; });
    }
    inner_.set_locked_graphics_clocks(d, lo, hi);
  }
  void reset_locked_graphics_clocks(int d) override { inner_.reset_locked_graphics_clocks(d); }
  void set_locked_memory_clocks(int d, int lo, int hi) override { inner_.set_locked_memory_clocks(d, lo, hi); }
  void reset_locked_memory_clocks(int d) override { inner_.reset_locked_memory_clocks(d); }
  void reset_power_limit(int d) override { inner_.reset_power_limit(d); }
  std::uint64_t total_energy_mj(int d) const override { return inner_.total_energy_mj(d); }
  std::uint64_t power_mw(int d) const override { return inner_.power_mw(d); }

 private:
  EmulatedGpu& inner_;
  std::mutex mutex_;
  std::condition_variable changed_;
  bool blocked_ = false;
  bool open_ = false;
};

TEST(FrequencyController, StartsByResettingPowerAndLockingMemoryAtMaximum) {
  EmulatedGpu gpu(spec_with_clocks({1410, 1200, 1005}));
  FrequencyController controller(gpu, 0);
  EXPECT_EQ(kinds_and_clocks(gpu.events()),
            (std::vector<std::pair<Kind, int>>{{Kind::kResetPowerLimit, 0}, {Kind::kLockMemory, 1593}}));
  EXPECT_EQ(gpu.events()[1].min_mhz, 1593);
  EXPECT_EQ(controller.current_frequency(), std::nullopt);
}

TEST(FrequencyController, AppliesInOrderSkipsRepeatsAndResetsOnDestruction) {
  EmulatedGpu gpu(spec_with_clocks({1410, 1200, 1005}));
  FrequencyControllerStats stats;
  {
    FrequencyController controller(gpu, 0);
    controller.set_frequency(1200);
    controller.wait_idle();
    EXPECT_EQ(gpu.graphics_clock_mhz(), 1200);
    controller.set_frequency(1200);  // already set: no call
    controller.wait_idle();
    controller.set_frequency(1005);
    controller.wait_idle();
    controller.set_frequency(1410);
    controller.wait_idle();
    EXPECT_EQ(controller.current_frequency(), 1410);
    stats = controller.stats();
  }
  EXPECT_EQ(kinds_and_clocks(gpu.events()), (std::vector<std::pair<Kind, int>>{{Kind::kResetPowerLimit, 0},
                                                                               {Kind::kLockMemory, 1593},
                                                                               {Kind::kLockGraphics, 1200},
                                                                               {Kind::kLockGraphics, 1005},
                                                                               {Kind::kLockGraphics, 1410},
                                                                               {Kind::kResetGraphics, 0},
                                                                               {Kind::kResetMemory, 0}}));
  EXPECT_EQ(stats.requested, 4u);
  EXPECT_EQ(stats.applied, 3u);
  EXPECT_EQ(stats.skipped, 1u);
  EXPECT_EQ(stats.superseded, 0u);
  EXPECT_EQ(stats.failed, 0u);
}

TEST(FrequencyController, NeverBlocksAndAppliesOnlyTheLatestPendingRequest) {
  EmulatedGpu emulated(spec_with_clocks({1410, 1200, 1005, 810}));
  GatedGpu gpu(emulated);
  FrequencyController controller(gpu, 0);
  controller.set_frequency(1200);
  gpu.wait_until_blocked();  // the thread is inside the 1200 lock, held at the gate
  // These return although the thread cannot take them: each replaces the one before.
  controller.set_frequency(1005);
  controller.set_frequency(1410);
  controller.set_frequency(810);
  EXPECT_EQ(controller.stats().applied, 0u);
  gpu.open();
  controller.wait_idle();
  const FrequencyControllerStats stats = controller.stats();
  EXPECT_EQ(stats.requested, 4u);
  EXPECT_EQ(stats.superseded, 2u);
  EXPECT_EQ(stats.applied, 2u);
  EXPECT_EQ(controller.current_frequency(), 810);
  std::vector<int> locked;
  for (const EmulatedGpuEvent& e : emulated.events()) {
    if (e.kind == Kind::kLockGraphics) {
      locked.push_back(e.max_mhz);
    }
  }
  EXPECT_EQ(locked, (std::vector<int>{1200, 810}));
}

TEST(FrequencyController, RejectsUnsupportedClocksAndDevices) {
  EmulatedGpu gpu(spec_with_clocks({1410, 1200}));
  EXPECT_THROW(FrequencyController(gpu, 1), InputError);
  EXPECT_TRUE(gpu.events().empty());
  FrequencyController controller(gpu, 0);
  try {
    controller.set_frequency(1300);
    FAIL() << "1300 MHz accepted";
  } catch (const InputError& e) {
    EXPECT_STREQ(e.what(),
                 "FrequencyController: 1300 MHz is not a supported graphics clock of device 0 (1200..1410 MHz, 2 "
                 "clocks)");
  }
  EXPECT_EQ(controller.stats().requested, 0u);
}

class FrequencyControllerNvml : public testing::FakeNvmlTest {};

// The calls a controller makes at start on fake device 0 with the default clocks.
Lines controller_startup_calls() {
  return {"nvmlDeviceGetSupportedMemoryClocks dev0 capacity=256",
          "nvmlDeviceGetSupportedMemoryClocks dev0 capacity=256",
          "nvmlDeviceGetSupportedGraphicsClocks dev0 1593 capacity=256",
          "nvmlDeviceGetPowerManagementDefaultLimit dev0",
          "nvmlDeviceSetPowerManagementLimit dev0 400000",
          "nvmlDeviceSetMemoryLockedClocks dev0 1593 1593"};
}

Lines concat(Lines a, const Lines& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

TEST_F(FrequencyControllerNvml, MakesTheExactNvmlCallsInOrder) {
  NvmlBackend gpu(kFakeNvml);
  clear_log();
  {
    FrequencyController controller(gpu, 0);
    controller.set_frequency(1200);
    controller.wait_idle();
    controller.set_frequency(1200);
    controller.wait_idle();
    controller.set_frequency(810);
    controller.wait_idle();
  }
  EXPECT_EQ(log_lines(), concat(controller_startup_calls(),
                                {"nvmlDeviceSetGpuLockedClocks dev0 1200 1200", "nvmlDeviceSetGpuLockedClocks dev0 810 810",
                                 "nvmlDeviceResetGpuLockedClocks dev0", "nvmlDeviceResetMemoryLockedClocks dev0"}));
}

TEST_F(FrequencyControllerNvml, ControlsTheSecondDevice) {
  ::setenv("FAKE_NVML_DEVICE_COUNT", "2", 1);
  NvmlBackend gpu(kFakeNvml);
  clear_log();
  {
    FrequencyController controller(gpu, 1);
    controller.set_frequency(1005);
    controller.wait_idle();
  }
  const Lines lines = log_lines();
  ASSERT_EQ(lines.size(), 9u);
  EXPECT_EQ(lines[4], "nvmlDeviceSetPowerManagementLimit dev1 350000");
  EXPECT_EQ(lines[5], "nvmlDeviceSetMemoryLockedClocks dev1 1593 1593");
  EXPECT_EQ(lines[6], "nvmlDeviceSetGpuLockedClocks dev1 1005 1005");
  EXPECT_EQ(lines[7], "nvmlDeviceResetGpuLockedClocks dev1");
  EXPECT_EQ(lines[8], "nvmlDeviceResetMemoryLockedClocks dev1");
}

TEST_F(FrequencyControllerNvml, FailedLockIsCountedAndRetriedOnTheNextRequest) {
  ::setenv("FAKE_NVML_FAIL", "nvmlDeviceSetGpuLockedClocks:4", 1);
  NvmlBackend gpu(kFakeNvml);
  FrequencyController controller(gpu, 0);
  controller.set_frequency(1200);
  controller.wait_idle();
  controller.set_frequency(1200);  // not skipped: the first attempt failed
  controller.wait_idle();
  const FrequencyControllerStats stats = controller.stats();
  EXPECT_EQ(stats.failed, 2u);
  EXPECT_EQ(stats.skipped, 0u);
  EXPECT_EQ(controller.current_frequency(), std::nullopt);
  EXPECT_EQ(controller.last_error(),
            "nvmlDeviceSetGpuLockedClocks(device 0, 1200, 1200): Insufficient Permissions (NVML error 4)");
}

// HBM GPUs (A100, H100) answer NVML_ERROR_NOT_SUPPORTED to a memory lock (seen on an H100):
// the controller goes on with the graphics clock alone, and never tries the memory lock again.
TEST_F(FrequencyControllerNvml, RunsWithoutAMemoryLockWhereTheDeviceSupportsNone) {
  ::setenv("FAKE_NVML_FAIL", "nvmlDeviceSetMemoryLockedClocks:3", 1);
  NvmlBackend gpu(kFakeNvml);
  FrequencyController controller(gpu, 0);
  EXPECT_FALSE(controller.memory_clock_locked());
  clear_log();
  controller.set_frequency(1200);
  controller.wait_idle();
  controller.reset_after_signal();  // locks lost: the next request relocks graphics only
  controller.set_frequency(1200);
  controller.wait_idle();
  EXPECT_EQ(controller.current_frequency(), 1200);
  EXPECT_EQ(controller.stats().failed, 0u);
  EXPECT_EQ(controller.stats().applied, 2u);
  for (const std::string& line : log_lines()) {
    EXPECT_EQ(line.find("nvmlDeviceSetMemoryLockedClocks"), std::string::npos) << line;
  }
}

TEST_F(FrequencyControllerNvml, StartFailureThrowsAndLeavesClocksReset) {
  ::setenv("FAKE_NVML_FAIL", "nvmlDeviceSetMemoryLockedClocks:4", 1);
  NvmlBackend gpu(kFakeNvml);
  clear_log();
  EXPECT_THROW(FrequencyController(gpu, 0), GpuError);
  EXPECT_EQ(log_lines(), controller_startup_calls());
}

// ---- Child processes ------------------------------------------------------------------------
// A scenario runs in a child: either forked directly, or (when it must start from a process
// that never installed the crash handlers) re-executed from /proc/self/exe, where the
// static initialiser below runs it before GoogleTest starts. The child writes one byte to the
// pipe named by PERSEUS_GPU_TEST_READY_FD once its controller has locked 1200 MHz.

const char* const kScenarioVariable = "PERSEUS_GPU_TEST_CHILD";
const char* const kReadyFdVariable = "PERSEUS_GPU_TEST_READY_FD";
volatile sig_atomic_t g_child_saw_sigterm = 0;

void signal_ready() {
  const char* fd = std::getenv(kReadyFdVariable);
  const char byte = 'r';
  if (fd == nullptr || ::write(std::atoi(fd), &byte, 1) != 1) {
    ::_exit(90);
  }
}

int* null_pointer() {
  static int* volatile pointer = nullptr;  // opaque to the optimiser
  return pointer;
}

// Runs `scenario` in this (child) process; never returns.
[[noreturn]] void run_child_scenario(const std::string& scenario) {
  const struct rlimit no_core {0, 0};
  ::setrlimit(RLIMIT_CORE, &no_core);  // abort and SIGSEGV must not leave core files
  try {
    if (scenario == "chain") {
      struct sigaction mine {};
      mine.sa_handler = [](int) { g_child_saw_sigterm = 1; };
      sigemptyset(&mine.sa_mask);
      ::sigaction(SIGTERM, &mine, nullptr);
    } else if (scenario == "ignored") {
      ::signal(SIGINT, SIG_IGN);
    } else {
      ::signal(SIGINT, SIG_DFL);  // a background shell may have started us with SIGINT ignored
    }
    auto* gpu = new NvmlBackend(kFakeNvml);  // leaked on purpose: the child never unwinds
    auto* controller = new FrequencyController(*gpu, 0);
    controller->set_frequency(1200);
    controller->wait_idle();
    if (controller->stats().applied != 1) {
      ::_exit(91);
    }
    signal_ready();
    if (scenario == "abort") {
      std::abort();
    }
    if (scenario == "segv") {
      *null_pointer() = 1;
    }
    if (scenario == "exit") {
      std::exit(0);  // atexit must reset: the controller is never destroyed
    }
    if (scenario == "chain") {
      // Our handler resets, then calls the previous one, and the process lives on.
      for (int i = 0; i < 10'000 && g_child_saw_sigterm == 0; ++i) {
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      }
      if (g_child_saw_sigterm == 0) {
        ::_exit(92);
      }
      controller->set_frequency(1200);  // the locks were lost: locked again, not skipped
      controller->wait_idle();
      const bool relocked = controller->stats().applied == 2 && controller->current_frequency() == 1200;
      delete controller;
      delete gpu;
      ::_exit(relocked ? 0 : 93);
    }
    for (;;) {
      ::pause();  // killed by the parent
    }
  } catch (const std::exception&) {
    ::_exit(94);
  }
}

// Re-executed children run their scenario before main.
const bool kRanAsChild = [] {
  if (const char* scenario = std::getenv(kScenarioVariable)) {
    run_child_scenario(scenario);
  }
  return false;
}();

struct ChildResult {
  bool ready = false;
  int status = 0;
};

// Starts `scenario` in a child, waits up to 10 s for it to be ready, sends `signal_number`
// (0: none), and waits for it to end.
ChildResult run_child(const std::string& scenario, bool exec, int signal_number) {
  int fds[2];
  if (::pipe(fds) != 0) {
    ADD_FAILURE() << "pipe failed";
    return {};
  }
  std::fflush(nullptr);  // a forked child that exits must not flush our buffers twice
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::close(fds[0]);
    ::setenv(kReadyFdVariable, std::to_string(fds[1]).c_str(), 1);
    if (exec) {
      ::setenv(kScenarioVariable, scenario.c_str(), 1);
      ::execl("/proc/self/exe", "gpu_test", static_cast<char*>(nullptr));
      ::_exit(95);
    }
    run_child_scenario(scenario);
  }
  ::close(fds[1]);
  ChildResult result;
  pollfd ready{fds[0], POLLIN, 0};
  char byte = 0;
  result.ready = ::poll(&ready, 1, 10'000) == 1 && ::read(fds[0], &byte, 1) == 1;
  ::close(fds[0]);
  if (signal_number != 0) {
    if (result.ready) {
      ::kill(pid, signal_number);
    } else {
      ::kill(pid, SIGKILL);
    }
  }
  ::waitpid(pid, &result.status, 0);
  return result;
}

const Lines kLockedAt1200 = concat(backend_startup_calls(1), concat(controller_startup_calls(),
                                                                    {"nvmlDeviceSetGpuLockedClocks dev0 1200 1200"}));
const Lines kReset = {"nvmlDeviceResetGpuLockedClocks dev0", "nvmlDeviceResetMemoryLockedClocks dev0"};

TEST_F(FrequencyControllerNvml, ForkedChildKilledWithSigtermResetsClocks) {
  const ChildResult child = run_child("wait", /*exec=*/false, SIGTERM);
  ASSERT_TRUE(child.ready);
  ASSERT_TRUE(WIFSIGNALED(child.status)) << "status " << child.status;
  EXPECT_EQ(WTERMSIG(child.status), SIGTERM);  // the signal still ends the process
  EXPECT_EQ(log_lines(), concat(kLockedAt1200, kReset));
}

TEST_F(FrequencyControllerNvml, ChildInterruptedWithSigintResetsClocks) {
  const ChildResult child = run_child("wait", /*exec=*/true, SIGINT);
  ASSERT_TRUE(child.ready);
  ASSERT_TRUE(WIFSIGNALED(child.status)) << "status " << child.status;
  EXPECT_EQ(WTERMSIG(child.status), SIGINT);
  EXPECT_EQ(log_lines(), concat(kLockedAt1200, kReset));
}

TEST_F(FrequencyControllerNvml, AbortingChildResetsClocks) {
  const ChildResult child = run_child("abort", /*exec=*/false, 0);
  ASSERT_TRUE(child.ready);
  ASSERT_TRUE(WIFSIGNALED(child.status)) << "status " << child.status;
  EXPECT_EQ(WTERMSIG(child.status), SIGABRT);
  EXPECT_EQ(log_lines(), concat(kLockedAt1200, kReset));
}

TEST_F(FrequencyControllerNvml, CrashingChildResetsClocks) {
  const ChildResult child = run_child("segv", /*exec=*/false, 0);
  ASSERT_TRUE(child.ready);
  ASSERT_TRUE(WIFSIGNALED(child.status)) << "status " << child.status;
  EXPECT_EQ(WTERMSIG(child.status), SIGSEGV);
  EXPECT_EQ(log_lines(), concat(kLockedAt1200, kReset));
}

TEST_F(FrequencyControllerNvml, ChildExitingWithoutDestroyingResetsClocks) {
  const ChildResult child = run_child("exit", /*exec=*/false, 0);
  ASSERT_TRUE(child.ready);
  ASSERT_TRUE(WIFEXITED(child.status)) << "status " << child.status;
  EXPECT_EQ(WEXITSTATUS(child.status), 0);
  EXPECT_EQ(log_lines(), concat(kLockedAt1200, kReset));
}

TEST_F(FrequencyControllerNvml, PreviousHandlerRunsAndLocksAreRestoredAfterward) {
  const ChildResult child = run_child("chain", /*exec=*/true, SIGTERM);
  ASSERT_TRUE(child.ready);
  ASSERT_TRUE(WIFEXITED(child.status)) << "status " << child.status;
  EXPECT_EQ(WEXITSTATUS(child.status), 0);
  EXPECT_EQ(log_lines(), concat(concat(kLockedAt1200, kReset),
                                {"nvmlDeviceSetMemoryLockedClocks dev0 1593 1593",
                                 "nvmlDeviceSetGpuLockedClocks dev0 1200 1200", "nvmlDeviceResetGpuLockedClocks dev0",
                                 "nvmlDeviceResetMemoryLockedClocks dev0", "nvmlShutdown"}));
}

TEST_F(FrequencyControllerNvml, IgnoredSignalStaysIgnored) {
  // SIGINT is ignored in the child: it must neither reset nor kill; SIGTERM then does both.
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::close(fds[0]);
    ::setenv(kReadyFdVariable, std::to_string(fds[1]).c_str(), 1);
    ::setenv(kScenarioVariable, "ignored", 1);
    ::execl("/proc/self/exe", "gpu_test", static_cast<char*>(nullptr));
    ::_exit(95);
  }
  ::close(fds[1]);
  pollfd ready{fds[0], POLLIN, 0};
  char byte = 0;
  const bool is_ready = ::poll(&ready, 1, 10'000) == 1 && ::read(fds[0], &byte, 1) == 1;
  ::close(fds[0]);
  if (is_ready) {
    ::kill(pid, SIGINT);  // an ignored signal is discarded when sent
  }
  const Lines after_sigint = log_lines();
  ::kill(pid, SIGTERM);
  int status = 0;
  ::waitpid(pid, &status, 0);
  ASSERT_TRUE(is_ready);
  EXPECT_EQ(after_sigint, kLockedAt1200);
  ASSERT_TRUE(WIFSIGNALED(status));
  EXPECT_EQ(WTERMSIG(status), SIGTERM);
  EXPECT_EQ(log_lines(), concat(kLockedAt1200, kReset));
}

}  // namespace
}  // namespace perseus
