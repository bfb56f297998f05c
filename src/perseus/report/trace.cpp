#include "perseus/report/trace.hpp"

#include <iterator>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "perseus/emulator/emulation_output.hpp"

namespace perseus::report {
namespace {

class EventWriter {
 public:
  explicit EventWriter(std::ostream& out) : out_(out) {}
  ~EventWriter() { flush(); }

  template <typename... Args>
  void event(fmt::format_string<Args...> format, Args&&... args) {
    if (!first_) buffer_.push_back(',');
    first_ = false;
    buffer_.push_back('\n');
    fmt::format_to(std::back_inserter(buffer_), format, std::forward<Args>(args)...);
    if (buffer_.size() > (1u << 16)) flush();
  }
  void flush() {
    out_.write(buffer_.data(), static_cast<std::streamsize>(buffer_.size()));
    buffer_.clear();
  }

 private:
  std::ostream& out_;
  fmt::memory_buffer buffer_;
  bool first_ = true;
};

double us(double seconds) { return seconds * 1e6; }

}  // namespace

void write_chrome_trace(std::ostream& out, const EmulationResult& result, const TraceOptions& options) {
  const int stages = result.stages;
  const int tp = result.tensor_parallel;
  out << fmt::format(
      "{{\"displayTimeUnit\":\"ms\",\"otherData\":{{\"generator\":\"perseus emulate\",\"stages\":{},"
      "\"data_parallel\":{},\"tensor_parallel\":{},\"gpus\":{},\"iteration_time_s\":{},\"energy_j\":{},"
      "\"p_blocking_w\":{},\"pipelines_traced\":{}}},\"traceEvents\":[",
      stages, result.data_parallel, tp, result.num_gpus(), result.iteration_time_s, result.energy.total_j(),
      result.p_blocking_w, result.detailed_pipelines.size());
  {
    EventWriter w(out);
    std::vector<char> critical(result.timeline.size(), 0);
    for (const int p : result.detailed_pipelines) {
      for (std::size_t i : critical_path(result, p)) critical[i] = 1;
    }
    // Only the pipelines that kept their timeline: a process each.
    for (const int p : result.detailed_pipelines) {
      const PipelineSummary& pipeline = result.pipelines[static_cast<std::size_t>(p)];
      const std::string name = pipeline.straggler ? fmt::format("pipeline {} (straggler x{:g}, +{:g} s)", p,
                                                                pipeline.slowdown, pipeline.delay_s)
                                                  : fmt::format("pipeline {}", p);
      w.event(R"({{"name":"process_name","ph":"M","pid":{},"tid":0,"args":{{"name":"{}"}}}})", p, name);
      // Why it is here (Perfetto shows labels beside the name): "straggler", "fastest", "typical".
      const std::vector<std::string> reasons = notable_reasons(result, p);
      if (!reasons.empty()) {
        w.event(R"({{"name":"process_labels","ph":"M","pid":{},"tid":0,"args":{{"labels":"{}"}}}})", p,
                fmt::join(reasons, ","));
      }
      w.event(R"({{"name":"process_sort_index","ph":"M","pid":{},"tid":0,"args":{{"sort_index":{}}}}})", p, p);
      for (int s = 0; s < stages; ++s) {
        const long long first = (static_cast<long long>(p) * stages + s) * tp;
        w.event(R"~({{"name":"thread_name","ph":"M","pid":{},"tid":{},"args":{{"name":"stage {} (GPU {}{})"}}}})~", p, s,
                s, first, tp > 1 ? fmt::format("-{}", first + tp - 1) : "");
        w.event(R"({{"name":"thread_sort_index","ph":"M","pid":{},"tid":{},"args":{{"sort_index":{}}}}})", p, s, s);
        const auto timeline = result.device_timeline(p, s);
        const std::size_t offset = static_cast<std::size_t>(timeline.data() - result.timeline.data());
        for (std::size_t k = 0; k < timeline.size(); ++k) {
          const ExecutedInstruction& e = timeline[k];
          if (e.load_s > 0.0) {
            w.event(R"({{"name":"load {}","cat":"load","ph":"X","pid":{},"tid":{},"ts":{:.3f},"dur":{:.3f},"args":{{"microbatch":{}}}}})",
                    e.instruction.microbatch, p, s, us(e.start_s - e.load_s), us(e.load_s), e.instruction.microbatch);
          }
          w.event(
              R"({{"name":"{}","cat":"{}","ph":"X","pid":{},"tid":{},"ts":{:.3f},"dur":{:.3f},"args":{{"microbatch":{},"chunk":{},"frequency_mhz":{},"clock_at_start_mhz":{},"power_w":{:.3f},"energy_j_per_gpu":{:.6f},"switch":"{}","critical":{}}}}})",
              label(e.instruction), to_string(e.instruction.kind), p, s, us(e.start_s), us(e.end_s - e.start_s),
              e.instruction.microbatch, e.instruction.chunk, e.frequency_mhz, e.clock_at_start_mhz, e.power_w(),
              e.energy_j, to_string(e.switch_outcome), critical[offset + k] ? "true" : "false");
          if (options.power_counters) {
            // Power steps up for the instruction and back to p_blocking after it; an
            // instruction that starts as the previous ends overrides the drop.
            w.event(R"({{"name":"power stage {}","ph":"C","pid":{},"ts":{:.3f},"args":{{"W":{:.3f}}}}})", s, p,
                    us(e.start_s), e.power_w());
            const bool next_starts_now = k + 1 < timeline.size() && timeline[k + 1].start_s <= e.end_s;
            if (!next_starts_now) {
              w.event(R"({{"name":"power stage {}","ph":"C","pid":{},"ts":{:.3f},"args":{{"W":{:.3f}}}}})", s, p,
                      us(e.end_s), result.p_blocking_w);
            }
          }
        }
        const IterationOverheads& o = result.overheads;
        if (o.optimizer_step_s > 0.0) {
          w.event(R"({{"name":"optimizer step","cat":"optimizer","ph":"X","pid":{},"tid":{},"ts":{:.3f},"dur":{:.3f},"args":{{}}}})",
                  p, s, us(result.communication_end_s), us(o.optimizer_step_s));
        }
      }
    }
    if (options.transfers && !result.transfers.empty()) {
      // Every pipeline runs the same DAG: its nodes' instructions from the first traced one,
      // which the timeline starts with (transfers are kept only for traced pipelines).
      std::vector<Instruction> instruction_of;
      const std::size_t first_pipeline_end =
          result.device_begin[static_cast<std::size_t>(result.detailed_pipelines.front() + 1) * stages];
      for (std::size_t i = 0; i < first_pipeline_end; ++i) {
        const ExecutedInstruction& e = result.timeline[i];
        if (static_cast<std::size_t>(e.node) >= instruction_of.size()) instruction_of.resize(e.node + 1);
        instruction_of[e.node] = e.instruction;
      }
      std::vector<char> named(static_cast<std::size_t>(stages) * stages * result.data_parallel, 0);
      for (const Transfer& t : result.transfers) {
        const int tid = 1000 + t.from_stage * stages + t.to_stage;
        char& seen = named[(static_cast<std::size_t>(t.pipeline) * stages + t.from_stage) * stages + t.to_stage];
        if (!seen) {
          seen = 1;
          w.event(R"({{"name":"thread_name","ph":"M","pid":{},"tid":{},"args":{{"name":"link {} -> {}"}}}})", t.pipeline,
                  tid, t.from_stage, t.to_stage);
          w.event(R"({{"name":"thread_sort_index","ph":"M","pid":{},"tid":{},"args":{{"sort_index":{}}}}})", t.pipeline,
                  tid, tid);
        }
        w.event(R"({{"name":"send {}","cat":"transfer","ph":"X","pid":{},"tid":{},"ts":{:.3f},"dur":{:.3f},"args":{{"bytes":{},"from_stage":{},"to_stage":{}}}}})",
                static_cast<std::size_t>(t.from_node) < instruction_of.size() ? label(instruction_of[t.from_node]) : "?", t.pipeline, tid, us(t.start_s),
                us(t.arrival_s - t.start_s), t.bytes, t.from_stage, t.to_stage);
      }
    }
    if (!result.allreduces.empty()) {
      const int pid = result.data_parallel;
      w.event(R"({{"name":"process_name","ph":"M","pid":{},"tid":0,"args":{{"name":"gradient all-reduce"}}}})", pid);
      w.event(R"({{"name":"process_sort_index","ph":"M","pid":{},"tid":0,"args":{{"sort_index":{}}}}})", pid, pid);
      for (const AllReduce& a : result.allreduces) {
        w.event(R"({{"name":"thread_name","ph":"M","pid":{},"tid":{},"args":{{"name":"stage {}"}}}})", pid, a.stage,
                a.stage);
        w.event(R"({{"name":"all-reduce","cat":"allreduce","ph":"X","pid":{},"tid":{},"ts":{:.3f},"dur":{:.3f},"args":{{"bytes_per_gpu":{}}}}})",
                pid, a.stage, us(a.start_s), us(a.end_s - a.start_s), a.bytes_per_gpu);
      }
    }
  }
  out << "\n]}\n";
}

}  // namespace perseus::report
