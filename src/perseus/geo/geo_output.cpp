#include "perseus/geo/geo_output.hpp"

#include <algorithm>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace perseus::geo {

using nlohmann::json;

std::string emulation_json(const GeoEmulation& e, const Workload& w, const NetworkSpec& net, bool detail,
                           int detail_pipelines) {
  json out;
  out["scheduler"] = std::string(to_string(e.scheduler));
  out["link_sharing"] = std::string(to_string(e.sharing));
  out["model"] = w.model->name;
  out["gpu"] = w.gpu->name;
  out["stages"] = e.placement.stages;
  out["pipelines"] = e.placement.pipelines;
  out["cell_size"] = e.placement.cell_size;
  out["microbatches"] = w.spec.microbatches;
  out["gpus"] = e.num_gpus();
  out["dcs"] = json::array();
  for (std::size_t d = 0; d < net.dcs.size(); ++d)
    out["dcs"].push_back({{"name", net.dcs[d].name}, {"gpus", net.dcs[d].gpus}, {"used", e.placement.used_per_dc[d]}});
  out["network"] = {{"wan_latency_ms", net.wan_latency_ms},
                    {"connections", net.connections},
                    {"wan_pair_gbps", net.wan_pair_bandwidth() * 8e-9},
                    {"intra_dc_gbps", net.intra_dc_gbps},
                    {"pair_cap_gbps", net.pair_cap_gbps},
                    {"tcp_model", {{"coefficient_mbps", net.tcp.coefficient_mbps}, {"exponent", net.tcp.exponent}}}};
  out["activation_bytes"] = w.activation_bytes;
  out["pipeline_time_s"] = e.pipeline_time_s;
  out["iteration_time_s"] = e.iteration_time_s;
  out["utilization"] = e.utilization();
  out["throughput_microbatches_per_s"] = e.throughput(w.spec.microbatches);
  out["computation_j"] = e.computation_j;
  out["warnings"] = e.warnings;
  json stages = json::array();
  for (int s = 0; s < e.placement.stages; ++s) {
    const StageWork& work = w.stages[static_cast<std::size_t>(s)];
    stages.push_back({{"stage", s},
                      {"forward_s", work.forward_s},
                      {"backward_s", work.backward_s},
                      {"parameters", work.parameters},
                      {"peak_in_flight", e.peak_in_flight[s]},
                      {"peak_memory_bytes", e.peak_memory_bytes[s]},
                      {"allreduce_start_s", e.allreduces[s].start_s},
                      {"allreduce_end_s", e.allreduces[s].end_s},
                      {"allreduce_over_wan", e.allreduces[s].wan}});
  }
  out["per_stage"] = std::move(stages);
  if (detail) {
    const int shown = std::min(e.placement.pipelines, detail_pipelines);
    out["detail_pipelines"] = shown;
    json gpus = json::array();
    for (int g = 0; g < shown * e.placement.stages; ++g) {
      json tasks = json::array();
      for (const GeoTask& t : e.tasks[static_cast<std::size_t>(g)])
        tasks.push_back({std::string(to_string(t.kind)), t.microbatch, t.start_s, t.end_s});
      gpus.push_back({{"pipeline", g / e.placement.stages},
                      {"stage", g % e.placement.stages},
                      {"dc", e.placement.dc[static_cast<std::size_t>(g)]},
                      {"tasks", std::move(tasks)}});
    }
    out["gpus"] = std::move(gpus);
  }
  return out.dump(1) + "\n";
}

