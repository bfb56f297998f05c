#include "perseus/report/html_report.hpp"

#include <algorithm>
#include <limits>

#include <fmt/format.h>

#include "perseus/model/errors.hpp"
#include "perseus/report/figures.hpp"
#include "perseus/report/plots.hpp"
#include "perseus/report/svg.hpp"
#include "perseus/report/tables.hpp"

namespace perseus::report {
namespace {

const char* kCss = R"(
body{font-family:sans-serif;margin:24px auto;max-width:1180px;color:#222;line-height:1.4}
h1{font-size:22px;margin-bottom:4px}h2{font-size:18px;margin-top:32px;border-bottom:1px solid #ddd}
h3{font-size:15px;margin-bottom:4px}
table{border-collapse:collapse;margin:8px 0 16px 0;font-size:13px}
th,td{border:1px solid #ddd;padding:3px 8px;text-align:right}
th{background:#f4f4f4}td:first-child,th:first-child{text-align:left}
table.facts td,td.text{text-align:left}
.figure{overflow-x:auto;margin:8px 0}.note{color:#555;font-size:13px}
.warning{background:#fff4e5;border-left:4px solid #ff7f0e;padding:6px 10px;font-size:13px}
)";

std::string page_head(const std::string& title) {
  std::string out = "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">";
  out += "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">";
  out += "<title>" + escape_xml(title) + "</title><style>" + kCss + "</style></head><body>\n";
  out += "<h1>" + escape_xml(title) + "</h1>\n";
  return out;
}

std::string section_html(const ReportSection& section) {
  std::string out = "<h2 id=\"" + escape_xml(section.id) + "\">" + escape_xml(section.title) + "</h2>";
  if (!section.note.empty()) out += "<p class=\"note\">" + escape_xml(section.note) + "</p>";
  out += section.tables_html + "\n";
  for (const std::string& svg : section.figures) out += "<div class=\"figure\">" + svg + "</div>\n";
  return out;
}

std::string power_range_note(double lo, double hi) {
  return fmt::format("Colour: power per GPU, {:.0f} W (dark) to {:.0f} W (yellow); faded background: blocked.", lo, hi);
}

}  // namespace

std::string html_report(const ReportInput& input) {
  if (!input.comparison) throw InputError("the report needs a comparison");
  const Comparison& c = *input.comparison;
  std::string out = page_head(input.title);
  out += "<p class=\"note\">Written by perseus. Every figure is emulated: each instruction takes the measured time "
         "and energy of its frequency, blocked GPUs draw p_blocking.</p>\n";
  for (const std::string& w : input.warnings) out += "<p class=\"warning\">" + escape_xml(w) + "</p>\n";

  // Summary.
  out += "<h2 id=\"summary\">Summary</h2><table class=\"facts\"><tbody>";
  for (const auto& [label, value] : input.facts) {
    out += "<tr><td>" + escape_xml(label) + "</td><td>" + escape_xml(value) + "</td></tr>";
  }
  const auto row = [&](const std::string& label, const std::string& value) {
    out += "<tr><td>" + escape_xml(label) + "</td><td>" + escape_xml(value) + "</td></tr>";
  };
  row("AllMax", fmt::format("{:.4f} s, {:.1f} J per iteration", c.all_max_time_s, c.all_max_energy_j));
  row("T_min (Perseus's fastest plan)", fmt::format("{:.4f} s", c.t_min_s));
  // T* minimises effective energy (blocked power counted while the plan waits for the
  // slowest pipeline), not the energy of one iteration: a slower plan can use less per iteration.
  row("T* (Perseus's plan of least effective energy: its energy plus blocked power while it waits for the slowest; "
      "not the least energy per iteration)",
      fmt::format("{:.4f} s", c.t_star_s));
  for (const MethodRow& r : c.iso_time) {
    if (r.method == kPerseus && r.available) {
      row("Perseus at iso-time", fmt::format("{:.1f} J, saves {:.1f} J ({:.2f}%) versus AllMax", r.energy_j, r.savings_j,
                                             100.0 * r.savings_fraction));
    }
  }
  // Per iteration, each at its own time: T*'s plan, then the least-energy plan (a different
  // point wherever blocked power is counted: T* is slower, and draws more per iteration).
  const auto per_iteration = [&](double time_s, double energy_j) {
    return fmt::format("{:.1f} J at {:.4f} s, saves {:.2f}% at {:.2f}% slowdown", energy_j, time_s,
                       100.0 * (1.0 - energy_j / c.all_max_energy_j), 100.0 * (time_s / c.all_max_time_s - 1.0));
  };
  if (const MethodPoint* t_star =
          perseus_choice(c.method(kPerseus), std::numeric_limits<double>::infinity(), c.p_blocking_w, c.gpus_per_pipeline)) {
    row("Perseus at T*, per iteration", per_iteration(t_star->time_s, t_star->energy_j));
  }
  for (const MethodRow& r : c.min_energy) {
    if (r.method == kPerseus && r.available) {
      row("Perseus's least energy per iteration", per_iteration(r.time_s, r.energy_j));
    }
  }
  out += "</tbody></table>\n";

  // Frontier.
  out += "<h2 id=\"frontier\">Frontier</h2><div class=\"figure\">";
  out += frontier_svg(c, {"Iteration time vs energy: Perseus and the baselines", 960, 500});
  out += "</div><p class=\"note\">Each point is a plan emulated on one pipeline. Lines join each method's "
         "Pareto-optimal plans; dashed lines mark Perseus's T_min and T*. The dashed curve under Perseus's line is a "
         "proven lower bound on the energy of any plan as fast (from the LP relaxation): no plan of these clocks "
         "lies below it.</p>\n";

  // Timelines, on one time axis and one colour scale so they compare at a glance.
  const EmulationResult* runs[] = {input.t_min_run, input.t_star_run};
  const char* names[] = {"T_min plan", "T* plan"};
  if (runs[0] || runs[1]) {
    double time_hi = 0.0, lo = 1e300, hi = 0.0;
    for (const EmulationResult* r : runs) {
      if (!r) continue;
      time_hi = std::max(time_hi, r->pipelines.front().time_s);
      lo = std::min(lo, r->p_blocking_w);
      for (const ExecutedInstruction& e : r->timeline) {
        if (e.pipeline != 0 || e.end_s <= e.start_s) continue;
        lo = std::min(lo, e.power_w());
        hi = std::max(hi, e.power_w());
      }
    }
    if (hi <= lo) hi = lo + 1.0;
    out += "<h2 id=\"timelines\">Timelines</h2><p class=\"note\">" + escape_xml(power_range_note(lo, hi)) +
           " The red line traces the critical path; orange outlines mark instructions whose clock switch came "
           "late.</p>\n";
    for (int k = 0; k < 2; ++k) {
      if (!runs[k]) continue;
      TimelinePlotOptions options;
      options.title = fmt::format("{}: {:.4f} s, {:.1f} J", names[k], runs[k]->pipelines.front().time_s,
                                  runs[k]->pipelines.front().energy.total_j());
      options.power_lo_w = lo;
      options.power_hi_w = hi;
      options.time_hi_s = time_hi;
      out += "<div class=\"figure\">" + timeline_svg(*runs[k], options) + "</div>\n";
    }
  }

  out += "<h2 id=\"methods\">Methods</h2>" + methods_html(c) + "\n";
  if (!c.stragglers.empty()) {
    out += "<h2 id=\"stragglers\">Stragglers</h2><p class=\"note\">Energy savings of the non-straggler pipelines "
           "versus AllMax when one pipeline (running AllMax) is slowed to T' = ratio &times; T. Perseus runs its "
           "plan for T_opt = min(T*, T'); the baselines their least-energy plan within T'.</p>" +
           stragglers_html(c) + "\n";
    // The paper's Fig. 7 and Fig. 8 from this comparison.
    out += "<div class=\"figure\">" + savings_breakdown_svg(c) + "</div>\n";
    out += "<div class=\"figure\">" + straggler_savings_svg(c) + "</div>\n";
  }
  if (!input.large_scale.empty()) {
    out += "<h2 id=\"large-scale\">Large scale</h2><p class=\"note\">Strong scaling without stragglers: the global "
           "batch is split into more pipelines with fewer microbatches each; every pipeline is emulated.</p>" +
           large_scale_html(input.large_scale) + "\n";
    out += "<div class=\"figure\">" + large_scale_svg(input.large_scale) + "</div>\n";
    out += "<div class=\"figure\">" + large_scale_energy_svg(input.large_scale) + "</div>\n";
  }
  if (!input.method_frontiers.empty()) {
    out += "<h2 id=\"methods-frontiers\">" + escape_xml(input.method_frontiers_title) +
           "</h2><p class=\"note\">Each method's iteration time-energy frontier; a dot marks its fastest plan.</p>"
           "<div class=\"figure\">" +
           tradeoff_curves_svg(input.method_frontiers_title, input.method_frontiers) + "</div>\n";
  }
  for (const ReportSection& section : input.sections) out += section_html(section);
  out += "</body></html>\n";
  return out;
}

std::string html_page(const std::string& title, const std::string& lead,
                      const std::vector<std::pair<std::string, std::string>>& facts, const std::vector<ReportSection>& sections) {
  std::string out = page_head(title);
  if (!lead.empty()) out += "<p class=\"note\">" + escape_xml(lead) + "</p>\n";
  if (!facts.empty()) {
    out += "<h2 id=\"summary\">Summary</h2><table class=\"facts\"><tbody>";
    for (const auto& [label, value] : facts) out += "<tr><td>" + escape_xml(label) + "</td><td>" + escape_xml(value) + "</td></tr>";
    out += "</tbody></table>\n";
  }
  for (const ReportSection& section : sections) out += section_html(section);
  out += "</body></html>\n";
  return out;
}

}  // namespace perseus::report
