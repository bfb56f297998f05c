#include "perseus/emulator/emulation_output.hpp"

#include <algorithm>
#include <iterator>
#include <span>

#include <fmt/format.h>

#include "perseus/model/errors.hpp"

namespace perseus {
namespace {

nlohmann::json energy_json(const EnergySplit& e) {
  return {{"total", e.total_j()},
          {"computation", e.computation_j},
          {"intrinsic_blocking", e.intrinsic_blocking_j},
          {"extrinsic_blocking", e.extrinsic_blocking_j},
          {"allreduce", e.allreduce_j},
          {"overhead", e.overhead_j}};
}

std::int64_t first_gpu(const EmulationResult& result, int pipeline, int stage) {
  return (static_cast<std::int64_t>(pipeline) * result.stages + stage) * result.tensor_parallel;
}

nlohmann::json pipeline_summary_json(const PipelineSummary& p) {
  return {{"pipeline", p.pipeline}, {"straggler", p.straggler}, {"slowdown", p.slowdown},
          {"delay_s", p.delay_s},   {"time_s", p.time_s},       {"energy_j", energy_json(p.energy)}};
}

void check_detailed(const EmulationResult& result, int pipeline) {
  if (pipeline < 0 || pipeline >= result.data_parallel) {
    throw InputError(fmt::format("pipeline {} does not exist (there are {})", pipeline, result.data_parallel));
  }
  if (!result.has_detail(pipeline)) {
    throw InputError(fmt::format("pipeline {} kept no timeline (emulated with detail '{}'; EmulationConfig::detail)",
                                 pipeline, to_string(result.detail)));
  }
}

// One pipeline's instructions: its devices' ranges are consecutive.
std::span<const ExecutedInstruction> timeline_of(const EmulationResult& result, int pipeline) {
  const std::size_t first = result.device_begin[static_cast<std::size_t>(pipeline) * result.stages];
  const std::size_t last = result.device_begin[static_cast<std::size_t>(pipeline + 1) * result.stages];
  return {result.timeline.data() + first, last - first};
}

// One pipeline's transfers: they are ordered by pipeline.
std::span<const Transfer> transfers_of(const EmulationResult& result, int pipeline) {
  const auto below = [](const Transfer& t, int p) { return t.pipeline < p; };
  const auto first = std::lower_bound(result.transfers.begin(), result.transfers.end(), pipeline, below);
  const auto last = std::lower_bound(first, result.transfers.end(), pipeline + 1, below);
  return {result.transfers.data() + (first - result.transfers.begin()), static_cast<std::size_t>(last - first)};
}

}  // namespace

std::string_view to_string(SwitchOutcome outcome) {
  switch (outcome) {
    case SwitchOutcome::kLate: return "late";
    case SwitchOutcome::kMissed: return "missed";
    case SwitchOutcome::kNone: break;
  }
  return "none";
}

std::string_view to_string(TimelineDetail detail) {
  switch (detail) {
    case TimelineDetail::kNotable: return "notable";
    case TimelineDetail::kListed: return "listed";
    case TimelineDetail::kAll: break;
  }
  return "all";
}

std::vector<std::string> notable_reasons(const EmulationResult& result, int pipeline) {
  std::vector<std::string> reasons;
  if (result.pipelines.at(static_cast<std::size_t>(pipeline)).straggler) reasons.emplace_back("straggler");
  if (pipeline == result.fastest_pipeline) reasons.emplace_back("fastest");
  if (pipeline == result.typical_pipeline) reasons.emplace_back("typical");
  return reasons;
}

std::string pipeline_file_name(int pipeline) { return fmt::format("pipelines/pipeline_{:05d}.json", pipeline); }

nlohmann::json emulation_to_json(const EmulationResult& result) {
  nlohmann::json out = {
      {"schema", "perseus.emulation/2"},
      {"stages", result.stages},
      {"data_parallel", result.data_parallel},
      {"tensor_parallel", result.tensor_parallel},
      {"gpus", result.num_gpus()},
      {"p_blocking_w", result.p_blocking_w},
      {"switch_latency_s", result.switch_latency_s},
      {"iteration_time_s", result.iteration_time_s},
      {"sync_time_s", result.sync_time_s},
      {"communication_end_s", result.communication_end_s},
      {"overheads",
       {{"first_stage_load_s", result.overheads.first_stage_load_s},
        {"last_stage_load_s", result.overheads.last_stage_load_s},
        {"blocking_sends", result.overheads.blocking_sends},
        {"optimizer_step_s", result.overheads.optimizer_step_s},
        {"optimizer_power_w", result.overheads.optimizer_power_w < 0.0 ? result.p_blocking_w
                                                                        : result.overheads.optimizer_power_w},
        {"between_iterations_s", result.overheads.between_iterations_s}}},
      {"average_power_w", result.average_power_w()},
      {"average_power_per_gpu_w", result.average_power_per_gpu_w()},
      {"energy_j", energy_json(result.energy)},
      {"switching",
       {{"switches", result.switches},
        {"late", result.late_switches},
        {"missed", result.missed_switches},
        {"delay_s", result.switching_delay_s},
        {"energy_j", result.switching_energy_j}}},
      {"warnings", result.warnings},
      {"fastest_pipeline", result.fastest_pipeline},
      {"typical_pipeline", result.typical_pipeline},
      {"detail", to_string(result.detail)},
  };
  nlohmann::json& allreduces = out["allreduce"] = nlohmann::json::array();
  for (const AllReduce& a : result.allreduces) {
    allreduces.push_back(
        {{"stage", a.stage}, {"start_s", a.start_s}, {"end_s", a.end_s}, {"bytes_per_gpu", a.bytes_per_gpu}});
  }
  nlohmann::json& detailed = out["detailed_pipelines"] = nlohmann::json::array();
  for (const std::int32_t p : result.detailed_pipelines) {
    detailed.push_back({{"pipeline", p}, {"notable", notable_reasons(result, p)}, {"file", pipeline_file_name(p)}});
  }
  nlohmann::json& pipelines = out["pipelines"] = nlohmann::json::array();
  for (const PipelineSummary& p : result.pipelines) pipelines.push_back(pipeline_summary_json(p));
  return out;
}

void write_emulation_json(std::ostream& out, const EmulationResult& result) {
  // dump(1) of the whole tree spends a dozen lines on each pipeline; one line each keeps the
  // file at about 200 bytes per pipeline and still readable.
  nlohmann::json document = emulation_to_json(result);
  const nlohmann::json pipelines = std::move(document["pipelines"]);
  document.erase("pipelines");
  std::string head = document.dump(1);
  head.erase(head.find_last_not_of("}\n ") + 1);
  out << head << ",\n \"pipelines\": [";
  std::string lines;
  for (std::size_t i = 0; i < pipelines.size(); ++i) {
    lines += i ? ",\n  " : "\n  ";
    lines += pipelines[i].dump();
    if (lines.size() > (1u << 16)) {
      out << lines;
      lines.clear();
    }
  }
  out << lines << "\n ]\n}\n";
}

nlohmann::json pipeline_to_json(const EmulationResult& result, int pipeline, const JsonOutputOptions& options) {
  check_detailed(result, pipeline);
  const PipelineSummary& summary = result.pipelines[static_cast<std::size_t>(pipeline)];
  nlohmann::json out = pipeline_summary_json(summary);
  out["schema"] = "perseus.emulation.pipeline/1";
  out["notable"] = notable_reasons(result, pipeline);
  nlohmann::json& devices = out["devices"] = nlohmann::json::array();
  for (int s = 0; s < result.stages; ++s) {
    const DeviceSummary& d = result.devices[static_cast<std::size_t>(pipeline) * result.stages + s];
    devices.push_back({{"pipeline", d.pipeline},
                       {"stage", d.stage},
                       {"first_gpu", first_gpu(result, d.pipeline, d.stage)},
                       {"gpus", result.tensor_parallel},
                       {"busy_s", d.busy_s},
                       {"finish_s", d.finish_s},
                       {"energy_j_per_gpu", energy_json(d.energy)},
                       {"switches", d.switches},
                       {"late_switches", d.late_switches},
                       {"missed_switches", d.missed_switches}});
  }
  if (options.transfers) {
    nlohmann::json& transfers = out["transfers"] = nlohmann::json::array();
    for (const Transfer& t : transfers_of(result, pipeline)) {
      transfers.push_back({{"pipeline", t.pipeline},
                           {"from_stage", t.from_stage},
                           {"to_stage", t.to_stage},
                           {"from_node", t.from_node},
                           {"to_node", t.to_node},
                           {"start_s", t.start_s},
                           {"arrival_s", t.arrival_s},
                           {"bytes", t.bytes}});
    }
  }
  if (options.timeline) {
    nlohmann::json& timeline = out["timeline"] = nlohmann::json::array();
    for (const ExecutedInstruction& e : timeline_of(result, pipeline)) {
      timeline.push_back({{"pipeline", e.pipeline},
                          {"stage", e.instruction.stage},
                          {"instruction", to_string(e.instruction.kind)},
                          {"microbatch", e.instruction.microbatch},
                          {"chunk", e.instruction.chunk},
                          {"start_s", e.start_s},
                          {"end_s", e.end_s},
                          {"load_s", e.load_s},
                          {"frequency_mhz", e.frequency_mhz},
                          {"clock_at_start_mhz", e.clock_at_start_mhz},
                          {"power_w", e.power_w()},
                          {"energy_j", e.energy_j},
                          {"switch", to_string(e.switch_outcome)}});
    }
  }
  return out;
}

void write_pipeline_json(std::ostream& out, const EmulationResult& result, int pipeline,
                         const JsonOutputOptions& options) {
  // The head through nlohmann; the long arrays streamed with fmt. Same document as pipeline_to_json.
  std::string head = pipeline_to_json(result, pipeline, {false, false}).dump(1);
  head.erase(head.find_last_not_of("}\n ") + 1);
  out << head;
  fmt::memory_buffer buffer;
  const auto flush = [&](bool force) {
    if (!force && buffer.size() < (1u << 16)) return;
    out.write(buffer.data(), static_cast<std::streamsize>(buffer.size()));
    buffer.clear();
  };
  if (options.transfers) {
    fmt::format_to(std::back_inserter(buffer), ",\n \"transfers\": [");
    const std::span<const Transfer> transfers = transfers_of(result, pipeline);
    for (std::size_t i = 0; i < transfers.size(); ++i) {
      const Transfer& t = transfers[i];
      fmt::format_to(std::back_inserter(buffer),
                     "{}\n  {{\"pipeline\":{},\"from_stage\":{},\"to_stage\":{},\"from_node\":{},\"to_node\":{},"
                     "\"start_s\":{},\"arrival_s\":{},\"bytes\":{}}}",
                     i ? "," : "", t.pipeline, t.from_stage, t.to_stage, t.from_node, t.to_node, t.start_s, t.arrival_s,
                     t.bytes);
      flush(false);
    }
    fmt::format_to(std::back_inserter(buffer), "\n ]");
  }
  if (options.timeline) {
    fmt::format_to(std::back_inserter(buffer), ",\n \"timeline\": [");
    const std::span<const ExecutedInstruction> timeline = timeline_of(result, pipeline);
    for (std::size_t i = 0; i < timeline.size(); ++i) {
      const ExecutedInstruction& e = timeline[i];
      fmt::format_to(std::back_inserter(buffer),
                     "{}\n  {{\"pipeline\":{},\"stage\":{},\"instruction\":\"{}\",\"microbatch\":{},\"chunk\":{},"
                     "\"start_s\":{},\"end_s\":{},\"load_s\":{},\"frequency_mhz\":{},\"clock_at_start_mhz\":{},"
                     "\"power_w\":{},\"energy_j\":{},\"switch\":\"{}\"}}",
                     i ? "," : "", e.pipeline, e.instruction.stage, to_string(e.instruction.kind), e.instruction.microbatch,
                     e.instruction.chunk, e.start_s, e.end_s, e.load_s, e.frequency_mhz, e.clock_at_start_mhz, e.power_w(),
                     e.energy_j, to_string(e.switch_outcome));
      flush(false);
    }
    fmt::format_to(std::back_inserter(buffer), "\n ]");
  }
  fmt::format_to(std::back_inserter(buffer), "\n}}\n");
  flush(true);
}

void write_timeline_csv(std::ostream& out, const EmulationResult& result, bool per_gpu) {
  out << "first_gpu,gpus,pipeline,stage,instruction,microbatch,chunk,start_s,end_s,frequency_mhz,"
         "clock_at_start_mhz,power_w,energy_j,switch\n";
  const int rows_per_device = per_gpu ? result.tensor_parallel : 1;
  const int gpus = per_gpu ? 1 : result.tensor_parallel;
  fmt::memory_buffer buffer;
  for (const ExecutedInstruction& e : result.timeline) {
    for (int rank = 0; rank < rows_per_device; ++rank) {
      fmt::format_to(std::back_inserter(buffer), "{},{},{},{},{},{},{},{},{},{},{},{},{},{}\n",
                     first_gpu(result, e.pipeline, e.instruction.stage) + rank, gpus, e.pipeline, e.instruction.stage,
                     to_string(e.instruction.kind), e.instruction.microbatch, e.instruction.chunk, e.start_s, e.end_s,
                     e.frequency_mhz, e.clock_at_start_mhz, e.power_w(), e.energy_j, to_string(e.switch_outcome));
    }
    if (buffer.size() > (1u << 16)) {
      out.write(buffer.data(), static_cast<std::streamsize>(buffer.size()));
      buffer.clear();
    }
  }
  out.write(buffer.data(), static_cast<std::streamsize>(buffer.size()));
}

void write_devices_csv(std::ostream& out, const EmulationResult& result) {
  out << "pipeline,stage,first_gpu,gpus,straggler,busy_s,finish_s,computation_j,intrinsic_blocking_j,"
         "extrinsic_blocking_j,allreduce_j,overhead_j,total_j,switches,late_switches,missed_switches\n";
  fmt::memory_buffer buffer;  // a row for each of 16,384 devices at 131,072 GPUs
  for (const DeviceSummary& d : result.devices) {
    const EnergySplit& e = d.energy;
    fmt::format_to(std::back_inserter(buffer), "{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{}\n", d.pipeline, d.stage,
                   first_gpu(result, d.pipeline, d.stage), result.tensor_parallel,
                   result.pipelines[d.pipeline].straggler ? 1 : 0, d.busy_s, d.finish_s, e.computation_j,
                   e.intrinsic_blocking_j, e.extrinsic_blocking_j, e.allreduce_j, e.overhead_j, e.total_j(), d.switches,
                   d.late_switches, d.missed_switches);
    if (buffer.size() > (1u << 16)) {
      out.write(buffer.data(), static_cast<std::streamsize>(buffer.size()));
      buffer.clear();
    }
  }
  out.write(buffer.data(), static_cast<std::streamsize>(buffer.size()));
}

}  // namespace perseus