std::string timeline_csv(const GeoEmulation& e, const BubbleTeaResult* prefills) {
  std::string out = "pipeline,stage,dc,what,microbatch,start_s,end_s,bytes\n";
  const int S = e.placement.stages;
  for (int g = 0; g < e.num_gpus(); ++g)
    for (const GeoTask& t : e.tasks[static_cast<std::size_t>(g)])
      out += fmt::format("{},{},{},{},{},{:.9g},{:.9g},\n", g / S, g % S, e.placement.dc[static_cast<std::size_t>(g)],
                         to_string(t.kind), t.microbatch, t.start_s, t.end_s);
  for (const GeoTransfer& t : e.transfers)
    out += fmt::format("{},{},{},{},{},{:.9g},{:.9g},{:.0f}\n", t.pipeline, t.from_stage,
                       e.placement.dc_of(t.pipeline, t.from_stage), t.gradient ? "gradient" : "activation", t.microbatch,
                       t.start_s, t.arrival_s, t.bytes);
  for (int s = 0; s < S; ++s)
    out += fmt::format(",{},,allreduce,,{:.9g},{:.9g},\n", s, e.allreduces[s].start_s, e.allreduces[s].end_s);
  if (prefills)
    for (const PrefillRequest& r : prefills->requests)
      for (const PrefillPart& part : r.parts)
        out += fmt::format("{},{},{},prefill,{},{:.9g},{:.9g},\n", part.gpu / S, part.gpu % S,
                           e.placement.dc[static_cast<std::size_t>(part.gpu)], r.id, part.start_s, part.end_s);
  return out;
}

std::string chrome_trace(const GeoEmulation& e, const BubbleTeaResult* prefills, int trace_iterations,
                         int detail_pipelines) {
  const int S = e.placement.stages, P = std::min(e.placement.pipelines, detail_pipelines);
  json events = json::array();
  auto meta = [&](const char* name, int pid, int tid, json args) {
    events.push_back({{"name", name}, {"ph", "M"}, {"pid", pid}, {"tid", tid}, {"args", std::move(args)}});
  };
  auto slice = [&](std::string name, const char* cat, int pid, int tid, double start, double end, json args) {
    events.push_back({{"name", std::move(name)}, {"cat", cat}, {"ph", "X"}, {"pid", pid}, {"tid", tid},
                      {"ts", start * 1e6}, {"dur", (end - start) * 1e6}, {"args", std::move(args)}});
  };
  for (int p = 0; p < P; ++p) {
    meta("process_name", p, 0, {{"name", fmt::format("pipeline {} (cell {})", p, e.placement.cell_of(p))}});
    for (int s = 0; s < S; ++s)
      meta("thread_name", p, s, {{"name", fmt::format("stage {} (dc{})", s, e.placement.dc_of(p, s) + 1)}});
  }
  for (int g = 0; g < P * S; ++g)
    for (const GeoTask& t : e.tasks[static_cast<std::size_t>(g)])
      slice(fmt::format("{}{}", "FBR"[static_cast<int>(t.kind) % 3], t.microbatch), std::string(to_string(t.kind)).c_str(),
            g / S, g % S, t.start_s, t.end_s, {{"microbatch", t.microbatch}});
  // Links: one process, a thread per (pipeline, hop, direction).
  const int links = P;
  meta("process_name", links, 0, {{"name", "links (WAN and DC)"}});
  for (int p = 0; p < P; ++p)
    for (int h = 0; h + 1 < S; ++h)
      for (int dir = 0; dir < 2; ++dir)
        meta("thread_name", links, (p * S + h) * 2 + dir,
             {{"name", fmt::format("p{} {} {}{}", p, dir ? fmt::format("{}<-{}", h, h + 1) : fmt::format("{}->{}", h, h + 1),
                                   e.placement.crosses_wan(p, h) ? "WAN" : "DC", "")}});
  for (const GeoTransfer& t : e.transfers) {
    if (t.pipeline >= P) continue;
    const int h = std::min(t.from_stage, t.to_stage);
    slice(fmt::format("{}{}", t.gradient ? "grad " : "act ", t.microbatch), "transfer", links,
          (t.pipeline * S + h) * 2 + (t.gradient ? 1 : 0), t.start_s, t.arrival_s,
          {{"bytes", t.bytes}, {"wan", t.wan}, {"sent_s", t.sent_s}});
  }
  const int allreduce = P + 1;
  meta("process_name", allreduce, 0, {{"name", "gradient all-reduce"}});
  for (int s = 0; s < S; ++s)
    slice("all-reduce", "allreduce", allreduce, s, e.allreduces[s].start_s, e.allreduces[s].end_s, {{"wan", e.allreduces[s].wan}});
  if (prefills) {
    const double until = trace_iterations * e.iteration_time_s;
    for (const PrefillRequest& r : prefills->requests)
      for (const PrefillPart& part : r.parts)
        if (part.start_s < until && part.gpu < P * S)
          slice(fmt::format("prefill {}", r.id), "prefill", part.gpu / S, part.gpu % S, part.start_s, part.end_s,
                {{"tokens", r.tokens}, {"ttft_s", r.ttft_s}});
  }
  json out = {{"displayTimeUnit", "ms"}, {"traceEvents", std::move(events)}};
  return out.dump() + "\n";
}

