#include "perseus/report/geo_figures.hpp"

#include <map>

#include <fmt/format.h>

#include "perseus/report/figures.hpp"
#include "perseus/report/svg.hpp"

namespace perseus::report {
namespace {

using geo::Scheduler;

// Atlas's gain (baseline pipeline time over Atlas's) against the WAN latency, one line per
// baseline and M (M = 16 dashed), for one model.
std::string testbed_chart(const std::vector<geo::TestbedPoint>& points, const std::string& model, const std::string& title) {
  std::map<std::pair<int, Scheduler>, ChartSeries> lines;
  std::map<std::pair<int, double>, double> atlas;
  for (const geo::TestbedPoint& p : points)
    if (p.model == model && p.scheduler == Scheduler::kAtlas) atlas[{p.microbatches, p.latency_ms}] = p.pipeline_time_s;
  for (const geo::TestbedPoint& p : points) {
    if (p.model != model || p.scheduler == Scheduler::kAtlas) continue;
    ChartSeries& s = lines[{p.microbatches, p.scheduler}];
    s.name = fmt::format("over {} M={}", to_string(p.scheduler), p.microbatches);
    s.dashed = p.microbatches > 4;
    s.colour = static_cast<int>(p.scheduler);  // one colour per baseline, dashed at M = 16
    s.points.emplace_back(p.latency_ms, p.pipeline_time_s / atlas.at({p.microbatches, p.latency_ms}));
  }
  LineChart chart{"geo-testbed", title, "WAN latency (ms)", "Atlas's speed-up (x)", {}, true};
  for (auto& [key, series] : lines) chart.series.push_back(std::move(series));
  return line_chart_svg(chart);
}

std::string scale_chart(const std::vector<geo::ScalePoint>& points, int dc_set) {
  LineChart chart{"geo-scale",
                  fmt::format("Fig. 10, DC-set-{}: throughput as DCs are added", dc_set),
                  "datacenters",
                  "throughput (microbatches/s)",
                  {},
                  true};
  chart.integer_x = true;
  for (int ratio : {2, 3}) {
    ChartSeries varuna{fmt::format("Varuna C={}", ratio), {}, ratio == 3, 0};
    ChartSeries atlas{fmt::format("Atlas C={}", ratio), {}, ratio == 3, 1};
    for (const geo::ScalePoint& p : points) {
      if (p.dc_set != dc_set || p.ratio != ratio) continue;
      varuna.points.emplace_back(p.dcs, p.varuna_throughput);
      atlas.points.emplace_back(p.dcs, p.atlas_throughput);
    }
    chart.series.push_back(std::move(varuna));
    chart.series.push_back(std::move(atlas));
  }
  return line_chart_svg(chart);
}

std::string td(const std::string& text) { return "<td>" + escape_xml(text) + "</td>"; }

}  // namespace

std::vector<std::pair<std::string, std::string>> geo_figures(const geo::GeoEvaluation& e) {
  std::vector<std::pair<std::string, std::string>> out;
  for (const char* model : {"gpt-a", "gpt-b"}) {
    out.emplace_back(fmt::format("fig8_{}", model),
                     testbed_chart(e.fig8, model, fmt::format("Fig. 8, {}: baselines at one TCP connection", model)));
    out.emplace_back(fmt::format("fig9_{}", model),
                     testbed_chart(e.fig9, model, fmt::format("Fig. 9, {}: everyone at the 5 Gbps cap", model)));
  }
  out.emplace_back("fig10_dc_set_1", scale_chart(e.fig10, 1));
  out.emplace_back("fig10_dc_set_2", scale_chart(e.fig10, 2));
  {
    LineChart chart{"geo-balance", "Fig. 11: two DCs, the second with 600 F GPUs", "F", "throughput over the first DC alone (x)", {}, true};
    ChartSeries s{"Atlas, C=2", {}, false};
    for (const geo::BalancePoint& p : e.fig11) s.points.emplace_back(p.fraction, p.relative);
    chart.series.push_back(std::move(s));
    out.emplace_back("fig11", line_chart_svg(chart));
  }
  {
    LineChart chart{"geo-bubbletea", "BubbleTea: GPU utilisation against the prefill request rate", "requests per second",
                    "GPU utilisation (%)", {}, true};
    ChartSeries alone{"training alone", {}, true}, with{"with prefills", {}, false};
    for (const geo::BubbleTeaPoint& p : e.bubbletea) {
      alone.points.emplace_back(p.rate, 100 * p.training_utilization);
      with.points.emplace_back(p.rate, 100 * p.utilization);
    }
    chart.series = {std::move(alone), std::move(with)};
    out.emplace_back("bubbletea_utilization", line_chart_svg(chart));
  }
  {
    const geo::FillOrSlowResult& r = e.fill_or_slow;
    BarChart chart{"geo-fill-or-slow",
                   fmt::format("Fill or slow at {:g} requests/s: energy per iteration", r.spec.prefills.arrival_rate),
                   "kJ per iteration",
                   {},
                   {"computation", "prefills", "idle", "total"},
                   {{}, {}, {}, {}}};
    for (const geo::PolicyOutcome& o : r.outcomes) {
      chart.groups.push_back(o.policy);
      chart.values[0].push_back(o.computation_j / 1e3);
      chart.values[1].push_back(o.prefill_j / 1e3);
      chart.values[2].push_back(o.idle_j / 1e3);
      chart.values[3].push_back(o.total_j() / 1e3);
    }
    out.emplace_back("fill_or_slow_energy", bar_chart_svg(chart));
  }
  return out;
}

ReportSection geo_section(const geo::GeoEvaluation& e) {
  ReportSection section;
  section.id = "geo";
  section.title = "Geo-distributed training: Atlas and BubbleTea";
  section.note =
      "Atlas's evaluation rerun on perseus's emulator of shared WAN links (docs/geo.md has the models and the reasons "
      "where ours differ). The paper reports Atlas up to 17x over GPipe, 13x over Megatron and 12x over Varuna at one "
      "TCP connection (Fig. 8), up to about 1.8x with every scheduler at the cap (Fig. 9), throughput that grows with "
      "the DCs and Atlas up to 24% (C=3) and 11% (C=2) over Varuna (Fig. 10), and BubbleTea lifting utilisation from 45% "
      "to 94%. Fill or slow goes beyond both papers: each bubble either takes prefills or lets the computation before "
      "it run at a lower clock; training's iteration time is checked unchanged by replay in every row.";
  std::string& t = section.tables_html;
  t += "<h3>Fill or slow</h3><table><thead><tr><th>policy</th><th>bubbles filled</th><th>bubbles slowed</th>"
       "<th>energy (kJ/iteration)</th><th>J per TFLOP</th><th>prefill tokens/s</th><th>utilisation</th>"
       "<th>$/hour</th><th>training unchanged</th></tr></thead><tbody>";
  for (const geo::PolicyOutcome& o : e.fill_or_slow.outcomes)
    t += "<tr>" + td(o.policy) + td(std::to_string(o.bubbles_filled)) + td(std::to_string(o.bubbles_slowed)) +
         td(fmt::format("{:.3f}", o.total_j() / 1e3)) + td(fmt::format("{:.2f}", o.joules_per_tflop())) +
         td(fmt::format("{:.0f}", o.prefill_tokens_per_s)) + td(fmt::format("{:.1f}%", 100 * o.utilization)) +
         td(fmt::format("{:.2f}", o.net_value_per_hour(e.fill_or_slow.spec))) + td(o.training_unchanged ? "yes" : "NO") +
         "</tr>";
  t += "</tbody></table>";
  t += "<h3>BubbleTea</h3><table><thead><tr><th>requests/s</th><th>utilisation, training alone</th><th>with prefills</th>"
       "<th>served</th><th>declined</th><th>median TTFT added (ms)</th><th>training unchanged</th></tr></thead><tbody>";
  for (const geo::BubbleTeaPoint& p : e.bubbletea)
    t += "<tr>" + td(fmt::format("{:g}", p.rate)) + td(fmt::format("{:.1f}%", 100 * p.training_utilization)) +
         td(fmt::format("{:.1f}%", 100 * p.utilization)) + td(std::to_string(p.served)) + td(std::to_string(p.declined)) +
         td(fmt::format("{:.0f}", 1e3 * p.median_added_s)) + td(p.training_unchanged ? "yes" : "NO") + "</tr>";
  t += "</tbody></table>";
  for (auto& [name, svg] : geo_figures(e)) section.figures.push_back(std::move(svg));
  return section;
}

}  // namespace perseus::report
