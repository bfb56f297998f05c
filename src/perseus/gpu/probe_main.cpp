// perseus_gpu_probe: a first check of the NVML backend on a real machine. Lists every device
// (name, clocks, power, energy counter), then locks one graphics clock, reads power and
// energy while locked, and resets the lock. Prints one JSON object; a failed step is
// reported in it under "errors" rather than ending the probe. Exit status: 0 when every step
// worked, 1 when NVML could not be loaded, 2 when some step failed.
#include <chrono>
#include <iostream>
#include <string>
#include <thread>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "perseus/gpu/nvml_backend.hpp"

namespace {

using nlohmann::json;

// Runs `step`, storing its result under `key` in `out`, or its error under errors[key].
template <typename Step>
bool attempt(json& out, const std::string& key, Step&& step) {
  try {
    out[key] = step();
    return true;
  } catch (const std::exception& e) {
    out["errors"][key] = e.what();
    return false;
  }
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Probe the GPUs through NVML and print JSON"};
  std::string library = perseus::NvmlBackend::default_library_path();
  int lock_device = 0;
  int lock_mhz = 0;
  bool skip_lock = false;
  int hold_ms = 200;
  app.add_option("--library", library, "NVML library to load (default $PERSEUS_NVML_LIBRARY or libnvidia-ml.so.1)");
  app.add_option("--device", lock_device, "Device for the lock test")->check(CLI::NonNegativeNumber);
  app.add_option("--frequency", lock_mhz, "Graphics clock to lock, MHz (default: the middle supported clock)")
      ->check(CLI::PositiveNumber);
  app.add_option("--hold-ms", hold_ms, "How long to hold the lock before reading power and energy")
      ->check(CLI::Range(0, 60'000));
  app.add_flag("--no-lock", skip_lock, "Only list; change no clock");
  CLI11_PARSE(app, argc, argv);

  json report;
  report["library"] = library;
  std::unique_ptr<perseus::NvmlBackend> gpu;
  try {
    gpu = std::make_unique<perseus::NvmlBackend>(library);
  } catch (const std::exception& e) {
    report["errors"]["load"] = e.what();
    std::cout << report.dump(2) << '\n';
    return 1;
  }

  bool ok = true;
  report["device_count"] = gpu->device_count();
  report["devices"] = json::array();
  for (int i = 0; i < gpu->device_count(); ++i) {
    json device{{"index", i}};
    ok &= attempt(device, "name", [&] { return gpu->name(i); });
    ok &= attempt(device, "max_memory_clock_mhz", [&] { return gpu->max_memory_clock(i); });
    ok &= attempt(device, "supported_graphics_clocks_mhz", [&] { return gpu->supported_graphics_clocks(i); });
    ok &= attempt(device, "power_mw", [&] { return gpu->power_mw(i); });
    ok &= attempt(device, "energy_mj", [&] { return gpu->total_energy_mj(i); });
    report["devices"].push_back(std::move(device));
  }

  if (!skip_lock) {
    json lock{{"device", lock_device}};
    if (lock_device >= gpu->device_count()) {
      lock["errors"]["device"] = "no device " + std::to_string(lock_device) + " (" +
                                 std::to_string(gpu->device_count()) + " device(s))";
      ok = false;
    } else {
      int mhz = lock_mhz;
      if (mhz == 0) {
        ok &= attempt(lock, "frequency_mhz", [&] {
          const std::vector<int> clocks = gpu->supported_graphics_clocks(lock_device);
          return clocks[clocks.size() / 2];
        });
        mhz = lock.value("frequency_mhz", 0);
      } else {
        lock["frequency_mhz"] = mhz;
      }
      if (mhz > 0) {
        ok &= attempt(lock, "energy_before_mj", [&] { return gpu->total_energy_mj(lock_device); });
        const bool locked = attempt(lock, "locked", [&] {
          gpu->set_locked_graphics_clocks(lock_device, mhz, mhz);
          return true;
        });
        ok &= locked;
        if (locked) {
          std::this_thread::sleep_for(std::chrono::milliseconds(hold_ms));
          ok &= attempt(lock, "power_while_locked_mw", [&] { return gpu->power_mw(lock_device); });
        }
        ok &= attempt(lock, "reset", [&] {
          gpu->reset_locked_graphics_clocks(lock_device);
          return true;
        });
        ok &= attempt(lock, "energy_after_mj", [&] { return gpu->total_energy_mj(lock_device); });
        if (lock.contains("energy_before_mj") && lock.contains("energy_after_mj")) {
          lock["energy_increased"] = lock["energy_after_mj"].get<std::uint64_t>() >
                                     lock["energy_before_mj"].get<std::uint64_t>();
        }
      }
    }
    report["lock_test"] = std::move(lock);
  }
  std::cout << report.dump(2) << '\n';
  return ok ? 0 : 2;
}
