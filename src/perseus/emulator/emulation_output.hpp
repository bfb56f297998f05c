// The emulator's results as JSON (schema "perseus.emulation/1") and CSV, written to a
// stream; callers that write files go through a temporary file and a rename.
#pragma once

#include <ostream>
#include <string_view>

#include <nlohmann/json.hpp>

#include "perseus/emulator/emulator.hpp"

namespace perseus {

std::string_view to_string(SwitchOutcome outcome);  // "none", "late", "missed"

struct JsonOutputOptions {
  bool timeline = true;   // every executed instruction
  bool transfers = true;  // every transfer on a link that is not free
};

// {"schema", "stages", "data_parallel", "tensor_parallel", "gpus", "p_blocking_w",
//  "switch_latency_s", "iteration_time_s", "sync_time_s", "average_power_w",
//  "average_power_per_gpu_w", "energy_j": {"total", "computation", "intrinsic_blocking",
//  "extrinsic_blocking", "allreduce"}, "switching": {"switches", "late", "missed", "delay_s",
//  "energy_j"},
//  "warnings", "pipelines": [...], "devices": [... energies per GPU ...], "allreduce": [...],
//  "transfers": [...], "timeline": [...]}.
nlohmann::json emulation_to_json(const EmulationResult& result, const JsonOutputOptions& options = {});
void write_emulation_json(std::ostream& out, const EmulationResult& result, const JsonOutputOptions& options = {});

// One row per executed instruction:
// first_gpu,gpus,pipeline,stage,instruction,microbatch,chunk,start_s,end_s,frequency_mhz,
// clock_at_start_mhz,power_w,energy_j,switch
// A row stands for the `gpus` tensor-parallel GPUs first_gpu.. of its device, which run in
// lockstep (GPU id = (pipeline * S + stage) * T + tensor rank); `per_gpu` writes one row per
// GPU instead. power_w and energy_j are per GPU.
void write_timeline_csv(std::ostream& out, const EmulationResult& result, bool per_gpu = false);

// One row per device (pipeline, stage), energies per GPU:
// pipeline,stage,first_gpu,gpus,straggler,busy_s,finish_s,computation_j,intrinsic_blocking_j,
// extrinsic_blocking_j,allreduce_j,total_j,switches,late_switches,missed_switches
void write_devices_csv(std::ostream& out, const EmulationResult& result);

}  // namespace perseus
