// Locks a GPU's graphics clock on request without ever making the training loop wait: a
// request is handed to the controller's own thread, which applies only the latest one.
// Mirrors the existing Perseus client's controller process: at start it resets the power
// limit and locks the memory clock to its maximum (where the device supports it: HBM GPUs such
// as the A100 and H100 do not, and zeus's controller goes on without it too); at the end (destruction, exit, or a
// fatal signal) it resets the locked graphics and memory clocks.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "perseus/gpu/gpu_backend.hpp"
#include "perseus/model/errors.hpp"

namespace perseus {

struct FrequencyControllerStats {
  std::uint64_t requested = 0;   // set_frequency calls
  std::uint64_t applied = 0;     // graphics clock locks that succeeded
  std::uint64_t skipped = 0;     // requests for the clock already locked
  std::uint64_t superseded = 0;  // requests replaced by a later one before the thread took them
  std::uint64_t failed = 0;      // locks the backend refused (see last_error)
};

class FrequencyController {
 public:
  // Resets the power limit of `device` and locks its memory clock to the maximum, on the
  // calling thread, so that failures (no permission, no such device) throw GpuError here; a
  // device that does not support memory locking (GpuNotSupported) runs without it.
  // Then registers for the crash handlers: on SIGTERM, SIGINT, SIGABRT or SIGSEGV, and at
  // exit, the clocks of every live controller are reset best-effort before the signal takes
  // its previous course (default action re-raised, or the previous handler called). Signals
  // the process ignored stay ignored. `gpu` must outlive the controller.
  FrequencyController(GpuBackend& gpu, int device);
  // Stops the thread (dropping a pending request) and resets locked graphics and memory
  // clocks, ignoring errors.
  ~FrequencyController();
  FrequencyController(const FrequencyController&) = delete;
  FrequencyController& operator=(const FrequencyController&) = delete;

  // Asks for the graphics clock to be locked at `mhz` (min = max = mhz). Returns at once;
  // a request still pending is replaced. InputError when `mhz` is not a supported clock.
  void set_frequency(int mhz);
  // Blocks until every request so far has been applied, skipped or has failed.
  void wait_idle();

  int device() const { return device_; }
  // Whether the memory clock is locked at its maximum (false where the device does not
  // support memory locking).
  bool memory_clock_locked() const { return memory_locked_; }
  // The graphics clock last locked, if any.
  std::optional<int> current_frequency() const;
  FrequencyControllerStats stats() const;
  // The message of the latest failed lock.
  std::optional<std::string> last_error() const;

  // Used by the crash handlers only: resets clocks without locks or exceptions and marks the
  // locks as lost, so that a process that survives the signal locks again on its next request.
  void reset_after_signal() noexcept;

 private:
  void run();
  void apply(int mhz);  // on the controller thread, without mutex_

  GpuBackend& gpu_;
  const int device_;
  const int max_memory_mhz_;
  const std::vector<int> supported_mhz_;  // descending
  bool memory_locked_ = false;            // set once, before the thread starts

  mutable std::mutex mutex_;
  std::condition_variable wake_;   // a request arrived or stop
  std::condition_variable idle_;   // nothing pending nor in flight
  std::optional<int> pending_;
  bool busy_ = false;
  bool stop_ = false;
  std::optional<int> current_;
  FrequencyControllerStats stats_;
  std::optional<std::string> last_error_;

  std::atomic<bool> locks_lost_{false};
  int registry_slot_ = -1;
  std::thread thread_;  // last: started once everything above is ready
};

}  // namespace perseus
