#include "perseus/emulator/emulation_output.hpp"

#include <iterator>

#include <fmt/format.h>

namespace perseus {
namespace {

nlohmann::json energy_json(const EnergySplit& e) {
  return {{"total", e.total_j()},
          {"computation", e.computation_j},
          {"intrinsic_blocking", e.intrinsic_blocking_j},
          {"extrinsic_blocking", e.extrinsic_blocking_j},
          {"allreduce", e.allreduce_j}};
}

std::int64_t first_gpu(const EmulationResult& result, int pipeline, int stage) {
  return (static_cast<std::int64_t>(pipeline) * result.stages + stage) * result.tensor_parallel;
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

nlohmann::json emulation_to_json(const EmulationResult& result, const JsonOutputOptions& options) {
  nlohmann::json out = {
      {"schema", "perseus.emulation/1"},
      {"stages", result.stages},
      {"data_parallel", result.data_parallel},
      {"tensor_parallel", result.tensor_parallel},
      {"gpus", result.num_gpus()},
      {"p_blocking_w", result.p_blocking_w},
      {"switch_latency_s", result.switch_latency_s},
      {"iteration_time_s", result.iteration_time_s},
      {"sync_time_s", result.sync_time_s},
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
  };
  nlohmann::json& pipelines = out["pipelines"] = nlohmann::json::array();
  for (const PipelineSummary& p : result.pipelines) {
    pipelines.push_back({{"pipeline", p.pipeline},
                         {"straggler", p.straggler},
                         {"slowdown", p.slowdown},
                         {"delay_s", p.delay_s},
                         {"time_s", p.time_s},
                         {"energy_j", energy_json(p.energy)}});
  }
  nlohmann::json& devices = out["devices"] = nlohmann::json::array();
  for (const DeviceSummary& d : result.devices) {
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
  nlohmann::json& allreduces = out["allreduce"] = nlohmann::json::array();
  for (const AllReduce& a : result.allreduces) {
    allreduces.push_back(
        {{"stage", a.stage}, {"start_s", a.start_s}, {"end_s", a.end_s}, {"bytes_per_gpu", a.bytes_per_gpu}});
  }
  if (options.transfers) {
    nlohmann::json& transfers = out["transfers"] = nlohmann::json::array();
    for (const Transfer& t : result.transfers) {
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
    for (const ExecutedInstruction& e : result.timeline) {
      timeline.push_back({{"pipeline", e.pipeline},
                          {"stage", e.instruction.stage},
                          {"instruction", to_string(e.instruction.kind)},
                          {"microbatch", e.instruction.microbatch},
                          {"chunk", e.instruction.chunk},
                          {"start_s", e.start_s},
                          {"end_s", e.end_s},
                          {"frequency_mhz", e.frequency_mhz},
                          {"clock_at_start_mhz", e.clock_at_start_mhz},
                          {"power_w", e.power_w()},
                          {"energy_j", e.energy_j},
                          {"switch", to_string(e.switch_outcome)}});
    }
  }
  return out;
}

void write_emulation_json(std::ostream& out, const EmulationResult& result, const JsonOutputOptions& options) {
  // The summary through nlohmann; the long arrays streamed with fmt (a tree of 10^5 small
  // objects would cost more than the emulation itself). Same document as emulation_to_json.
  std::string head = emulation_to_json(result, {false, false}).dump(1);
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
    for (std::size_t i = 0; i < result.transfers.size(); ++i) {
      const Transfer& t = result.transfers[i];
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
    for (std::size_t i = 0; i < result.timeline.size(); ++i) {
      const ExecutedInstruction& e = result.timeline[i];
      fmt::format_to(std::back_inserter(buffer),
                     "{}\n  {{\"pipeline\":{},\"stage\":{},\"instruction\":\"{}\",\"microbatch\":{},\"chunk\":{},"
                     "\"start_s\":{},\"end_s\":{},\"frequency_mhz\":{},\"clock_at_start_mhz\":{},\"power_w\":{},"
                     "\"energy_j\":{},\"switch\":\"{}\"}}",
                     i ? "," : "", e.pipeline, e.instruction.stage, to_string(e.instruction.kind), e.instruction.microbatch,
                     e.instruction.chunk, e.start_s, e.end_s, e.frequency_mhz, e.clock_at_start_mhz, e.power_w(),
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
         "extrinsic_blocking_j,allreduce_j,total_j,switches,late_switches,missed_switches\n";
  for (const DeviceSummary& d : result.devices) {
    const EnergySplit& e = d.energy;
    out << fmt::format("{},{},{},{},{},{},{},{},{},{},{},{},{},{},{}\n", d.pipeline, d.stage,
                       first_gpu(result, d.pipeline, d.stage), result.tensor_parallel,
                       result.pipelines[d.pipeline].straggler ? 1 : 0, d.busy_s, d.finish_s, e.computation_j,
                       e.intrinsic_blocking_j, e.extrinsic_blocking_j, e.allreduce_j, e.total_j(), d.switches,
                       d.late_switches, d.missed_switches);
  }
}

}  // namespace perseus