std::string dc_selection_json(const DcSelection& selection, const NetworkSpec& network) {
  json out;
  out["best"] = selection.best >= 0 ? json(selection.choices[selection.best].pipelines) : json(nullptr);  // pipelines
  out["distinct_emulations"] = selection.distinct_emulations;
  out["dcs"] = json::array();
  for (const DataCenter& dc : network.dcs) out["dcs"].push_back({{"name", dc.name}, {"gpus", dc.gpus}});
  json rows = json::array();
  for (const DcChoice& c : selection.choices) {
    json row = {{"pipelines", c.pipelines}, {"cells", c.cells}, {"feasible", c.feasible}};
    if (c.feasible) {
      std::vector<int> unused;
      for (std::size_t d = 0; d < network.dcs.size(); ++d) unused.push_back(network.dcs[d].gpus - c.gpus_used_per_dc[d]);
      row.update({{"stages_per_dc", c.stages_per_dc},
                  {"gpus_used_per_dc", c.gpus_used_per_dc},
                  {"gpus_unused_per_dc", unused},
                  {"gpus_used", c.gpus_used},
                  {"pipeline_time_s", c.pipeline_time_s},
                  {"allreduce_s", c.allreduce_s},
                  {"total_s", c.total_s},
                  {"throughput_microbatches_per_s", c.throughput}});
    }
    rows.push_back(std::move(row));
  }
  out["choices"] = std::move(rows);
  return out.dump(1) + "\n";
}

std::string bubbletea_json(const BubbleTeaResult& r, const GeoEmulation& training, bool detail) {
  json out = {{"inference_model", r.spec.inference_model},
              {"arrival_rate_per_s", r.spec.arrival_rate},
              {"tokens", {r.spec.min_tokens, r.spec.max_tokens}},
              {"guard_s", r.spec.guard_s},
              {"max_wait_s", r.spec.max_wait_s},
              {"iterations", r.spec.iterations},
              {"iteration_time_s", training.iteration_time_s},
              {"inference_stages", r.inference_stages},
              {"inference_pipelines", r.inference_pipelines},
              {"inference_memory_bytes_per_gpu", r.inference_memory_bytes},
              {"requests", r.requests.size()},
              {"served", r.served},
              {"declined", r.declined},
              {"training_utilization", r.training_utilization},
              {"utilization", r.utilization},
              {"median_ttft_s", r.median_ttft_s},
              {"p99_ttft_s", r.p99_ttft_s},
              {"median_added_s", r.median_added_s},
              {"hop_overhead_s", r.hop_overhead_s}};
  if (detail) {
    json requests = json::array();
    for (const PrefillRequest& q : r.requests)
      requests.push_back({{"id", q.id}, {"arrival_s", q.arrival_s}, {"tokens", q.tokens}, {"served", q.served},
                          {"pipeline", q.pipeline}, {"ttft_s", q.ttft_s}, {"added_s", q.added_s}});
    out["per_request"] = std::move(requests);
  }
  return out.dump(1) + "\n";
}

