// perseus_gpu_client_check: the client on NVML against a server in this process, the C++
// half of tests/gpu/real_gpu_check.sh (the same steps as its Python half, for machines
// without the Python module: a bare GPU host needs only this binary and the driver).
//
// A PointSolution server serves a two-instruction plan (the highest and the middle supported
// clock); a client runs `--steps` steps, each instruction held `--hold-ms`, and checks that
// the frequency controller locked each planned clock before the instruction began. It prints
// one JSON object: the clocks locked, the time and energy measured per instruction, and the
// power per instruction (energy over time). With a load on the GPU (another process's
// kernels), the highest clock draws more power than the middle one; `--expect-power-order`
// makes that a check. Closing the client resets the clocks.
// Exit status 0: every check passed; 1: NVML could not be loaded; 2: a check failed.
#include <chrono>
#include <filesystem>
#include <map>
#include <fstream>
#include <iostream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <unistd.h>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "perseus/client/perseus_client.hpp"
#include "perseus/gpu/nvml_backend.hpp"
#include "perseus/protocol/protocol.hpp"
#include "perseus/server/http_server.hpp"
#include "perseus/server/scheduler_config.hpp"
#include "perseus/server/service.hpp"

namespace {

using nlohmann::json;

double mean(const std::vector<double>& values) {
  double sum = 0.0;
  for (double v : values) sum += v;
  return values.empty() ? 0.0 : sum / static_cast<double>(values.size());
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Run the perseus client on NVML against an in-process server and print JSON"};
  std::string library = perseus::NvmlBackend::default_library_path();
  int device = 0;
  int steps = 3;
  int hold_ms = 200;
  bool expect_power_order = false;
  app.add_option("--library", library, "NVML library to load (default $PERSEUS_NVML_LIBRARY or libnvidia-ml.so.1)");
  app.add_option("--device", device, "GPU the client drives")->check(CLI::NonNegativeNumber);
  app.add_option("--steps", steps, "Steps (iterations) the client runs, all in one round")->check(CLI::Range(1, 100));
  app.add_option("--hold-ms", hold_ms, "How long each instruction holds its clock")->check(CLI::Range(1, 60'000));
  app.add_flag("--expect-power-order", expect_power_order,
               "Also check that the highest clock drew more power than the middle one (needs a load on the GPU)");
  CLI11_PARSE(app, argc, argv);

  json report;
  std::shared_ptr<perseus::NvmlBackend> gpu;
  try {
    gpu = std::make_shared<perseus::NvmlBackend>(library);
  } catch (const std::exception& e) {
    report["errors"]["load"] = e.what();
    std::cout << report.dump(2) << '\n';
    return 1;
  }
  try {
    const std::vector<int> clocks = gpu->supported_graphics_clocks(device);
    const int high = clocks.front();
    const int middle = clocks[clocks.size() / 2];
    report["device"] = gpu->name(device);
    report["memory_clock_max_mhz"] = gpu->max_memory_clock(device);
    report["plan_mhz"] = {high, middle};

    const auto folder = std::filesystem::temp_directory_path() / ("perseus-gpu-check-" + std::to_string(::getpid()));
    std::filesystem::create_directories(folder);
    const auto plan = folder / "freqs_pipeline_00000.py";
    std::ofstream(plan) << "[\n[('forward', " << high << "), ('backward', " << middle << ")],\n]\n";

    perseus::server::ServiceOptions service_options;
    service_options.scheduler = perseus::server::parse_scheduler_config("PointSolution", json{{"solution_path", plan.string()}});
    service_options.db_path = ":memory:";
    perseus::server::Service service(std::move(service_options));
    perseus::server::HttpOptions http;
    http.port = 0;
    perseus::server::HttpServer front_end(service, http);
    front_end.start();

    perseus::client::ClientOptions options;
    options.connection = perseus::client::ConnectionOptions::to("http://127.0.0.1:" + std::to_string(front_end.port()));
    options.device = device;
    options.steps_per_round = steps;
    json locked = json::array();
    bool locks_as_planned = true;
    perseus::client::ProfilingResult measured;
    {
      perseus::client::PerseusClient client(std::move(options), *gpu);
      report["memory_clock_locked"] = client.controller()->memory_clock_locked();
      for (int step = 0; step < steps; ++step) {
        client.on_step_begin();
        const perseus::StageFrequencies schedule = client.schedule();
        for (const auto& [name, mhz] : schedule) {
          client.on_instruction_begin(name);
          perseus::FrequencyController& controller = *client.controller();
          controller.wait_idle();
          const auto current = controller.current_frequency();
          locked.push_back(current ? json(*current) : json(nullptr));
          locks_as_planned = locks_as_planned && current && *current == mhz;
          std::this_thread::sleep_for(std::chrono::milliseconds(hold_ms));  // the "instruction"
          client.on_instruction_end(name);
        }
        if (step + 1 == steps) measured = client.pending_result();  // the round's, before it is reported
        client.on_step_end();
      }
      client.close();  // resets the graphics and memory clocks
    }
    front_end.stop();
    service.shutdown();
    std::filesystem::remove_all(folder);

    report["locked_mhz"] = locked;
    report["locks_as_planned"] = locks_as_planned;
    const json result = perseus::protocol::to_json(measured);
    report["time_breakdown_s"] = result["time_breakdown"];
    report["energy_breakdown_j"] = result["energy_breakdown"];
    // Power per instruction kind: the energy over the time of every measured instruction.
    std::map<std::string, double> power_w;
    bool energy_advanced = true;
    for (const auto& [name, energies] : result["energy_breakdown"].items()) {
      std::vector<double> watts;
      const json& times = result["time_breakdown"][name];
      for (std::size_t s = 0; s < energies.size(); ++s) {
        for (std::size_t k = 0; k < energies[s].size(); ++k) {
          const double joules = energies[s][k].get<double>();
          energy_advanced = energy_advanced && joules > 0.0;
          watts.push_back(joules / times[s][k].get<double>());
        }
      }
      power_w[name] = mean(watts);
    }
    report["mean_power_w"] = power_w;
    report["energy_advanced"] = energy_advanced;
    bool ok = locks_as_planned && energy_advanced;
    if (expect_power_order) {
      const bool ordered = power_w["forward"] > power_w["backward"];
      report["high_clock_draws_more"] = ordered;
      ok = ok && ordered;
    }
    std::cout << report.dump(2) << '\n';
    return ok ? 0 : 2;
  } catch (const std::exception& e) {
    report["errors"]["check"] = e.what();
    std::cout << report.dump(2) << '\n';
    return 2;
  }
}
