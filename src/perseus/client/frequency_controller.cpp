#include "perseus/client/frequency_controller.hpp"

#include <signal.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <functional>

#include "perseus/model/errors.hpp"

namespace perseus {

namespace {

// ---- Crash handling -------------------------------------------------------------------------
// Live controllers sit in a fixed table of atomics so that a signal handler can walk it
// without locks or allocation. A process drives one controller per local GPU, far below this.
constexpr int kMaxControllers = 64;
std::atomic<FrequencyController*> g_controllers[kMaxControllers];

constexpr int kCrashSignals[] = {SIGTERM, SIGINT, SIGABRT, SIGSEGV};
constexpr int kNumCrashSignals = sizeof kCrashSignals / sizeof kCrashSignals[0];
// The action each signal had before ours; written once, before our handler is installed.
struct sigaction g_previous_actions[kNumCrashSignals];
std::once_flag g_install_once;

void reset_every_controller() noexcept {
  for (auto& slot : g_controllers) {
    if (FrequencyController* controller = slot.load()) {
      controller->reset_after_signal();
    }
  }
}

void on_crash_signal(int signal_number, siginfo_t* info, void* context) {
  const int saved_errno = errno;
  reset_every_controller();
  for (int i = 0; i < kNumCrashSignals; ++i) {
    if (kCrashSignals[i] != signal_number) {
      continue;
    }
    const struct sigaction& previous = g_previous_actions[i];
    if ((previous.sa_flags & SA_SIGINFO) != 0) {
      if (previous.sa_sigaction != nullptr) {
        previous.sa_sigaction(signal_number, info, context);
      }
    } else if (previous.sa_handler == SIG_DFL) {
      // Restore the default and raise again: the signal stays blocked while this handler
      // runs, so it is delivered, with its default action, as soon as we return.
      ::sigaction(signal_number, &previous, nullptr);
      ::raise(signal_number);
    } else if (previous.sa_handler != SIG_IGN) {
      previous.sa_handler(signal_number);
    }
  }
  errno = saved_errno;
}

void reset_at_exit() { reset_every_controller(); }

void install_crash_handlers() {
  for (int i = 0; i < kNumCrashSignals; ++i) {
    struct sigaction current {};
    if (::sigaction(kCrashSignals[i], nullptr, &current) != 0) {
      continue;
    }
    if ((current.sa_flags & SA_SIGINFO) == 0 && current.sa_handler == SIG_IGN) {
      continue;  // an ignored signal (nohup) does not end the process: leave it alone
    }
    g_previous_actions[i] = current;
    struct sigaction ours {};
    ours.sa_sigaction = on_crash_signal;
    ours.sa_flags = SA_SIGINFO | SA_RESTART | SA_ONSTACK;
    sigemptyset(&ours.sa_mask);
    ::sigaction(kCrashSignals[i], &ours, nullptr);
  }
  std::atexit(reset_at_exit);
}

int register_controller(FrequencyController* controller) {
  std::call_once(g_install_once, install_crash_handlers);
  for (int i = 0; i < kMaxControllers; ++i) {
    FrequencyController* expected = nullptr;
    if (g_controllers[i].compare_exchange_strong(expected, controller)) {
      return i;
    }
  }
  throw GpuError("FrequencyController: more than " + std::to_string(kMaxControllers) +
                 " controllers alive in one process");
}

int checked_device(const GpuBackend& gpu, int device) {
  const int count = gpu.device_count();
  if (device < 0 || device >= count) {
    throw InputError("FrequencyController: device index " + std::to_string(device) + " out of range: " +
                     std::to_string(count) + " device(s)");
  }
  return device;
}

}  // namespace

// ---- FrequencyController --------------------------------------------------------------------

FrequencyController::FrequencyController(GpuBackend& gpu, int device)
    : gpu_(gpu),
      device_(checked_device(gpu, device)),
      max_memory_mhz_(gpu.max_memory_clock(device)),
      supported_mhz_(gpu.supported_graphics_clocks(device)) {
  gpu_.reset_power_limit(device_);
  try {
    gpu_.set_locked_memory_clocks(device_, max_memory_mhz_, max_memory_mhz_);
    memory_locked_ = true;
  } catch (const GpuNotSupported&) {
    // HBM memory runs at one clock: nothing to lock (found on an H100; zeus skips it too).
  }
  try {
    registry_slot_ = register_controller(this);
    thread_ = std::thread([this] { run(); });
  } catch (...) {
    if (registry_slot_ >= 0) {
      g_controllers[registry_slot_].store(nullptr);
    }
    gpu_.reset_clocks_best_effort(device_);
    throw;
  }
}

FrequencyController::~FrequencyController() {
  {
    const std::lock_guard lock(mutex_);
    stop_ = true;
    pending_.reset();
  }
  wake_.notify_all();
  thread_.join();
  gpu_.reset_clocks_best_effort(device_);
  g_controllers[registry_slot_].store(nullptr);
}

void FrequencyController::set_frequency(int mhz) {
  if (std::find(supported_mhz_.begin(), supported_mhz_.end(), mhz) == supported_mhz_.end()) {
    throw InputError("FrequencyController: " + std::to_string(mhz) + " MHz is not a supported graphics clock of device " +
                     std::to_string(device_) + " (" + std::to_string(supported_mhz_.back()) + ".." +
                     std::to_string(supported_mhz_.front()) + " MHz, " + std::to_string(supported_mhz_.size()) +
                     " clocks)");
  }
  {
    const std::lock_guard lock(mutex_);
    ++stats_.requested;
    if (pending_) {
      ++stats_.superseded;
    }
    pending_ = mhz;
  }
  wake_.notify_one();
}

void FrequencyController::wait_idle() {
  std::unique_lock lock(mutex_);
  idle_.wait(lock, [&] { return !pending_ && !busy_; });
}

std::optional<int> FrequencyController::current_frequency() const {
  const std::lock_guard lock(mutex_);
  return current_;
}

FrequencyControllerStats FrequencyController::stats() const {
  const std::lock_guard lock(mutex_);
  return stats_;
}

std::optional<std::string> FrequencyController::last_error() const {
  const std::lock_guard lock(mutex_);
  return last_error_;
}

void FrequencyController::reset_after_signal() noexcept {
  locks_lost_.store(true);
  gpu_.reset_clocks_best_effort(device_);
}

void FrequencyController::run() {
  // Termination requests go to the application's threads, never this one: its handler then
  // cannot run in the middle of this thread's own NVML call.
  sigset_t termination;
  sigemptyset(&termination);
  sigaddset(&termination, SIGTERM);
  sigaddset(&termination, SIGINT);
  ::pthread_sigmask(SIG_BLOCK, &termination, nullptr);

  std::unique_lock lock(mutex_);
  for (;;) {
    wake_.wait(lock, [&] { return stop_ || pending_.has_value(); });
    if (stop_) {
      break;
    }
    const int mhz = *pending_;
    pending_.reset();
    busy_ = true;
    const bool locks_lost = locks_lost_.exchange(false);
    const bool relock_memory = locks_lost && memory_locked_;
    if (locks_lost) {
      current_.reset();  // a crash handler reset the clocks behind our back
    }
    if (current_ == mhz) {
      ++stats_.skipped;
    } else {
      lock.unlock();
      std::optional<std::string> error;
      try {
        if (relock_memory) {
          gpu_.set_locked_memory_clocks(device_, max_memory_mhz_, max_memory_mhz_);
        }
        gpu_.set_locked_graphics_clocks(device_, mhz, mhz);
      } catch (const std::exception& e) {
        error = e.what();
      }
      lock.lock();
      if (error) {
        ++stats_.failed;
        last_error_ = std::move(error);
        current_.reset();  // the clock is now unknown: the next request must not be skipped
        if (locks_lost) {
          locks_lost_.store(true);
        }
      } else {
        ++stats_.applied;
        current_ = mhz;
      }
    }
    busy_ = false;
    if (!pending_) {
      idle_.notify_all();
    }
  }
}

}  // namespace perseus
