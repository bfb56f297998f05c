// The emulator's results as JSON and CSV, written to a stream; callers that write files go
// through a temporary file or directory and a rename.
//
// Two JSON documents: the summary of the whole cluster (schema "perseus.emulation/2", small
// at any scale: a line per pipeline, no instruction) and the detail of one pipeline (schema
// "perseus.emulation.pipeline/1": its devices, transfers and timeline), one per pipeline that
// kept its timeline (EmulationConfig::detail).
#pragma once

#include <ostream>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "perseus/emulator/emulator.hpp"

namespace perseus {

std::string_view to_string(SwitchOutcome outcome);  // "none", "late", "missed"
std::string_view to_string(TimelineDetail detail);  // "all", "notable", "listed"

// Why a pipeline is worth looking at: any of "straggler", "fastest", "typical" (none for one
// kept in detail only because it was asked for, or because every pipeline was).
std::vector<std::string> notable_reasons(const EmulationResult& result, int pipeline);

// Where `emulate --out` puts one pipeline's detail, relative to the directory:
// "pipelines/pipeline_00042.json".
std::string pipeline_file_name(int pipeline);

// {"schema": "perseus.emulation/2", "stages", "data_parallel", "tensor_parallel", "gpus",
//  "p_blocking_w", "switch_latency_s", "iteration_time_s", "sync_time_s", "average_power_w",
//  "average_power_per_gpu_w", "energy_j": {"total", "computation", "intrinsic_blocking",
//  "extrinsic_blocking", "allreduce"}, "switching": {"switches", "late", "missed", "delay_s",
//  "energy_j"}, "warnings", "fastest_pipeline", "typical_pipeline", "detail" ("all",
//  "notable" or "listed"), "allreduce": [...],
//  "detailed_pipelines": [{"pipeline", "notable": [...], "file"}...],
//  "pipelines": [{"pipeline", "straggler", "slowdown", "delay_s", "time_s", "energy_j"}...]}.
// Per-device figures are in devices.csv and the pipeline documents.
nlohmann::json emulation_to_json(const EmulationResult& result);
// The same document, a line per pipeline.
void write_emulation_json(std::ostream& out, const EmulationResult& result);

struct JsonOutputOptions {
  bool timeline = true;   // every executed instruction
  bool transfers = true;  // every transfer on a link that is not free
};

// {"schema": "perseus.emulation.pipeline/1", "pipeline", "straggler", "slowdown", "delay_s",
//  "time_s", "energy_j", "notable": [...], "devices": [... energies per GPU ...],
//  "transfers": [...], "timeline": [...]}. Throws InputError for a pipeline that does not
// exist or kept no timeline.
nlohmann::json pipeline_to_json(const EmulationResult& result, int pipeline, const JsonOutputOptions& options = {});
// The same document, its long arrays streamed (a tree of 10^4 small objects would cost more
// than emulating the pipeline).
void write_pipeline_json(std::ostream& out, const EmulationResult& result, int pipeline,
                         const JsonOutputOptions& options = {});

// One row per executed instruction of the pipelines that kept their timeline:
// first_gpu,gpus,pipeline,stage,instruction,microbatch,chunk,start_s,end_s,frequency_mhz,
// clock_at_start_mhz,power_w,energy_j,switch
// A row stands for the `gpus` tensor-parallel GPUs first_gpu.. of its device, which run in
// lockstep (GPU id = (pipeline * S + stage) * T + tensor rank); `per_gpu` writes one row per
// GPU instead. power_w and energy_j are per GPU.
void write_timeline_csv(std::ostream& out, const EmulationResult& result, bool per_gpu = false);

// One row per device (pipeline, stage) of every pipeline, energies per GPU:
// pipeline,stage,first_gpu,gpus,straggler,busy_s,finish_s,computation_j,intrinsic_blocking_j,
// extrinsic_blocking_j,allreduce_j,overhead_j,total_j,switches,late_switches,missed_switches
void write_devices_csv(std::ostream& out, const EmulationResult& result);

}  // namespace perseus
