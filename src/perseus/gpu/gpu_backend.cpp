#include "perseus/gpu/gpu_backend.hpp"

namespace perseus {

void GpuBackend::reset_clocks_best_effort(int device) noexcept {
  // Each reset is tried on its own: a failed graphics reset must not keep memory locked.
  try {
    reset_locked_graphics_clocks(device);
  } catch (...) {
  }
  try {
    reset_locked_memory_clocks(device);
  } catch (...) {
  }
}

}  // namespace perseus