std::string fill_or_slow_json(const FillOrSlowResult& r, bool detail) {
  json policies = json::array();
  for (const PolicyOutcome& o : r.outcomes)
    policies.push_back({{"policy", o.policy},
                        {"iteration_time_s", o.iteration_time_s},
                        {"training_unchanged", o.training_unchanged},
                        {"bubbles_filled", o.bubbles_filled},
                        {"bubbles_slowed", o.bubbles_slowed},
                        {"energy_j", o.total_j()},
                        {"computation_j", o.computation_j},
                        {"prefill_j", o.prefill_j},
                        {"idle_j", o.idle_j},
                        {"training_flops", o.training_flops},
                        {"prefill_flops", o.prefill_flops},
                        {"joules_per_tflop", o.joules_per_tflop()},
                        {"prefill_tokens_per_s", o.prefill_tokens_per_s},
                        {"served", o.served},
                        {"declined", o.declined},
                        {"utilization", o.utilization},
                        {"median_ttft_s", o.median_ttft_s},
                        {"net_value_per_hour", o.net_value_per_hour(r.spec)}});
  json out = {{"objective", to_string(r.spec.objective)},
              {"price_per_kwh", r.spec.price_per_kwh},
              {"value_per_mtokens", r.spec.value_per_mtokens},
              {"arrival_rate_per_s", r.spec.prefills.arrival_rate},
              {"iterations", r.spec.prefills.iterations},
              {"prefill_power_w", r.prefill_power_w},
              {"blocking_power_w", r.blocking_power_w},
              {"bubbles", r.bubbles.size()},
              {"objective_rounds", r.objective_rounds},
              {"energy_per_iteration", "J; FLOPs and energy per iteration, tokens per second"},
              {"policies", std::move(policies)}};
  if (detail) {
    json bubbles = json::array();
    for (const BubbleChoice& b : r.bubbles)
      bubbles.push_back({{"gpu", b.gpu}, {"after", b.after}, {"start_s", b.start_s}, {"length_s", b.length_s},
                         {"slow_saving_j", b.slow_saving_j}, {"fill_extra_j", b.fill_extra_j},
                         {"fill_tokens", b.fill_tokens}, {"fill", b.fill}});
    out["per_bubble"] = std::move(bubbles);
  }
  return out.dump(1);
}

std::string reproduce_json(const GeoEvaluation& e) {
  json out;
  for (const auto* points : {&e.fig8, &e.fig9}) {
    json rows = json::array();
    // Four schedulers per point, Atlas last (testbed_sweep's order).
    for (std::size_t i = 0; i + 3 < points->size(); i += 4) {
      const TestbedPoint& atlas = (*points)[i + 3];
      rows.push_back({{"model", atlas.model}, {"microbatches", atlas.microbatches}, {"latency_ms", atlas.latency_ms},
                      {"gpipe_s", (*points)[i].pipeline_time_s}, {"1f1b_s", (*points)[i + 1].pipeline_time_s},
                      {"varuna_s", (*points)[i + 2].pipeline_time_s}, {"atlas_s", atlas.pipeline_time_s},
                      {"atlas_utilization", atlas.utilization}});
    }
    out[points == &e.fig8 ? "fig8" : "fig9"] = std::move(rows);
  }
  json rows = json::array();
  for (const ScalePoint& p : e.fig10)
    rows.push_back({{"dc_set", p.dc_set}, {"dcs", p.dcs}, {"ratio", p.ratio}, {"gpus", p.gpus},
                    {"varuna", p.varuna_throughput}, {"atlas", p.atlas_throughput}, {"atlas_gpus", p.atlas_gpus}});
  out["fig10"] = std::move(rows);
  rows = json::array();
  for (const BalancePoint& p : e.fig11)
    rows.push_back({{"fraction", p.fraction}, {"second_dc_gpus", p.second_dc_gpus}, {"gpus_used", p.gpus_used},
                    {"stages_per_dc", p.stages_per_dc}, {"relative", p.relative}});
  out["fig11"] = std::move(rows);
  rows = json::array();
  for (const BubbleTeaPoint& p : e.bubbletea)
    rows.push_back({{"rate", p.rate}, {"training_utilization", p.training_utilization}, {"utilization", p.utilization},
                    {"served", p.served}, {"declined", p.declined}, {"median_added_s", p.median_added_s},
                    {"training_unchanged", p.training_unchanged}});
  out["bubbletea"] = std::move(rows);
  out["fill_or_slow"] = json::parse(fill_or_slow_json(e.fill_or_slow, false));
  return out.dump(1);
}

}  // namespace perseus::geo
